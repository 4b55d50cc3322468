//! What an exchange of requests and answers carries, whatever the protocol: the thread's
//! [`Wire`] (recorder, encoded requests, dialer, read buffer), a request rendered for one send,
//! the answer, why a batch failed, and its times.

use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use loadlab_run::{ErrorKind, GrpcCode, Plan, Protocol};
use tokio::time::Instant;

use super::dialer::Dialer;
use crate::http1::{encode_request, MAX_HEAD_BYTES};
use crate::http2::Http2Request;
use crate::record::{Pending, Recorder};
use crate::trace::Tracer;

/// Size of a thread's read buffer: room for a connection's leftover partial head plus a
/// large read.
const SCRATCH_BYTES: usize = MAX_HEAD_BYTES + 64 * 1024;

/// A pre-encoded request.
pub struct Encoded {
    /// The bytes written for each send.
    pub bytes: Vec<u8>,
    /// HEAD requests get responses without bodies.
    pub head: bool,
    /// Index of the endpoint it goes to.
    pub endpoint: usize,
}

/// What one thread's connections share: its recorder, the plan's requests encoded once, how
/// to connect, the request timeout, and one read buffer.
pub struct Wire {
    /// The thread's recorder.
    pub rec: Recorder,
    /// Encoded requests, indexed like the plan's.
    pub requests: Vec<Encoded>,
    /// Opens the connections.
    pub dialer: Rc<Dialer>,
    /// Request timeout.
    pub timeout: Duration,
    /// Over HTTP/2, each request's HTTP/2 form (indexed like `requests`; `None` for one that
    /// cannot be sent over HTTP/2, which then fails as a protocol error), and each endpoint's
    /// scheme and authority for the requests virtual users render.
    pub(crate) http2: Option<Http2Forms>,
    /// The thread's read buffer, shared by its connections: a connection borrows it only
    /// between a readiness event and the end of parsing, never across an await.
    pub(crate) scratch: RefCell<Vec<u8>>,
    /// Samples requests for tracing, when the plan traces.
    pub(crate) tracer: Option<Tracer>,
}

impl Wire {
    /// The connection state of a thread that records with `rec` and connects with `dialer`.
    pub fn new(plan: &Plan, rec: Recorder, dialer: Rc<Dialer>) -> Self {
        let requests = plan
            .requests
            .iter()
            .map(|r| Encoded {
                bytes: encode_request(r, &plan.endpoints[r.endpoint].authority),
                head: r.method == "HEAD",
                endpoint: r.endpoint,
            })
            .collect();
        let http2 = matches!(plan.protocol, Protocol::Http2 { .. }).then(|| Http2Forms::new(plan));
        Wire {
            rec,
            requests,
            dialer,
            timeout: plan.timeout,
            http2,
            scratch: RefCell::new(vec![0; SCRATCH_BYTES]),
            tracer: Tracer::of(plan),
        }
    }

    /// The number of endpoints.
    pub fn endpoints(&self) -> usize {
        self.dialer.endpoints()
    }
}

/// The HTTP/2 forms of a plan's requests.
pub(crate) struct Http2Forms {
    /// Each template's form, indexed like the plan's requests.
    templates: Vec<Option<Http2Request>>,
    /// Each endpoint's scheme and authority.
    origins: Vec<(&'static str, String)>,
    /// Each template's streaming gRPC call, for the requests rendered in its place.
    streams: Vec<Option<loadlab_run::GrpcStream>>,
}

impl Http2Forms {
    /// The HTTP/2 forms of `plan`'s requests, converted once from their HTTP/1.1 encoding.
    fn new(plan: &Plan) -> Self {
        let origins: Vec<(&'static str, String)> = plan
            .endpoints
            .iter()
            .map(|e| {
                let scheme = if e.tls.is_some() { "https" } else { "http" };
                (scheme, e.authority.clone())
            })
            .collect();
        let templates = plan
            .requests
            .iter()
            .map(|r| {
                let (scheme, authority) = &origins[r.endpoint];
                let bytes = encode_request(r, authority);
                Http2Request::from_http1(&bytes, scheme, authority)
                    .ok()
                    .map(|h| h.with_stream(r.grpc_stream))
            })
            .collect();
        let streams = plan.requests.iter().map(|r| r.grpc_stream).collect();
        Http2Forms {
            templates,
            origins,
            streams,
        }
    }

    /// The HTTP/2 form of `p`'s request, or of `rendered` bytes in its place.
    pub(crate) fn request(
        &self,
        p: &Pending,
        ep: usize,
        rendered: Option<&[u8]>,
    ) -> Option<Cow<'_, Http2Request>> {
        match rendered {
            None => self.templates[p.template].as_ref().map(Cow::Borrowed),
            Some(bytes) => {
                let (scheme, authority) = &self.origins[ep];
                Http2Request::from_http1(bytes, scheme, authority)
                    .ok()
                    .map(|h| Cow::Owned(h.with_stream(self.streams[p.template])))
            }
        }
    }
}

/// A request rendered for one send by a virtual user, instead of a template's pre-encoded
/// bytes.
#[derive(Clone, Copy)]
pub struct Rendered<'a> {
    /// What to write.
    pub bytes: &'a [u8],
    /// Keep the response's headers and body (for expectations, captures, static resources);
    /// without it, only `Set-Cookie` and `Location` are kept (cookies, redirects).
    pub keep: bool,
}

/// The last response of a batch: its status and, for a [`Rendered`] request that asked to
/// keep them, its headers (names as sent) and body.
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Headers, when kept.
    pub headers: Vec<(String, String)>,
    /// Body (at most [`crate::http1::MAX_KEPT_BODY`] bytes), when kept.
    pub body: Vec<u8>,
    /// A gRPC call's status; `None` for any other request.
    pub grpc: Option<GrpcCode>,
}

/// Why a batch did not get all its answers; the requests left unanswered are already recorded.
#[derive(Debug, Clone, Copy)]
pub enum Failed {
    /// No connection could be opened.
    Connect(ErrorKind),
    /// The connection failed during the exchange.
    Exchange(ErrorKind),
}

impl Failed {
    /// The kind of the failure.
    pub fn kind(self) -> ErrorKind {
        match self {
            Failed::Connect(kind) | Failed::Exchange(kind) => kind,
        }
    }
}

/// When a batch was sent (its latency's start when it has no intended one) and when its
/// writes began (after any connect: where its waiting starts).
#[derive(Clone, Copy)]
pub(crate) struct Times {
    /// When the batch was sent, before any connect.
    pub(crate) sent_at: Instant,
    /// When its writes began.
    pub(crate) start: Instant,
}

/// How an exchange ended without all its answers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Broken {
    /// The kind the unanswered requests count as.
    pub(crate) kind: ErrorKind,
    /// Requests answered before it.
    pub(crate) answered: usize,
    /// The connection is still usable (an HTTP/2 stream's failure).
    pub(crate) keep: bool,
    /// The server surely did not process the request: it may go again.
    pub(crate) unprocessed: bool,
    /// The status a gRPC call that failed so ends with, when the failure says more than its
    /// kind (a stream reset's reason).
    pub(crate) grpc: Option<GrpcCode>,
}

impl Broken {
    /// A failure that ends the connection, after `answered` answers.
    pub(crate) fn fatal(kind: ErrorKind, answered: usize) -> Self {
        Broken {
            kind,
            answered,
            keep: false,
            unprocessed: false,
            grpc: None,
        }
    }
}
