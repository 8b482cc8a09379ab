//! Who may subscribe: the publisher's own user, root, and — when the
//! publisher names one — the members of a group (D19).
//!
//! File modes keep everyone else from reaching the socket and the shared
//! header; the control thread checks the connecting process's credentials
//! (`SO_PEERCRED`, `SO_PEERGROUPS`) as well, so a socket reached some other
//! way (a copied path, a loosened directory) still refuses other users.

use std::os::fd::{AsFd, AsRawFd};

use nix::libc;
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use nix::unistd::{Gid, Group};

use crate::error::{Error, ErrorKind, Result};

/// Credentials of the process at the other end of a Unix socket.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerCred {
    /// Process id (as seen in this pid namespace; 0 if unknown).
    pub pid: u32,
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
    /// Supplementary groups (empty when the kernel cannot tell).
    pub groups: Vec<u32>,
}

/// Whether `peer` may subscribe to a publisher running as `owner_uid` that
/// admits `group` (None: only its own user and root).
pub fn peer_allowed(peer: &PeerCred, owner_uid: u32, group: Option<u32>) -> bool {
    peer.uid == owner_uid || peer.uid == 0 || group.is_some_and(|g| peer.gid == g || peer.groups.contains(&g))
}

/// The credentials of `sock`'s peer: SO_PEERCRED (as of its connect or
/// listen), plus SO_PEERGROUPS where the kernel has it (Linux ≥ 4.13).
pub fn peer_credentials(sock: impl AsFd) -> Result<PeerCred> {
    let cred = getsockopt(&sock, PeerCredentials).map_err(|e| Error::os("SO_PEERCRED", e))?;
    Ok(PeerCred {
        pid: cred.pid().max(0) as u32,
        uid: cred.uid(),
        gid: cred.gid(),
        groups: peer_groups(sock.as_fd()).unwrap_or_default(),
    })
}

fn peer_groups(sock: std::os::fd::BorrowedFd<'_>) -> Option<Vec<u32>> {
    let mut groups = vec![0 as libc::gid_t; 64];
    loop {
        let mut len = (groups.len() * size_of::<libc::gid_t>()) as libc::socklen_t;
        // SAFETY: the buffer is `len` bytes of writable gid_t storage that
        // outlives the call; the kernel writes at most `len` bytes and
        // stores the size it needs in `len`.
        let rc = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let count = len as usize / size_of::<libc::gid_t>();
        if rc == 0 {
            groups.truncate(count);
            return Some(groups);
        }
        if nix::errno::Errno::last() != nix::errno::Errno::ERANGE || count <= groups.len() {
            return None;
        }
        groups.resize(count, 0);
    }
}

/// A group given by name or number, as a gid.
pub fn resolve_group(name: &str) -> Result<u32> {
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    match Group::from_name(name) {
        Ok(Some(group)) => Ok(group.gid.as_raw()),
        Ok(None) => Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("unknown group '{name}'"),
        )),
        Err(e) => Err(Error::os(format!("looking up group '{name}'"), e)),
    }
}

/// The group as a nix Gid.
pub(crate) fn gid(group: u32) -> Gid {
    Gid::from_raw(group)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cred(uid: u32, gid: u32, groups: &[u32]) -> PeerCred {
        PeerCred {
            pid: 1,
            uid,
            gid,
            groups: groups.to_vec(),
        }
    }

    #[test]
    fn only_owner_and_root_without_a_group() {
        assert!(peer_allowed(&cred(1000, 1000, &[]), 1000, None));
        assert!(peer_allowed(&cred(0, 0, &[]), 1000, None));
        assert!(!peer_allowed(&cred(1001, 1000, &[1000]), 1000, None));
        assert!(!peer_allowed(&cred(65534, 65534, &[]), 0, None));
    }

    #[test]
    fn group_members_by_primary_or_supplementary_group() {
        assert!(peer_allowed(&cred(1001, 44, &[]), 1000, Some(44)));
        assert!(peer_allowed(&cred(1001, 1001, &[27, 44]), 1000, Some(44)));
        assert!(!peer_allowed(&cred(1001, 1001, &[27]), 1000, Some(44)));
        assert!(peer_allowed(&cred(1000, 1000, &[]), 1000, Some(44)), "owner");
        assert!(peer_allowed(&cred(0, 0, &[]), 1000, Some(44)), "root");
    }

    #[test]
    fn real_socket_pair_reports_this_process() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let c = peer_credentials(&a).unwrap();
        assert_eq!(c.uid, nix::unistd::geteuid().as_raw());
        assert_eq!(c.gid, nix::unistd::getegid().as_raw());
        assert_eq!(c.pid, std::process::id());
        assert!(peer_allowed(&c, c.uid, None));
    }

    #[test]
    fn groups_resolve_by_name_and_number() {
        assert_eq!(resolve_group("0").unwrap(), 0);
        assert_eq!(resolve_group("root").unwrap(), 0);
        let err = resolve_group("no-such-group-cuframes").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    }
}
