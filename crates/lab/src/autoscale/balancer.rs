//! The balancer in front of an autoscaled topology, Knative's activator and queue-proxy in one:
//! it passes each HTTP/1.1 request to a ready instance, at most `container_concurrency` on
//! each, picked as Knative's activator picks by that limit (its `throttler.go`): with no limit
//! the fewer in flight of two taken at random, with a limit of 3 or less the first instance
//! with room (so requests pack onto the oldest), above 3 the next with room in turn; a request
//! that finds no room (every instance full, or none
//! ready yet) is held until one has room, and answered 429 after `hold_timeout`, as Cloud Run
//! answers when no instance can take it. Instances join and leave while load runs: one leaving
//! drains (takes nothing new) before it is removed. Each second it reports what the autoscaler
//! reads: every instance's average concurrency and requests, and the requests it held.
//!
//! A proxy of its own rather than nginx: nginx can neither hold a request until an instance
//! starts nor say how many requests each instance had in flight. hyper serves and forwards;
//! only the choice of instance and the holding are written here. Upgrades (WebSocket) are not
//! passed on.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::{oneshot, Notify};

/// How the balancer admits requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// Requests in flight an instance takes at most (`containerConcurrency`); `None`: no limit.
    pub container_concurrency: Option<u32>,
    /// How long a request may wait for an instance with room before it is answered 429.
    pub hold_timeout: Duration,
}

/// An instance behind the balancer.
#[derive(Debug)]
struct Instance {
    id: u32,
    addr: SocketAddr,
    draining: bool,
    in_flight: u32,
    /// Request-seconds in flight since the last report.
    busy: f64,
    /// When `in_flight` or `busy` last changed.
    since: Instant,
    /// Requests it finished since the last report.
    requests: u64,
}

impl Instance {
    fn advance(&mut self, now: Instant) {
        self.busy += f64::from(self.in_flight) * now.duration_since(self.since).as_secs_f64();
        self.since = now;
    }
}

/// One instance's second, as its queue-proxy reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceSecond {
    /// Its id, as given to [`Balancer::add`].
    pub id: u32,
    /// Requests in flight on average over the second (request-seconds / the second's length).
    pub concurrency: f64,
    /// Request-seconds it had in flight.
    pub request_seconds: f64,
    /// Requests it finished.
    pub requests: u64,
    /// Requests in flight at the report.
    pub in_flight: u32,
    /// Whether it takes nothing new.
    pub draining: bool,
}

/// What the balancer saw since its last report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Second {
    /// The report's span, seconds.
    pub span_s: f64,
    /// Every instance behind it, removed ones last seen in the span included.
    pub instances: Vec<InstanceSecond>,
    /// Requests held on average (the activator's concurrency).
    pub held_concurrency: f64,
    /// Requests held at the report.
    pub held_now: u32,
    /// Requests that were held and then passed on.
    pub waited: u64,
    /// Their waits summed, seconds.
    pub wait_s: f64,
    /// Requests answered 429 after waiting `hold_timeout`.
    pub refused: u64,
    /// Requests answered 502: the instance could not be reached or failed mid-answer.
    pub failed: u64,
}

impl Second {
    /// The revision's concurrency, as Knative's autoscaler sums it: every instance's and the
    /// held requests'.
    pub fn total_concurrency(&self) -> f64 {
        self.instances.iter().map(|i| i.concurrency).sum::<f64>() + self.held_concurrency
    }

    /// Requests finished in the span, every instance's.
    pub fn requests(&self) -> u64 {
        self.instances.iter().map(|i| i.requests).sum()
    }
}

/// The balancer's state, behind one lock.
#[derive(Debug)]
struct Pool {
    settings: Settings,
    instances: Vec<Instance>,
    /// Instances removed since the last report, with what they did in it.
    gone: Vec<InstanceSecond>,
    /// Where the round robin takes its next turn.
    next: usize,
    held: u32,
    held_busy: f64,
    held_since: Instant,
    report_at: Instant,
    waited: u64,
    wait_s: f64,
    refused: u64,
    failed: u64,
}

impl Pool {
    /// The ready instance a request goes to, by Knative's activator's policy for the
    /// container's concurrency; `None` when none has room.
    fn pick(&mut self) -> Option<usize> {
        let n = self.instances.len();
        let limit = self.settings.container_concurrency.unwrap_or(u32::MAX);
        let open = |i: &Instance| !i.draining && i.in_flight < limit;
        match self.settings.container_concurrency {
            // No limit: the power of two choices.
            None => {
                let ready: Vec<usize> = (0..n).filter(|&i| open(&self.instances[i])).collect();
                let (a, b) = match ready.len() {
                    0 => return None,
                    1 => return Some(ready[0]),
                    k => {
                        let a = fastrand::usize(..k);
                        let b = (a + 1 + fastrand::usize(..k - 1)) % k;
                        (ready[a], ready[b])
                    }
                };
                let (x, y) = (self.instances[a].in_flight, self.instances[b].in_flight);
                Some(if x < y || (x == y && fastrand::bool()) {
                    a
                } else {
                    b
                })
            }
            // A small limit: the first with room.
            Some(cc) if cc <= 3 => (0..n).find(|&i| open(&self.instances[i])),
            // The next with room in turn.
            Some(_) => {
                let start = self.next;
                let pick = (0..n)
                    .map(|k| (start + k) % n)
                    .find(|&i| open(&self.instances[i]))?;
                self.next = pick + 1;
                Some(pick)
            }
        }
    }

    fn hold(&mut self, now: Instant, change: i32) {
        self.held_busy += f64::from(self.held) * now.duration_since(self.held_since).as_secs_f64();
        self.held_since = now;
        self.held = self.held.saturating_add_signed(change);
    }
}

/// What the proxy's tasks share.
struct Shared {
    pool: Mutex<Pool>,
    /// Woken when an instance has room again or joins.
    room: Notify,
}

impl Shared {
    fn pool(&self) -> MutexGuard<'_, Pool> {
        // A task that panicked holding the lock leaves counts, not broken invariants.
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A request's place on an instance, given back when its answer ends.
struct Slot {
    shared: Arc<Shared>,
    id: u32,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let now = Instant::now();
        let mut pool = self.shared.pool();
        if let Some(i) = pool.instances.iter_mut().find(|i| i.id == self.id) {
            i.advance(now);
            i.in_flight = i.in_flight.saturating_sub(1);
            i.requests += 1;
        }
        drop(pool);
        self.shared.room.notify_waiters();
    }
}

/// A running balancer, stopped when dropped.
pub struct Balancer {
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Balancer {
    /// Serves on `listener` with no instance yet.
    pub fn start(listener: std::net::TcpListener, settings: Settings) -> std::io::Result<Self> {
        listener.set_nonblocking(true)?;
        let now = Instant::now();
        let shared = Arc::new(Shared {
            pool: Mutex::new(Pool {
                settings,
                instances: Vec::new(),
                gone: Vec::new(),
                next: 0,
                held: 0,
                held_busy: 0.0,
                held_since: now,
                report_at: now,
                waited: 0,
                wait_s: 0.0,
                refused: 0,
                failed: 0,
            }),
            room: Notify::new(),
        });
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let (tx, rx) = oneshot::channel();
        let serving = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("loadlab-balancer".into())
            .spawn(move || {
                rt.block_on(async move {
                    tokio::select! {
                        _ = serve(listener, serving) => {}
                        _ = rx => {}
                    }
                });
                rt.shutdown_background();
            })?;
        Ok(Balancer {
            shared,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// Puts ready instance `id` on `addr` behind the balancer; held requests go to it at once.
    pub fn add(&self, id: u32, addr: SocketAddr) {
        let now = Instant::now();
        self.shared.pool().instances.push(Instance {
            id,
            addr,
            draining: false,
            in_flight: 0,
            busy: 0.0,
            since: now,
            requests: 0,
        });
        self.shared.room.notify_waiters();
    }

    /// Gives instance `id` nothing new; returns its requests in flight (0: it may be removed).
    pub fn drain(&self, id: u32) -> u32 {
        let mut pool = self.shared.pool();
        match pool.instances.iter_mut().find(|i| i.id == id) {
            Some(i) => {
                i.draining = true;
                i.in_flight
            }
            None => 0,
        }
    }

    /// Requests held now, waiting for room.
    pub fn held(&self) -> u32 {
        self.shared.pool().held
    }

    /// Instance `id`'s requests in flight.
    pub fn in_flight(&self, id: u32) -> u32 {
        let pool = self.shared.pool();
        pool.instances
            .iter()
            .find(|i| i.id == id)
            .map_or(0, |i| i.in_flight)
    }

    /// Takes instance `id` out (its last second stays in the next report).
    pub fn remove(&self, id: u32) {
        let now = Instant::now();
        let mut pool = self.shared.pool();
        if let Some(at) = pool.instances.iter().position(|i| i.id == id) {
            let mut gone = pool.instances.remove(at);
            gone.advance(now);
            let span = now.duration_since(pool.report_at).as_secs_f64().max(1e-9);
            pool.gone.push(InstanceSecond {
                id: gone.id,
                concurrency: gone.busy / span,
                request_seconds: gone.busy,
                requests: gone.requests,
                in_flight: gone.in_flight,
                draining: true,
            });
        }
    }

    /// What happened since the last report (or the start), and starts the next.
    pub fn report(&self) -> Second {
        let now = Instant::now();
        let mut pool = self.shared.pool();
        let span = now.duration_since(pool.report_at).as_secs_f64().max(1e-9);
        pool.report_at = now;
        pool.hold(now, 0);
        let mut instances: Vec<InstanceSecond> = pool
            .instances
            .iter_mut()
            .map(|i| {
                i.advance(now);
                let s = InstanceSecond {
                    id: i.id,
                    concurrency: i.busy / span,
                    request_seconds: i.busy,
                    requests: i.requests,
                    in_flight: i.in_flight,
                    draining: i.draining,
                };
                (i.busy, i.requests) = (0.0, 0);
                s
            })
            .collect();
        instances.append(&mut pool.gone);
        let second = Second {
            span_s: span,
            instances,
            held_concurrency: pool.held_busy / span,
            held_now: pool.held,
            waited: pool.waited,
            wait_s: pool.wait_s,
            refused: pool.refused,
            failed: pool.failed,
        };
        pool.held_busy = 0.0;
        (pool.waited, pool.wait_s, pool.refused, pool.failed) = (0, 0.0, 0, 0);
        second
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Accepts connections and serves each one's requests.
async fn serve(listener: std::net::TcpListener, shared: Arc<Shared>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Client<HttpConnector, Incoming> =
        Client::builder(TokioExecutor::new()).build(connector);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (shared, client) = (Arc::clone(&shared), client.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                forward(Arc::clone(&shared), client.clone(), req)
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Headers that concern one connection, not the request (RFC 9110 §7.6.1).
const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Passes `req` to an instance with room, holding it until there is one.
async fn forward(
    shared: Arc<Shared>,
    client: Client<HttpConnector, Incoming>,
    req: Request<Incoming>,
) -> Result<Response<Answer>, Infallible> {
    let Some((slot, addr)) = admit(&shared).await else {
        return Ok(message(
            StatusCode::TOO_MANY_REQUESTS,
            "no instance had room for the request in time\n",
        ));
    };
    let (mut parts, body) = req.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let Ok(uri) = format!("http://{addr}{path}").parse() else {
        return Ok(message(StatusCode::BAD_REQUEST, "not a request path\n"));
    };
    parts.uri = uri;
    for h in HOP_BY_HOP {
        parts.headers.remove(h);
    }
    match client.request(Request::from_parts(parts, body)).await {
        Ok(answer) => {
            let (parts, body) = answer.into_parts();
            Ok(Response::from_parts(
                parts,
                Answer::Passed {
                    body,
                    slot: Some(slot),
                },
            ))
        }
        Err(_) => {
            drop(slot);
            shared.pool().failed += 1;
            Ok(message(
                StatusCode::BAD_GATEWAY,
                "the instance could not be reached\n",
            ))
        }
    }
}

/// A place on an instance with room, waiting for one until the hold timeout; `None` when none
/// came in time.
async fn admit(shared: &Arc<Shared>) -> Option<(Slot, SocketAddr)> {
    let arrived = Instant::now();
    let deadline = tokio::time::Instant::from_std(arrived + shared.pool().settings.hold_timeout);
    let mut held = false;
    loop {
        // Registered before looking, so a slot freed between the look and the wait wakes it.
        let notified = shared.room.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        {
            let now = Instant::now();
            let mut pool = shared.pool();
            if let Some(at) = pool.pick() {
                if held {
                    pool.hold(now, -1);
                    pool.waited += 1;
                    pool.wait_s += now.duration_since(arrived).as_secs_f64();
                }
                let instance = &mut pool.instances[at];
                instance.advance(now);
                instance.in_flight += 1;
                let (id, addr) = (instance.id, instance.addr);
                let slot = Slot {
                    shared: Arc::clone(shared),
                    id,
                };
                return Some((slot, addr));
            }
            if !held {
                pool.hold(now, 1);
                held = true;
            }
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            let mut pool = shared.pool();
            pool.hold(Instant::now(), -1);
            pool.refused += 1;
            return None;
        }
    }
}

/// The balancer's own short answer.
fn message(status: StatusCode, text: &'static str) -> Response<Answer> {
    let mut r = Response::new(Answer::Message(Some(Bytes::from_static(text.as_bytes()))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain"),
    );
    r
}

/// An answer: an instance's, which gives its slot back when it ends, or the balancer's own.
enum Answer {
    Passed { body: Incoming, slot: Option<Slot> },
    Message(Option<Bytes>),
}

impl Body for Answer {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            Answer::Passed { body, slot } => {
                let polled = Pin::new(body).poll_frame(cx);
                if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
                    slot.take();
                }
                polled
            }
            Answer::Message(text) => Poll::Ready(text.take().map(|t| Ok(Frame::data(t)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Answer::Passed { body, .. } => body.is_end_stream(),
            Answer::Message(text) => text.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Answer::Passed { body, .. } => body.size_hint(),
            Answer::Message(Some(t)) => SizeHint::with_exact(t.len() as u64),
            Answer::Message(None) => SizeHint::with_exact(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autoscale::testing::{backend, get, together, until};

    #[test]
    fn requests_go_where_knatives_activator_sends_them_for_the_containers_limit() {
        // Each pick takes a place on the instance picked; `loads` are the places taken before.
        let picks = |limit: Option<u32>, loads: &[u32], n: usize| -> Vec<Option<usize>> {
            let (b, _) = balancer(limit, Duration::from_secs(1));
            for id in 0..loads.len() {
                b.add(id as u32, "127.0.0.1:9".parse().unwrap());
            }
            let mut pool = b.shared.pool();
            for (i, load) in loads.iter().enumerate() {
                pool.instances[i].in_flight = *load;
            }
            (0..n)
                .map(|_| {
                    let pick = pool.pick();
                    if let Some(i) = pick {
                        pool.instances[i].in_flight += 1;
                    }
                    pick
                })
                .collect()
        };
        // A limit of 3 or less packs requests onto the first instances with room.
        assert_eq!(
            picks(Some(2), &[0, 0, 0], 7),
            [Some(0), Some(0), Some(1), Some(1), Some(2), Some(2), None]
        );
        // Above 3, each in turn, passing over a full one.
        assert_eq!(
            picks(Some(10), &[0, 10, 0], 4),
            [Some(0), Some(2), Some(0), Some(2)]
        );
        // No limit: the fewer in flight of two.
        assert_eq!(picks(None, &[5, 0], 5), [Some(1); 5]);
        assert_eq!(picks(None, &[], 1), [None]);
    }

    fn balancer(limit: Option<u32>, hold: Duration) -> (Balancer, SocketAddr) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let settings = Settings {
            container_concurrency: limit,
            hold_timeout: hold,
        };
        (Balancer::start(listener, settings).unwrap(), addr)
    }

    #[test]
    fn past_each_instances_concurrency_requests_wait_for_room_and_are_counted() {
        let (a, b) = (backend("a"), backend("b"));
        let (lb, front) = balancer(Some(1), Duration::from_secs(5));
        lb.add(1, a.addr);
        lb.add(2, b.addr);
        lb.report();
        // Four requests of 200 ms on two instances taking one each: two wait for the first two.
        let answers = together(front, "/wait?ms=200", 4);
        assert!(answers.iter().all(|(s, _, _)| *s == 200), "{answers:?}");
        let on = |n: &str| answers.iter().filter(|(_, b, _)| b == n).count();
        assert_eq!((on("a"), on("b")), (2, 2), "{answers:?}");
        let waited = answers
            .iter()
            .filter(|(_, _, t)| *t >= Duration::from_millis(400))
            .count();
        assert_eq!(waited, 2, "{answers:?}");
        let second = lb.report();
        assert_eq!((second.waited, second.refused, second.failed), (2, 0, 0));
        assert!(
            second.wait_s >= 0.4,
            "two waits of about 200 ms: {second:?}"
        );
        assert_eq!(second.requests(), 4);
        // Each instance had a request in flight for 2 × 200 ms; a held request's wait is not
        // an instance's (that would make 600 ms on one of them).
        for i in &second.instances {
            assert!(
                (0.4..0.6).contains(&i.request_seconds),
                "{i:?} in {second:?}"
            );
            assert_eq!((i.requests, i.in_flight), (2, 0));
        }
    }

    #[test]
    fn a_request_without_room_in_time_is_answered_429() {
        let a = backend("a");
        let (lb, front) = balancer(Some(1), Duration::from_millis(100));
        lb.add(1, a.addr);
        let long = std::thread::spawn(move || get(front, "/wait?ms=600"));
        std::thread::sleep(Duration::from_millis(100));
        let (status, body, took) = get(front, "/wait?ms=0");
        assert_eq!(status, 429, "{body}");
        assert!(took >= Duration::from_millis(100), "{took:?}");
        assert_eq!(long.join().unwrap().0, 200);
        let second = lb.report();
        assert_eq!(
            (second.refused, second.waited, second.requests()),
            (1, 0, 1)
        );
    }

    #[test]
    fn with_no_instance_requests_are_held_until_one_joins() {
        let a = backend("a");
        let (lb, front) = balancer(None, Duration::from_secs(5));
        let held = std::thread::spawn(move || together(front, "/wait?ms=0", 3));
        until(|| lb.held() == 3);
        lb.report();
        std::thread::sleep(Duration::from_millis(300));
        let early = lb.report();
        assert_eq!(early.held_now, 3, "{early:?}");
        assert!(
            (2.9..=3.0).contains(&early.held_concurrency),
            "3 held the whole span: {early:?}"
        );
        lb.add(7, a.addr);
        let answers = held.join().unwrap();
        assert!(
            answers
                .iter()
                .all(|(s, b, t)| *s == 200 && b == "a" && *t >= Duration::from_millis(300)),
            "{answers:?}"
        );
        let second = lb.report();
        assert_eq!((second.waited, second.held_now), (3, 0));
        assert_eq!(second.requests(), 3);
    }

    #[test]
    fn a_draining_instance_finishes_its_requests_and_takes_no_new_one() {
        let (a, b) = (backend("a"), backend("b"));
        let (lb, front) = balancer(None, Duration::from_secs(5));
        lb.add(1, a.addr);
        let long = std::thread::spawn(move || get(front, "/wait?ms=1500"));
        until(|| lb.in_flight(1) == 1);
        lb.add(2, b.addr);
        assert_eq!(lb.drain(1), 1, "its request is still in flight");
        let answers = together(front, "/wait?ms=0", 3);
        assert!(answers.iter().all(|(s, b, _)| *s == 200 && b == "b"));
        assert_eq!(long.join().unwrap().1, "a");
        assert_eq!(lb.drain(1), 0);
        lb.remove(1);
        let second = lb.report();
        let gone = second.instances.iter().find(|i| i.id == 1).unwrap();
        assert_eq!((gone.requests, gone.draining), (1, true));
        assert_eq!(
            lb.report().instances.len(),
            1,
            "reported once after its removal"
        );
    }
}
