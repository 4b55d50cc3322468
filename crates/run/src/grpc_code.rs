//! gRPC status codes (`grpc-status`), by number and by the name users write in thresholds.

/// A gRPC status code, 0 (`OK`) to 16 (`UNAUTHENTICATED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Code(u8);

/// The codes' names, indexed by number, as gRPC's specification spells them.
const NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

impl Code {
    /// How many codes there are.
    pub const COUNT: usize = NAMES.len();
    /// `OK`.
    pub const OK: Code = Code(0);
    /// `UNKNOWN`: what a client reads a status it does not know as.
    pub const UNKNOWN: Code = Code(2);
    /// `INTERNAL`: what a response without a status, or a broken one, counts as.
    pub const INTERNAL: Code = Code(13);

    /// The code numbered `n`, `UNKNOWN` past 16 (as gRPC's clients read an unknown number).
    pub fn from_number(n: u32) -> Code {
        if (n as usize) < Self::COUNT {
            Code(n as u8)
        } else {
            Self::UNKNOWN
        }
    }

    /// A `grpc-status` header's value: a decimal number; anything else is `UNKNOWN`.
    pub fn from_header(value: &[u8]) -> Code {
        match std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()) {
            Some(n) => Self::from_number(n),
            None => Self::UNKNOWN,
        }
    }

    /// The code of an answer that carried no `grpc-status`, from its HTTP status, as gRPC's
    /// mapping of HTTP statuses says (a 200 without one is `INTERNAL`: the server broke off).
    pub fn from_http_status(status: u16) -> Code {
        match status {
            200 | 400 => Self::INTERNAL,
            401 => Code(16),
            403 => Code(7),
            404 => Code(12),
            429 | 502 | 503 | 504 => Code(14),
            _ => Self::UNKNOWN,
        }
    }

    /// The code named `name` (`UNAVAILABLE`, `unavailable` or its number), if any.
    pub fn from_name(name: &str) -> Option<Code> {
        if let Ok(n) = name.parse::<u32>() {
            return ((n as usize) < Self::COUNT).then_some(Code(n as u8));
        }
        NAMES
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .map(|i| Code(i as u8))
    }

    /// Its number.
    pub fn number(self) -> usize {
        usize::from(self.0)
    }

    /// Its name, e.g. `UNAVAILABLE`.
    pub fn name(self) -> &'static str {
        NAMES[self.number()]
    }

    /// Every code, in order.
    pub fn all() -> impl Iterator<Item = Code> {
        (0..Self::COUNT as u8).map(Code)
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_read_from_headers_names_and_numbers() {
        assert_eq!(Code::from_header(b"0"), Code::OK);
        assert_eq!(Code::from_header(b"14").name(), "UNAVAILABLE");
        assert_eq!(Code::from_header(b"17"), Code::UNKNOWN);
        assert_eq!(Code::from_header(b"x"), Code::UNKNOWN);
        assert_eq!(Code::from_header(b""), Code::UNKNOWN);
        assert_eq!(Code::from_name("deadline_exceeded").unwrap().number(), 4);
        assert_eq!(Code::from_name("8").unwrap().name(), "RESOURCE_EXHAUSTED");
        assert_eq!(Code::from_name("17"), None);
        assert_eq!(Code::from_name("SLOW"), None);
        assert_eq!(Code::from_http_status(200), Code::INTERNAL);
        assert_eq!(Code::from_http_status(503).name(), "UNAVAILABLE");
        assert_eq!(Code::from_http_status(404).name(), "UNIMPLEMENTED");
        assert_eq!(Code::from_http_status(418), Code::UNKNOWN);
        assert_eq!(Code::all().count(), 17);
        assert_eq!(Code::all().last().unwrap().name(), "UNAUTHENTICATED");
    }
}
