//! One suite, every memory backend (in the iceoryx2 manner): the same
//! scenarios with host memory, CUDA slots shared as file descriptors and
//! CUDA slots shared as IPC handles (D27), as real processes.
//!
//! The host variants run everywhere. The CUDA ones need an NVIDIA GPU: they
//! are ignored by default, sit in `needs_gpu`, and are run by
//! `scripts/gpu-test.sh` (`--include-ignored`).

mod common;

use common::*;
use cuframes::PixelFormat;

/// Where the frames live, and how the publisher shares them.
#[derive(Clone, Copy, Debug)]
enum Backend {
    Host,
    CudaFd,
    CudaIpc,
}

impl Backend {
    fn publish_options(self) -> &'static str {
        match self {
            Backend::Host => "--memory host",
            Backend::CudaFd => "--memory cuda --cuda-share fd",
            Backend::CudaIpc => "--memory cuda --cuda-share ipc",
        }
    }

    /// What a subscriber's JSON summary says: memory, cuda_share.
    fn expected(self) -> (&'static str, Option<&'static str>) {
        match self {
            Backend::Host => ("host", None),
            Backend::CudaFd => ("cuda", Some("fd")),
            Backend::CudaIpc => ("cuda", Some("ipc")),
        }
    }

    fn start(self, env: &TestEnv, key: &str, options: &str) -> Proc {
        let mut args = vec!["publish", key];
        args.extend(self.publish_options().split_whitespace());
        args.extend(options.split_whitespace());
        let mut publisher = env.spawn(&format!("publish {key} ({self:?})"), &args);
        let path = env.socket(key);
        wait_until(SOCKET_LIMIT, "the publisher's socket", || {
            assert!(publisher.is_running(), "publisher exited early");
            std::os::unix::net::UnixStream::connect(&path).is_ok()
        });
        publisher
    }

    fn check(self, summary: &serde_json::Value) {
        let (memory, share) = self.expected();
        assert_eq!(summary["memory"], memory, "{self:?}: {summary}");
        match share {
            Some(share) => assert_eq!(summary["cuda_share"], share, "{self:?}: {summary}"),
            None => assert!(summary["cuda_share"].is_null(), "{self:?}: {summary}"),
        }
    }
}

/// Every format at an odd size, two verifying subscribers, strict-wait.
fn every_format_reaches_two_subscribers(backend: Backend) {
    let env = TestEnv::new();
    for format in PixelFormat::ALL.map(PixelFormat::name) {
        let key = env.key(&format!("be-{format}"));
        let publisher = backend.start(
            &env,
            &key,
            &format!(
                "--size 33x17 --format {format} --fps 0 --frames 150 --policy strict-wait --ring 3 --wait-subscribers 2"
            ),
        );
        let subscribers: Vec<Proc> = (0..2)
            .map(|n| env.subscribe(&key, &format!("--verify --frames 150 --name be{n}")))
            .collect();
        for s in subscribers {
            let summary = s.wait(EXIT_LIMIT).assert_success().json();
            assert_all_verified(&summary, 1, 150);
            assert_eq!(summary["format"], format, "{summary}");
            backend.check(&summary);
        }
        publisher.wait(EXIT_LIMIT).assert_success();
    }
}

/// A consumer holding more frames than the ring (copy=auto) never stalls
/// the publisher and gets every frame exact; some are private copies.
fn a_holding_consumer_gets_copies_and_every_frame(backend: Backend) {
    let env = TestEnv::new();
    let key = env.key("be-hold");
    let publisher = backend.start(
        &env,
        &key,
        "--size 320x240 --fps 0 --frames 300 --policy strict-wait --ring 4 --ack-timeout 300ms --wait-subscribers 1",
    );
    let summary = env
        .subscribe(&key, "--verify --frames 300 --copy auto --hold 10")
        .wait(EXIT_LIMIT)
        .assert_success()
        .json();
    assert_all_verified(&summary, 1, 300);
    assert!(uint(&summary, "copied") > 0, "{summary}");
    backend.check(&summary);
    publisher.wait(EXIT_LIMIT).assert_success();
}

/// Drop-oldest with a latest-mode subscriber: frames may be skipped, none
/// delivered is wrong, and the last one arrives.
fn drop_oldest_never_hands_out_a_wrong_frame(backend: Backend) {
    let env = TestEnv::new();
    let key = env.key("be-latest");
    let publisher = backend.start(
        &env,
        &key,
        "--size 160x120 --fps 0 --frames 1500 --policy drop-oldest --ring 2 --wait-subscribers 1",
    );
    let summary = env
        // In place (the defaults copy under drop_oldest).
        .subscribe(
            &key,
            "--verify --frames 0 --mode latest --copy never --read-ahead 0",
        )
        .wait(EXIT_LIMIT)
        .assert_success()
        .json();
    publisher.wait(EXIT_LIMIT).assert_success();
    assert_eq!(uint(&summary, "mismatched"), 0, "{summary}");
    assert_eq!(uint(&summary, "last_seq"), 1500, "{summary}");
    backend.check(&summary);
}

/// kill -9 of the publisher: the subscriber says the publisher went away.
fn a_killed_publisher_is_reported(backend: Backend) {
    let env = TestEnv::new();
    let key = env.key("be-kill");
    let mut publisher = backend.start(&env, &key, "--size 160x120 --fps 100");
    let subscriber = env.subscribe(&key, "--frames 0 --timeout 20s");
    wait_until(SOCKET_LIMIT, "a subscriber", || {
        env.run(&["inspect", &key, "--json"]).json()["subscriber_slots"]
            .as_array()
            .is_some_and(|s| !s.is_empty())
    });
    publisher.kill9();
    let out = subscriber.wait(EXIT_LIMIT);
    out.assert_error(&["went away"]);
}

/// A subscriber slower before SUBSCRIBE than the publisher's handshake
/// timeout (making its CUDA context on a crowded GPU, played by the test
/// hook for the first handshake) is closed by the publisher, says why once,
/// connects again at once, and gets every frame.
fn a_subscriber_slow_to_subscribe_connects_again(backend: Backend) {
    let env = TestEnv::new();
    let key = env.key("be-slow");
    let publisher = backend.start(
        &env,
        &key,
        "--size 160x120 --fps 0 --frames 100 --policy strict-wait --wait-subscribers 1 --handshake-timeout 1s",
    );
    let mut cmd = env.command(&["subscribe", &key, "--json", "--verify", "--frames", "100"]);
    cmd.env("CUFRAMES_TEST_STALL_AT", "sub-context:2000");
    let out = Proc::spawn("slow subscriber", cmd).wait(EXIT_LIMIT);
    out.assert_success();
    let summary = out.json();
    assert_all_verified(&summary, 1, 100);
    backend.check(&summary);
    let said: Vec<&str> = out
        .stderr_lines()
        .into_iter()
        .filter(|l| l.contains("connecting again"))
        .collect();
    assert_eq!(said.len(), 1, "{out}");
    assert!(said[0].contains("handshake not completed in time"), "{out}");
    publisher.wait(EXIT_LIMIT).assert_success();
}

macro_rules! every_backend {
    ($($scenario:ident),* $(,)?) => {
        mod host {
            $(#[test]
            fn $scenario() {
                super::$scenario(super::Backend::Host);
            })*
        }
        mod needs_gpu {
            mod cuda_fd {
                $(#[test]
                #[ignore = "needs an NVIDIA GPU: run by scripts/gpu-test.sh"]
                fn $scenario() {
                    super::super::$scenario(super::super::Backend::CudaFd);
                })*
            }
            mod cuda_ipc {
                $(#[test]
                #[ignore = "needs an NVIDIA GPU: run by scripts/gpu-test.sh"]
                fn $scenario() {
                    super::super::$scenario(super::super::Backend::CudaIpc);
                })*
            }
        }
    };
}

every_backend!(
    every_format_reaches_two_subscribers,
    a_holding_consumer_gets_copies_and_every_frame,
    drop_oldest_never_hands_out_a_wrong_frame,
    a_killed_publisher_is_reported,
    a_subscriber_slow_to_subscribe_connects_again,
);
