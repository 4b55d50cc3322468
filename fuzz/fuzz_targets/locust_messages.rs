//! Lines of the locustfile helpers' messages (`PROTOCOL.md`), as the run reads them: a user
//! class's description, a request with its name, body, due time and pacing.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for line in text.lines() {
        let _ = loadlab_engine::locustfile::read_message(line);
    }
});
