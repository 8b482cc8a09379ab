//! Errors: one enum of kinds with stable numeric codes (shared with the wire
//! protocol's `result`/`error_code` fields and the C API's status codes), plus a
//! message that names the object and its state.

use std::fmt;

/// What went wrong, with a stable negative code (protocol notes, "Error codes").
///
/// The numbers travel on the wire (HELLO_RESP.result, SUBSCRIBE_RESP.result,
/// ERROR.error_code) and are the C API's status values: never renumber.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ErrorKind {
    /// A caller's argument is invalid (bad key, size, format, option).
    InvalidArgument = -1,
    /// No publisher exists for the key.
    NotFound = -2,
    /// A live publisher already owns the key.
    AlreadyExists = -3,
    /// Protocol violation or version mismatch.
    Protocol = -4,
    /// Pixel format unknown or not supported by this operation.
    Format = -5,
    /// The publisher already serves the maximum number of subscribers.
    TooMany = -6,
    /// A wait ran out of time.
    Timeout = -7,
    /// The peer went away (publisher shutdown or crash, subscriber dropped).
    Disconnected = -8,
    /// A leased frame was overwritten by the publisher before it was released.
    Overwritten = -9,
    /// An operating-system call failed.
    Io = -10,
    /// A CUDA driver call failed.
    Cuda = -11,
    /// The operation or backend is not available in this build or on this machine.
    Unsupported = -12,
    /// Shared memory or a message from a peer holds values that cannot be trusted.
    Corrupt = -13,
    /// Access denied by the operating system.
    Permission = -14,
    /// An internal invariant broke (a bug; e.g. a panic caught at the C boundary).
    Internal = -15,
    /// A resource ran out: file descriptors, memory, space in /dev/shm, GPU
    /// memory ([`Error::resource`] says which, and on which side).
    Exhausted = -16,
}

impl ErrorKind {
    /// Every kind, for tables and tests.
    pub const ALL: [ErrorKind; 16] = [
        ErrorKind::InvalidArgument,
        ErrorKind::NotFound,
        ErrorKind::AlreadyExists,
        ErrorKind::Protocol,
        ErrorKind::Format,
        ErrorKind::TooMany,
        ErrorKind::Timeout,
        ErrorKind::Disconnected,
        ErrorKind::Overwritten,
        ErrorKind::Io,
        ErrorKind::Cuda,
        ErrorKind::Unsupported,
        ErrorKind::Corrupt,
        ErrorKind::Permission,
        ErrorKind::Internal,
        ErrorKind::Exhausted,
    ];

    /// The stable numeric code.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The kind for a code received from a peer; unknown codes map to `Protocol`.
    pub fn from_code(code: i32) -> ErrorKind {
        Self::ALL
            .into_iter()
            .find(|k| k.code() == code)
            .unwrap_or(ErrorKind::Protocol)
    }

    /// A short fixed description (the future `cuframes_strerror`).
    pub fn describe(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid argument",
            ErrorKind::NotFound => "no such publisher",
            ErrorKind::AlreadyExists => "key already published",
            ErrorKind::Protocol => "protocol error or version mismatch",
            ErrorKind::Format => "unsupported pixel format",
            ErrorKind::TooMany => "too many subscribers",
            ErrorKind::Timeout => "timed out",
            ErrorKind::Disconnected => "disconnected",
            ErrorKind::Overwritten => "frame overwritten while leased",
            ErrorKind::Io => "I/O error",
            ErrorKind::Cuda => "CUDA error",
            ErrorKind::Unsupported => "not supported",
            ErrorKind::Corrupt => "corrupt shared state",
            ErrorKind::Permission => "permission denied",
            ErrorKind::Internal => "internal error",
            ErrorKind::Exhausted => "a resource ran out",
        }
    }
}

/// What ran out, for errors of kind [`ErrorKind::Exhausted`]: it lets the
/// side that ran out and the side it tells each name it in their own words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resource {
    /// File descriptors of one process: its soft `RLIMIT_NOFILE`.
    Descriptors {
        /// The limit in force when it ran out.
        limit: u64,
    },
    /// The system's open-file table (`fs.file-max`).
    SystemDescriptors,
    /// Memory: memfd pages, mappings.
    Memory,
    /// Space on a filesystem: for cuframes, `/dev/shm` (a container's is
    /// 64 MiB by default), where the shared headers live.
    Space,
    /// GPU memory.
    GpuMemory,
}

impl Resource {
    /// `side` ("this process", "the publisher") and what it ran out of.
    pub fn ran_out(self, side: &str) -> String {
        match self {
            Resource::Descriptors { limit } => format!("{side} has no descriptor left (limit {limit})"),
            Resource::SystemDescriptors => {
                format!("{side} found the system's file table full (fs.file-max)")
            }
            Resource::Memory => format!("{side} is out of memory"),
            Resource::Space => format!("{side} found no space left on the filesystem"),
            Resource::GpuMemory => format!("{side} found its GPU out of memory"),
        }
    }

    /// What ran out when a call failed with `errno`, if that errno means one.
    fn of_errno(errno: nix::errno::Errno) -> Option<Resource> {
        use nix::errno::Errno;
        match errno {
            Errno::EMFILE => Some(Resource::Descriptors {
                limit: descriptor_limit(),
            }),
            Errno::ENFILE => Some(Resource::SystemDescriptors),
            Errno::ENOMEM => Some(Resource::Memory),
            Errno::ENOSPC => Some(Resource::Space),
            _ => None,
        }
    }
}

/// This process's soft limit on open descriptors (`ulimit -n`).
pub(crate) fn descriptor_limit() -> u64 {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).map_or(0, |(soft, _)| soft)
}

/// An error: a kind plus a message saying which object and what state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    resource: Option<Resource>,
}

/// Result alias for the crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error of `kind` with a message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            resource: None,
        }
    }

    /// An [`ErrorKind::Exhausted`] error: `resource` ran out while doing
    /// what `message` says.
    pub fn exhausted(resource: Resource, message: impl Into<String>) -> Error {
        Error {
            kind: ErrorKind::Exhausted,
            message: message.into(),
            resource: Some(resource),
        }
    }

    /// What ran out, for an [`ErrorKind::Exhausted`] error.
    pub fn resource(&self) -> Option<Resource> {
        self.resource
    }

    /// The kind (and so the stable code).
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message alone.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// An OS error while doing `what` (the kind follows errno: EACCES/EPERM
    /// become `Permission`; EMFILE, ENFILE, ENOMEM and ENOSPC `Exhausted`,
    /// saying what this process ran out of).
    pub fn os(what: impl fmt::Display, errno: nix::errno::Errno) -> Error {
        if let Some(resource) = Resource::of_errno(errno) {
            return Error::exhausted(resource, format!("{what}: {}", resource.ran_out("this process")));
        }
        let kind = match errno {
            nix::errno::Errno::EACCES | nix::errno::Errno::EPERM => ErrorKind::Permission,
            _ => ErrorKind::Io,
        };
        Error::new(kind, format!("{what}: {}", errno.desc()))
    }

    /// Same as [`Error::os`] for a `std::io::Error`.
    pub fn io(what: impl fmt::Display, err: &std::io::Error) -> Error {
        match err.raw_os_error() {
            Some(code) => Error::os(what, nix::errno::Errno::from_raw(code)),
            None => Error::new(ErrorKind::Io, format!("{what}: {err}")),
        }
    }

    pub(crate) fn protocol(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Protocol, message)
    }

    pub(crate) fn corrupt(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Corrupt, message)
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidArgument, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_distinct() {
        let codes: Vec<i32> = ErrorKind::ALL.iter().map(|k| k.code()).collect();
        assert_eq!(codes, (1..=16).map(|c| -c).collect::<Vec<_>>());
        for kind in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_code(kind.code()), kind);
        }
        assert_eq!(ErrorKind::from_code(-999), ErrorKind::Protocol);
        assert_eq!(ErrorKind::from_code(0), ErrorKind::Protocol);
    }

    #[test]
    fn errno_maps_to_kind() {
        let e = Error::os("open x", nix::errno::Errno::EACCES);
        assert_eq!(e.kind(), ErrorKind::Permission);
        assert!(e.message().starts_with("open x: "));
        assert_eq!(Error::os("y", nix::errno::Errno::EIO).kind(), ErrorKind::Io);
    }

    #[test]
    fn running_out_is_named_with_the_limit() {
        let e = Error::os("eventfd", nix::errno::Errno::EMFILE);
        assert_eq!(e.kind(), ErrorKind::Exhausted);
        let limit = descriptor_limit();
        assert_eq!(e.resource(), Some(Resource::Descriptors { limit }));
        assert_eq!(
            e.message(),
            format!("eventfd: this process has no descriptor left (limit {limit})")
        );
        assert_eq!(
            Resource::Descriptors { limit: 40 }.ran_out("the publisher"),
            "the publisher has no descriptor left (limit 40)"
        );
        assert_eq!(
            Error::os("memfd", nix::errno::Errno::ENOMEM).resource(),
            Some(Resource::Memory)
        );
        assert_eq!(Error::os("x", nix::errno::Errno::EIO).resource(), None);
    }
}
