//! Keys and the kernel resources behind them (spec §1, D5, D6).
//!
//! A key `K` owns: the control socket `<runtime dir>/K.sock`, the shared
//! header `/dev/shm/cuframes-K`, and a lock file `<runtime dir>/K.lock`.
//! The publisher holds an open-file-description lock (`F_OFD_SETLK`) on the
//! lock file for its whole life: the kernel drops it when the process dies,
//! so "lock free" means every resource of the key is stale. The socket
//! connect test of spec §1 is applied as well, for publishers of other
//! implementations that take no lock.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind as IoKind;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::libc;

use crate::error::{Error, ErrorKind, Result};
use crate::platform::names;
use crate::shm::header::{AtName, ShmHeader};

/// Environment variable that overrides the runtime directory.
pub const RUNTIME_DIR_ENV: &str = "CUFRAMES_RUNTIME_DIR";
/// The default runtime directory.
pub const DEFAULT_RUNTIME_DIR: &str = "/run/cuframes";
/// Prefix of shared header names (`/dev/shm/cuframes-<key>`).
pub const SHM_PREFIX: &str = "cuframes-";

/// Checks a key against `^[a-zA-Z0-9_-]{1,63}$`.
pub fn validate_key(key: &str) -> Result<()> {
    let ok = !key.is_empty()
        && key.len() <= 63
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("invalid key {key:?}: use 1 to 63 characters from a-z A-Z 0-9 _ -"),
        ))
    }
}

/// The runtime directories to use, most preferred first: `explicit` alone
/// when given (a config's `runtime_dir`), else `$CUFRAMES_RUNTIME_DIR` alone
/// when set, else `/run/cuframes`, `$XDG_RUNTIME_DIR/cuframes`,
/// `/tmp/cuframes-<uid>`.
pub fn runtime_dir_candidates(explicit: Option<&Path>) -> Vec<PathBuf> {
    if let Some(dir) = explicit {
        return vec![dir.to_owned()];
    }
    if let Some(dir) = std::env::var_os(RUNTIME_DIR_ENV).filter(|d| !d.is_empty()) {
        return vec![PathBuf::from(dir)];
    }
    let mut dirs = vec![PathBuf::from(DEFAULT_RUNTIME_DIR)];
    if let Some(xdg) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        dirs.push(Path::new(&xdg).join("cuframes"));
    }
    dirs.push(PathBuf::from(format!("/tmp/cuframes-{}", nix::unistd::getuid())));
    dirs
}

/// Makes `dir` (mode 0700; 0710 with the group when one is given, so its
/// members can reach the socket) unless it exists. An existing `dir` must
/// be a real directory (not a symlink) owned by this user or root, not
/// writable by others unless sticky, and writable and searchable by us.
/// With a group, a directory of ours gets the group and its search bit.
fn ensure_dir(dir: &Path, group: Option<u32>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = if group.is_some() { 0o710 } else { 0o700 };
    match std::fs::DirBuilder::new().mode(mode).create(dir) {
        Ok(()) => {
            if let Some(gid) = group {
                std::os::unix::fs::lchown(dir, None, Some(gid))?;
            }
            // Exact, whatever the umask.
            return std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode));
        }
        Err(e) if e.kind() == IoKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.file_type().is_dir() {
        return Err(std::io::Error::other(
            "exists and is not a directory (a symlink?)",
        ));
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me && meta.uid() != 0 {
        return Err(std::io::Error::other(format!(
            "owned by uid {}, not by this user (uid {me}) or root",
            meta.uid()
        )));
    }
    if meta.mode() & 0o002 != 0 && meta.mode() & 0o1000 == 0 {
        return Err(std::io::Error::other("writable by every user and not sticky"));
    }
    nix::unistd::access(
        dir,
        nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
    )
    .map_err(std::io::Error::from)?;
    if let Some(gid) = group
        && meta.uid() == me
        && (meta.gid() != gid || meta.mode() & 0o010 == 0)
    {
        std::os::unix::fs::lchown(dir, None, Some(gid))?;
        let perms = std::fs::Permissions::from_mode((meta.mode() | 0o010) & 0o7777);
        std::fs::set_permissions(dir, perms)?;
    }
    Ok(())
}

/// Refuses anything at a runtime path that is not what we put there: a
/// symlink or other file planted at a socket path, say. Whether something
/// (of the right kind) is there.
fn expect_file_type(path: &Path, socket: bool) -> Result<bool> {
    let Some(meta) = names::lstat(path)? else {
        return Ok(false);
    };
    let ft = meta.file_type();
    if if socket { ft.is_socket() } else { ft.is_file() } {
        Ok(true)
    } else {
        Err(names::foreign(
            path,
            format_args!(
                "a {} where cuframes makes a {}",
                names::kind_of(&meta),
                if socket { "socket" } else { "regular file" }
            ),
        ))
    }
}

/// Binds the listening socket at `path` with its final mode (0600, or 0660
/// with `group`) and group already set: bound under a private name first
/// (a leading dot, never a key's socket; short, so that it fits
/// `sun_path` wherever the final name does), secured, then renamed into
/// place, so `path` never exists with the umask's mode. (Otherwise a group
/// member connecting in between was refused, and a waiter that sees the
/// socket could read its mode too early.)
pub(crate) fn bind_secured(path: &Path, group: Option<u32>) -> Result<std::os::unix::net::UnixListener> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let staging = path.with_file_name(format!(".{:x}.{n:x}", std::process::id()));
    let _ = std::fs::remove_file(&staging); // a leftover of a crashed process of this pid
    let listener = std::os::unix::net::UnixListener::bind(&staging)
        .map_err(|e| Error::io(format!("binding {}", staging.display()), &e))?;
    let placed = secure_socket(&staging, group).and_then(|()| {
        std::fs::rename(&staging, path)
            .map_err(|e| Error::io(format!("moving {} into place", staging.display()), &e))
    });
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&staging);
        return Err(e);
    }
    Ok(listener)
}

/// Sets the mode of a socket just bound by us: 0600, or 0660 with `group`.
fn secure_socket(path: &Path, group: Option<u32>) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let what = |e: std::io::Error| Error::io(format!("securing socket {}", path.display()), &e);
    expect_file_type(path, true)?;
    if let Some(gid) = group {
        std::os::unix::fs::lchown(path, None, Some(gid)).map_err(what)?;
    }
    let mode = if group.is_some() { 0o660 } else { 0o600 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(what)
}

/// The names of one key's resources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPaths {
    /// The key.
    pub key: String,
    /// Runtime directory holding socket and lock.
    pub dir: PathBuf,
    /// Control socket path.
    pub socket: PathBuf,
    /// Lock file path.
    pub lock: PathBuf,
    /// shm_open name of the shared header (`/cuframes-<key>`).
    pub shm_name: String,
}

impl KeyPaths {
    /// The paths of `key` under `dir`.
    pub fn in_dir(key: &str, dir: &Path) -> Result<KeyPaths> {
        validate_key(key)?;
        Ok(KeyPaths {
            key: key.to_owned(),
            dir: dir.to_owned(),
            socket: dir.join(format!("{key}.sock")),
            lock: dir.join(format!("{key}.lock")),
            shm_name: shm_name(key),
        })
    }

    /// Where a publisher of `key` puts its resources: the first candidate
    /// directory that exists or can be created and is safe to use
    /// (D5, D19); `group` (a gid) is admitted to it.
    pub fn for_publisher(key: &str, runtime_dir: Option<&Path>, group: Option<u32>) -> Result<KeyPaths> {
        validate_key(key)?;
        let mut tried = Vec::new();
        for dir in runtime_dir_candidates(runtime_dir) {
            match ensure_dir(&dir, group) {
                Ok(()) => return KeyPaths::in_dir(key, &dir),
                Err(e) => tried.push(format!("{}: {e}", dir.display())),
            }
        }
        Err(Error::new(
            ErrorKind::Permission,
            format!(
                "no usable runtime directory for key '{key}' ({})",
                tried.join("; ")
            ),
        ))
    }

    /// Where a subscriber finds `key`: the first candidate directory holding
    /// its socket.
    pub fn for_subscriber(key: &str, runtime_dir: Option<&Path>) -> Result<KeyPaths> {
        validate_key(key)?;
        let dirs = runtime_dir_candidates(runtime_dir);
        for dir in &dirs {
            let paths = KeyPaths::in_dir(key, dir)?;
            if expect_file_type(&paths.socket, true)? {
                return Ok(paths);
            }
        }
        let searched: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "no publisher for key '{key}' (no socket in {})",
                searched.join(", ")
            ),
        ))
    }
}

/// The shm_open name of `key`'s shared header.
pub fn shm_name(key: &str) -> String {
    format!("/{SHM_PREFIX}{key}")
}

/// What a connect to a socket path says about its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketState {
    /// No file at the path.
    Absent,
    /// A process accepts connections (or is too busy to: its backlog is
    /// full), or the socket is not ours to connect to.
    Live,
    /// The file exists but nobody listens (refused): stale.
    Stale,
}

/// Spec §1's primary liveness test, without blocking (a listener whose
/// backlog is full answers at once, as live). Fails only when this process
/// cannot make a socket to ask with (out of descriptors or memory): that
/// says nothing about the owner.
pub fn probe_socket(path: &Path) -> Result<SocketState> {
    use nix::errno::Errno;
    Ok(match crate::channel::connect_nonblocking(path) {
        Ok(_) | Err(Errno::EAGAIN) => SocketState::Live,
        Err(Errno::ENOENT) => SocketState::Absent,
        Err(Errno::ECONNREFUSED) => SocketState::Stale,
        Err(e @ (Errno::EMFILE | Errno::ENFILE | Errno::ENOMEM | Errno::ENOBUFS)) => {
            return Err(Error::os(format!("connecting to {}", path.display()), e));
        }
        // Not a socket (refused before connecting), or no permission: not
        // a dead publisher's leftover we could prove.
        Err(_) => SocketState::Live,
    })
}

/// Whether a live process holds `key`'s lock, tested without taking it.
pub fn lock_is_held(lock: &Path) -> bool {
    names::open_regular(lock, false).is_ok_and(|(file, _)| crate::platform::lock::is_locked_elsewhere(&file))
}

/// A publisher's exclusive claim on a key: the held lock, with every stale
/// resource of an earlier owner already removed. Dropping it unlinks the
/// socket, the shared header and the lock file, then releases the lock.
#[derive(Debug)]
pub struct KeyClaim {
    paths: KeyPaths,
    lock: File,
    removed: Vec<String>,
}

impl KeyClaim {
    /// Takes `paths.key`, or fails with `AlreadyExists` when a live owner
    /// holds it.
    pub fn acquire(paths: &KeyPaths) -> Result<KeyClaim> {
        let key = &paths.key;
        let lock = loop {
            expect_file_type(&paths.lock, false)?;
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(&paths.lock)
                .map_err(|e| Error::io(format!("opening lock {}", paths.lock.display()), &e))?;
            // What was opened is what lstat saw, of ours, and empty as we
            // leave it: anything else is not a lock of this key's publisher.
            let meta = file
                .metadata()
                .map_err(|e| Error::io(format!("fstat {}", paths.lock.display()), &e))?;
            if !meta.file_type().is_file() {
                return Err(names::foreign(&paths.lock, names::not_made(&meta)));
            }
            if !names::owned_by_us(&meta) {
                return Err(names::foreign(&paths.lock, names::not_ours(&meta, "")));
            }
            names::check_mode(&paths.lock, &meta)?;
            if meta.len() != 0 {
                return Err(names::foreign(
                    &paths.lock,
                    format_args!(
                        "a regular file of {} bytes (a lock file is empty), not a file cuframes made",
                        meta.len()
                    ),
                ));
            }
            if !crate::platform::lock::try_lock_exclusive(&file, &paths.lock.display().to_string())? {
                return Err(already_published(key, &paths.shm_name));
            }
            // The previous owner may have unlinked the file between our open
            // and our lock: only a lock on the file still at the path counts.
            let held = nix::sys::stat::fstat(file.as_fd()).map_err(|e| Error::os("fstat lock", e))?;
            match std::fs::symlink_metadata(&paths.lock) {
                Ok(now) if now.ino() == held.st_ino && now.dev() == held.st_dev => break file,
                _ => continue,
            }
        };
        match clear_stale(paths) {
            Ok(removed) => Ok(KeyClaim {
                paths: paths.clone(),
                lock,
                removed,
            }),
            Err(e) => {
                // Still holding the lock, so removing the file we made is safe.
                let _ = std::fs::remove_file(&paths.lock);
                Err(e)
            }
        }
    }

    /// The key's paths.
    pub fn paths(&self) -> &KeyPaths {
        &self.paths
    }

    /// Stale resources removed while acquiring.
    pub fn removed(&self) -> &[String] {
        &self.removed
    }
}

/// With the key's lock held: refuses a live owner of the socket or shared
/// header, and removes what a dead one left. Returns what was removed.
fn clear_stale(paths: &KeyPaths) -> Result<Vec<String>> {
    let key = &paths.key;
    let mut removed = Vec::new();
    expect_file_type(&paths.socket, true)?;
    match probe_socket(&paths.socket)? {
        SocketState::Live => {
            return Err(Error::new(
                ErrorKind::AlreadyExists,
                format!(
                    "key '{key}' is already published: a process accepts connections on {}",
                    paths.socket.display()
                ),
            ));
        }
        SocketState::Stale => {
            // Only a socket of ours is provably our publisher's leftover.
            if let Some(meta) = names::lstat(&paths.socket)?
                && !names::owned_by_us(&meta)
            {
                return Err(names::foreign(
                    &paths.socket,
                    names::not_ours(&meta, " that nobody listens on"),
                ));
            }
            std::fs::remove_file(&paths.socket)
                .map_err(|e| Error::io(format!("removing stale socket {}", paths.socket.display()), &e))?;
            removed.push(paths.socket.display().to_string());
        }
        SocketState::Absent => {}
    }
    // The shared header is global (/dev/shm) while socket and lock are per
    // runtime directory: a publisher using another directory still holds
    // the header's own lock.
    let at_name = ShmHeader::at_name(&paths.shm_name)?;
    if at_name == AtName::Live {
        return Err(Error::new(
            ErrorKind::AlreadyExists,
            format!(
                "key '{key}' is already published by a live process using another runtime directory (shared memory /dev/shm{} is in use)",
                paths.shm_name
            ),
        ));
    }
    if at_name == AtName::Stale && ShmHeader::unlink(&paths.shm_name)? {
        removed.push(names::shm_path(&paths.shm_name).display().to_string());
    }
    Ok(removed)
}

fn already_published(key: &str, shm: &str) -> Error {
    let pid = ShmHeader::open_read_only(shm)
        .map(|h| h.snapshot().producer_pid)
        .ok()
        .filter(|&p| p != 0);
    let owner = pid.map_or(String::new(), |p| format!(" (publisher pid {p})"));
    Error::new(
        ErrorKind::AlreadyExists,
        format!("key '{key}' is already published by a live process{owner}"),
    )
}

impl Drop for KeyClaim {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.paths.socket);
        let _ = ShmHeader::unlink(&self.paths.shm_name);
        // Unlink the lock while still holding it; a racing acquirer then
        // finds its inode gone and retries on a fresh file.
        let _ = std::fs::remove_file(&self.paths.lock);
        let _ = &self.lock;
    }
}

/// Every key with a resource on this machine: shared headers in /dev/shm
/// and sockets or locks in the runtime directories. Sorted, unique. A name
/// holding what cuframes did not make there for this user is skipped with
/// a warning naming the path and what is there (anyone can create names in
/// /dev/shm): a FIFO or any other wrong kind of file, a file every user
/// may write, and another user's header or lock that no live publisher
/// holds (its leftover or a plant: not ours to list as stale, or remove).
/// Another user's live key is listed.
pub fn list_keys(runtime_dir: Option<&Path>) -> Vec<String> {
    #[derive(Clone, Copy)]
    enum Name {
        Header,
        Socket,
        Lock,
    }
    let mut keys = Vec::new();
    let mut scan = |dir: &Path, key_of: &dyn Fn(&str) -> Option<(String, Name)>| {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some((key, kind)) = key_of(&name) else {
                continue;
            };
            if validate_key(&key).is_err() {
                continue;
            }
            // Sockets are only lstat'ed; regular files are opened (never
            // blocking, never following a link) to see whose they are.
            let path = entry.path();
            let listed = match kind {
                Name::Header => ShmHeader::at_name(&shm_name(&key)).map(|at| at != AtName::Absent),
                Name::Socket => expect_file_type(&path, true),
                Name::Lock => lock_of_a_key(&path),
            };
            match listed {
                Ok(true) => keys.push(key),
                Ok(false) => {} // gone meanwhile
                Err(e) => crate::log::warning!("not listed: {e}"),
            }
        }
    };
    scan(Path::new(names::SHM_DIR), &|name| {
        name.strip_prefix(SHM_PREFIX)
            .map(|k| (k.to_owned(), Name::Header))
    });
    for dir in runtime_dir_candidates(runtime_dir) {
        scan(&dir, &|name| {
            name.strip_suffix(".sock")
                .map(|k| (k.to_owned(), Name::Socket))
                .or_else(|| name.strip_suffix(".lock").map(|k| (k.to_owned(), Name::Lock)))
        });
    }
    keys.sort();
    keys.dedup();
    keys
}

/// Whether the file at `path` is a key's lock file to list: a regular file
/// of ours, or one a live publisher holds; anything else is an error naming
/// it. False when nothing is there.
fn lock_of_a_key(path: &Path) -> Result<bool> {
    let (file, meta) = match names::open_regular(path, false) {
        Ok(opened) => opened,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if names::owned_by_us(&meta) || crate::platform::lock::is_locked_elsewhere(&file) {
        Ok(true)
    } else {
        Err(names::foreign(
            path,
            names::not_ours(&meta, " that no live publisher holds"),
        ))
    }
}

/// Where a key's resources stand, without connecting a subscriber.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyStatus {
    /// The key's paths (in the directory where its socket or lock was found,
    /// else the first candidate).
    pub paths: KeyPaths,
    /// A live process holds the lock or accepts on the socket.
    pub live: bool,
    /// The shared header exists.
    pub has_shm: bool,
    /// The socket file exists.
    pub has_socket: bool,
    /// The lock file exists.
    pub has_lock: bool,
}

/// Looks at `key`'s resources. Liveness: the lock file or the shared
/// header's lock is held, or (for other implementations) the socket accepts.
/// A name holding what cuframes did not make there (a FIFO, a directory, a
/// link, a device, a file every user may write, a header this user may not
/// open) is a `Permission` error naming the path and what is there.
pub fn key_status(key: &str, runtime_dir: Option<&Path>) -> Result<KeyStatus> {
    validate_key(key)?;
    let dirs = runtime_dir_candidates(runtime_dir);
    let mut chosen = KeyPaths::in_dir(key, &dirs[0])?;
    for dir in &dirs {
        let paths = KeyPaths::in_dir(key, dir)?;
        let present = |p: &Path| std::fs::symlink_metadata(p).is_ok();
        if present(&paths.socket) || present(&paths.lock) {
            chosen = paths;
            break;
        }
    }
    let has_socket = expect_file_type(&chosen.socket, true)?;
    let has_lock = expect_file_type(&chosen.lock, false)?;
    let has_shm = match names::open_regular(&names::shm_path(&chosen.shm_name), false) {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::NotFound => false,
        Err(e) => return Err(e),
    };
    let live = lock_is_held(&chosen.lock)
        || ShmHeader::at_name(&chosen.shm_name).is_ok_and(|at| at == AtName::Live)
        || (has_socket && probe_socket(&chosen.socket)? == SocketState::Live);
    Ok(KeyStatus {
        paths: chosen,
        live,
        has_shm,
        has_socket,
        has_lock,
    })
}

/// Removes `key`'s resources when no live process owns them. Returns what
/// was removed; `AlreadyExists` when the key is live.
pub fn cleanup_key(key: &str, runtime_dir: Option<&Path>) -> Result<Vec<String>> {
    let status = key_status(key, runtime_dir)?;
    if !status.has_lock && !status.has_socket && !status.has_shm {
        return Ok(Vec::new());
    }
    let claim = KeyClaim::acquire(&status.paths)?;
    let mut removed = claim.removed().to_vec();
    if status.has_lock {
        removed.push(status.paths.lock.display().to_string());
    }
    drop(claim);
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_rules() {
        for good in ["a", "cam1", "A-b_9", &"k".repeat(63)] {
            assert!(validate_key(good).is_ok(), "{good}");
        }
        for bad in ["", &"k".repeat(64), "a/b", "a b", "ключ", "a.b", "../x", "a\0b"] {
            let err = validate_key(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{bad:?}");
        }
    }

    #[test]
    fn paths_follow_the_key() {
        let p = KeyPaths::in_dir("cam1", Path::new("/x")).unwrap();
        assert_eq!(p.socket, Path::new("/x/cam1.sock"));
        assert_eq!(p.lock, Path::new("/x/cam1.lock"));
        assert_eq!(p.shm_name, "/cuframes-cam1");
        assert!(KeyPaths::in_dir("../etc", Path::new("/x")).is_err());
    }
}
