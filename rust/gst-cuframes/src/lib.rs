//! GStreamer elements for cuframes.
//!
//! * `cuframessink` publishes every buffer it receives under a cuframes key
//!   (host shared memory), as `ffmpeg … -f cuframes KEY` does.
//! * `cuframessrc` subscribes to a key and pushes the frames as system-memory
//!   `video/x-raw` buffers, as `ffmpeg -f cuframes -i KEY` reads them.
//!
//! The plugin is `libgstcuframes.so`; load it with `GST_PLUGIN_PATH` pointing
//! at its directory. See `docs/gstreamer.md`.

use gst::glib;

mod cuda;
mod cuframessink;
mod cuframessrc;
pub mod formats;
mod gstcuda;
mod settings;

fn plugin_init(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    cuframessink::register(plugin)?;
    cuframessrc::register(plugin)?;
    Ok(())
}

gst::plugin_define!(
    cuframes,
    // GStreamer knows no dual licence: "MIT/X11" is the closest it accepts.
    concat!(
        env!("CARGO_PKG_DESCRIPTION"),
        " (licensed as the cuframes crates: MIT OR Apache-2.0)"
    ),
    plugin_init,
    concat!(env!("CARGO_PKG_VERSION"), "-", env!("COMMIT_ID")),
    "MIT/X11",
    env!("CARGO_PKG_NAME"),
    env!("CARGO_PKG_NAME"),
    env!("CARGO_PKG_REPOSITORY"),
    env!("BUILD_REL_DATE")
);
