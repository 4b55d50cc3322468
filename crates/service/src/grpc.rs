//! The reference service over gRPC (`loadlab.reference.v1.Reference`, the `.proto` file
//! loadlab-grpc ships), on the service's own port: HTTP/2 requests whose content type is
//! `application/grpc` reach these handlers, each doing the work of the HTTP endpoint it is
//! named after, so a lab can put the same work behind JSON over HTTP and gRPC.
//!
//! Written on axum rather than tonic: the service already answers HTTP through axum, and a
//! unary gRPC call is a POST with one length-prefixed message each way and a status in the
//! trailers — a few dozen lines here, against tonic's stack and a code generator for six
//! methods.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body::Frame;
use loadlab_grpc::reflection::{self, ReflectionRequest};
use loadlab_grpc::{frame, Deframer, FrameError, Protos};
use prost::Message;
use tokio::sync::mpsc;

use crate::endpoints::{busy_wait, stalled_for, MAX_CALC_N, MAX_WAIT_MS};
use crate::state::Shared;

/// The service's full name: its methods are at `/loadlab.reference.v1.Reference/{method}`.
pub const SERVICE: &str = "loadlab.reference.v1.Reference";

/// `Ping`'s request.
#[derive(Clone, PartialEq, Message)]
pub struct PingRequest {}

/// `Ping`'s reply.
#[derive(Clone, PartialEq, Message)]
pub struct PingReply {
    /// `pong`.
    #[prost(string, tag = "1")]
    pub message: String,
}

/// `Delay`'s, `Block`'s and `Heavy`'s request, and their reply.
#[derive(Clone, PartialEq, Message)]
pub struct DelayRequest {
    /// Milliseconds.
    #[prost(uint32, tag = "1")]
    pub ms: u32,
}

/// `Calc`'s request.
#[derive(Clone, PartialEq, Message)]
pub struct CalcRequest {
    /// Values summed.
    #[prost(uint64, tag = "1")]
    pub n: u64,
    /// The first value.
    #[prost(uint64, tag = "2")]
    pub from: u64,
}

/// `Calc`'s reply.
#[derive(Clone, PartialEq, Message)]
pub struct CalcReply {
    /// The sum of sin(i).
    #[prost(double, tag = "1")]
    pub sum: f64,
}

/// `Stall`'s request.
#[derive(Clone, PartialEq, Message)]
pub struct StallRequest {
    /// The period, ms (0: 2000).
    #[prost(uint32, tag = "1")]
    pub every_ms: u32,
    /// The freeze at the end of each period, ms (0: 1000).
    #[prost(uint32, tag = "2")]
    pub for_ms: u32,
}

/// `Ticks`'s request.
#[derive(Clone, PartialEq, Message)]
pub struct TicksRequest {
    /// Messages sent.
    #[prost(uint32, tag = "1")]
    pub count: u32,
    /// Time between them, ms.
    #[prost(uint32, tag = "2")]
    pub interval_ms: u32,
}

/// One message of `Ticks`'s stream.
#[derive(Clone, PartialEq, Message)]
pub struct Tick {
    /// From 0.
    #[prost(uint32, tag = "1")]
    pub index: u32,
}

/// A call that ends with a status other than OK: its code and message.
struct Status(u8, String);

impl Status {
    fn invalid(message: impl Into<String>) -> Self {
        Status(3, message.into())
    }
}

/// One call to `/loadlab.reference.v1.Reference/{method}`.
pub async fn call(
    State(s): State<Shared>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let grpc = headers
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if !grpc {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a gRPC method: send application/grpc over HTTP/2\n",
        )
            .into_response();
    }
    let message = match one_message(&body) {
        Ok(m) => m,
        Err(status) => return ended(status),
    };
    if method == "Ticks" {
        return match TicksRequest::decode(message.as_ref()) {
            Ok(r) => ticks(r),
            Err(e) => ended(Status::invalid(format!("not a TicksRequest: {e}"))),
        };
    }
    match unary(&s, &method, &message).await {
        Ok(reply) => answered(reply),
        Err(status) => ended(status),
    }
}

/// The one message of a unary call's body, unframed.
fn one_message(body: &[u8]) -> Result<Bytes, Status> {
    let mut d = Deframer::new();
    d.push(body);
    let message = d
        .next_message()
        .map_err(frame_status)?
        .ok_or_else(|| Status::invalid("the body holds no whole message"))?;
    if d.finish().is_err() {
        return Err(Status::invalid("a unary call's body is one whole message"));
    }
    Ok(message)
}

/// The status a body that does not read as messages ends its call with.
fn frame_status(e: FrameError) -> Status {
    match e {
        FrameError::Compressed => Status(12, "this server takes no compressed messages".into()),
        FrameError::TooLong(_) => Status(8, e.to_string()),
        _ => Status::invalid(e.to_string()),
    }
}

/// Does `method`'s work and encodes its reply.
async fn unary(s: &Shared, method: &str, message: &[u8]) -> Result<Vec<u8>, Status> {
    let decode_err = |e: prost::DecodeError| Status::invalid(format!("a malformed request: {e}"));
    let wait = |ms: u32| -> Result<Duration, Status> {
        let ms = u64::from(ms);
        if ms > MAX_WAIT_MS {
            return Err(Status::invalid(format!("ms must be at most {MAX_WAIT_MS}")));
        }
        Ok(Duration::from_millis(ms))
    };
    Ok(match method {
        "Ping" => {
            PingRequest::decode(message).map_err(decode_err)?;
            PingReply {
                message: "pong".into(),
            }
            .encode_to_vec()
        }
        "Delay" | "Block" | "Heavy" => {
            let r = DelayRequest::decode(message).map_err(decode_err)?;
            let d = wait(r.ms)?;
            match method {
                "Delay" => tokio::time::sleep(d).await,
                "Block" => std::thread::sleep(d),
                _ => busy_wait(d),
            }
            r.encode_to_vec()
        }
        "Calc" => {
            let r = CalcRequest::decode(message).map_err(decode_err)?;
            if r.n > MAX_CALC_N || r.from > MAX_CALC_N {
                return Err(Status::invalid(format!(
                    "n and from must be at most {MAX_CALC_N}"
                )));
            }
            // As /calc: a fold from 0.0, so no work is 0.
            let sum = (r.from..r.from + r.n).fold(0.0f64, |acc, i| acc + (i as f64).sin());
            CalcReply { sum }.encode_to_vec()
        }
        "Stall" => {
            let r = StallRequest::decode(message).map_err(decode_err)?;
            let every = if r.every_ms == 0 { 2000 } else { r.every_ms };
            let freeze = if r.for_ms == 0 { 1000 } else { r.for_ms };
            let hold = stalled_for(s, u64::from(every), u64::from(freeze))
                .map_err(Status::invalid)?;
            tokio::time::sleep(hold).await;
            DelayRequest { ms: 0 }.encode_to_vec()
        }
        other => {
            return Err(Status(
                12,
                format!("{SERVICE} has no method {other}; its methods: Ping, Delay, Block, Calc, Heavy, Stall, Ticks"),
            ))
        }
    })
}

/// A reply message, framed, then status OK in the trailers.
fn answered(reply: Vec<u8>) -> Response {
    let (tx, body) = FrameBody::channel(2);
    let _ = tx.try_send(Frame::data(frame(&reply)));
    let _ = tx.try_send(Frame::trailers(status_headers(0, "")));
    grpc_response(body)
}

/// `Ticks`: `count` messages `interval_ms` apart, then OK; the stream stops when the client
/// goes.
fn ticks(r: TicksRequest) -> Response {
    let (tx, body) = FrameBody::channel(4);
    tokio::spawn(async move {
        for index in 0..r.count {
            if index > 0 {
                tokio::time::sleep(Duration::from_millis(u64::from(r.interval_ms))).await;
            }
            let tick = Tick { index }.encode_to_vec();
            if tx.send(Frame::data(frame(&tick))).await.is_err() {
                return;
            }
        }
        let _ = tx.send(Frame::trailers(status_headers(0, ""))).await;
    });
    grpc_response(body)
}

/// Server reflection (`grpc.reflection.v1` and `v1alpha`) of the reference service's types:
/// each question answered as it arrives on the stream, as a client that waits for an answer
/// before its next question needs.
pub async fn reflect(body: Body) -> Response {
    static REFERENCE: std::sync::OnceLock<Protos> = std::sync::OnceLock::new();
    let protos = REFERENCE.get_or_init(Protos::reference);
    let (tx, out) = FrameBody::channel(4);
    tokio::spawn(async move {
        let mut body = body;
        let mut d = Deframer::new();
        let status = loop {
            let next =
                std::future::poll_fn(|cx| http_body::Body::poll_frame(Pin::new(&mut body), cx))
                    .await;
            let Some(Ok(f)) = next else {
                break match (next.is_none(), d.finish()) {
                    (true, Ok(())) => (0, String::new()),
                    _ => (3, "the request stream broke off".to_string()),
                };
            };
            let Ok(data) = f.into_data() else { continue };
            d.push(&data);
            let mut broken = None;
            loop {
                match d.next_message() {
                    Ok(Some(m)) => match ReflectionRequest::decode(m) {
                        Ok(request) => {
                            let answer = reflection::answer(protos, &request).encode_to_vec();
                            if tx.send(Frame::data(frame(&answer))).await.is_err() {
                                return;
                            }
                        }
                        Err(e) => broken = Some(format!("not a reflection request: {e}")),
                    },
                    Ok(None) => break,
                    Err(e) => broken = Some(e.to_string()),
                }
                if broken.is_some() {
                    break;
                }
            }
            if let Some(why) = broken {
                break (3, why);
            }
        };
        let _ = tx
            .send(Frame::trailers(status_headers(status.0, &status.1)))
            .await;
    });
    grpc_response(out)
}

/// A call that failed: its status in the headers alone ("trailers-only").
fn ended(Status(code, message): Status) -> Response {
    let mut response = Response::new(Body::empty());
    let headers = response.headers_mut();
    headers.insert("content-type", HeaderValue::from_static("application/grpc"));
    headers.extend(status_headers(code, &message));
    response
}

/// A 200 with gRPC's content type and `body`.
fn grpc_response(body: FrameBody) -> Response {
    let mut response = Response::new(Body::new(body));
    response
        .headers_mut()
        .insert("content-type", HeaderValue::from_static("application/grpc"));
    response
}

/// `grpc-status` and, when there is one, `grpc-message` (percent-encoded as gRPC's spec says).
fn status_headers(code: u8, message: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("grpc-status", HeaderValue::from(u16::from(code)));
    if !message.is_empty() {
        let encoded: String = message
            .bytes()
            .map(|b| match b {
                b' '..=b'~' if b != b'%' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        if let Ok(v) = HeaderValue::from_str(&encoded) {
            h.insert("grpc-message", v);
        }
    }
    h
}

/// A response body fed frame by frame (data, then trailers) from a channel.
struct FrameBody(mpsc::Receiver<Frame<Bytes>>);

impl FrameBody {
    fn channel(capacity: usize) -> (mpsc::Sender<Frame<Bytes>>, FrameBody) {
        let (tx, rx) = mpsc::channel(capacity);
        (tx, FrameBody(rx))
    }
}

impl http_body::Body for FrameBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|f| f.map(Ok))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unary_body_is_exactly_one_uncompressed_message() {
        let ok = frame(&DelayRequest { ms: 20 }.encode_to_vec());
        assert_eq!(one_message(&ok).ok().as_deref(), Some(&[0x08, 20][..]));
        let code = |body: &[u8]| one_message(body).err().map(|s| s.0);
        assert_eq!(code(&[0, 0, 0]), Some(3));
        assert_eq!(code(&[1, 0, 0, 0, 0]), Some(12));
        assert_eq!(code(&[0, 0, 0, 0, 2, 8]), Some(3));
        assert_eq!(code(&[0, 0x7f, 0, 0, 0]), Some(8));
        let h = status_headers(3, "ms 100%\n");
        assert_eq!(h["grpc-message"], "ms 100%25%0A");
        assert_eq!(h["grpc-status"], "3");
    }
}
