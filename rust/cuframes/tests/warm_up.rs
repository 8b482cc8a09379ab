//! The CUDA warm-up of a subscriber that finds no publisher (issue 27): made
//! unless the subscriber's config turns it off (`cuda_warm_up`), as
//! GStreamer's cuframessrc does, which maps CUDA frames in GStreamer's own
//! context. Seen through the library's debug message, which it logs
//! whether or not a GPU is there. One test in its own binary: the warm-up
//! and the log level are process-wide.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use cuframes::log::{Level, Logger};
use cuframes::{ErrorKind, Subscriber};

const WARMING: &str = "making the CUDA context of device";

#[test]
fn a_subscriber_warms_up_only_when_its_config_says_so() {
    let dir = tempfile::tempdir().unwrap();
    cuframes::log::set_max_level(Level::Debug);
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let attempt = |warm_up: bool| {
        let mut config = subscriber_config(&unique_key("nobody"), dir.path(), "waiting");
        config.cuda_warm_up = warm_up;
        let sink = Arc::clone(&seen);
        config.logger = Some(Logger::new(move |_, message| {
            sink.lock().unwrap().push(message.to_owned())
        }));
        let Err(error) = Subscriber::connect(config) else {
            panic!("a subscriber connected to a key nobody publishes")
        };
        assert_eq!(error.kind(), ErrorKind::NotFound, "{error}");
        let warmed = seen.lock().unwrap().iter().any(|m| m.contains(WARMING));
        seen.lock().unwrap().clear();
        warmed
    };
    // Off first: the warm-up, once started, stays started for the process.
    assert!(
        !attempt(false),
        "a subscriber with cuda_warm_up off made a context"
    );
    assert!(
        attempt(true),
        "no warm-up with cuda_warm_up on (the control case)"
    );
}
