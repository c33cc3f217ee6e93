//! The RESP wire format: request framing ([`request`]) and reply encoding ([`reply`]).
//! `docs/protocol.md` is the specification.

pub mod reply;
pub mod request;

pub use reply::ReplyBuffer;
pub use request::{Limits, ProtocolError, RequestParser};
