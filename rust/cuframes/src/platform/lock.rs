//! Open-file-description locks (`F_OFD_SETLK`): held per open file, released
//! by the kernel when the holder dies however it dies, and testable without
//! taking them (`F_OFD_GETLK`). They mark a key's owner (lock file) and a
//! shared header's owner, independent of pid namespaces and runtime dirs.

use std::os::fd::AsFd;

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, fcntl};
use nix::libc;

use crate::error::{Error, Result};

fn whole_file(kind: libc::c_short) -> libc::flock {
    libc::flock {
        l_type: kind,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    }
}

/// Takes an exclusive lock on `fd`'s whole file; `Ok(false)` when another
/// open file holds one.
pub(crate) fn try_lock_exclusive(fd: impl AsFd, what: &str) -> Result<bool> {
    let request = whole_file(libc::F_WRLCK as libc::c_short);
    match fcntl(fd.as_fd(), FcntlArg::F_OFD_SETLK(&request)) {
        Ok(_) => Ok(true),
        Err(Errno::EAGAIN | Errno::EACCES) => Ok(false),
        Err(e) => Err(Error::os(format!("locking {what}"), e)),
    }
}

/// Whether some other open file holds a lock on `fd`'s file.
pub(crate) fn is_locked_elsewhere(fd: impl AsFd) -> bool {
    let mut request = whole_file(libc::F_WRLCK as libc::c_short);
    match fcntl(fd.as_fd(), FcntlArg::F_OFD_GETLK(&mut request)) {
        Ok(_) => request.l_type != libc::F_UNLCK as libc::c_short,
        Err(_) => false,
    }
}
