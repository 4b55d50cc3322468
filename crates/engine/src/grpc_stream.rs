//! A streaming gRPC call on the engine's HTTP/2 path (used by `http2`): the request's framed
//! messages sent at the plan's pace, and the answer's messages counted and timed as they
//! arrive, without copying them.
//!
//! The answer's messages are counted by hand rather than read with a gRPC library's decoder:
//! the engine only needs where each message ends, not its bytes, and a decoder would buffer
//! every message it counts.

use std::cell::RefCell;
use std::time::Duration;

use bytes::Bytes;
use loadlab_run::GrpcStream;
use tokio::time::Instant;

/// gRPC's message prefix: a flag byte and four bytes of length.
const PREFIX: usize = 5;

/// A streaming call's plan and the request's messages, each framed.
#[derive(Clone, Debug)]
pub struct CallStream {
    /// Which side streams, and how the client spaces its messages.
    pub spec: GrpcStream,
    /// The request's framed messages (slices of its body).
    pub messages: Vec<Bytes>,
}

impl CallStream {
    /// The call `spec` describes, sending the framed messages of `body`.
    pub fn new(spec: GrpcStream, body: &Bytes) -> Self {
        CallStream {
            spec,
            messages: split_messages(body),
        }
    }

    /// Whether the client sends its messages over time, rather than as one body.
    pub fn paced(&self) -> bool {
        self.spec.paced()
    }

    /// Sends the messages on `out` at the plan's pace from now, noting each one's send in
    /// `sent`, then half-closes (at the end of the stream's duration when it has one).
    pub async fn send(
        &self,
        out: &mut h2::SendStream<Bytes>,
        sent: &RefCell<Vec<Instant>>,
    ) -> Result<(), h2::Error> {
        let start = Instant::now();
        let n = self.messages.len();
        let mut k = 0u64;
        while let Some(offset) = self.spec.offset_of(k, n).filter(|_| n > 0) {
            if offset.is_zero() {
                // Unspaced messages still let the connection's other streams run.
                if k > 0 {
                    tokio::task::yield_now().await;
                }
            } else {
                tokio::time::sleep_until(start + offset).await;
            }
            out.send_data(self.messages[(k % n as u64) as usize].clone(), false)?;
            sent.borrow_mut().push(Instant::now());
            k += 1;
        }
        if let Some(d) = self.spec.duration {
            tokio::time::sleep_until(start + d).await;
        }
        out.send_data(Bytes::new(), true)
    }
}

/// The framed messages of `body`, each a slice of it; a trailing partial message is left out.
fn split_messages(body: &Bytes) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut at = 0;
    while body.len() >= at + PREFIX {
        let len = u32::from_be_bytes([body[at + 1], body[at + 2], body[at + 3], body[at + 4]]);
        let end = at + PREFIX + len as usize;
        if end > body.len() {
            break;
        }
        out.push(body.slice(at..end));
        at = end;
    }
    out
}

/// Finds where an answer's messages end in chunks of any size.
#[derive(Debug, Default)]
struct MessageEnds {
    /// Prefix bytes read of the next message.
    prefix: [u8; PREFIX],
    /// How many of them.
    prefix_len: usize,
    /// Bytes left of the current message's body.
    left: usize,
}

impl MessageEnds {
    /// The number of messages that end within `chunk`.
    fn feed(&mut self, mut chunk: &[u8]) -> u64 {
        let mut ended = 0;
        while !chunk.is_empty() {
            if self.left > 0 {
                let n = self.left.min(chunk.len());
                self.left -= n;
                chunk = &chunk[n..];
                ended += u64::from(self.left == 0);
                continue;
            }
            let n = (PREFIX - self.prefix_len).min(chunk.len());
            self.prefix[self.prefix_len..self.prefix_len + n].copy_from_slice(&chunk[..n]);
            self.prefix_len += n;
            chunk = &chunk[n..];
            if self.prefix_len == PREFIX {
                self.prefix_len = 0;
                let [_, a, b, c, d] = self.prefix;
                self.left = u32::from_be_bytes([a, b, c, d]) as usize;
                ended += u64::from(self.left == 0);
            }
        }
        ended
    }
}

/// What a streaming call's answer brought, as its messages arrived.
#[derive(Debug, Default)]
pub struct StreamTimes {
    /// Messages the client sent.
    pub sent: u64,
    /// Messages the server answered with.
    pub received: u64,
    /// When the first of them arrived.
    pub first_message: Option<Instant>,
    /// A bidirectional call's time from each message sent to its answer, the k-th answer
    /// taken as the k-th message's.
    pub replies: Vec<Duration>,
}

/// Counts an answer's messages as its chunks arrive.
pub struct AnswerCount {
    ends: MessageEnds,
    times: StreamTimes,
    /// Whether the k-th answer is paired with the k-th message sent.
    pairs: bool,
}

impl AnswerCount {
    /// A count for a call of `spec`.
    pub fn new(spec: &GrpcStream) -> Self {
        AnswerCount {
            ends: MessageEnds::default(),
            times: StreamTimes::default(),
            pairs: spec.client && spec.server,
        }
    }

    /// Counts the messages that end in `chunk`, which arrived `now`; `sent` holds the sends
    /// of the client's messages so far.
    pub fn feed(&mut self, chunk: &[u8], now: Instant, sent: &[Instant]) {
        for _ in 0..self.ends.feed(chunk) {
            let t = &mut self.times;
            t.first_message.get_or_insert(now);
            if self.pairs {
                if let Some(at) = sent.get(t.received as usize) {
                    t.replies.push(now.saturating_duration_since(*at));
                }
            }
            t.received += 1;
        }
    }

    /// The answer's account, given the messages the client sent.
    pub fn finish(self, sent: u64) -> StreamTimes {
        StreamTimes { sent, ..self.times }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(len: usize) -> Vec<u8> {
        let mut m = vec![0];
        m.extend_from_slice(&(len as u32).to_be_bytes());
        m.extend(std::iter::repeat_n(7, len));
        m
    }

    #[test]
    fn messages_ending_in_chunks_of_any_size_are_counted_once_each() {
        let body: Vec<u8> = [framed(3), framed(0), framed(300), framed(1)].concat();
        for size in [1, 2, 4, 5, 6, 7, 64, body.len()] {
            let mut ends = MessageEnds::default();
            let counted: u64 = body.chunks(size).map(|c| ends.feed(c)).sum();
            assert_eq!(counted, 4, "chunks of {size}");
        }
        let mut ends = MessageEnds::default();
        assert_eq!(ends.feed(&framed(10)[..8]), 0, "a message still arriving");
    }

    #[test]
    fn a_body_splits_into_its_messages_and_drops_a_partial_one() {
        let body = Bytes::from([framed(2), framed(0), framed(5)[..4].to_vec()].concat());
        let parts = split_messages(&body);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].len(), PREFIX + 2);
        assert_eq!(parts[1].len(), PREFIX);
    }

    #[test]
    fn a_bidirectional_calls_answers_pair_with_its_messages_in_order() {
        let spec = GrpcStream {
            client: true,
            server: true,
            ..GrpcStream::default()
        };
        let t0 = Instant::now();
        let sent = [t0, t0 + Duration::from_millis(10)];
        let mut count = AnswerCount::new(&spec);
        let both = [framed(1), framed(1)].concat();
        count.feed(&both[..3], t0 + Duration::from_millis(4), &sent[..1]);
        count.feed(&both[3..], t0 + Duration::from_millis(15), &sent);
        let times = count.finish(2);
        assert_eq!((times.sent, times.received), (2, 2));
        assert_eq!(times.first_message, Some(t0 + Duration::from_millis(15)));
        assert_eq!(
            times.replies,
            [Duration::from_millis(15), Duration::from_millis(5)]
        );
    }

    #[test]
    fn the_plan_says_when_each_message_goes_and_when_the_client_stops() {
        let ms = Duration::from_millis;
        let every = |interval, count, duration| GrpcStream {
            client: true,
            server: true,
            interval,
            count,
            duration,
        };
        let offsets = |s: GrpcStream, n| {
            (0..)
                .map_while(|k| s.offset_of(k, n))
                .collect::<Vec<Duration>>()
        };
        assert_eq!(offsets(every(None, None, None), 3), [ms(0); 3]);
        assert_eq!(
            offsets(every(Some(ms(10)), None, None), 3),
            [ms(0), ms(10), ms(20)]
        );
        assert_eq!(offsets(every(Some(ms(10)), Some(5), None), 2).len(), 5);
        let timed = every(Some(ms(10)), None, Some(ms(100)));
        assert_eq!(offsets(timed, 1).len(), 10);
        assert_eq!(timed.sending_span(1), ms(100));
        let both = every(Some(ms(10)), Some(4), Some(ms(100)));
        assert_eq!(offsets(both, 1).len(), 4, "the count ends it first");
        assert_eq!(every(Some(ms(10)), Some(4), None).sending_span(1), ms(30));
        // A duration with no interval cannot flood: the request's messages once.
        assert_eq!(offsets(every(None, None, Some(ms(100))), 2).len(), 2);
    }
}
