//! What every test of the elements starts with.

use std::path::PathBuf;

/// GStreamer started with the plugin registered, and a runtime directory of
/// this test's own (`gst-cuframes-NAME-PID`, for the elements' `runtime-dir`);
/// returns it and a key named the same way (`NAME-PID`).
pub fn start(name: &str) -> (PathBuf, String) {
    gst::init().unwrap();
    gstcuframes::plugin_register_static().unwrap();
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("gst-cuframes-{name}-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    (dir, format!("{name}-{pid}"))
}
