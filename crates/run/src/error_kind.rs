//! The kinds of transport failure a request can end in, counted by kind, never by message.

use std::fmt;

/// Why a request got no usable HTTP response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// Nothing accepted the TCP connection (ECONNREFUSED and other connect failures).
    ConnectRefused,
    /// The TCP connection was not established within the connect timeout.
    ConnectTimeout,
    /// The peer reset the connection (ECONNRESET, EPIPE).
    Reset,
    /// The response did not complete within the request timeout.
    Timeout,
    /// The response was malformed or larger than the parser accepts.
    Protocol,
    /// The peer closed the connection before the response was complete.
    Closed,
}

impl ErrorKind {
    /// Every kind, in the order summaries and timelines list them.
    pub const ALL: [ErrorKind; 6] = [
        ErrorKind::ConnectRefused,
        ErrorKind::ConnectTimeout,
        ErrorKind::Reset,
        ErrorKind::Timeout,
        ErrorKind::Protocol,
        ErrorKind::Closed,
    ];

    /// The stable name used in `summary.json` and `timeline.csv`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::ConnectRefused => "connect_refused",
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Closed => "closed",
        }
    }

    /// Position of this kind in [`ErrorKind::ALL`], for counting in arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_follow_the_listing_order() {
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
    }
}
