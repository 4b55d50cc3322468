//! The TLS client configuration every loadlab connection uses, the load's and the ones made
//! before it (server reflection over `grpcs://`): the platform's roots plus `--cacert` (whose
//! self-signed server certificates are pinned as curl accepts them), or no verification with
//! `--insecure`; ALPN offers `h2` alone when HTTP/2 is asked for.

use std::sync::Arc;

use loadlab_run::TlsSettings;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

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

/// The client configuration `settings` ask for; with `h2`, ALPN offers HTTP/2 alone, so a
/// server that does not choose it fails the handshake rather than quietly speaking HTTP/1.1.
pub fn client_config(settings: &TlsSettings, h2: bool) -> Result<ClientConfig, TlsSetupError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
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
        let path = settings
            .cacert
            .as_ref()
            .map_or_else(String::new, |c| c.path.clone());
        let bad = |why: String| TlsSetupError::CaCert {
            path: path.clone(),
            why,
        };
        if let Some(ca) = &settings.cacert {
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
            .map_err(|e| bad(e.to_string()))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(RootsOrPinned {
                    roots: verifier,
                    pinned,
                }))
                .with_no_client_auth()
        }
    };
    if h2 {
        config.alpn_protocols = vec![b"h2".to_vec()];
    }
    Ok(config)
}

/// `host` as the name its certificate is checked against.
pub fn server_name(host: &str) -> Result<ServerName<'static>, TlsSetupError> {
    ServerName::try_from(host.to_string()).map_err(|_| TlsSetupError::ServerName {
        host: host.to_string(),
    })
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
