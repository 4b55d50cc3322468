//! Test support: valid scenario files, and mutations of them for the fuzz tests.

/// A valid file to mutate.
pub const SEED: &str = "config:\n  target: \"http://127.0.0.1:8080\"\n  http:\n    timeout: 5\n  phases:\n    - duration: 2\n      arrivalRate: 10\n      rampTo: 20\n    - pause: 1\n    - duration: 3\n      spike: { base: 1, to: 9, length: 1, every: 2 }\n    - duration: 4\n      step: { from: 1, to: 4, steps: 4 }\nscenarios:\n  - name: a\n    weight: 2\n    flow:\n      - post:\n          url: \"/x\"\n          json: { k: [1, 2] }\n";

/// A file of users phases with every flow and Markov feature, to mutate.
pub const USERS_SEED: &str = "config:\n  target: \"http://127.0.0.1:8080\"\n  variables:\n    v: [a, 2]\n  phases:\n    - { duration: 2, users: 3, spawnRate: 2 }\n    - pause: 1\nscenarios:\n  - name: f\n    weight: 2\n    flow:\n      - post:\n          url: \"/login?x={{ v }}\"\n          json: { user: \"{{ v }}-{{ $randomNumber(1, 9) }}\" }\n          capture: [{ json: \"$.token\", as: t }, { header: X-A, as: h }]\n          expect: [{ statusCode: [200, 201] }, { contentType: json }]\n      - think: { uniform: [0.1, 0.2] }\n      - loop:\n          - get: { url: \"/a/{{ t }}\", qs: { q: \"{{ h }}\" }, headers: { A: \"{{ t }}\" }, static: true }\n          - think: 0.5\n        count: 3\n  - name: m\n    markov:\n      start: r\n      states:\n        r: { next: { p: 1 } }\n        p: { get: { url: \"/p\", static: true }, think: { exponential: 1 }, next: { p: 0.5, end: 0.5 } }\n";

/// Mutates `seed` a few bytes at a time (or replaces it with random bytes every tenth
/// round) and hands each text to `check`.
pub fn mutations(seed: &str, rounds: usize, mut check: impl FnMut(&str)) {
    let mut rng = fastrand::Rng::with_seed(4);
    let alphabet: &[u8] =
        b" \n\t:-{}[],\"'#&*!|>%@`0123456789.eE+-abcdefghijklmnopqrstuvwxyz\\\x00\xff";
    for round in 0..rounds {
        let mut bytes = seed.as_bytes().to_vec();
        if round % 10 == 0 {
            bytes = (0..rng.usize(0..300)).map(|_| rng.u8(..)).collect();
        } else {
            for _ in 0..rng.usize(1..6) {
                let at = rng.usize(0..=bytes.len());
                match rng.u8(0..4) {
                    0 if at < bytes.len() => bytes[at] = alphabet[rng.usize(0..alphabet.len())],
                    1 => bytes.insert(at, alphabet[rng.usize(0..alphabet.len())]),
                    2 if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    _ => {
                        let end = (at + rng.usize(0..40)).min(bytes.len());
                        let piece = bytes[at..end].to_vec();
                        bytes.splice(at..at, piece);
                    }
                }
            }
        }
        check(&String::from_utf8_lossy(&bytes));
    }
}
