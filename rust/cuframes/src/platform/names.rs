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

/// What kind of file `meta` describes, for messages.
pub(crate) fn kind_of(meta: &Metadata) -> &'static str {
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

/// The error for `path` holding what we did not put there.
pub(crate) fn foreign(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Permission,
        format!(
            "{} is {what}: not cuframes' own, refusing to use or remove it",
            path.display()
        ),
    )
}

/// Opens the regular file at `path` (read-only, or read-write), without
/// blocking or following a link; anything else there is refused naming the
/// path and what it is. NotFound when nothing is there.
pub(crate) fn open_regular(path: &Path, write: bool) -> Result<(File, Metadata)> {
    // lstat first: a device node is never opened (opening one can act).
    let Some(before) = lstat(path)? else {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("{} does not exist", path.display()),
        ));
    };
    if !before.file_type().is_file() {
        return Err(foreign(path, format_args!("a {}", kind_of(&before))));
    }
    let file = OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.kind() {
            IoKind::NotFound => Error::new(ErrorKind::NotFound, format!("{} does not exist", path.display())),
            _ if e.raw_os_error() == Some(libc::ELOOP) => foreign(path, "a symbolic link"),
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
    Ok((file, meta))
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
        assert_eq!(
            open_regular(&dir.path().join("none"), false).unwrap_err().kind(),
            ErrorKind::NotFound
        );
        assert_eq!(shm_path("/cuframes-k"), Path::new("/dev/shm/cuframes-k"));
    }
}
