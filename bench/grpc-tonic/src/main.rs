//! Calls one unary gRPC method at a fixed rate over one tonic channel (one HTTP/2 connection)
//! on one thread, for a time, and prints the calls that ended OK, the others, and the median
//! and p99 latency from each call's send, as JSON on stdout.
//!
//! The request is the method's message already encoded (its bytes, an empty message by
//! default), sent through a codec that passes bytes through, so what is measured is tonic's
//! transport and framing, as loadlab's engine sends a message encoded once.
//!
//!     grpc-tonic URL PATH RATE SECONDS [MAX_IN_FLIGHT]
//!     grpc-tonic http://127.0.0.1:50051 /loadlab.reference.v1.Reference/Ping 5000 10 50

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;

/// Passes a message's bytes through unchanged, both ways.
#[derive(Clone, Copy, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Bytes;
    type Error = Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Bytes;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// Latencies and counts of the calls so far.
#[derive(Default)]
struct Tally {
    ok: u64,
    failed: u64,
    latencies_us: Vec<u64>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: grpc-tonic URL PATH RATE SECONDS [MAX_IN_FLIGHT]");
        std::process::exit(2);
    }
    let (url, path) = (args[1].clone(), args[2].clone());
    let rate: f64 = args[3].parse().expect("RATE is a number");
    let seconds: f64 = args[4].parse().expect("SECONDS is a number");
    let max_in_flight: usize = args.get(5).map_or(1000, |s| s.parse().expect("a count"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let local = tokio::task::LocalSet::new();
    let tally = local.block_on(&runtime, run(url, path, rate, seconds, max_in_flight));
    let mut l = tally.latencies_us;
    l.sort_unstable();
    let at = |q: f64| l.get(((l.len() as f64 * q) as usize).min(l.len().saturating_sub(1)));
    let ms = |v: Option<&u64>| v.map_or(f64::NAN, |v| *v as f64 / 1000.0);
    println!(
        "{{\"ok\": {}, \"failed\": {}, \"p50_ms\": {}, \"p99_ms\": {}}}",
        tally.ok,
        tally.failed,
        ms(at(0.5)),
        ms(at(0.99))
    );
}

async fn run(url: String, path: String, rate: f64, seconds: f64, max_in_flight: usize) -> Tally {
    let channel = tonic::transport::Endpoint::from_shared(url)
        .expect("a URL")
        .connect()
        .await
        .expect("the server answers");
    let path: tonic::codegen::http::uri::PathAndQuery = path.parse().expect("a method path");
    let tally = Rc::new(RefCell::new(Tally::default()));
    let in_flight = Rc::new(std::cell::Cell::new(0usize));
    let start = Instant::now();
    let gap = Duration::from_secs_f64(1.0 / rate);
    let total = (rate * seconds) as u64;
    let mut next = tokio::time::Instant::now();
    for _ in 0..total {
        tokio::time::sleep_until(next).await;
        next += gap;
        if in_flight.get() >= max_in_flight {
            tally.borrow_mut().failed += 1;
            continue;
        }
        in_flight.set(in_flight.get() + 1);
        let mut client = tonic::client::Grpc::new(channel.clone());
        let (path, tally, in_flight) = (path.clone(), tally.clone(), in_flight.clone());
        tokio::task::spawn_local(async move {
            let sent = Instant::now();
            let answer = match client.ready().await {
                Ok(()) => client
                    .unary(tonic::Request::new(Bytes::new()), path, Raw)
                    .await
                    .map(|_| ()),
                Err(e) => Err(Status::unavailable(e.to_string())),
            };
            let mut t = tally.borrow_mut();
            match answer {
                Ok(()) => t.ok += 1,
                Err(_) => t.failed += 1,
            }
            t.latencies_us.push(sent.elapsed().as_micros() as u64);
            in_flight.set(in_flight.get() - 1);
        });
    }
    // The last calls' answers, for at most a second.
    let deadline = start + Duration::from_secs_f64(seconds + 1.0);
    while in_flight.get() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Rc::try_unwrap(tally)
        .map(RefCell::into_inner)
        .unwrap_or_else(|rc| std::mem::take(&mut *rc.borrow_mut()))
}
