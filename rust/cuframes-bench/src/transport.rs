//! The transports a run compares, by name.

use cuframes::{Error, ErrorKind, MemoryKind, Result};

/// A way to move frames from the publisher to its subscribers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// The cuframes ring: subscribers read the publisher's slots in place.
    Cuframes,
    /// A Unix pipe per subscriber, frames written packed (`ffmpeg -f rawvideo pipe:`).
    Pipe,
    /// A shared-memory ring: copied in by the publisher, out by each subscriber.
    ShmCopy,
}

impl Transport {
    pub const ALL: [Transport; 3] = [Transport::Cuframes, Transport::Pipe, Transport::ShmCopy];

    pub fn parse(name: &str) -> Result<Transport> {
        Transport::ALL
            .into_iter()
            .find(|t| t.name() == name.trim())
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "bad --transports: unknown transport '{}' (cuframes, pipe, shm-copy)",
                        name.trim()
                    ),
                )
            })
    }

    pub fn name(self) -> &'static str {
        match self {
            Transport::Cuframes => "cuframes",
            Transport::Pipe => "pipe",
            Transport::ShmCopy => "shm-copy",
        }
    }

    /// The copies a frame takes from publisher to subscriber, in words
    /// (stated in the report).
    pub fn copies(self, memory: MemoryKind) -> &'static str {
        match (self, memory) {
            (Transport::Cuframes, MemoryKind::Host) => {
                "publisher copies the frame into a ring slot; subscribers read the slot in place"
            }
            (Transport::Cuframes, MemoryKind::Cuda) => {
                "publisher copies the frame device to device into a ring slot; subscribers use the slot in place (CUDA IPC)"
            }
            (Transport::Pipe, MemoryKind::Host) => {
                "publisher writes the packed frame into one pipe per subscriber; each subscriber reads it out"
            }
            (Transport::Pipe, MemoryKind::Cuda) => {
                "publisher copies the frame device to host, writes it into one pipe per subscriber; each subscriber reads it and copies it host to device"
            }
            (Transport::ShmCopy, MemoryKind::Host) => {
                "publisher copies the frame into a shared-memory slot; each subscriber copies it out"
            }
            (Transport::ShmCopy, MemoryKind::Cuda) => {
                "publisher copies the frame device to host into a shared-memory slot; each subscriber copies it host to device"
            }
        }
    }
}
