//! gRPC status codes (`grpc-status`), by number and by name: how records count gRPC calls and
//! thresholds name them.

/// Whether a `content-type` value is gRPC's (`application/grpc`, `application/grpc+proto`…):
/// a request with it is a gRPC call, whose answer ends with a `grpc-status`.
pub fn is_grpc_content_type(value: &[u8]) -> bool {
    value.starts_with(b"application/grpc")
}

/// A gRPC status code, 0 (`OK`) to 16 (`UNAUTHENTICATED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GrpcCode(u8);

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

impl GrpcCode {
    /// How many codes there are.
    pub const COUNT: usize = NAMES.len();
    /// `OK`.
    pub const OK: GrpcCode = GrpcCode(0);
    /// `UNKNOWN`: what a client reads a status it does not know as.
    pub const UNKNOWN: GrpcCode = GrpcCode(2);
    /// `INTERNAL`: what a response without a status, or a broken one, counts as.
    pub const INTERNAL: GrpcCode = GrpcCode(13);

    /// The code numbered `n`, `UNKNOWN` past 16 (as gRPC's clients read an unknown number).
    pub fn from_number(n: u32) -> GrpcCode {
        if (n as usize) < Self::COUNT {
            GrpcCode(n as u8)
        } else {
            Self::UNKNOWN
        }
    }

    /// A `grpc-status` header's value: a decimal number; anything else is `UNKNOWN`.
    pub fn from_header(value: &[u8]) -> GrpcCode {
        match std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()) {
            Some(n) => Self::from_number(n),
            None => Self::UNKNOWN,
        }
    }

    /// The code of an answer that carried no `grpc-status`, from its HTTP status, as gRPC's
    /// mapping of HTTP statuses says (a 200 without one is `INTERNAL`: the server broke off).
    pub fn from_http_status(status: u16) -> GrpcCode {
        match status {
            200 | 400 => Self::INTERNAL,
            401 => GrpcCode(16),
            403 => GrpcCode(7),
            404 => GrpcCode(12),
            429 | 502 | 503 | 504 => GrpcCode(14),
            _ => Self::UNKNOWN,
        }
    }

    /// The HTTP status that means the same, as `google.rpc.Code` maps each code (`OK` 200,
    /// `INVALID_ARGUMENT` 400, `UNAVAILABLE` 503, `CANCELLED` 499…): how a call's outcome is
    /// classed beside HTTP requests' (per name, by status class).
    pub fn http_equivalent(self) -> u16 {
        const HTTP: [u16; GrpcCode::COUNT] = [
            200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503, 500, 401,
        ];
        HTTP[self.number()]
    }

    /// The status a gRPC client gives a call that ended in transport error `kind`, as gRPC's
    /// clients do: its deadline passed (`DEADLINE_EXCEEDED`), the server was not reached or
    /// went away (`UNAVAILABLE`), or the answer broke (`INTERNAL`).
    pub fn of_transport_error(kind: crate::ErrorKind) -> GrpcCode {
        use crate::ErrorKind as K;
        match kind {
            K::Timeout => GrpcCode(4),
            K::ConnectRefused
            | K::ConnectTimeout
            | K::Reset
            | K::Closed
            | K::Tls
            | K::GoAway
            | K::Unresolved => GrpcCode(14),
            K::Protocol | K::StreamReset => Self::INTERNAL,
        }
    }

    /// The status a gRPC client gives a call whose stream the server reset with HTTP/2 error
    /// code `reason` (RST_STREAM), as grpc-go maps them: `REFUSED_STREAM` (the server did not
    /// process it) is `UNAVAILABLE`, `CANCEL` is `CANCELLED`, `ENHANCE_YOUR_CALM` and
    /// `FLOW_CONTROL_ERROR` are `RESOURCE_EXHAUSTED`, `INADEQUATE_SECURITY` is
    /// `PERMISSION_DENIED`, and every other reason, known or not, `INTERNAL`.
    pub fn of_stream_reset(reason: u32) -> GrpcCode {
        match reason {
            0x7 => GrpcCode(14),
            0x8 => GrpcCode(1),
            0x3 | 0xb => GrpcCode(8),
            0xc => GrpcCode(7),
            _ => Self::INTERNAL,
        }
    }

    /// The code named `name` (`UNAVAILABLE`, `unavailable` or its number), if any.
    pub fn from_name(name: &str) -> Option<GrpcCode> {
        if let Ok(n) = name.parse::<u32>() {
            return ((n as usize) < Self::COUNT).then_some(GrpcCode(n as u8));
        }
        NAMES
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .map(|i| GrpcCode(i as u8))
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
    pub fn all() -> impl Iterator<Item = GrpcCode> {
        (0..Self::COUNT as u8).map(GrpcCode)
    }
}

impl std::fmt::Display for GrpcCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_read_from_headers_names_and_numbers() {
        assert_eq!(GrpcCode::from_header(b"0"), GrpcCode::OK);
        assert_eq!(GrpcCode::from_header(b"14").name(), "UNAVAILABLE");
        assert_eq!(GrpcCode::from_header(b"17"), GrpcCode::UNKNOWN);
        assert_eq!(GrpcCode::from_header(b"x"), GrpcCode::UNKNOWN);
        assert_eq!(GrpcCode::from_header(b""), GrpcCode::UNKNOWN);
        assert_eq!(
            GrpcCode::from_name("deadline_exceeded").unwrap().number(),
            4
        );
        assert_eq!(
            GrpcCode::from_name("8").unwrap().name(),
            "RESOURCE_EXHAUSTED"
        );
        assert_eq!(GrpcCode::from_name("17"), None);
        assert_eq!(GrpcCode::from_name("SLOW"), None);
        assert_eq!(GrpcCode::from_http_status(200), GrpcCode::INTERNAL);
        assert_eq!(GrpcCode::from_http_status(503).name(), "UNAVAILABLE");
        assert_eq!(GrpcCode::from_http_status(404).name(), "UNIMPLEMENTED");
        assert_eq!(GrpcCode::from_http_status(418), GrpcCode::UNKNOWN);
        assert_eq!(GrpcCode::all().count(), 17);
        assert_eq!(
            GrpcCode::of_transport_error(crate::ErrorKind::Timeout).name(),
            "DEADLINE_EXCEEDED"
        );
        assert_eq!(
            GrpcCode::of_transport_error(crate::ErrorKind::ConnectRefused).name(),
            "UNAVAILABLE"
        );
        let classes: Vec<u16> = GrpcCode::all().map(|c| c.http_equivalent() / 100).collect();
        assert_eq!(classes, [2, 4, 5, 4, 5, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 4]);
        assert_eq!(GrpcCode::all().last().unwrap().name(), "UNAUTHENTICATED");
    }

    #[test]
    fn a_reset_stream_reads_as_a_grpc_client_reads_its_reason() {
        let named = |reason| GrpcCode::of_stream_reset(reason).name();
        assert_eq!(named(0x7), "UNAVAILABLE");
        assert_eq!(named(0x8), "CANCELLED");
        assert_eq!(named(0xb), "RESOURCE_EXHAUSTED");
        assert_eq!(named(0x3), "RESOURCE_EXHAUSTED");
        assert_eq!(named(0xc), "PERMISSION_DENIED");
        for other in [0x0, 0x1, 0x2, 0x4, 0x5, 0x6, 0x9, 0xa, 0xd, 0xff] {
            assert_eq!(named(other), "INTERNAL", "{other:#x}");
        }
    }
}
