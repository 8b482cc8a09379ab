//! Peers of another user (D19), with real processes: a root
//! publisher and subscribers run as `nobody` through setpriv(1). Needs root
//! and setpriv: the tests are ignored by default and sit in `needs_root`;
//! `scripts/test-rust.sh` runs them as root and counts them as skipped
//! otherwise.

mod common;

mod needs_root {

    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};

    use super::common::{
        self, EXIT_LIMIT, Proc, TestEnv, assert_all_verified, bin, require_root, shm_path, wait_until,
    };

    const NOBODY: u32 = 65534;

    /// A runtime directory inside a tree `nobody` may traverse.
    fn runtime_dir(env: &TestEnv) -> PathBuf {
        std::fs::set_permissions(env.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
        env.dir().join("rt")
    }

    fn publish(dir: &Path, key: &str, extra: &[&str]) -> Proc {
        let mut cmd = Command::new(bin());
        cmd.args([
            "publish", key, "--memory", "host", "--size", "64x48", "--fps", "500", "--frames", "0",
        ])
        .args(extra)
        .env("CUFRAMES_RUNTIME_DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let p = Proc::spawn("publish", cmd);
        let socket = dir.join(format!("{key}.sock"));
        wait_until(common::SOCKET_LIMIT, "the socket", || socket.exists());
        p
    }

    /// `cuframes subscribe KEY --json --verify --frames 20` as nobody, with
    /// `groups` as supplementary groups.
    fn subscribe_as_nobody(dir: &Path, key: &str, groups: &[u32]) -> common::Finished {
        let mut cmd = Command::new("setpriv");
        cmd.arg(format!("--reuid={NOBODY}"))
            .arg(format!("--regid={NOBODY}"));
        if groups.is_empty() {
            cmd.arg("--clear-groups");
        } else {
            let list: Vec<String> = groups.iter().map(u32::to_string).collect();
            cmd.arg(format!("--groups={}", list.join(",")));
        }
        cmd.args([
            bin(),
            "subscribe",
            key,
            "--json",
            "--verify",
            "--frames",
            "20",
            "--timeout",
            "3s",
        ])
        .env("CUFRAMES_RUNTIME_DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        Proc::spawn("subscribe as nobody", cmd).wait(EXIT_LIMIT)
    }

    /// Default: 0700 directory, 0600 socket: nobody cannot even reach it.
    #[test]
    #[ignore = "needs root and setpriv: run by scripts/test-rust.sh as root"]
    fn another_user_cannot_reach_a_private_publisher() {
        require_root();
        let env = TestEnv::new();
        let dir = runtime_dir(&env);
        let key = env.key("acc-private");
        let publisher = publish(&dir, &key, &[]);
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        let out = subscribe_as_nobody(&dir, &key, &[]);
        out.assert_error(&["ermission denied"]);
        drop(publisher);
    }

    /// With the files loosened by hand (0755 directory, 0666 socket) the
    /// publisher still refuses the other uid: SO_PEERCRED on accept.
    #[test]
    #[ignore = "needs root and setpriv: run by scripts/test-rust.sh as root"]
    fn peer_credentials_are_checked_on_accept() {
        require_root();
        let env = TestEnv::new();
        let dir = runtime_dir(&env);
        let key = env.key("acc-cred");
        let publisher = publish(&dir, &key, &[]);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let socket = dir.join(format!("{key}.sock"));
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
        std::fs::set_permissions(shm_path(&key), std::fs::Permissions::from_mode(0o666)).unwrap();
        let out = subscribe_as_nobody(&dir, &key, &[]);
        out.assert_error(&["uid 65534 may not subscribe"]);
        drop(publisher);
    }

    /// `--group`: members (by primary or only by a supplementary group) get in
    /// and read verified frames; others do not.
    #[test]
    #[ignore = "needs root and setpriv: run by scripts/test-rust.sh as root"]
    fn group_members_may_subscribe() {
        require_root();
        let env = TestEnv::new();
        let dir = runtime_dir(&env);

        // Primary group: nobody's own (65534).
        let key = env.key("acc-group");
        let publisher = publish(&dir, &key, &["--group", "65534"]);
        let socket = std::fs::symlink_metadata(dir.join(format!("{key}.sock"))).unwrap();
        assert_eq!((socket.mode() & 0o777, socket.gid()), (0o660, NOBODY));
        // The shared header: the group reads it (0640); only protocol-v1
        // subscribers write theirs, and the group's are refused (D33).
        let shm = std::fs::metadata(shm_path(&key)).unwrap();
        assert_eq!((shm.mode() & 0o777, shm.gid()), (0o640, NOBODY));
        let dir_meta = std::fs::metadata(&dir).unwrap();
        assert_eq!((dir_meta.mode() & 0o777, dir_meta.gid()), (0o710, NOBODY));
        let summary = subscribe_as_nobody(&dir, &key, &[]).assert_success().json();
        assert_eq!(summary["mismatched"], 0, "{summary}");
        assert_eq!(summary["verified"], 20, "{summary}");
        drop(publisher);

        // Supplementary group only (SO_PEERGROUPS), and a non-member.
        let key = env.key("acc-supp");
        let publisher = publish(&dir, &key, &["--group", "4242", "--policy", "strict-wait"]);
        let out = subscribe_as_nobody(&dir, &key, &[4242]);
        let summary = out.assert_success().json();
        let first = summary["first_seq"].as_u64().unwrap();
        assert_all_verified(&summary, first, 20);
        let out = subscribe_as_nobody(&dir, &key, &[4243]);
        assert_eq!(out.code(), Some(1), "{out}");
        drop(publisher);
    }

    /// Another user's file at a key's shared-header name that no live
    /// publisher holds: `ls` does not list it, saying why; `cleanup KEY`
    /// leaves it, says so and succeeds (it used to fail with exit 1).
    #[test]
    #[ignore = "needs root: run by scripts/test-rust.sh as root"]
    fn another_users_file_is_not_listed_or_cleaned_and_cleanup_succeeds() {
        require_root();
        let env = TestEnv::new();
        let key = env.key("acc-nobodys");
        let path = shm_path(&key);
        std::fs::write(&path, vec![0u8; 7424]).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::lchown(&path, Some(NOBODY), Some(NOBODY)).unwrap();
        let listed = env.run(&["ls", "--json"]);
        let cleaned = env.run(&["cleanup", &key]);
        let left = std::fs::symlink_metadata(&path).is_ok_and(|m| m.uid() == NOBODY);
        let _ = std::fs::remove_file(&path);
        let said = format!(
            "{} is a regular file of uid {NOBODY} (nobody) that no live publisher holds",
            path.display()
        );
        listed.assert_success();
        assert!(!listed.stdout.contains(&key), "listed: {listed}");
        assert!(listed.stderr.contains(&said), "{listed}");
        cleaned.assert_success();
        assert!(
            cleaned.stdout.contains(&format!("skipped key '{key}': {said}")),
            "{cleaned}"
        );
        assert!(left, "cleanup removed nobody's file");
    }
}
