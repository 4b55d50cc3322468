//! HTTP/1.1: requests and responses on the wire (`parse`, a leaf) and the connection that
//! exchanges them (`conn`, in the connections layer).

mod conn;
mod parse;

pub(crate) use conn::Http1Conn;
pub use parse::{
    encode_request, Progress, ProtocolError, Response, ResponseParser, MAX_HEAD_BYTES,
    MAX_KEPT_BODY,
};
