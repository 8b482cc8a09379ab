//! A worker's stdin: the pipe transport's frames, shm-copy's wake-ups.

use std::os::fd::AsFd;

use cuframes::{Error, ErrorKind, Result};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// Stdin without Rust's buffering (poll on the descriptor must see every
/// byte that was not read yet).
pub fn raw_stdin() -> Result<std::fs::File> {
    std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .map_err(|e| Error::io("duplicating stdin", &e))
}

/// Waits until `fd` is readable, up to `timeout_ms`.
pub fn wait_readable(fd: impl AsFd, timeout_ms: u64, what: &str) -> Result<()> {
    let timeout = PollTimeout::try_from(timeout_ms.min(i32::MAX as u64) as i32).unwrap_or(PollTimeout::MAX);
    loop {
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) => {
                return Err(Error::new(
                    ErrorKind::Timeout,
                    format!("no {what} within {timeout_ms} ms"),
                ));
            }
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(Error::os("poll", e)),
        }
    }
}
