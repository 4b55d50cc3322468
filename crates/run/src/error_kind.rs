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
    /// The TLS handshake failed (see [`TlsFailure`] for why, in words).
    Tls,
    /// HTTP/2: the server reset the request's stream (RST_STREAM), the connection staying up.
    StreamReset,
    /// HTTP/2: the server shut the connection down (GOAWAY) before answering the request.
    GoAway,
    /// The endpoint's host name did not resolve when the run started (Artillery's
    /// ENOTFOUND): nothing was sent.
    Unresolved,
}

impl ErrorKind {
    /// The number of kinds.
    pub const COUNT: usize = 10;

    /// Every kind, in the order summaries list them; kinds added later go last, so the indices
    /// of the older ones never move.
    pub const ALL: [ErrorKind; ErrorKind::COUNT] = [
        ErrorKind::ConnectRefused,
        ErrorKind::ConnectTimeout,
        ErrorKind::Reset,
        ErrorKind::Timeout,
        ErrorKind::Protocol,
        ErrorKind::Closed,
        ErrorKind::Tls,
        ErrorKind::StreamReset,
        ErrorKind::GoAway,
        ErrorKind::Unresolved,
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
            ErrorKind::Tls => "tls",
            ErrorKind::StreamReset => "stream_reset",
            ErrorKind::GoAway => "goaway",
            ErrorKind::Unresolved => "unresolved",
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

/// Why a TLS handshake failed, in the words a user acts on; counted per cause so the summary
/// can name the commonest one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TlsFailure {
    /// The certificate chain ends in a CA the roots do not hold.
    UnknownIssuer,
    /// The certificate is not valid for the URL's host.
    NameMismatch,
    /// The certificate has expired.
    Expired,
    /// The certificate is not valid yet.
    NotYetValid,
    /// The certificate is otherwise unacceptable (revoked, bad signature, wrong use).
    BadCertificate,
    /// The server refused the handshake with an alert.
    Refused,
    /// The server answered with something other than TLS (a plain HTTP port).
    NotTls,
    /// The server closed the connection during the handshake.
    Closed,
    /// The handshake did not complete within the connect timeout.
    Timeout,
    /// `--http2` on `https://`: the server did not choose HTTP/2 in ALPN.
    NoHttp2,
}

impl TlsFailure {
    /// The number of causes.
    pub const COUNT: usize = 10;

    /// Every cause, in the order summaries list them.
    pub const ALL: [TlsFailure; TlsFailure::COUNT] = [
        TlsFailure::UnknownIssuer,
        TlsFailure::NameMismatch,
        TlsFailure::Expired,
        TlsFailure::NotYetValid,
        TlsFailure::BadCertificate,
        TlsFailure::Refused,
        TlsFailure::NotTls,
        TlsFailure::Closed,
        TlsFailure::Timeout,
        TlsFailure::NoHttp2,
    ];

    /// The stable name used in `summary.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsFailure::UnknownIssuer => "unknown_issuer",
            TlsFailure::NameMismatch => "name_mismatch",
            TlsFailure::Expired => "expired",
            TlsFailure::NotYetValid => "not_yet_valid",
            TlsFailure::BadCertificate => "bad_certificate",
            TlsFailure::Refused => "refused",
            TlsFailure::NotTls => "not_tls",
            TlsFailure::Closed => "closed",
            TlsFailure::Timeout => "timeout",
            TlsFailure::NoHttp2 => "no_h2",
        }
    }

    /// The cause in words, with what to do about it.
    pub fn message(self) -> &'static str {
        match self {
            TlsFailure::UnknownIssuer => {
                "certificate signed by an unknown issuer (pass --cacert FILE, or --insecure)"
            }
            TlsFailure::NameMismatch => {
                "certificate not valid for the URL's host name (use the name the certificate \
                 was issued for, or --insecure)"
            }
            TlsFailure::Expired => "certificate expired (renew it, or pass --insecure)",
            TlsFailure::NotYetValid => {
                "certificate not valid yet (check the clocks, or pass --insecure)"
            }
            TlsFailure::BadCertificate => {
                "certificate refused (revoked, badly signed or not for a server; --insecure \
                 skips the check)"
            }
            TlsFailure::Refused => {
                "the server refused the handshake with an alert (check its TLS versions and \
                 ciphers)"
            }
            TlsFailure::NotTls => {
                "the server did not answer in TLS (is the port plain HTTP? use http://)"
            }
            TlsFailure::Closed => "the server closed the connection during the handshake",
            TlsFailure::Timeout => "the handshake did not finish within the connect timeout",
            TlsFailure::NoHttp2 => {
                "the server did not offer HTTP/2 in the handshake (ALPN); enable http2 on it, or \
                 drop --http2"
            }
        }
    }

    /// Position of this cause in [`TlsFailure::ALL`], for counting in arrays.
    pub fn index(self) -> usize {
        self as usize
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
        for (i, k) in TlsFailure::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
    }

    #[test]
    fn tls_comes_after_the_kinds_older_summaries_know() {
        assert_eq!(ErrorKind::Tls.index(), 6);
        assert_eq!(ErrorKind::Tls.as_str(), "tls");
    }
}
