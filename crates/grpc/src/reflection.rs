//! Server reflection: a method's types asked of the server itself, for calls made without a
//! `.proto` file. The messages of `grpc.reflection.v1` (whose `v1alpha` is the same on another
//! path), the client that asks a server over h2c, and the answers a server gives from its own
//! types (the reference service serves them).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use prost_reflect::prost_types::{FileDescriptorProto, FileDescriptorSet};

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

/// Asks the server at `addr` (its `authority` for the `:authority` header) for the types of
/// `service`, by `grpc.reflection.v1`, or `v1alpha` where the server has only that; each
/// exchange may take `timeout`.
pub fn fetch(
    addr: SocketAddr,
    authority: &str,
    service: &str,
    timeout: Duration,
) -> Result<Protos, MethodError> {
    let from = format!("server reflection at {authority}");
    let fail = |why: String| MethodError::Compile(format!("{from}: {why}"));
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
            match exchange(addr, authority, V1, std::slice::from_ref(&first), timeout).await {
                Err(Exchange::Status(12, _)) => (
                    V1ALPHA,
                    exchange(addr, authority, V1ALPHA, &[first], timeout).await,
                ),
                other => (V1, other),
            };
        let mut files: BTreeMap<String, FileDescriptorProto> = BTreeMap::new();
        let mut answers = answers.map_err(|e| fail(e.to_string()))?;
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
            answers = exchange(addr, authority, path, &missing, timeout)
                .await
                .map_err(|e| fail(e.to_string()))?;
        }
        let set = FileDescriptorSet {
            file: files.into_values().collect(),
        };
        Protos::from_descriptor_set(&set.encode_to_vec(), &from)
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
}

/// One call of `path` on a new h2c connection: `requests` sent, then the stream closed; the
/// answers read until the trailers.
async fn exchange(
    addr: SocketAddr,
    authority: &str,
    path: &str,
    requests: &[ReflectionRequest],
    timeout: Duration,
) -> Result<Vec<ReflectionResponse>, Exchange> {
    let t = |e: &dyn std::fmt::Display| Exchange::Transport(e.to_string());
    let call = async {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| t(&format!("cannot connect to {addr}: {e}")))?;
        let (client, connection) = h2::client::handshake(tcp)
            .await
            .map_err(|e| t(&format!("no HTTP/2 (h2c) from {addr}: {e}")))?;
        tokio::spawn(connection);
        let mut client = client.ready().await.map_err(|e| t(&e))?;
        let request = http::Request::post(format!("http://{authority}{path}"))
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
