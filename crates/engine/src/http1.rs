//! HTTP/1.1 on the wire (a leaf of the bottom layer, used by the connections): requests
//! encoded once into bytes, responses parsed incrementally without keeping their bodies
//! (unless a virtual user needs one, to capture from it).
//!
//! Written by hand around `httparse` because the load engine needs what general clients
//! (hyper, reqwest) do not offer: pipelining several requests per connection, reusing one
//! pre-encoded request for millions of sends, and skipping bodies without buffering them.

use loadlab_run::RequestTemplate;

/// Most response header bytes accepted before the response is called malformed.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Most headers accepted in one response.
const MAX_HEADERS: usize = 64;
/// Most body bytes kept for a virtual user; past this the body is still read, but not kept.
pub const MAX_KEPT_BODY: usize = 4 * 1024 * 1024;

/// Encodes a request once; the bytes are written as-is for every send.
pub fn encode_request(t: &RequestTemplate, authority: &str) -> Vec<u8> {
    let has = |name: &str| t.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut out = Vec::with_capacity(128 + t.body.len());
    out.extend_from_slice(t.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(t.path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if !has("host") {
        out.extend_from_slice(b"Host: ");
        out.extend_from_slice(authority.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !has("user-agent") {
        out.extend_from_slice(
            concat!("User-Agent: loadlab/", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes(),
        );
    }
    for (k, v) in &t.headers {
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let method_has_body = matches!(t.method.as_str(), "POST" | "PUT" | "PATCH");
    if !has("content-length") && (!t.body.is_empty() || method_has_body) {
        out.extend_from_slice(format!("Content-Length: {}\r\n", t.body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&t.body);
    out
}

/// A response that could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolError {
    /// The status line or headers are not HTTP/1.x.
    Malformed,
    /// The headers exceed [`MAX_HEAD_BYTES`].
    TooLarge,
}

/// A complete response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// True when the connection cannot carry another request after this response.
    pub close: bool,
    /// The service said no to the request rather than serving it: 429, or 503 with
    /// `Retry-After` (a rate limit, or load shed with a time to come back).
    pub refused: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    /// Bytes left of a Content-Length body.
    Length(u64),
    /// Inside a chunked body.
    Chunked(Chunk),
    /// The body ends when the peer closes.
    UntilClose,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Bytes left of the current chunk's data.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer lines until an empty line.
    Trailer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    #[default]
    Head,
    Body {
        status: u16,
        close: bool,
        body: Body,
        refused: bool,
    },
}

/// What one call to [`ResponseParser::advance`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of the input consumed.
    pub consumed: usize,
    /// The response, when it completed.
    pub done: Option<Response>,
}

/// True for the headers a virtual user's session reads from every response, body kept or
/// not: its cookies and redirects.
pub(crate) fn session_header(name: &str) -> bool {
    name.eq_ignore_ascii_case("set-cookie") || name.eq_ignore_ascii_case("location")
}

/// Parses one response at a time from a byte stream; bodies are skipped, not stored, unless
/// [`ResponseParser::keep`] asks for the next response's headers and body.
#[derive(Debug, Default)]
pub struct ResponseParser {
    state: State,
    head_request: bool,
    keep_headers: bool,
    keep: bool,
    kept_headers: Vec<(String, String)>,
    kept_body: Vec<u8>,
}

impl ResponseParser {
    /// Keeps (or stops keeping) the headers of the responses that follow — all of them with
    /// `body`, which also keeps the bodies, else only a session's ([`session_header`]); clears
    /// what was kept before.
    pub fn keep(&mut self, headers: bool, body: bool) {
        self.keep_headers = headers || body;
        self.keep = body;
        self.kept_headers.clear();
        self.kept_body.clear();
    }

    /// Takes the kept headers (names as sent) and body (at most [`MAX_KEPT_BODY`] bytes) of
    /// the last response; empty unless keeping.
    pub fn take_kept(&mut self) -> (Vec<(String, String)>, Vec<u8>) {
        (
            std::mem::take(&mut self.kept_headers),
            std::mem::take(&mut self.kept_body),
        )
    }

    /// Starts expecting the response to a new request (`head` for a HEAD request: no body).
    pub fn expect(&mut self, head: bool) {
        self.state = State::Head;
        self.head_request = head;
    }

    /// Consumes as much of `buf` as belongs to the current response.
    pub fn advance(&mut self, buf: &[u8]) -> Result<Progress, ProtocolError> {
        let mut pos = 0;
        loop {
            let rest = &buf[pos..];
            match self.state {
                State::Head => {
                    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                    let mut resp = httparse::Response::new(&mut headers);
                    match resp.parse(rest) {
                        Ok(httparse::Status::Complete(n)) => {
                            pos += n;
                            let status = resp.code.unwrap_or(0);
                            if (100..200).contains(&status) && status != 101 {
                                continue; // an interim response; the real one follows
                            }
                            let (body, close, refused) =
                                inspect_head(&resp, status, self.head_request)?;
                            if self.keep_headers {
                                self.kept_body.clear();
                                let all = self.keep;
                                self.kept_headers = resp
                                    .headers
                                    .iter()
                                    .filter(|h| all || session_header(h.name))
                                    .map(|h| {
                                        let v = String::from_utf8_lossy(h.value);
                                        (h.name.to_string(), v.into_owned())
                                    })
                                    .collect();
                            }
                            self.state = State::Body {
                                status,
                                close,
                                body,
                                refused,
                            };
                        }
                        Ok(httparse::Status::Partial) => {
                            if rest.len() >= MAX_HEAD_BYTES {
                                return Err(ProtocolError::TooLarge);
                            }
                            return Ok(Progress {
                                consumed: pos,
                                done: None,
                            });
                        }
                        Err(httparse::Error::TooManyHeaders) => {
                            return Err(ProtocolError::TooLarge)
                        }
                        Err(_) => return Err(ProtocolError::Malformed),
                    }
                }
                State::Body {
                    status,
                    close,
                    body,
                    refused,
                } => {
                    let sink = if self.keep && self.kept_body.len() < MAX_KEPT_BODY {
                        Some(&mut self.kept_body)
                    } else {
                        None
                    };
                    let (used, next) = advance_body(body, rest, sink)?;
                    pos += used;
                    match next {
                        None => {
                            self.state = State::Head;
                            return Ok(Progress {
                                consumed: pos,
                                done: Some(Response {
                                    status,
                                    close,
                                    refused,
                                }),
                            });
                        }
                        Some(b) => {
                            self.state = State::Body {
                                status,
                                close,
                                body: b,
                                refused,
                            };
                            if used == 0 || pos == buf.len() {
                                return Ok(Progress {
                                    consumed: pos,
                                    done: None,
                                });
                            }
                        }
                    }
                }
            }
        }
    }

    /// The peer closed the connection: the response completes if its body ran until close,
    /// otherwise it was cut short.
    pub fn finish_at_eof(&mut self) -> Option<Response> {
        match self.state {
            State::Body {
                status,
                body: Body::UntilClose,
                refused,
                ..
            } => {
                self.state = State::Head;
                Some(Response {
                    status,
                    close: true,
                    refused,
                })
            }
            _ => None,
        }
    }
}

/// What the response head says about framing, the connection (closed after it) and whether
/// the service refused the request (429, or 503 with `Retry-After`), read in one pass.
fn inspect_head(
    resp: &httparse::Response<'_, '_>,
    status: u16,
    head_request: bool,
) -> Result<(Body, bool, bool), ProtocolError> {
    let http10 = resp.version == Some(0);
    let mut close = http10;
    let mut refused = status == 429;
    let mut chunked = false;
    let mut length: Option<u64> = None;
    for h in resp.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or(ProtocolError::Malformed)?;
            if length.is_some_and(|l| l != n) {
                return Err(ProtocolError::Malformed);
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked |= contains_token(h.value, "chunked");
        } else if name.eq_ignore_ascii_case(b"connection") {
            if contains_token(h.value, "close") {
                close = true;
            } else if http10 && contains_token(h.value, "keep-alive") {
                close = false;
            }
        } else if status == 503 && name.eq_ignore_ascii_case(b"retry-after") {
            refused = true;
        }
    }
    let body = if head_request || status == 204 || status == 304 || (100..200).contains(&status) {
        Body::Length(0)
    } else if chunked {
        Body::Chunked(Chunk::Size)
    } else {
        length.map_or(Body::UntilClose, Body::Length)
    };
    Ok((body, close || body == Body::UntilClose, refused))
}

fn contains_token(value: &[u8], token: &str) -> bool {
    value
        .split(|b| *b == b',')
        .any(|part| part.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Consumes body bytes, appending the body's content (without chunk framing) to `sink` when
/// given; returns how many bytes were consumed and the body's next state (`None` when complete).
fn advance_body(
    body: Body,
    buf: &[u8],
    mut sink: Option<&mut Vec<u8>>,
) -> Result<(usize, Option<Body>), ProtocolError> {
    let mut keep = |bytes: &[u8]| {
        if let Some(sink) = sink.as_mut() {
            sink.extend_from_slice(bytes);
        }
    };
    match body {
        Body::Length(left) => {
            let n = left.min(buf.len() as u64);
            keep(&buf[..n as usize]);
            let left = left - n;
            Ok((n as usize, (left > 0).then_some(Body::Length(left))))
        }
        Body::UntilClose => {
            keep(buf);
            Ok((buf.len(), Some(Body::UntilClose)))
        }
        Body::Chunked(mut chunk) => {
            let mut pos = 0;
            loop {
                let rest = &buf[pos..];
                match chunk {
                    Chunk::Size => match httparse::parse_chunk_size(rest) {
                        Ok(httparse::Status::Complete((n, 0))) => {
                            pos += n;
                            chunk = Chunk::Trailer;
                        }
                        Ok(httparse::Status::Complete((n, size))) => {
                            pos += n;
                            chunk = Chunk::Data(size);
                        }
                        Ok(httparse::Status::Partial) => {
                            if rest.len() > 1024 {
                                return Err(ProtocolError::Malformed);
                            }
                            return Ok((pos, Some(Body::Chunked(chunk))));
                        }
                        Err(_) => return Err(ProtocolError::Malformed),
                    },
                    Chunk::Data(left) => {
                        let n = left.min(rest.len() as u64);
                        keep(&rest[..n as usize]);
                        pos += n as usize;
                        if n < left {
                            return Ok((pos, Some(Body::Chunked(Chunk::Data(left - n)))));
                        }
                        chunk = Chunk::DataEnd;
                    }
                    Chunk::DataEnd => {
                        if rest.len() < 2 {
                            return Ok((pos, Some(Body::Chunked(chunk))));
                        }
                        if &rest[..2] != b"\r\n" {
                            return Err(ProtocolError::Malformed);
                        }
                        pos += 2;
                        chunk = Chunk::Size;
                    }
                    Chunk::Trailer => match rest.windows(2).position(|w| w == b"\r\n") {
                        Some(0) => return Ok((pos + 2, None)),
                        Some(i) => pos += i + 2,
                        None => {
                            if rest.len() > MAX_HEAD_BYTES {
                                return Err(ProtocolError::TooLarge);
                            }
                            return Ok((pos, Some(Body::Chunked(chunk))));
                        }
                    },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(method: &str, body: &[u8], headers: &[(&str, &str)]) -> RequestTemplate {
        RequestTemplate {
            name: "x".into(),
            url: "http://127.0.0.1:8080/x".into(),
            endpoint: 0,
            method: method.into(),
            path: "/x?a=1".into(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: body.to_vec(),
            grpc_stream: None,
        }
    }

    /// Feeds `input` to the parser in pieces of `step` bytes, collecting responses.
    fn parse_all(input: &[u8], step: usize) -> Result<Vec<Response>, ProtocolError> {
        let mut p = ResponseParser::default();
        let mut buf: Vec<u8> = Vec::new();
        let mut out = Vec::new();
        for piece in input.chunks(step) {
            buf.extend_from_slice(piece);
            loop {
                let prog = p.advance(&buf)?;
                buf.drain(..prog.consumed);
                match prog.done {
                    Some(r) => out.push(r),
                    None => break,
                }
            }
        }
        Ok(out)
    }

    #[test]
    fn a_get_is_encoded_with_host_and_user_agent_and_no_length() {
        let bytes = encode_request(&template("GET", b"", &[("X-A", "b")]), "127.0.0.1:8080");
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.starts_with("GET /x?a=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: loadlab/")
        );
        assert!(text.ends_with("X-A: b\r\n\r\n"));
        assert!(!text.contains("Content-Length"));
    }

    #[test]
    fn a_post_carries_its_body_and_length_and_user_headers_win() {
        let bytes = encode_request(&template("POST", b"hello", &[("host", "example")]), "h:1");
        let text = String::from_utf8(bytes).unwrap();
        assert!(!text.contains("Host: h:1"));
        assert!(text.contains("host: example\r\n"));
        assert!(text.ends_with("Content-Length: 5\r\n\r\nhello"));
    }

    #[test]
    fn pipelined_responses_parse_whatever_the_read_boundaries() {
        let input = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\nHTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        for step in [1, 2, 3, 7, 64, input.len()] {
            let got = parse_all(input, step).unwrap();
            let statuses: Vec<u16> = got.iter().map(|r| r.status).collect();
            assert_eq!(statuses, vec![200, 500, 204, 201], "step {step}");
            assert!(got[3].close && !got[0].close);
        }
    }

    #[test]
    fn a_body_without_length_runs_until_close() {
        let mut p = ResponseParser::default();
        let prog = p.advance(b"HTTP/1.0 200 OK\r\n\r\npartial body").unwrap();
        assert_eq!(prog.done, None);
        assert_eq!(
            p.finish_at_eof(),
            Some(Response {
                status: 200,
                close: true,
                refused: false,
            })
        );
    }

    #[test]
    fn a_truncated_length_body_is_not_complete_at_eof() {
        let mut p = ResponseParser::default();
        let prog = p
            .advance(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
            .unwrap();
        assert_eq!(prog.done, None);
        assert_eq!(p.finish_at_eof(), None);
    }

    #[test]
    fn garbage_and_oversized_heads_are_protocol_errors() {
        let mut p = ResponseParser::default();
        assert_eq!(
            p.advance(b"SMTP ready\r\n\r\n"),
            Err(ProtocolError::Malformed)
        );
        let mut p = ResponseParser::default();
        let mut big = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        big.resize(MAX_HEAD_BYTES + 10, b'a');
        assert_eq!(p.advance(&big), Err(ProtocolError::TooLarge));
        let mut p = ResponseParser::default();
        assert_eq!(
            p.advance(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            Err(ProtocolError::Malformed)
        );
    }

    #[test]
    fn kept_responses_give_their_headers_and_unframed_bodies() {
        let input = b"HTTP/1.1 200 OK\r\nX-Token: t1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n";
        for step in [1, 5, input.len()] {
            let mut p = ResponseParser::default();
            p.keep(true, true);
            let mut buf: Vec<u8> = Vec::new();
            let mut done = None;
            for piece in input.chunks(step) {
                buf.extend_from_slice(piece);
                let prog = p.advance(&buf).unwrap();
                buf.drain(..prog.consumed);
                done = done.or(prog.done);
            }
            assert_eq!(done.map(|r| r.status), Some(200), "step {step}");
            let (headers, body) = p.take_kept();
            assert_eq!(body, b"{\"a\":1}", "step {step}");
            assert_eq!(headers[0], ("X-Token".into(), "t1".into()));
        }
        let mut p = ResponseParser::default();
        p.advance(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
            .unwrap();
        let (headers, body) = p.take_kept();
        assert!(body.is_empty() && headers.is_empty());
    }

    #[test]
    fn a_head_response_has_no_body_despite_its_length() {
        let mut p = ResponseParser::default();
        p.expect(true);
        let prog = p
            .advance(b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n")
            .unwrap();
        assert_eq!(prog.done.map(|r| r.status), Some(200));
    }
}
