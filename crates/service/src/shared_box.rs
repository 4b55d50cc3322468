//! The call an instance makes to a black box every instance shares: one GET on a connection
//! of its own, answered with the box's status and body.
//!
//! Written by hand over a TCP stream (and httparse) because the service has no HTTP client of
//! its own and needs only this: one request on loopback, `Connection: close`, the body read to
//! the end, as a Node service calling another with its default agent would.

use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest a call waits for the shared box before answering 504 (nginx's default timeout is
/// 60 s; a seed's client waited up to 120 s).
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// Most bytes of the box's answer read (its bodies are a few bytes).
const MOST_BYTES: u64 = 64 * 1024;

/// The shared box at `base` (`http://127.0.0.1:PORT`) asked for `path`: its status and body,
/// 502 when it cannot be reached or answers nonsense, 504 past [`CALL_TIMEOUT`].
pub(crate) async fn call(base: &str, path: &str) -> Response {
    match tokio::time::timeout(CALL_TIMEOUT, get(base, path)).await {
        Ok(Ok((status, body))) => (status, body).into_response(),
        Ok(Err(why)) => (
            StatusCode::BAD_GATEWAY,
            format!("the shared black box at {base}: {why}\n"),
        )
            .into_response(),
        Err(_) => (
            StatusCode::GATEWAY_TIMEOUT,
            format!("the shared black box at {base} did not answer within 120 s\n"),
        )
            .into_response(),
    }
}

/// One GET of `path` on `base`'s host and port.
async fn get(base: &str, path: &str) -> Result<(StatusCode, Vec<u8>), String> {
    let authority = base
        .strip_prefix("http://")
        .ok_or("not an http:// URL")?
        .trim_end_matches('/');
    let mut stream = TcpStream::connect(authority)
        .await
        .map_err(|e| e.to_string())?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    stream
        .take(MOST_BYTES)
        .read_to_end(&mut answer)
        .await
        .map_err(|e| e.to_string())?;
    parse(&answer)
}

/// The status and body of a whole HTTP/1.1 answer read to its end.
fn parse(answer: &[u8]) -> Result<(StatusCode, Vec<u8>), String> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut head = httparse::Response::new(&mut headers);
    let httparse::Status::Complete(len) = head.parse(answer).map_err(|e| e.to_string())? else {
        return Err("its answer ended before its headers did".into());
    };
    let status = head
        .code
        .and_then(|c| StatusCode::from_u16(c).ok())
        .ok_or("its answer has no status")?;
    Ok((status, answer[len..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_answer_gives_its_status_and_body() {
        let (status, body) =
            parse(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 3\r\n\r\nno\n").unwrap();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, b"no\n");
    }

    #[test]
    fn an_answer_cut_in_its_headers_is_refused() {
        assert!(parse(b"HTTP/1.1 200 OK\r\ncontent-le").is_err());
    }
}
