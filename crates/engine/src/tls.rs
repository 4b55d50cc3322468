//! TLS for `https://` endpoints (connections layer, below `conn`): the run's one rustls client
//! configuration (`loadlab_tls`'s), shared by every thread so reconnects resume their
//! sessions; the handshake, whose failures keep their cause in words; and [`Stream`], plain TCP
//! or TLS, so nothing above `conn` knows which one runs.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use loadlab_run::{Plan, Protocol, TlsFailure};
pub use loadlab_tls::TlsSetupError;
use rustls::pki_types::ServerName;
use rustls::CertificateError;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// What every thread's `https://` connections share: one client configuration (and so one
/// session cache, which makes reconnects resume) and each endpoint's server name.
pub struct TlsClient {
    connector: TlsConnector,
    /// Indexed like the plan's endpoints; `None` for plain HTTP ones.
    names: Vec<Option<ServerName<'static>>>,
}

impl TlsClient {
    /// The TLS client of a plan with `https://` endpoints; `None` when it has none.
    pub fn for_plan(plan: &Plan) -> Result<Option<Arc<TlsClient>>, TlsSetupError> {
        if !plan.uses_tls() {
            return Ok(None);
        }
        let names = plan
            .endpoints
            .iter()
            .map(|e| {
                e.tls
                    .as_ref()
                    .map(|host| loadlab_tls::server_name(host))
                    .transpose()
            })
            .collect::<Result<_, _>>()?;
        let h2 = matches!(plan.protocol, Protocol::Http2 { .. });
        let config = loadlab_tls::client_config(&plan.tls, h2)?;
        Ok(Some(Arc::new(TlsClient {
            connector: TlsConnector::from(Arc::new(config)),
            names,
        })))
    }

    /// True when endpoint `ep` is `https://`.
    pub fn is_tls(&self, ep: usize) -> bool {
        self.names.get(ep).is_some_and(Option::is_some)
    }

    /// Runs the handshake on `tcp` to endpoint `ep` (an `https://` one) within `timeout`.
    pub async fn handshake(
        &self,
        ep: usize,
        tcp: TcpStream,
        timeout: Duration,
    ) -> Result<Stream, TlsFailure> {
        let Some(Some(name)) = self.names.get(ep) else {
            return Ok(Stream::Plain(tcp));
        };
        match tokio::time::timeout(timeout, self.connector.connect(name.clone(), tcp)).await {
            Err(_) => Err(TlsFailure::Timeout),
            Ok(Err(e)) => Err(cause(&e)),
            Ok(Ok(s)) => Ok(Stream::Tls(Box::new(s))),
        }
    }
}

/// The cause of a failed handshake, from the error tokio-rustls returns.
fn cause(e: &io::Error) -> TlsFailure {
    let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
        return TlsFailure::Closed;
    };
    match tls {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => TlsFailure::UnknownIssuer,
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                TlsFailure::NameMismatch
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                TlsFailure::Expired
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                TlsFailure::NotYetValid
            }
            _ => TlsFailure::BadCertificate,
        },
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            TlsFailure::NotTls
        }
        // Only h2 was offered in ALPN, and the server speaks none of it.
        rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol) => {
            TlsFailure::NoHttp2
        }
        _ => TlsFailure::Refused,
    }
}

/// An open connection's byte stream: plain TCP, or TLS over TCP (boxed, so a plain
/// connection stays as small as it was).
pub enum Stream {
    /// `http://`.
    Plain(TcpStream),
    /// `https://`.
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// Writes all of `bytes`; TLS records buffered by rustls are flushed to the socket too.
    pub async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.write_all(bytes).await,
            Stream::Tls(s) => {
                s.write_all(bytes).await?;
                s.flush().await
            }
        }
    }
}

impl Stream {
    /// True when the TLS handshake chose HTTP/2 in ALPN (false for plain TCP).
    pub fn is_h2(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            Stream::Tls(s) => s.get_ref().1.alpn_protocol() == Some(b"h2"),
        }
    }
}

/// Writes go straight to the socket or through rustls; HTTP/2's framing writes through this.
impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

impl AsyncRead for Stream {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(e: rustls::Error) -> TlsFailure {
        cause(&io::Error::new(io::ErrorKind::InvalidData, e))
    }

    #[test]
    fn handshake_errors_keep_their_cause() {
        let cert = rustls::Error::InvalidCertificate;
        assert_eq!(
            failure(cert(CertificateError::UnknownIssuer)),
            TlsFailure::UnknownIssuer
        );
        assert_eq!(
            failure(cert(CertificateError::NotValidForName)),
            TlsFailure::NameMismatch
        );
        assert_eq!(
            failure(cert(CertificateError::Expired)),
            TlsFailure::Expired
        );
        assert_eq!(
            failure(cert(CertificateError::NotValidYet)),
            TlsFailure::NotYetValid
        );
        assert_eq!(
            failure(cert(CertificateError::Revoked)),
            TlsFailure::BadCertificate
        );
        assert_eq!(
            failure(rustls::Error::AlertReceived(
                rustls::AlertDescription::HandshakeFailure
            )),
            TlsFailure::Refused
        );
        assert_eq!(
            failure(rustls::Error::InvalidMessage(
                rustls::InvalidMessage::InvalidContentType
            )),
            TlsFailure::NotTls
        );
        assert_eq!(
            failure(rustls::Error::AlertReceived(
                rustls::AlertDescription::NoApplicationProtocol
            )),
            TlsFailure::NoHttp2
        );
        let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "eof");
        assert_eq!(cause(&eof), TlsFailure::Closed);
    }
}
