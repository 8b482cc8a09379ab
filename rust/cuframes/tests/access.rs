//! Access control and runtime-file hygiene (D19): modes of what a
//! publisher creates, a group option, refusal of symlinks and unsafe
//! directories, the shared header's owner, and key validation at every
//! entry point. Peers of another uid: `rust/cuframes-cli/tests/cli_access.rs`.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;

use common::*;
use std::io::Read;
use std::os::unix::net::UnixListener;

use cuframes::{ErrorKind, Publisher, Subscriber, SubscriberConfig};

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

fn shm_file(key: &str) -> String {
    format!("/dev/shm/cuframes-{key}")
}

/// The socket appears with its final mode: a watcher that sees it at once
/// never finds the umask's mode (it was bound, then chmod-ed, in place).
#[test]
fn the_socket_never_appears_with_the_umask_mode() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..40 {
        let key = unique_key(&format!("sockmode{round}"));
        let socket = dir.path().join(format!("{key}.sock"));
        let config = config(&key, dir.path());
        let maker = std::thread::spawn(move || Publisher::create(config).unwrap());
        let seen = loop {
            if let Ok(meta) = std::fs::symlink_metadata(&socket) {
                break meta.mode() & 0o777;
            }
            std::hint::spin_loop();
        };
        let publisher = maker.join().unwrap();
        assert_eq!(seen, 0o600, "round {round}: the socket was visible as {seen:o}");
        drop(publisher);
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "staging names left behind: {leftovers:?}");
}

#[test]
fn private_by_default() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("rt");
    let key = unique_key("modes");
    let publisher = Publisher::create(config(&key, &dir)).unwrap();
    assert_eq!(mode(&dir), 0o700, "runtime dir");
    assert_eq!(mode(&publisher.paths().socket), 0o600, "socket");
    assert_eq!(mode(&publisher.paths().lock), 0o600, "lock");
    assert_eq!(mode(Path::new(&shm_file(&key))), 0o600, "shared header");
    let me = nix::unistd::geteuid().as_raw();
    assert_eq!(std::fs::metadata(shm_file(&key)).unwrap().uid(), me);
    // The owner still subscribes.
    let mut sub = subscribe(&key, &dir, "owner");
    drop(publisher);
    assert_eq!(sub.next(SECOND).unwrap_err().kind(), ErrorKind::Disconnected);
}

#[test]
fn a_group_gets_its_modes_and_a_searchable_directory() {
    // The group may connect (socket 0660) and read the named header (0640:
    // only protocol-v1 subscribers write it, and they are refused to the
    // group unless v1_peers=allow, which makes it 0660, D33).
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("rt");
    let key = unique_key("group");
    let gid = nix::unistd::getegid().as_raw();
    let mut cfg = config(&key, &dir);
    cfg.group = Some(gid.to_string());
    let publisher = Publisher::create(cfg).unwrap();
    assert_eq!(mode(&dir), 0o710, "runtime dir: group may search, not list");
    let socket = std::fs::symlink_metadata(&publisher.paths().socket).unwrap();
    assert_eq!(socket.mode() & 0o7777, 0o660);
    assert_eq!(socket.gid(), gid);
    let shm = std::fs::metadata(shm_file(&key)).unwrap();
    assert_eq!(shm.mode() & 0o7777, 0o640);
    assert_eq!(shm.gid(), gid);
    assert_eq!(mode(&publisher.paths().lock), 0o600, "the lock stays private");
    drop(subscribe(&key, &dir, "member"));
    drop(publisher);
    let mut cfg = config(&key, &dir);
    cfg.group = Some(gid.to_string());
    cfg.v1_peers = cuframes::V1Peers::Allow;
    let _publisher = Publisher::create(cfg).unwrap();
    assert_eq!(std::fs::metadata(shm_file(&key)).unwrap().mode() & 0o7777, 0o660);

    let mut bad = config(&unique_key("nogroup"), &dir);
    bad.group = Some("no-such-group-cuframes".into());
    assert_eq!(
        Publisher::create(bad).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn symlinks_at_runtime_paths_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"keep me").unwrap();

    // At the socket path.
    let key = unique_key("symsock");
    symlink(&victim, dir.path().join(format!("{key}.sock"))).unwrap();
    let err = Publisher::create(config(&key, dir.path())).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    let err = Subscriber::connect(subscriber_config(&key, dir.path(), "s")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    assert!(cuframes::cleanup_key(&key, Some(dir.path())).is_err());

    // At the lock path (dangling, too).
    let key = unique_key("symlock");
    symlink(&victim, dir.path().join(format!("{key}.lock"))).unwrap();
    let err = Publisher::create(config(&key, dir.path())).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    let key = unique_key("danglock");
    symlink(dir.path().join("nowhere"), dir.path().join(format!("{key}.lock"))).unwrap();
    assert!(Publisher::create(config(&key, dir.path())).is_err());
    assert!(
        !dir.path().join("nowhere").exists(),
        "O_NOFOLLOW: nothing created through the link"
    );

    // A symlink pointing at a live publisher's socket elsewhere.
    let other = tempfile::tempdir().unwrap();
    let key = unique_key("symlive");
    let _publisher = Publisher::create(config(&key, other.path())).unwrap();
    symlink(
        other.path().join(format!("{key}.sock")),
        dir.path().join(format!("{key}.sock")),
    )
    .unwrap();
    let err = Subscriber::connect(subscriber_config(&key, dir.path(), "s")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");

    // The runtime directory itself.
    let key = unique_key("symdir");
    let link = dir.path().join("rt-link");
    symlink(other.path(), &link).unwrap();
    let err = Publisher::create(config(&key, &link)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");

    assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
}

#[test]
fn unsafe_runtime_directories_are_refused() {
    let base = tempfile::tempdir().unwrap();
    let open = base.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = Publisher::create(config(&unique_key("opendir"), &open)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    assert!(err.to_string().contains("not sticky"), "{err}");
    // Sticky like /tmp: allowed.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    drop(Publisher::create(config(&unique_key("sticky"), &open)).unwrap());
}

#[test]
fn keys_are_validated_at_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["", "../etc", "a/b", "a b", "a.sock", "x\0y", &"k".repeat(64)] {
        let err = Publisher::create(config(bad, dir.path())).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "publish {bad:?}");
        let mut c = SubscriberConfig::new(bad);
        c.runtime_dir = Some(dir.path().to_owned());
        assert_eq!(
            Subscriber::connect(c).unwrap_err().kind(),
            ErrorKind::InvalidArgument,
            "subscribe {bad:?}"
        );
        use cuframes as r;
        assert!(r::key_status(bad, Some(dir.path())).is_err(), "status {bad:?}");
        assert!(r::cleanup_key(bad, Some(dir.path())).is_err(), "cleanup {bad:?}");
        assert!(
            cuframes::inspect::inspect(bad, Some(dir.path())).is_err(),
            "inspect {bad:?}"
        );
        assert!(r::KeyPaths::in_dir(bad, dir.path()).is_err(), "paths {bad:?}");
    }
    // Names in the runtime directory that are no key are not listed.
    std::fs::write(dir.path().join("a b.sock"), b"").unwrap();
    assert!(cuframes::list_keys(Some(dir.path())).iter().all(|k| k != "a b"));
}

/// Subscribers receive the host slot memfd, which anyone holding it could
/// reopen read-write through /proc; F_SEAL_FUTURE_WRITE keeps the frames
/// read-only for everyone but the publisher's own mapping.
#[test]
fn host_slot_memory_cannot_be_written_by_subscribers() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let key = unique_key("ro");
    let mut publisher = Publisher::create(config(&key, dir.path())).unwrap();
    let mut sub = subscribe(&key, dir.path(), "s");
    let memfd = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .find(|e| {
            std::fs::read_link(e.path())
                .is_ok_and(|l| l.to_string_lossy().contains(&format!("cuframes-{key}-slots")))
        })
        .expect("the slot memfd")
        .path();
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&memfd);
    match file {
        // Reopened read-write (memfd inodes allow it): the write is refused.
        Ok(file) => {
            let err = file.write_at(&[0xAA; 16], 0).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(nix::libc::EPERM), "{err}");
            eprintln!("reopened read-write; write refused: {err}");
        }
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}"),
    }
    publish_pattern(&mut publisher);
    let lease = sub.next(SECOND).unwrap();
    assert!(lease_matches(&lease));
}

/// What only root can set up: files of another user.
mod needs_root {
    use super::*;

    /// Panics unless root (`chown` to another user is the subject's setup).
    fn require_root() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test cannot run its subject here: it needs root (it is #[ignore]d for that reason; \
         scripts/test-rust.sh runs it only as root)"
        );
    }

    /// An existing runtime directory of another user is refused.
    #[test]
    #[ignore = "needs root (chown): run by scripts/test-rust.sh as root"]
    fn a_runtime_directory_of_another_user_is_refused() {
        require_root();
        let base = tempfile::tempdir().unwrap();
        let foreign = base.path().join("foreign");
        std::fs::create_dir(&foreign).unwrap();
        std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
        let err = Publisher::create(config(&unique_key("foreign"), &foreign)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
        assert!(err.to_string().contains("owned by uid 65534"), "{err}");
    }

    /// Our subscriber maps the header its publisher sends over the socket
    /// (D27), so a name planted or changed in /dev/shm does not matter.
    #[test]
    #[ignore = "needs root (chown): run by scripts/test-rust.sh as root"]
    fn the_header_sent_by_the_publisher_is_used_not_the_name() {
        require_root();
        let dir = tempfile::tempdir().unwrap();
        let key = unique_key("shmsent");
        let mut publisher = Publisher::create(config(&key, dir.path())).unwrap();
        std::os::unix::fs::chown(shm_file(&key), Some(65534), None).unwrap();
        let mut sub = Subscriber::connect(subscriber_config(&key, dir.path(), "s")).unwrap();
        publish_pattern(&mut publisher);
        let lease = sub.next(Some(std::time::Duration::from_secs(5))).unwrap();
        assert!(lease_matches(&lease));
    }

    /// A publisher that sends no header descriptor (protocol v1) leaves the
    /// subscriber to open the header by name; one that belongs to another user
    /// than the publisher is refused (anyone can create names in /dev/shm). The
    /// v1 publisher here relays a real one's HELLO_RESP, asked without
    /// `EARLY_FDS`.
    #[test]
    #[ignore = "needs root (chown): run by scripts/test-rust.sh as root"]
    fn a_header_of_another_user_is_refused() {
        require_root();
        let real = tempfile::tempdir().unwrap();
        let v1 = tempfile::tempdir().unwrap();
        let key = unique_key("shmowner");
        let _publisher = Publisher::create(config(&key, real.path())).unwrap();
        std::os::unix::fs::chown(shm_file(&key), Some(65534), None).unwrap();
        let listener = UnixListener::bind(v1.path().join(format!("{key}.sock"))).unwrap();
        let real_socket = real.path().join(format!("{key}.sock"));
        let relay = std::thread::spawn(move || {
            let mut sub = relay_hello_v1(&listener, &real_socket, |_| {});
            let mut rest = Vec::new();
            let _ = sub.read_to_end(&mut rest); // until the subscriber gives up
        });
        let err = Subscriber::connect(subscriber_config(&key, v1.path(), "s")).unwrap_err();
        relay.join().unwrap();
        assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
        assert!(err.to_string().contains("belongs to uid 65534"), "{err}");
    }
}
