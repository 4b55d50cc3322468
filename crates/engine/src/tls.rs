//! TLS for `https://` endpoints (connections layer, below `conn`): the run's one rustls client
//! configuration (the platform's roots plus `--cacert`, or no verification with `--insecure`),
//! shared by every thread so reconnects resume their sessions; the handshake, whose failures
//! keep their cause in words; and [`Stream`], plain TCP or TLS, so nothing above `conn` knows
//! which one runs.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use loadlab_run::{Plan, Protocol, TlsFailure};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// The TLS settings of a plan cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// The CA file is not PEM certificates rustls accepts.
    #[error("the CA file {path} cannot be used: {why}")]
    CaCert {
        /// The file.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// A URL's host is not a name a certificate can be checked against.
    #[error("{host:?} is not a host name TLS can check a certificate against")]
    ServerName {
        /// The host.
        host: String,
    },
    /// The protocol versions could not be set up (a build without TLS 1.2 and 1.3).
    #[error("cannot set up TLS: {0}")]
    Config(#[from] rustls::Error),
}

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
                    .map(|host| {
                        ServerName::try_from(host.clone())
                            .map_err(|_| TlsSetupError::ServerName { host: host.clone() })
                    })
                    .transpose()
            })
            .collect::<Result<_, _>>()?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?;
        let settings = &plan.tls;
        let mut config = if settings.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
                .with_no_client_auth()
        } else {
            let mut roots = RootCertStore::empty();
            // Unreadable system certificates are skipped: the CA file or a failed handshake
            // (unknown issuer) says what is missing.
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            let mut pinned = Vec::new();
            if let Some(ca) = &settings.cacert {
                let bad = |why: String| TlsSetupError::CaCert {
                    path: ca.path.clone(),
                    why,
                };
                for cert in CertificateDer::pem_slice_iter(&ca.pem) {
                    let cert = cert.map_err(|e| bad(e.to_string()))?;
                    roots.add(cert.clone()).map_err(|e| bad(e.to_string()))?;
                    pinned.push(cert);
                }
            }
            if pinned.is_empty() {
                builder.with_root_certificates(roots).with_no_client_auth()
            } else {
                let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider.clone(),
                )
                .build()
                .map_err(|e| TlsSetupError::CaCert {
                    path: settings
                        .cacert
                        .as_ref()
                        .map_or_else(String::new, |c| c.path.clone()),
                    why: e.to_string(),
                })?;
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(RootsOrPinned {
                        roots: verifier,
                        pinned,
                    }))
                    .with_no_client_auth()
            }
        };
        // HTTP/2 is asked for in ALPN only; a server that does not choose it fails the
        // handshake as `no_h2` (see `Stream::is_h2`) rather than quietly speaking HTTP/1.1.
        if let Protocol::Http2 { .. } = plan.protocol {
            config.alpn_protocols = vec![b"h2".to_vec()];
        }
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

/// `--insecure`: accepts any certificate, but still checks the handshake's signatures, so the
/// connection is at least made with the key of the certificate the server sent.
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `--cacert`'s verification: the chain to the roots (the platform's and the file's), or a
/// server certificate that is byte for byte one of the file's — a self-signed certificate a
/// server uses as its own (`openssl req -x509` makes it a CA, which webpki refuses as an end
/// entity, where curl accepts it) — whose name must still match; any other certificate is
/// refused as the roots refuse it.
#[derive(Debug)]
struct RootsOrPinned {
    roots: Arc<rustls::client::WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for RootsOrPinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let refused = match self.roots.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => return Ok(verified),
            Err(e) => e,
        };
        if !self
            .pinned
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            return Err(refused);
        }
        let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, server_name)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.roots.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.roots.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.roots.supported_verify_schemes()
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
