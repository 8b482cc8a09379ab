//! Containers that share only the runtime directory (D27), as
//! sibling namespaces: publisher and subscriber each in their own PID, IPC
//! and mount namespaces, each with its own tmpfs on /dev/shm — what two
//! Docker containers with one shared volume are. Host memory here (CI has
//! no GPU); `scripts/gpu-test.sh` runs the CUDA modes the same way.
//!
//! Needs root and `unshare`: the tests are ignored by default and sit in
//! `needs_namespaces`; `scripts/test-rust.sh` runs them where namespaces
//! work and counts them as skipped elsewhere.

mod common;

mod needs_namespaces {
    use super::common::*;

    #[test]
    #[ignore = "needs root and unshare: run by scripts/test-rust.sh where namespaces work"]
    fn a_subscriber_in_another_container_sharing_only_the_runtime_directory_gets_every_frame() {
        require_namespaces();
        let env = TestEnv::new();
        let key = env.key("ns-pair");
        let publisher = env.spawn_isolated(
            "isolated publisher",
            &format!(
                "publish {key} --memory host --size 320x240 --fps 0 \
             --frames 120 --policy strict-wait --wait-subscribers 1"
            ),
        );
        // Started before or after the publisher: --wait-timeout covers the race.
        let subscriber = env.spawn_isolated(
            "isolated subscriber",
            &format!("subscribe {key} --json --verify --frames 120 --wait-timeout 10s"),
        );
        let sub = subscriber.wait(EXIT_LIMIT);
        let publisher = publisher.wait(EXIT_LIMIT);
        sub.assert_success();
        publisher.assert_success();
        let summary = sub.json();
        assert_eq!(summary["frames"], 120, "{sub}");
        assert_eq!(summary["verified"], 120, "{sub}");
        assert_eq!(summary["mismatched"], 0, "{sub}");
        assert_eq!(summary["dropped"], 0, "{sub}");
        // Nothing was left in the publisher's private /dev/shm for us to see.
        assert!(!shm_path(&key).exists());
    }

    #[test]
    #[ignore = "needs root and unshare: run by scripts/test-rust.sh where namespaces work"]
    fn a_subscriber_in_another_container_waits_for_a_publisher_that_is_not_there_yet() {
        require_namespaces();
        let env = TestEnv::new();
        let key = env.key("ns-late");
        let subscriber = env.spawn_isolated(
            "isolated subscriber",
            &format!("subscribe {key} --json --frames 10 --wait-timeout 10s"),
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
        let publisher = env.spawn_isolated(
            "isolated publisher",
            &format!(
                "publish {key} --memory host --size 64x64 --fps 200 \
             --frames 10 --policy strict-wait --wait-subscribers 1"
            ),
        );
        let sub = subscriber.wait(EXIT_LIMIT);
        publisher.wait(EXIT_LIMIT).assert_success();
        sub.assert_success();
        assert_eq!(sub.json()["frames"], 10, "{sub}");
    }

    #[test]
    #[ignore = "needs root and unshare: run by scripts/test-rust.sh where namespaces work"]
    fn ls_and_inspect_in_another_container_ask_the_publisher_for_its_header() {
        require_namespaces();
        let env = TestEnv::new();
        let key = env.key("ns-ls");
        let mut publisher = env.start_publisher(&key, "--size 64x48 --fps 50");
        let ls = env.spawn_isolated("isolated ls", "ls --json").wait(EXIT_LIMIT);
        ls.assert_success();
        let rows = ls.json();
        let row = rows
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["key"] == key.as_str()))
            .unwrap_or_else(|| panic!("{key} missing: {ls}"));
        assert_eq!(row["state"], "live", "{ls}");
        assert_eq!(row["format"], "nv12", "{ls}");
        assert_eq!(row["width"], 64, "{ls}");
        assert!(row["invalid"].is_null(), "{ls}");
        let inspect = env
            .spawn_isolated("isolated inspect", &format!("inspect {key} --json"))
            .wait(EXIT_LIMIT);
        inspect.assert_success();
        assert_eq!(inspect.json()["height"], 48, "{inspect}");
        publisher.kill9();
    }
}
