//! gRPC's length-prefixed messages: a flag byte (compressed or not), four bytes of length
//! (big-endian), then the message.

use bytes::{Buf, Bytes, BytesMut};

/// The prefix's length.
const PREFIX: usize = 5;

/// The largest message read by default, as gRPC's own clients (4 MiB).
pub const MAX_MESSAGE: usize = 4 << 20;

/// `message` framed, uncompressed.
pub fn frame(message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(PREFIX + message.len());
    out.extend_from_slice(&[0]);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out.freeze()
}

/// A body's bytes that are not messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A compressed message, though the call asked for none.
    #[error("a compressed message, though the call offered no compression")]
    Compressed,
    /// A message longer than the limit.
    #[error("a message of {0} bytes, over the {MAX_MESSAGE}-byte limit")]
    TooLong(usize),
    /// The body ended inside a message.
    #[error("the body ended {0} bytes into a message")]
    Truncated(usize),
    /// A flag byte that is neither 0 nor 1.
    #[error("a message flag of {0}, neither 0 nor 1")]
    Flag(u8),
}

/// Reads messages out of a body that arrives in chunks of any size.
#[derive(Debug, Default)]
pub struct Deframer {
    buffered: BytesMut,
}

impl Deframer {
    /// An empty reader.
    pub fn new() -> Self {
        Deframer::default()
    }

    /// Adds a chunk of the body.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buffered.extend_from_slice(chunk);
    }

    /// The next whole message, if one has arrived.
    pub fn next_message(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.buffered.len() < PREFIX {
            return Ok(None);
        }
        match self.buffered[0] {
            0 => {}
            1 => return Err(FrameError::Compressed),
            f => return Err(FrameError::Flag(f)),
        }
        let len = u32::from_be_bytes([
            self.buffered[1],
            self.buffered[2],
            self.buffered[3],
            self.buffered[4],
        ]) as usize;
        if len > MAX_MESSAGE {
            return Err(FrameError::TooLong(len));
        }
        if self.buffered.len() < PREFIX + len {
            return Ok(None);
        }
        self.buffered.advance(PREFIX);
        Ok(Some(self.buffered.split_to(len).freeze()))
    }

    /// Checks that the body ended between messages.
    pub fn finish(&self) -> Result<(), FrameError> {
        match self.buffered.len() {
            0 => Ok(()),
            n => Err(FrameError::Truncated(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_split_across_chunks_of_any_size_read_back_whole() {
        let mut body = frame(b"hello").to_vec();
        body.extend_from_slice(&frame(b""));
        body.extend_from_slice(&frame(&[7; 300]));
        for size in [1, 2, 5, 6, 7, 64, body.len()] {
            let mut d = Deframer::new();
            let mut got = Vec::new();
            for chunk in body.chunks(size) {
                d.push(chunk);
                while let Some(m) = d.next_message().unwrap() {
                    got.push(m);
                }
            }
            d.finish().unwrap();
            assert_eq!(got.len(), 3, "chunks of {size}");
            assert_eq!(&got[0][..], b"hello");
            assert!(got[1].is_empty());
            assert_eq!(got[2].len(), 300);
        }
    }

    #[test]
    fn bodies_that_are_not_messages_are_refused() {
        let mut d = Deframer::new();
        d.push(&[1, 0, 0, 0, 1, 9]);
        assert_eq!(d.next_message(), Err(FrameError::Compressed));
        let mut d = Deframer::new();
        d.push(&[0, 0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(d.next_message(), Err(FrameError::TooLong(_))));
        let mut d = Deframer::new();
        d.push(&[0, 0, 0, 0, 4, 1, 2]);
        assert_eq!(d.next_message(), Ok(None));
        assert_eq!(d.finish(), Err(FrameError::Truncated(7)));
        let mut d = Deframer::new();
        d.push(&[9, 0, 0, 0, 0]);
        assert_eq!(d.next_message(), Err(FrameError::Flag(9)));
    }
}
