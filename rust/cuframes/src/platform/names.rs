//! Opening names in directories other users may write (`/dev/shm`, a
//! runtime directory on a shared volume): never blocking (a FIFO planted at
//! a name would hang a plain open), never following a link, and checked
//! with `fstat` after the open, so what is used is what was checked (D33).

use std::fs::{File, Metadata, OpenOptions};
use std::io::ErrorKind as IoKind;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::libc;

use crate::error::{Error, ErrorKind, Result};

/// Where POSIX shared-memory names live (what `shm_open` opens).
pub(crate) const SHM_DIR: &str = "/dev/shm";

/// The file of a `shm_open` name (`/cuframes-cam1`).
pub(crate) fn shm_path(name: &str) -> PathBuf {
    Path::new(SHM_DIR).join(name.trim_start_matches('/'))
}

/// What kind of file `meta` describes, for messages ("FIFO", "regular file", ...).
pub fn kind_of(meta: &Metadata) -> &'static str {
    let ft = meta.file_type();
    if ft.is_symlink() {
        "symbolic link"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_dir() {
        "directory"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else {
        "regular file"
    }
}

/// The `lstat` of `path` (None when nothing is there).
pub(crate) fn lstat(path: &Path) -> Result<Option<Metadata>> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some(meta)),
        Err(e) if e.kind() == IoKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("stat {}", path.display()), &e)),
    }
}

/// Who `uid` is, for messages: `uid 65534 (nobody)`, or `uid 4242` when
/// the user database does not know it.
pub(crate) fn user(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => format!("uid {uid} ({})", u.name),
        _ => format!("uid {uid}"),
    }
}

/// What `meta` is when it is not what cuframes makes at that name: `a
/// FIFO, not a file cuframes made`.
pub(crate) fn not_made(meta: &Metadata) -> String {
    format!("a {}, not a file cuframes made", kind_of(meta))
}

/// What `meta` is when it belongs to another user (`why`: what more is
/// known, such as "that no live publisher holds"): `a regular file of uid
/// 65534 (nobody) that no live publisher holds, not this user's`.
pub(crate) fn not_ours(meta: &Metadata, why: impl std::fmt::Display) -> String {
    format!(
        "a {} of {}{why}, not this user's",
        kind_of(meta),
        user(meta.uid())
    )
}

/// The error for `path` holding what cuframes did not make there for this
/// user (`what`, from [`not_made`] or [`not_ours`], or as precise): it
/// names the path and what is there, and the file is neither used nor
/// removed. Every refusal of a planted name, and every warning of a
/// listing that skips one, reads this way.
pub(crate) fn foreign(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Permission,
        format!("{} is {what}: left alone", path.display()),
    )
}

/// Refuses a regular file that cuframes did not make: one every user may
/// write (cuframes makes its files 0600, 0640 or 0660, exactly).
pub(crate) fn check_mode(path: &Path, meta: &Metadata) -> Result<()> {
    if meta.mode() & 0o002 != 0 {
        return Err(foreign(
            path,
            format_args!(
                "a {} every user may write (mode {:04o}), not a file cuframes made",
                kind_of(meta),
                meta.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// Opens the regular file at `path` (read-only, or read-write), without
/// blocking or following a link; anything else there, or a file every user
/// may write, is refused naming the path and what it is. NotFound when
/// nothing is there.
pub(crate) fn open_regular(path: &Path, write: bool) -> Result<(File, Metadata)> {
    // lstat first: a device node is never opened (opening one can act).
    let Some(before) = lstat(path)? else {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("{} does not exist", path.display()),
        ));
    };
    if !before.file_type().is_file() {
        return Err(foreign(path, not_made(&before)));
    }
    let file = OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.kind() {
            IoKind::NotFound => Error::new(ErrorKind::NotFound, format!("{} does not exist", path.display())),
            _ if e.raw_os_error() == Some(libc::ELOOP) => {
                foreign(path, "a symbolic link, not a file cuframes made")
            }
            IoKind::PermissionDenied if !owned_by_us(&before) => {
                foreign(path, not_ours(&before, " that this user may not open"))
            }
            _ => Error::io(format!("opening {}", path.display()), &e),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io(format!("fstat {}", path.display()), &e))?;
    if !meta.file_type().is_file() || (meta.dev(), meta.ino()) != (before.dev(), before.ino()) {
        return Err(foreign(
            path,
            format_args!("a {} (replaced while it was opened)", kind_of(&meta)),
        ));
    }
    check_mode(path, &meta)?;
    Ok((file, meta))
}

/// Opens the regular file at `path`, a name in a directory other users may
/// write (`/dev/shm`, a runtime directory), the way cuframes opens its own:
/// never blocking (a FIFO there would hang a plain open), never following a
/// link, and checked with `fstat` after the open (a regular file, the one
/// `lstat` saw, not writable by every user). Anything else is refused with
/// `Permission`, naming the path and what is there; `NotFound` when nothing
/// is. Read-only, or read-write with `write`. For tools built on the
/// library that keep files of their own there (`cuframes bench`'s ring).
pub fn open_shared_file(path: &Path, write: bool) -> Result<(File, Metadata)> {
    open_regular(path, write)
}

/// Whether `meta` is owned by this process's effective user.
pub(crate) fn owned_by_us(meta: &Metadata) -> bool {
    meta.uid() == nix::unistd::geteuid().as_raw()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_symlinks_and_directories_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        for (path, what) in [
            (&fifo, "FIFO"),
            (&link, "symbolic link"),
            (&dir.path().to_owned(), "directory"),
        ] {
            let err = open_regular(path, false).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
            assert!(err.to_string().contains(what), "{err}");
            assert!(err.to_string().contains(&path.display().to_string()), "{err}");
        }
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let (_, meta) = open_regular(&file, true).unwrap();
        assert!(owned_by_us(&meta));
        // Not one cuframes made: every user may write it.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o662)).unwrap();
        let err = open_regular(&file, false).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
        assert!(
            err.to_string().contains(&format!(
                "{} is a regular file every user may write (mode 0662)",
                file.display()
            )),
            "{err}"
        );
        assert_eq!(
            open_regular(&dir.path().join("none"), false).unwrap_err().kind(),
            ErrorKind::NotFound
        );
        assert_eq!(shm_path("/cuframes-k"), Path::new("/dev/shm/cuframes-k"));
    }
}
