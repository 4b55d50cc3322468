//! Test support: plans aimed at a URL, and raw TCP servers that misbehave on purpose.

#![allow(dead_code)]

pub mod h2_server;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use loadlab_engine::{run, StopSignal};
use loadlab_run::{Model, Plan, RunData, Stop, Summary};

/// These tests measure time on a 2-core machine; run concurrently they would measure each
/// other's load. Each holds this lock while it runs (a poisoned lock is still usable).
static SERIAL: Mutex<()> = Mutex::new(());

/// Holds the test binary's lock for the test's duration.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Checks and runs `p`, with its summary.
pub fn run_plan(p: &Plan) -> (RunData, Summary) {
    let plan = p.clone().check().expect("a valid plan");
    let data = run(&plan, &StopSignal::default(), |_, _| {}).expect("the run starts");
    let summary = Summary::from_run(&data);
    (data, summary)
}

/// A plan for `path` on `addr` with the given model and stop condition, on two threads.
pub fn plan(addr: SocketAddr, path: &str, model: Model, stop: Stop) -> Plan {
    Plan {
        threads: 2,
        connect_timeout: Duration::from_secs(2),
        ..Plan::get(addr, path, model, stop)
    }
}

/// The closed model with `connections` and `pipeline`.
pub fn closed(connections: usize, pipeline: usize) -> Model {
    Model::Closed {
        connections,
        pipeline,
    }
}

/// The open model at `rate` with `connections` initial and `max` connections.
pub fn open(rate: f64, connections: usize, max: usize) -> Model {
    Model::open(rate, connections, max)
}

/// Stop after `secs` seconds.
pub fn for_secs(secs: f64) -> Stop {
    Stop {
        duration: Some(Duration::from_secs_f64(secs)),
        count: None,
    }
}

/// Stop after `n` requests.
pub fn count(n: u64) -> Stop {
    Stop {
        duration: None,
        count: Some(n),
    }
}

/// What a raw server does with each request it reads.
#[derive(Clone, Copy)]
pub enum Behaviour {
    /// Answers every request with these bytes, keeping the connection open.
    Answer(&'static [u8]),
    /// Answers every request with these bytes after sleeping this long (a thread sleep, so
    /// the delay is exact to tens of microseconds).
    AnswerAfter(Duration, &'static [u8]),
    /// Answers the first request with these bytes, then closes the connection.
    AnswerAndClose(&'static [u8]),
    /// Reads the request, then resets the connection (RST).
    Reset,
    /// Reads the request and never answers.
    Silent,
}

/// A TCP server on 127.0.0.1 with a thread per connection, stopped when dropped.
pub struct RawServer {
    pub addr: SocketAddr,
    /// The address of each connection's peer, in the order they were accepted.
    pub peers: Arc<Mutex<Vec<IpAddr>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RawServer {
    pub fn start(behaviour: Behaviour) -> RawServer {
        // A blocking accept, so a new connection is served the moment it arrives (a polling
        // accept would add its poll interval to the first request of every connection);
        // dropping the server wakes it with a connection of its own.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let peers = Arc::new(Mutex::new(Vec::new()));
        let seen = peers.clone();
        let thread = std::thread::spawn(move || {
            while let Ok((stream, peer)) = listener.accept() {
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                seen.lock().unwrap().push(peer.ip());
                let flag = flag.clone();
                std::thread::spawn(move || serve_conn(stream, behaviour, flag));
            }
        });
        RawServer {
            addr,
            peers,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_conn(mut s: TcpStream, behaviour: Behaviour, stop: Arc<AtomicBool>) {
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        match s.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => continue, // read timeout: check the stop flag
        }
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            match behaviour {
                Behaviour::Answer(bytes) => {
                    if s.write_all(bytes).is_err() {
                        return;
                    }
                }
                Behaviour::AnswerAfter(delay, bytes) => {
                    std::thread::sleep(delay);
                    if s.write_all(bytes).is_err() {
                        return;
                    }
                }
                Behaviour::AnswerAndClose(bytes) => {
                    let _ = s.write_all(bytes);
                    return;
                }
                Behaviour::Reset => {
                    // SO_LINGER with a zero timeout makes close() send RST.
                    linger_zero(&s);
                    return; // dropping the stream closes it with RST
                }
                Behaviour::Silent => {}
            }
        }
    }
}

/// Sets SO_LINGER to zero so that closing the socket resets the connection.
fn linger_zero(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a socket we own with a correctly sized linger struct.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// An address with nothing listening: a port bound and released at once.
pub fn dead_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// A TCP server on 127.0.0.1 that answers `200 ok` to every request and notes the wall-clock
/// time at which it read each one; stopped when dropped.
pub struct StampServer {
    pub addr: SocketAddr,
    stamps: Arc<Mutex<Vec<SystemTime>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StampServer {
    pub fn start() -> StampServer {
        // A blocking accept, so a new connection is served the moment it arrives (a polling
        // accept would add its poll interval to the first request of every connection);
        // dropping the server wakes it with a connection of its own.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stamps = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, all) = (stop.clone(), stamps.clone());
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (flag, all) = (flag.clone(), all.clone());
                        std::thread::spawn(move || stamp_conn(stream, all, flag));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        StampServer {
            addr,
            stamps,
            stop,
            thread: Some(thread),
        }
    }

    /// When each request was read, in order.
    pub fn stamps(&self) -> Vec<SystemTime> {
        let mut all = self.stamps.lock().unwrap().clone();
        all.sort();
        all
    }
}

impl Drop for StampServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn stamp_conn(mut s: TcpStream, stamps: Arc<Mutex<Vec<SystemTime>>>, stop: Arc<AtomicBool>) {
    s.set_nonblocking(false).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        match s.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => continue, // read timeout: check the stop flag
        }
        let at = SystemTime::now();
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            stamps.lock().unwrap().push(at);
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .is_err()
            {
                return;
            }
        }
    }
}
