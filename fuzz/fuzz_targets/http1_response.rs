//! The HTTP/1.1 response parser and its chunked decoder, fed a byte stream in reads of the
//! sizes the input's first bytes choose, as a connection delivers them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadlab_engine::http1::ResponseParser;

fuzz_target!(|data: &[u8]| {
    let Some((&shape, stream)) = data.split_first() else {
        return;
    };
    let mut parser = ResponseParser::default();
    // Bits of the first byte: a HEAD request, whether bodies and headers are kept, the read size.
    parser.keep(shape & 2 != 0, shape & 4 != 0);
    parser.expect(shape & 1 != 0);
    let step = usize::from(shape >> 3) + 1;
    let mut buf: Vec<u8> = Vec::new();
    for piece in stream.chunks(step) {
        buf.extend_from_slice(piece);
        // Every response the bytes complete; a parser that consumes nothing and completes
        // nothing waits for more.
        loop {
            let Ok(progress) = parser.advance(&buf) else {
                return;
            };
            assert!(progress.consumed <= buf.len());
            buf.drain(..progress.consumed);
            if progress.done.is_none() {
                break;
            }
            let _ = parser.take_kept();
            parser.expect(shape & 1 != 0);
        }
    }
    let _ = parser.finish_at_eof();
});
