//! TLV messages of the control socket (spec §3), strict on input.
//!
//! Frame: `type` (LE u32), `payload_length` (LE u32, ≤ 4096), payload.
//! Every payload has one exact length (or, for variable parts, exactly the
//! length its own length fields imply); anything else is a protocol error.
//! Reserved bytes are written as zero and ignored on read (spec §6.3).

use super::layout::{FrameMeta, MAX_NAME_BYTES};
use crate::error::{Error, Result};

/// Bytes of the TLV header.
pub const TLV_HEADER_LEN: usize = 8;
/// Largest payload in v1.
pub const MAX_PAYLOAD_LEN: usize = 4096;
/// Largest whole message.
pub const MAX_MESSAGE_LEN: usize = TLV_HEADER_LEN + MAX_PAYLOAD_LEN;

/// Message type numbers (spec §3.2).
pub mod msg_type {
    /// C→P first message.
    pub const HELLO_REQ: u32 = 0x01;
    /// P→C answer to HELLO_REQ.
    pub const HELLO_RESP: u32 = 0x02;
    /// C→P request a subscriber bit.
    pub const SUBSCRIBE_REQ: u32 = 0x03;
    /// P→C bit assigned (or refused).
    pub const SUBSCRIBE_RESP: u32 = 0x04;
    /// C→P graceful leave.
    pub const UNSUBSCRIBE: u32 = 0x10;
    /// P→C a file descriptor rides in SCM_RIGHTS.
    pub const EVENT_FD: u32 = 0x20;
    /// P→C publisher shutting down.
    pub const SHUTDOWN: u32 = 0x30;
    /// Either way, liveness check.
    pub const PING: u32 = 0xF0;
    /// Reply to PING.
    pub const PONG: u32 = 0xF1;
    /// Either way, an error notification.
    pub const ERROR: u32 = 0xFE;
}

/// `fd_purpose` of EVENT_FD.
pub mod fd_purpose {
    /// Spec §3.7: an eventfd the publisher writes 1 to on every publish.
    pub const WAKEUP: u32 = 1;
    /// Extension: a sealed memfd holding the host-memory slots.
    pub const HOST_SLOTS: u32 = 2;
    /// Extension (D27): the shared header itself, sent before
    /// SUBSCRIBE to a subscriber that asked ([`super::hello_flags::EARLY_FDS`]).
    pub const HEADER: u32 = 3;
    /// Extension (D28): the CUDA fence array (one u64 per slot).
    pub const CUDA_FENCES: u32 = 4;
    /// Extension (D30): the side-data area, a sealed memfd (before
    /// SUBSCRIBE, to subscribers that asked).
    pub const SIDE_DATA: u32 = 5;
    /// Extension (D33): the subscriber's own ACK area, a memfd only it and
    /// the publisher map (after SUBSCRIBE_RESP, to subscribers granted
    /// [`super::hello_flags::PRIVATE_ACKS`]).
    pub const ACK_AREA: u32 = 6;
    /// Extension (D33): the eventfd a subscriber writes after an ACK while
    /// the publisher waits for one (same subscribers).
    pub const ACK_DOORBELL: u32 = 7;
    /// Extension (D27): CUDA slot `n`, exported as a file
    /// descriptor, is purpose `CUDA_SLOT_0 + n`.
    pub const CUDA_SLOT_0: u32 = 0x100;

    /// The most descriptors a publisher sends before SUBSCRIBE: the header,
    /// one per slot of the largest ring, the fence array and the side-data
    /// area. A subscriber refuses an announcement of more.
    pub const MAX_EARLY: u32 = 1 + crate::wire::layout::MAX_RING_SIZE as u32 + 1 + 1;
}

/// Extension: bits of HELLO_REQ's first reserved word (`ext_flags`);
/// protocol-v1 publishers ignore it (reserved bytes are ignored on read).
pub mod hello_flags {
    /// Send the descriptors a subscriber needs before SUBSCRIBE (the shared
    /// header, CUDA slots shared as fds), right after HELLO_RESP, whose first
    /// reserved word (`early_fds`) then says how many EVENT_FDs follow.
    pub const EARLY_FDS: u32 = 1;
    /// ACK in an area of my own, and send me the header as a copy only the
    /// publisher can write (D33); needs `EARLY_FDS`. A publisher that
    /// grants it says so in HELLO_RESP's `granted`.
    pub const PRIVATE_ACKS: u32 = 2;
}

/// `reason` of SHUTDOWN (spec §3.8).
pub mod shutdown_reason {
    /// Normal destroy.
    pub const NORMAL: u32 = 0;
    /// Publisher failed.
    pub const ERROR: u32 = 1;
    /// Upgrade.
    pub const UPGRADE: u32 = 2;
}

/// HELLO_REQ (spec §3.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelloReq {
    /// The subscriber's protocol version.
    pub proto_version: u32,
    /// Subscriber name, UTF-8, ≤ 31 bytes, no NUL.
    pub name: String,
    /// The subscriber's CUDA device ordinal (-1 = none/host).
    pub cuda_device: i32,
    /// `SubscriberMode` number.
    pub mode: u32,
    /// Extension: `hello_flags::*` (the first reserved word; 0 from v1 peers).
    pub ext_flags: u32,
}

/// The accepted body of HELLO_RESP (spec §3.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelloAccept {
    /// Ring size, 1..=16.
    pub ring_size: u32,
    /// Ownership mode.
    pub ownership_mode: u32,
    /// The frame meta.
    pub meta: FrameMeta,
    /// Name of the shared header object, e.g. `/cuframes-cam1`.
    pub shm_path: String,
    /// Extension: EVENT_FD messages sent right after this HELLO_RESP, before
    /// SUBSCRIBE (the first reserved word; 0 from v1 publishers, and sent
    /// only to subscribers that asked with `hello_flags::EARLY_FDS`).
    pub early_fds: u32,
    /// Extension: the `hello_flags` the publisher grants beyond
    /// `EARLY_FDS` (the second reserved word; 0 from older publishers).
    pub granted: u32,
}

/// HELLO_RESP: accepted with a body, or refused with a negative result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelloResp {
    /// 0 = success, negative = an [`crate::ErrorKind`] code.
    pub result: i32,
    /// The publisher's protocol version.
    pub proto_version: u32,
    /// Present exactly when `result == 0`.
    pub accept: Option<HelloAccept>,
}

/// SUBSCRIBE_RESP (spec §3.6, D2: `initial_seq` is 8 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubscribeResp {
    /// 0 = success, negative = an [`crate::ErrorKind`] code.
    pub result: i32,
    /// 1..=31 on success, 0 when refused.
    pub assigned_bit: u32,
    /// `global_seq` when the bit was assigned; frames after it are delivered.
    pub initial_seq: u64,
}

/// One control message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// 0x01
    HelloReq(HelloReq),
    /// 0x02
    HelloResp(HelloResp),
    /// 0x03
    SubscribeReq {
        /// Repeated protocol version.
        proto_version: u32,
    },
    /// 0x04
    SubscribeResp(SubscribeResp),
    /// 0x10
    Unsubscribe {
        /// 0 = normal (D9).
        reason: u32,
    },
    /// 0x20; the descriptor itself travels in SCM_RIGHTS.
    EventFd {
        /// `fd_purpose::*`.
        purpose: u32,
    },
    /// 0x30
    Shutdown {
        /// `shutdown_reason::*`.
        reason: u32,
    },
    /// 0xF0
    Ping {
        /// Echoed in PONG.
        nonce: u64,
    },
    /// 0xF1
    Pong {
        /// The PING's nonce.
        nonce: u64,
    },
    /// 0xFE
    Error {
        /// An [`crate::ErrorKind`] code.
        code: i32,
        /// UTF-8 text.
        message: String,
    },
}

/// Fixed payload lengths (the variable ones are computed).
mod len {
    pub const HELLO_REQ_FIXED: usize = 4 + 4 + 4 + 4 + 12;
    pub const HELLO_RESP_FIXED: usize = 4 + 4 + 4 + 4 + 64 + 4 + 12;
    pub const HELLO_RESP_REFUSED: usize = 4 + 12;
    pub const SUBSCRIBE_REQ: usize = 4 + 12;
    pub const SUBSCRIBE_RESP: usize = 4 + 4 + 8 + 12;
    pub const FOUR_PLUS_RESERVED: usize = 4 + 12;
    pub const PING: usize = 8 + 8;
    pub const ERROR_FIXED: usize = 4 + 4 + 12;
}

impl Message {
    /// The type number.
    pub fn type_id(&self) -> u32 {
        match self {
            Message::HelloReq(_) => msg_type::HELLO_REQ,
            Message::HelloResp(_) => msg_type::HELLO_RESP,
            Message::SubscribeReq { .. } => msg_type::SUBSCRIBE_REQ,
            Message::SubscribeResp(_) => msg_type::SUBSCRIBE_RESP,
            Message::Unsubscribe { .. } => msg_type::UNSUBSCRIBE,
            Message::EventFd { .. } => msg_type::EVENT_FD,
            Message::Shutdown { .. } => msg_type::SHUTDOWN,
            Message::Ping { .. } => msg_type::PING,
            Message::Pong { .. } => msg_type::PONG,
            Message::Error { .. } => msg_type::ERROR,
        }
    }

    /// The spec's name, for logs and errors.
    pub fn name(&self) -> &'static str {
        type_name(self.type_id())
    }

    /// Encodes header and payload. Fails only for values the protocol cannot
    /// carry (a name over 31 bytes, an over-long string).
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut w = Writer(Vec::with_capacity(64));
        w.u32(self.type_id());
        w.u32(0); // payload length, patched below
        match self {
            Message::HelloReq(h) => {
                check_name(&h.name)?;
                w.u32(h.proto_version);
                w.u32(h.name.len() as u32);
                w.bytes(h.name.as_bytes());
                w.i32(h.cuda_device);
                w.u32(h.mode);
                w.u32(h.ext_flags);
                w.zeros(8);
            }
            Message::HelloResp(r) => match (&r.accept, r.result) {
                (Some(a), 0) => {
                    check_shm_path(&a.shm_path)?;
                    w.i32(0);
                    w.u32(r.proto_version);
                    w.u32(a.ring_size);
                    w.u32(a.ownership_mode);
                    w.bytes(&a.meta.to_bytes());
                    w.u32(a.shm_path.len() as u32);
                    w.bytes(a.shm_path.as_bytes());
                    w.u32(a.early_fds);
                    w.u32(a.granted);
                    w.zeros(4);
                }
                (None, result) if result < 0 => {
                    // Spec §3.4: result + reserved. The first reserved word
                    // carries the publisher's version (extension, notes §E4).
                    w.i32(result);
                    w.u32(r.proto_version);
                    w.zeros(8);
                }
                _ => {
                    return Err(Error::invalid(
                        "HELLO_RESP needs a body exactly when result is 0 and a negative result otherwise",
                    ));
                }
            },
            Message::SubscribeReq { proto_version } => {
                w.u32(*proto_version);
                w.zeros(12);
            }
            Message::SubscribeResp(r) => {
                w.i32(r.result);
                w.u32(r.assigned_bit);
                w.u64(r.initial_seq);
                w.zeros(12);
            }
            Message::Unsubscribe { reason: v }
            | Message::EventFd { purpose: v }
            | Message::Shutdown { reason: v } => {
                w.u32(*v);
                w.zeros(12);
            }
            Message::Ping { nonce } | Message::Pong { nonce } => {
                w.u64(*nonce);
                w.zeros(8);
            }
            Message::Error { code, message } => {
                if message.len() > MAX_PAYLOAD_LEN - len::ERROR_FIXED {
                    return Err(Error::invalid("ERROR message text is too long"));
                }
                w.i32(*code);
                w.u32(message.len() as u32);
                w.bytes(message.as_bytes());
                w.zeros(12);
            }
        }
        let payload_len = w.0.len() - TLV_HEADER_LEN;
        debug_assert!(payload_len <= MAX_PAYLOAD_LEN);
        w.0[4..8].copy_from_slice(&(payload_len as u32).to_le_bytes());
        Ok(w.0)
    }

    /// Decodes one message from the front of `buf`.
    ///
    /// `Ok(None)`: more bytes are needed. `Ok(Some((msg, used)))`: a message
    /// and the bytes it took. `Err`: the stream is not protocol v1 (unknown
    /// type, oversized or malformed payload) and must be closed.
    pub fn decode(buf: &[u8]) -> Result<Option<(Message, usize)>> {
        if buf.len() < TLV_HEADER_LEN {
            return Ok(None);
        }
        let kind = u32::from_le_bytes(buf[0..4].try_into().expect("4 bytes"));
        let length = u32::from_le_bytes(buf[4..8].try_into().expect("4 bytes")) as usize;
        if type_name(kind) == "UNKNOWN" {
            return Err(Error::protocol(format!("unknown message type 0x{kind:02X}")));
        }
        if length > MAX_PAYLOAD_LEN {
            return Err(Error::protocol(format!(
                "{} payload of {length} bytes exceeds the v1 limit of {MAX_PAYLOAD_LEN}",
                type_name(kind)
            )));
        }
        if buf.len() < TLV_HEADER_LEN + length {
            return Ok(None);
        }
        let payload = &buf[TLV_HEADER_LEN..TLV_HEADER_LEN + length];
        let msg = decode_payload(kind, payload)?;
        Ok(Some((msg, TLV_HEADER_LEN + length)))
    }
}

/// The spec's name of a type number, or "UNKNOWN".
pub fn type_name(kind: u32) -> &'static str {
    match kind {
        msg_type::HELLO_REQ => "HELLO_REQ",
        msg_type::HELLO_RESP => "HELLO_RESP",
        msg_type::SUBSCRIBE_REQ => "SUBSCRIBE_REQ",
        msg_type::SUBSCRIBE_RESP => "SUBSCRIBE_RESP",
        msg_type::UNSUBSCRIBE => "UNSUBSCRIBE",
        msg_type::EVENT_FD => "EVENT_FD",
        msg_type::SHUTDOWN => "SHUTDOWN",
        msg_type::PING => "PING",
        msg_type::PONG => "PONG",
        msg_type::ERROR => "ERROR",
        _ => "UNKNOWN",
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.len() > MAX_NAME_BYTES {
        return Err(Error::invalid(format!(
            "subscriber name '{name}' is {} bytes; at most {MAX_NAME_BYTES}",
            name.len()
        )));
    }
    if name.contains('\0') {
        return Err(Error::invalid("subscriber name contains a NUL byte"));
    }
    Ok(())
}

fn check_shm_path(path: &str) -> Result<()> {
    if path.is_empty() || path.len() > 255 || !path.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::invalid(format!(
            "shm path {path:?} must be 1..=255 printable ASCII bytes"
        )));
    }
    Ok(())
}

/// The message of type `kind` in payload `p`: one decoder a type (the
/// payload's length already checked against the v1 limit).
fn decode_payload(kind: u32, p: &[u8]) -> Result<Message> {
    let name = type_name(kind);
    let mut r = Reader { p, at: 0 };
    let msg = match kind {
        msg_type::HELLO_REQ => decode_hello_req(name, p)?,
        msg_type::HELLO_RESP => decode_hello_resp(name, p)?,
        msg_type::SUBSCRIBE_REQ => {
            exact(name, p, len::SUBSCRIBE_REQ)?;
            Message::SubscribeReq {
                proto_version: r.u32(),
            }
        }
        msg_type::SUBSCRIBE_RESP => decode_subscribe_resp(name, p)?,
        msg_type::UNSUBSCRIBE => {
            exact(name, p, len::FOUR_PLUS_RESERVED)?;
            Message::Unsubscribe { reason: r.u32() }
        }
        msg_type::EVENT_FD => {
            exact(name, p, len::FOUR_PLUS_RESERVED)?;
            Message::EventFd { purpose: r.u32() }
        }
        msg_type::SHUTDOWN => {
            exact(name, p, len::FOUR_PLUS_RESERVED)?;
            Message::Shutdown { reason: r.u32() }
        }
        msg_type::PING => {
            exact(name, p, len::PING)?;
            Message::Ping { nonce: r.u64() }
        }
        msg_type::PONG => {
            exact(name, p, len::PING)?;
            Message::Pong { nonce: r.u64() }
        }
        msg_type::ERROR => decode_error(name, p)?,
        _ => return Err(Error::protocol(format!("unknown message type 0x{kind:02X}"))),
    };
    Ok(msg)
}

/// A payload of `name` must be exactly `want` bytes.
fn exact(name: &str, p: &[u8], want: usize) -> Result<()> {
    if p.len() == want {
        Ok(())
    } else {
        Err(Error::protocol(format!(
            "{name} payload is {} bytes; v1 requires {want}",
            p.len()
        )))
    }
}

/// A payload of `name` must hold at least its `fixed` part.
fn at_least(name: &str, p: &[u8], fixed: usize) -> Result<()> {
    if p.len() < fixed {
        return Err(Error::protocol(format!(
            "{name} payload of {} bytes is truncated",
            p.len()
        )));
    }
    Ok(())
}

/// A result field: 0 or negative (an [`crate::ErrorKind`] code).
fn check_result(name: &str, result: i32) -> Result<()> {
    if result > 0 {
        return Err(Error::protocol(format!(
            "{name}: result {result} is not 0 or negative"
        )));
    }
    Ok(())
}

/// HELLO_REQ: the fixed part with the name's length, the name, the rest.
fn decode_hello_req(name: &str, p: &[u8]) -> Result<Message> {
    at_least(name, p, len::HELLO_REQ_FIXED)?;
    let mut r = Reader { p, at: 0 };
    let proto_version = r.u32();
    let name_len = r.u32() as usize;
    if name_len > MAX_NAME_BYTES {
        return Err(Error::protocol(format!(
            "{name}: consumer name of {name_len} bytes exceeds {MAX_NAME_BYTES}"
        )));
    }
    exact(name, p, len::HELLO_REQ_FIXED + name_len)?;
    let raw = r.bytes(name_len);
    let consumer = std::str::from_utf8(raw)
        .map_err(|_| Error::protocol(format!("{name}: consumer name is not UTF-8")))?;
    if consumer.contains('\0') {
        return Err(Error::protocol(format!("{name}: consumer name contains NUL")));
    }
    let cuda_device = r.i32();
    let mode = r.u32();
    let ext_flags = r.u32();
    Ok(Message::HelloReq(HelloReq {
        proto_version,
        name: consumer.to_owned(),
        cuda_device,
        mode,
        ext_flags,
    }))
}

/// HELLO_RESP: a refusal (a negative result and the publisher's version),
/// or the body, with the shm path's length, the path and the rest.
fn decode_hello_resp(name: &str, p: &[u8]) -> Result<Message> {
    at_least(name, p, 4)?;
    let mut r = Reader { p, at: 0 };
    let result = r.i32();
    check_result(name, result)?;
    if result < 0 && p.len() == len::HELLO_RESP_REFUSED {
        let proto_version = r.u32();
        return Ok(Message::HelloResp(HelloResp {
            result,
            proto_version,
            accept: None,
        }));
    }
    at_least(name, p, len::HELLO_RESP_FIXED)?;
    let proto_version = r.u32();
    let ring_size = r.u32();
    let ownership_mode = r.u32();
    let meta = FrameMeta::from_bytes(r.bytes(64).try_into().expect("64 bytes"));
    let path_len = r.u32() as usize;
    if path_len > 255 {
        return Err(Error::protocol(format!(
            "{name}: shm path of {path_len} bytes is too long"
        )));
    }
    exact(name, p, len::HELLO_RESP_FIXED + path_len)?;
    let raw = r.bytes(path_len);
    let shm_path = std::str::from_utf8(raw)
        .ok()
        .filter(|s| check_shm_path(s).is_ok())
        .ok_or_else(|| Error::protocol(format!("{name}: shm path is not printable ASCII")))?;
    let early_fds = r.u32();
    let granted = r.u32();
    let accept = (result == 0).then(|| HelloAccept {
        ring_size,
        ownership_mode,
        meta,
        shm_path: shm_path.to_owned(),
        early_fds,
        granted,
    });
    Ok(Message::HelloResp(HelloResp {
        result,
        proto_version,
        accept,
    }))
}

/// SUBSCRIBE_RESP: result, bit, initial seq.
fn decode_subscribe_resp(name: &str, p: &[u8]) -> Result<Message> {
    exact(name, p, len::SUBSCRIBE_RESP)?;
    let mut r = Reader { p, at: 0 };
    let result = r.i32();
    check_result(name, result)?;
    Ok(Message::SubscribeResp(SubscribeResp {
        result,
        assigned_bit: r.u32(),
        initial_seq: r.u64(),
    }))
}

/// ERROR: the code, the text's length, the text.
fn decode_error(name: &str, p: &[u8]) -> Result<Message> {
    at_least(name, p, len::ERROR_FIXED)?;
    let mut r = Reader { p, at: 0 };
    let code = r.i32();
    let text_len = r.u32() as usize;
    exact(name, p, len::ERROR_FIXED.saturating_add(text_len))?;
    let text = std::str::from_utf8(r.bytes(text_len))
        .map_err(|_| Error::protocol(format!("{name}: message is not UTF-8")))?;
    Ok(Message::Error {
        code,
        message: text.to_owned(),
    })
}

struct Writer(Vec<u8>);

impl Writer {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
    fn zeros(&mut self, n: usize) {
        self.0.resize(self.0.len() + n, 0);
    }
}

/// Reads fields from a payload whose length was already checked.
struct Reader<'a> {
    p: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let out = &self.p[self.at..self.at + n];
        self.at += n;
        out
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.bytes(4).try_into().expect("4 bytes"))
    }
    fn i32(&mut self) -> i32 {
        i32::from_le_bytes(self.bytes(4).try_into().expect("4 bytes"))
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.bytes(8).try_into().expect("8 bytes"))
    }
}
