//! Instances and clients for the autoscaling tests: in-process HTTP servers on 127.0.0.1 that
//! answer after the time they are asked to wait, and blocking clients.

use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::sync::oneshot;

/// An instance on 127.0.0.1 that answers `/wait?ms=N` after N ms with its name.
pub struct Backend {
    /// Where it listens.
    pub addr: SocketAddr,
    _shutdown: oneshot::Sender<()>,
}

pub fn backend(name: &str) -> Backend {
    let name: std::sync::Arc<str> = name.into();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let accept = async {
                loop {
                    let (stream, _) = listener.accept().await.unwrap();
                    let name = name.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                            let name = name.clone();
                            let ms: u64 = req
                                .uri()
                                .query()
                                .and_then(|q| q.strip_prefix("ms="))
                                .and_then(|v| v.parse().ok())
                                .unwrap_or(0);
                            async move {
                                tokio::time::sleep(Duration::from_millis(ms)).await;
                                Ok::<_, Infallible>(Response::new(name.to_string()))
                            }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            };
            tokio::select! {
                _ = accept => {}
                _ = rx => {}
            }
        });
    });
    Backend {
        addr,
        _shutdown: tx,
    }
}

/// GETs `path` through `front` on a connection of its own: (status, body, time taken).
pub fn get(front: SocketAddr, path: &str) -> (u16, String, Duration) {
    let started = Instant::now();
    let mut s = std::net::TcpStream::connect(front).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body, started.elapsed())
}

/// Sends `n` GETs of `path` at once, each from a thread of its own.
pub fn together(front: SocketAddr, path: &'static str, n: usize) -> Vec<(u16, String, Duration)> {
    let threads: Vec<_> = (0..n)
        .map(|_| std::thread::spawn(move || get(front, path)))
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

/// Waits until `done` holds, 10 s at most.
pub fn until(done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(10), "never happened");
        std::thread::sleep(Duration::from_millis(5));
    }
}
