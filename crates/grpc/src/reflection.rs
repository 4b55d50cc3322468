//! Server reflection: a method's types asked of the server itself, for calls made without a
//! `.proto` file. The messages of `grpc.reflection.v1` (whose `v1alpha` is the same on another
//! path), the client that asks a server over h2c or TLS, and the answers a server gives from
//! its own types (the reference service serves them).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use prost_reflect::prost_types::{FileDescriptorProto, FileDescriptorSet};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::{frame, Deframer, MethodError, Protos};

/// The reflection method of `grpc.reflection.v1`.
pub const V1: &str = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
/// The same of `grpc.reflection.v1alpha`, which older servers serve alone.
pub const V1ALPHA: &str = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

/// Most rounds of asking for files a server left out (a file's imports, by name).
const MAX_ROUNDS: usize = 16;

/// One question to a server's reflection (`ServerReflectionRequest`, the parts loadlab asks).
#[derive(Clone, PartialEq, Message)]
pub struct ReflectionRequest {
    /// The host asked about (unused by most servers).
    #[prost(string, tag = "1")]
    pub host: String,
    /// What is asked.
    #[prost(oneof = "Ask", tags = "3, 4, 7")]
    pub ask: Option<Ask>,
}

/// What a reflection request asks.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Ask {
    /// A file by its name, e.g. `google/protobuf/empty.proto`.
    #[prost(string, tag = "3")]
    FileByFilename(String),
    /// The file that defines a symbol (a service's full name), with its imports.
    #[prost(string, tag = "4")]
    FileContainingSymbol(String),
    /// The services the server has (the field's value is ignored).
    #[prost(string, tag = "7")]
    ListServices(String),
}

/// A server's answer to one [`ReflectionRequest`] (`ServerReflectionResponse`).
#[derive(Clone, PartialEq, Message)]
pub struct ReflectionResponse {
    /// The host it answers for.
    #[prost(string, tag = "1")]
    pub valid_host: String,
    /// The answer.
    #[prost(oneof = "Answer", tags = "4, 6, 7")]
    pub answer: Option<Answer>,
}

/// What a server answered.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Answer {
    /// Files, each a serialized `FileDescriptorProto`.
    #[prost(message, tag = "4")]
    Files(FileDescriptorResponse),
    /// The services' full names.
    #[prost(message, tag = "6")]
    Services(ListServiceResponse),
    /// Why it could not answer.
    #[prost(message, tag = "7")]
    Error(ErrorResponse),
}

/// Files a server sent.
#[derive(Clone, PartialEq, Message)]
pub struct FileDescriptorResponse {
    /// Each a serialized `FileDescriptorProto`.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub file_descriptor_proto: Vec<Vec<u8>>,
}

/// The services a server has.
#[derive(Clone, PartialEq, Message)]
pub struct ListServiceResponse {
    /// One per service.
    #[prost(message, repeated, tag = "1")]
    pub service: Vec<ServiceName>,
}

/// A service's full name.
#[derive(Clone, PartialEq, Message)]
pub struct ServiceName {
    /// E.g. `loadlab.reference.v1.Reference`.
    #[prost(string, tag = "1")]
    pub name: String,
}

/// A question the server could not answer.
#[derive(Clone, PartialEq, Message)]
pub struct ErrorResponse {
    /// A gRPC status code.
    #[prost(int32, tag = "1")]
    pub error_code: i32,
    /// Why.
    #[prost(string, tag = "2")]
    pub error_message: String,
}

/// How reflection reaches a `grpcs://` server: the client configuration (its ALPN offering `h2`)
/// and the name the server's certificate is checked against.
#[derive(Clone)]
pub struct ReflectionTls {
    /// The configuration the run's connections use too.
    pub config: Arc<rustls::ClientConfig>,
    /// The URL's host.
    pub name: rustls::pki_types::ServerName<'static>,
}

/// Where a server's reflection is: its address, its `authority` for the `:authority` header, and
/// TLS when the URL is `grpcs://`.
#[derive(Clone)]
pub struct Server {
    /// The address connected to.
    pub addr: SocketAddr,
    /// `HOST:PORT` as the URL gives them.
    pub authority: String,
    /// TLS, or `None` for h2c.
    pub tls: Option<ReflectionTls>,
}

/// Why asking a server's reflection failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The TLS handshake failed: the server's certificate is not trusted here, or it does not
    /// speak TLS, or not HTTP/2 over it.
    #[error("server reflection at {server}: the TLS handshake failed: {why}")]
    Tls {
        /// `HOST:PORT`.
        server: String,
        /// rustls's reason.
        why: String,
    },
    /// Anything else: no connection, no reflection service, an answer that does not decode.
    #[error(transparent)]
    Other(#[from] MethodError),
}

/// Asks `server` for the types of `service`, by `grpc.reflection.v1`, or `v1alpha` where the
/// server has only that; each exchange may take `timeout`.
pub fn fetch(server: &Server, service: &str, timeout: Duration) -> Result<Protos, FetchError> {
    let authority = server.authority.as_str();
    let from = format!("server reflection at {authority}");
    let fail = |why: String| FetchError::Other(MethodError::Compile(format!("{from}: {why}")));
    let failed = |e: Exchange| match e {
        Exchange::Tls(why) => FetchError::Tls {
            server: authority.to_string(),
            why,
        },
        e => fail(e.to_string()),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(e.to_string()))?;
    runtime.block_on(async {
        let ask = |a: Ask| ReflectionRequest {
            host: String::new(),
            ask: Some(a),
        };
        let first = ask(Ask::FileContainingSymbol(service.to_string()));
        let (path, answers) =
            match exchange(server, V1, std::slice::from_ref(&first), timeout).await {
                Err(Exchange::Status(12, _)) => {
                    (V1ALPHA, exchange(server, V1ALPHA, &[first], timeout).await)
                }
                other => (V1, other),
            };
        let mut files: BTreeMap<String, FileDescriptorProto> = BTreeMap::new();
        let mut answers = answers.map_err(failed)?;
        for _ in 0..MAX_ROUNDS {
            for a in answers {
                match a.answer {
                    Some(Answer::Files(f)) => {
                        for bytes in f.file_descriptor_proto {
                            let file = FileDescriptorProto::decode(bytes.as_slice())
                                .map_err(|e| fail(format!("a file that does not decode: {e}")))?;
                            files.insert(file.name().to_string(), file);
                        }
                    }
                    Some(Answer::Error(e)) => {
                        return Err(fail(format!(
                            "it answered status {}: {}",
                            e.error_code, e.error_message
                        )))
                    }
                    Some(Answer::Services(_)) | None => {}
                }
            }
            // A server may leave out files it sent before on the stream, or never: ask for
            // each import still missing by name.
            let missing: Vec<ReflectionRequest> = files
                .values()
                .flat_map(|f| f.dependency.iter())
                .filter(|d| !files.contains_key(*d))
                .map(|d| ask(Ask::FileByFilename(d.clone())))
                .collect();
            if missing.is_empty() {
                break;
            }
            answers = exchange(server, path, &missing, timeout)
                .await
                .map_err(failed)?;
        }
        let set = FileDescriptorSet {
            file: files.into_values().collect(),
        };
        Ok(Protos::from_descriptor_set(&set.encode_to_vec(), &from)?)
    })
}

/// Why an exchange with a server failed.
#[derive(Debug, thiserror::Error)]
enum Exchange {
    /// The call ended with a status other than OK, with its message.
    #[error("the call ended with gRPC status {0} {1:?}")]
    Status(u32, String),
    /// The connection or the stream failed.
    #[error("{0}")]
    Transport(String),
    /// The TLS handshake failed, or chose no HTTP/2.
    #[error("{0}")]
    Tls(String),
}

/// One call of `path` on a new connection to `server`: `requests` sent, then the stream closed;
/// the answers read until the trailers.
async fn exchange(
    server: &Server,
    path: &str,
    requests: &[ReflectionRequest],
    timeout: Duration,
) -> Result<Vec<ReflectionResponse>, Exchange> {
    let t = |e: &dyn std::fmt::Display| Exchange::Transport(e.to_string());
    let addr = server.addr;
    let call = async {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| t(&format!("cannot connect to {addr}: {e}")))?;
        let (client, scheme) = match &server.tls {
            None => (http2(tcp, "h2c").await?, "http"),
            Some(tls) => {
                let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
                let stream = connector
                    .connect(tls.name.clone(), tcp)
                    .await
                    .map_err(|e| Exchange::Tls(e.to_string()))?;
                if stream.get_ref().1.alpn_protocol() != Some(b"h2") {
                    return Err(Exchange::Tls("the server chose no HTTP/2 (ALPN h2)".into()));
                }
                (http2(stream, "HTTP/2 over TLS").await?, "https")
            }
        };
        let mut client = client.ready().await.map_err(|e| t(&e))?;
        let request = http::Request::post(format!("{scheme}://{}{path}", server.authority))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .map_err(|e| t(&e))?;
        let (response, mut send) = client.send_request(request, false).map_err(|e| t(&e))?;
        let mut body = Vec::new();
        for r in requests {
            body.extend_from_slice(&frame(&r.encode_to_vec()));
        }
        send.send_data(Bytes::from(body), true).map_err(|e| t(&e))?;
        let response = response.await.map_err(|e| t(&e))?;
        if let Some(status) = status_of(response.headers()) {
            return Err(status);
        }
        let mut recv = response.into_body();
        let mut deframer = Deframer::new();
        let mut answers = Vec::new();
        while let Some(chunk) = recv.data().await {
            let chunk = chunk.map_err(|e| t(&e))?;
            let _ = recv.flow_control().release_capacity(chunk.len());
            deframer.push(&chunk);
            while let Some(m) = deframer.next_message().map_err(|e| t(&e))? {
                answers.push(ReflectionResponse::decode(m).map_err(|e| t(&e))?);
            }
        }
        let trailers = recv.trailers().await.map_err(|e| t(&e))?;
        match trailers.as_ref().and_then(status_of) {
            Some(status) => Err(status),
            None => Ok(answers),
        }
    };
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| t(&format!("no answer within {timeout:?}")))?
}

/// An HTTP/2 client on `io` (its connection driven by a task of its own); `what` names the
/// transport in the error.
async fn http2<T>(io: T, what: &str) -> Result<h2::client::SendRequest<Bytes>, Exchange>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (client, connection) = h2::client::handshake(io)
        .await
        .map_err(|e| Exchange::Transport(format!("no HTTP/2 ({what}): {e}")))?;
    tokio::spawn(connection);
    Ok(client)
}

/// A failed status in `headers` (`grpc-status` other than 0, with its `grpc-message`).
fn status_of(headers: &http::HeaderMap) -> Option<Exchange> {
    let code: u32 = headers.get("grpc-status")?.to_str().ok()?.parse().ok()?;
    let message = headers
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    (code != 0).then_some(Exchange::Status(code, message))
}

/// A server's answer to `request` from the files of `protos`: the file defining a symbol
/// with all it imports, a file by name, or the list of services.
pub fn answer(protos: &Protos, request: &ReflectionRequest) -> ReflectionResponse {
    let not_found = |what: String| {
        Answer::Error(ErrorResponse {
            error_code: 5,
            error_message: format!("{what} not found"),
        })
    };
    let answer = match &request.ask {
        Some(Ask::ListServices(_)) => Answer::Services(ListServiceResponse {
            service: protos
                .services()
                .into_iter()
                .map(|name| ServiceName { name })
                .collect(),
        }),
        Some(Ask::FileContainingSymbol(symbol)) => match protos.file_of_symbol(symbol) {
            Some(files) => Answer::Files(FileDescriptorResponse {
                file_descriptor_proto: files,
            }),
            None => not_found(format!("symbol {symbol}")),
        },
        Some(Ask::FileByFilename(name)) => match protos.file_by_name(name) {
            Some(file) => Answer::Files(FileDescriptorResponse {
                file_descriptor_proto: vec![file],
            }),
            None => not_found(format!("file {name}")),
        },
        None => Answer::Error(ErrorResponse {
            error_code: 12,
            error_message: "only file_by_filename, file_containing_symbol and list_services \
                            are served"
                .into(),
        }),
    };
    ReflectionResponse {
        valid_host: request.host.clone(),
        answer: Some(answer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_run::{CaCert, TlsSettings};
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    use tokio::net::TcpListener;

    /// A certificate for 127.0.0.1 made here, as PEM and as rustls takes it.
    struct Certificate {
        pem: String,
        der: CertificateDer<'static>,
        key: PrivatePkcs8KeyDer<'static>,
    }

    fn certificate() -> Certificate {
        let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        Certificate {
            pem: made.cert.pem(),
            der: made.cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()),
        }
    }

    /// A TLS server on 127.0.0.1 answering server reflection from the reference service's
    /// files over HTTP/2, offering `alpn` in the handshake; serves connections until the
    /// runtime ends.
    async fn reflecting_server(cert: &Certificate, alpn: &[&[u8]]) -> SocketAddr {
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der.clone()],
            PrivateKeyDer::Pkcs8(cert.key.clone_key()),
        )
        .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut h2) = h2::server::handshake(tls).await else {
                        return;
                    };
                    while let Some(Ok((request, mut respond))) = h2.accept().await {
                        let mut body = request.into_body();
                        let mut deframer = Deframer::new();
                        let mut answers = Vec::new();
                        while let Some(Ok(chunk)) = body.data().await {
                            let _ = body.flow_control().release_capacity(chunk.len());
                            deframer.push(&chunk);
                            while let Ok(Some(m)) = deframer.next_message() {
                                let asked = ReflectionRequest::decode(m).unwrap();
                                let answer = answer(&Protos::reference(), &asked);
                                answers.extend_from_slice(&frame(&answer.encode_to_vec()));
                            }
                        }
                        let head = http::Response::builder()
                            .header("content-type", "application/grpc")
                            .body(())
                            .unwrap();
                        let mut send = respond.send_response(head, false).unwrap();
                        send.send_data(Bytes::from(answers), false).unwrap();
                        let mut trailers = http::HeaderMap::new();
                        trailers.insert("grpc-status", "0".parse().unwrap());
                        send.send_trailers(trailers).unwrap();
                    }
                });
            }
        });
        addr
    }

    /// Asks the server at `addr` over TLS as `settings` say, from a thread of its own (`fetch`
    /// runs a runtime of its own).
    async fn ask(addr: SocketAddr, settings: TlsSettings) -> Result<Protos, FetchError> {
        let server = Server {
            addr,
            authority: addr.to_string(),
            tls: Some(ReflectionTls {
                config: Arc::new(loadlab_tls::client_config(&settings, true).unwrap()),
                name: loadlab_tls::server_name("127.0.0.1").unwrap(),
            }),
        };
        tokio::task::spawn_blocking(move || {
            fetch(
                &server,
                "loadlab.reference.v1.Reference",
                Duration::from_secs(5),
            )
        })
        .await
        .unwrap()
    }

    fn trusting(cert: &Certificate) -> TlsSettings {
        TlsSettings {
            cacert: Some(CaCert {
                path: "server.pem".into(),
                pem: cert.pem.clone().into_bytes(),
            }),
            insecure: false,
        }
    }

    #[tokio::test]
    async fn reflection_over_tls_reads_the_services_types_when_its_certificate_is_trusted() {
        let cert = certificate();
        let addr = reflecting_server(&cert, &[b"h2"]).await;
        let protos = ask(addr, trusting(&cert)).await.unwrap();
        let method = protos
            .method("loadlab.reference.v1.Reference", "Delay")
            .unwrap();
        assert!(!method.framed_requests(r#"{"ms": 5}"#).unwrap().is_empty());
        let insecure = TlsSettings {
            cacert: None,
            insecure: true,
        };
        assert!(ask(addr, insecure).await.is_ok());
    }

    #[tokio::test]
    async fn reflection_over_tls_names_an_untrusted_certificate_and_a_server_without_http2() {
        let cert = certificate();
        let addr = reflecting_server(&cert, &[b"h2"]).await;
        match ask(addr, TlsSettings::default()).await {
            Err(FetchError::Tls { why, server }) => {
                assert!(why.contains("UnknownIssuer"), "{why}");
                assert_eq!(server, addr.to_string());
            }
            other => panic!("{:?}", other.map(|p| p.services())),
        }
        // A server that speaks TLS without ALPN, and one that offers HTTP/1.1 alone.
        for (alpn, said) in [
            (&[][..], "chose no HTTP/2"),
            (&[&b"http/1.1"[..]][..], "NoApplicationProtocol"),
        ] {
            let other = reflecting_server(&cert, alpn).await;
            match ask(other, trusting(&cert)).await {
                Err(FetchError::Tls { why, .. }) => assert!(why.contains(said), "{why}"),
                other => panic!("{:?}", other.map(|p| p.services())),
            }
        }
    }
}
