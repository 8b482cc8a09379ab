//! Protocol v1 on the wire: the shared-memory layout and the control messages.

pub mod layout;
pub mod message;

pub use layout::*;
pub use message::{
    HelloAccept, HelloReq, HelloResp, MAX_MESSAGE_LEN, MAX_PAYLOAD_LEN, Message, SubscribeResp,
    TLV_HEADER_LEN, fd_purpose, msg_type, shutdown_reason,
};
