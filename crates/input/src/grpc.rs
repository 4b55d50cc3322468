//! `grpc://` targets lowered into HTTP/2 requests: each call is a POST to
//! `/package.Service/Method` with gRPC's headers, its request message encoded once from the JSON
//! of `-b` with the method's input type (from `--proto` files), length-prefixed, and `-H` as
//! metadata. The engine then sends it as any HTTP/2 request and counts it by its `grpc-status`.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use loadlab_grpc::reflection::{FetchError, ReflectionTls, Server};
use loadlab_grpc::{frame, grpc_timeout, GrpcTarget, MethodError, Protos, TargetError};
use loadlab_run::{GrpcStream, TlsSettings};

use crate::values::{positive_duration, positive_u64};

use crate::target::RequestSpec;

/// Where a gRPC call's types come from (`grpc://` targets).
#[derive(Debug, Clone, Default, Args)]
pub struct GrpcFlags {
    /// gRPC: the .proto file that defines the method (repeatable); compiled here, no protoc
    /// needed. Its imports are looked up in --import-path and the file's own directory.
    #[arg(long = "proto", value_name = "FILE")]
    pub proto: Vec<PathBuf>,
    /// gRPC: a directory the .proto files' imports are looked up in (repeatable), as protoc's
    /// -I.
    #[arg(long = "import-path", value_name = "DIR", requires = "proto")]
    pub import_path: Vec<PathBuf>,
    /// gRPC: a compiled FileDescriptorSet that defines the method, with its imports (repeatable),
    /// as `protoc --include_imports --descriptor_set_out` or `buf build -o` write it.
    #[arg(long = "protoset", value_name = "FILE", conflicts_with = "proto")]
    pub protoset: Vec<PathBuf>,
    /// gRPC streams: the time between two messages a client-streaming or bidirectional call
    /// sends (as ghz's --stream-interval); without it they go all at once.
    #[arg(long = "stream-interval", value_name = "DUR", value_parser = positive_duration)]
    pub stream_interval: Option<Duration>,
    /// gRPC streams: messages each client-streaming or bidirectional call sends before it
    /// half-closes, the request's messages in turn (as ghz's --stream-call-count).
    #[arg(long = "stream-call-count", value_name = "N", value_parser = positive_u64)]
    pub stream_call_count: Option<u64>,
    /// gRPC streams: each client-streaming or bidirectional call sends a message every
    /// --stream-interval and half-closes this long after its first (as ghz's
    /// --stream-call-duration).
    #[arg(
        long = "stream-call-duration",
        value_name = "DUR",
        value_parser = positive_duration,
        requires = "stream_interval"
    )]
    pub stream_call_duration: Option<Duration>,
}

impl GrpcFlags {
    /// Whether any flag that paces a client's stream was given.
    fn paces(&self) -> bool {
        self.stream_interval.is_some()
            || self.stream_call_count.is_some()
            || self.stream_call_duration.is_some()
    }
}

/// A `grpc://` target that cannot become calls, and why.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    /// The URL names no method.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The method's types: the files do not compile, or do not define it, or the request is
    /// not its input in JSON.
    #[error(transparent)]
    Method(#[from] MethodError),
    /// No `--proto` to read the method's types from, and no server to ask.
    #[error(
        "{url}: {why}: add --proto FILE (and --import-path DIR for its imports), or --protoset FILE"
    )]
    NoProto {
        /// The URL.
        url: String,
        /// Why the server cannot be asked.
        why: String,
    },
    /// Asking a `grpcs://` server for the method's types failed its TLS handshake.
    #[error(
        "{url}: asking the server for the method's types failed the TLS handshake ({why}); \
         pass --cacert FILE with the certificate that signed the server's (or --insecure), or \
         give the types with --proto FILE or --protoset FILE"
    )]
    ReflectionTls {
        /// The URL.
        url: String,
        /// rustls's reason.
        why: String,
    },
    /// `grpc://` targets among HTTP ones.
    #[error(
        "{url}: gRPC and HTTP targets cannot share a run (every call of one run goes over \
         HTTP/2 as gRPC); run them apart, or compare them in a lab"
    )]
    Mixed {
        /// The first gRPC URL.
        url: String,
    },
    /// `-m`: a call's method is its path.
    #[error("-m sets an HTTP method; a gRPC call is named by its URL (grpc://HOST:PORT/package.Service/Method): drop -m")]
    HttpMethod,
    /// `--no-keepalive` or `-p`, which HTTP/2 does not take.
    #[error("{0} applies to HTTP/1.1; gRPC calls go over HTTP/2 (use -c and --streams)")]
    Http1Flag(&'static str),
    /// `--proto`, `--import-path` or `--protoset` with HTTP targets.
    #[error("--proto, --import-path and --protoset apply to grpc:// targets")]
    ProtoWithoutGrpc,
    /// A lab's gRPC workload on a topology that serves no gRPC where the lab can reach it.
    #[error(
        "this topology serves no gRPC where the lab can reach it: a Node or Python topology \
         serves gRPC from a process of its own beside each replica, which a balancer in front \
         does not pass on (give it one replica, or lb: client), and an autoscaled topology's \
         balancer passes HTTP/1.1 only"
    )]
    NoGrpcFront,
    /// A flag that paces a client's stream, for a method whose client sends one message.
    #[error(
        "{url}: --stream-interval, --stream-call-count and --stream-call-duration pace the \
         messages a client streams, and this method is {kind}: drop them"
    )]
    NotClientStreaming {
        /// The URL.
        url: String,
        /// `unary` or `server-streaming`.
        kind: &'static str,
    },
    /// A deadline shorter than the time the client's stream takes to send.
    #[error(
        "--timeout {timeout:?} ends every call before its stream is sent ({span:?} from its first \
         message to its last): give a longer --timeout, or fewer messages"
    )]
    TimeoutInsideStream {
        /// The deadline given.
        timeout: Duration,
        /// The time from the first message to the half-close.
        span: Duration,
    },
}

/// Whether any of `urls` is a gRPC target; refuses a mix of gRPC and HTTP ones.
pub fn any_grpc(urls: &[String]) -> Result<bool, GrpcError> {
    let grpc: Vec<&String> = urls.iter().filter(|u| GrpcTarget::is_grpc(u)).collect();
    match grpc.first() {
        Some(first) if grpc.len() < urls.len() => Err(GrpcError::Mixed {
            url: (*first).clone(),
        }),
        Some(_) => Ok(true),
        None => Ok(false),
    }
}

/// How a call's types are found when no `--proto` gives them.
#[derive(Debug, Clone, Copy)]
pub enum Reflection {
    /// Ask each server (server reflection), waiting up to this long for each answer.
    Ask(Duration),
    /// Do not: the plan runs elsewhere (`loadlab k8s job`), where its names resolve.
    Never,
    /// Not yet: the server is not up (a lab checks its workloads before deploying); the URL
    /// and flags are checked, the call's message is left empty.
    Later,
}

/// The HTTP/2 requests the calls to `urls` are: each URL's method looked up in the `--proto`
/// files, or else asked of its server by reflection; `body` (JSON, `{}` when empty) encoded as
/// its input and framed, `headers` sent as metadata, and `timeout`, when given, as the call's
/// deadline (`grpc-timeout`).
pub fn call_specs(
    urls: &[String],
    flags: &GrpcFlags,
    (headers_given, body): (&[(String, String)], &[u8]),
    method_given: bool,
    timeout: Option<Duration>,
    reflection: Reflection,
    tls: &TlsSettings,
) -> Result<Vec<RequestSpec>, GrpcError> {
    if method_given {
        return Err(GrpcError::HttpMethod);
    }
    let targets = urls
        .iter()
        .map(|u| GrpcTarget::parse(u))
        .collect::<Result<Vec<_>, _>>()?;
    let compiled = match (flags.proto.is_empty(), flags.protoset.is_empty()) {
        (true, true) => None,
        (false, _) => Some(Protos::compile(&flags.proto, &flags.import_path)?),
        (true, false) => Some(Protos::read_descriptor_sets(&flags.protoset)?),
    };
    // Each server is asked once per service.
    let mut asked: BTreeMap<(String, String), Protos> = BTreeMap::new();
    let json = match String::from_utf8_lossy(body).trim() {
        "" => "{}".to_string(),
        body => body.to_string(),
    };
    let mut headers = vec![
        ("content-type".to_string(), "application/grpc".to_string()),
        ("te".to_string(), "trailers".to_string()),
    ];
    if let Some(t) = timeout {
        headers.push(("grpc-timeout".to_string(), grpc_timeout(t)));
    }
    // Metadata: gRPC's keys are lower case (HTTP/2 sends them so anyway); one given for a key
    // of the above (`content-type: application/grpc+proto`) takes its place.
    let given: Vec<(String, String)> = headers_given
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect();
    headers.retain(|(k, _)| !given.iter().any(|(g, _)| g == k));
    headers.extend(given);
    targets
        .iter()
        .zip(urls)
        .map(|(t, url)| {
            let (body, grpc_stream) = match (&compiled, reflection) {
                (Some(protos), _) => encoded(protos, t, &json, flags, url)?,
                // The server is not up yet: the URL and flags are checked, the message waits.
                (None, Reflection::Later) => (frame(&[]).to_vec(), None),
                (None, _) => {
                    let protos = match asked.entry((t.authority.clone(), t.service.clone())) {
                        Entry::Occupied(o) => o.into_mut(),
                        Entry::Vacant(v) => v.insert(reflect(t, url, reflection, tls)?),
                    };
                    encoded(protos, t, &json, flags, url)?
                }
            };
            if let (Some(timeout), Some(stream)) = (timeout, grpc_stream) {
                let span = stream.sending_span(messages_in(&body));
                if timeout <= span {
                    return Err(GrpcError::TimeoutInsideStream { timeout, span });
                }
            }
            let scheme = if t.tls { "https" } else { "http" };
            Ok(RequestSpec {
                name: url.clone(),
                url: format!("{scheme}://{}{}", t.authority, t.path()),
                method: "POST".to_string(),
                headers: headers.clone(),
                body,
                grpc_stream,
            })
        })
        .collect()
}

/// The request `json` as `t`'s method's input messages, framed: one, or, for a method whose
/// client streams, one per element of a JSON array; and, for a streaming method, how its
/// messages go (the flags' pacing, refused for a method whose client sends one message).
fn encoded(
    protos: &Protos,
    t: &GrpcTarget,
    json: &str,
    flags: &GrpcFlags,
    url: &str,
) -> Result<(Vec<u8>, Option<GrpcStream>), GrpcError> {
    let method = protos.method(&t.service, &t.method)?;
    if flags.paces() && !method.client_streaming {
        return Err(GrpcError::NotClientStreaming {
            url: url.to_string(),
            kind: if method.server_streaming {
                "server-streaming"
            } else {
                "unary"
            },
        });
    }
    let stream = (method.client_streaming || method.server_streaming).then_some(GrpcStream {
        client: method.client_streaming,
        server: method.server_streaming,
        interval: flags.stream_interval,
        count: flags.stream_call_count,
        duration: flags.stream_call_duration,
    });
    Ok((method.framed_requests(json)?, stream))
}

/// How many framed messages `body` holds.
fn messages_in(body: &[u8]) -> usize {
    let mut d = loadlab_grpc::Deframer::new();
    d.push(body);
    std::iter::from_fn(|| d.next_message().ok().flatten()).count()
}

/// The time a call's stream takes from its first message to its half-close, at most, over
/// `calls`; zero when none streams over time.
pub fn sending_span(calls: &[RequestSpec]) -> Duration {
    calls
        .iter()
        .filter_map(|c| Some(c.grpc_stream?.sending_span(messages_in(&c.body))))
        .max()
        .unwrap_or_default()
}

/// The types of `service`, asked by reflection of the server a scenario's `target`
/// (`http://HOST:PORT`, or `https://` over TLS with the platform's roots) names.
pub(crate) fn reflect_target(target: &str, service: &str) -> Result<Protos, GrpcError> {
    let rest = target
        .strip_prefix("http://")
        .map(|r| ("grpc", r))
        .or_else(|| target.strip_prefix("https://").map(|r| ("grpcs", r)));
    let Some((scheme, rest)) = rest else {
        return Err(GrpcError::NoProto {
            url: target.to_string(),
            why: "a target that is not http:// or https:// cannot be asked for types".into(),
        });
    };
    let authority = rest.split('/').next().unwrap_or(rest);
    let url = format!("{scheme}://{authority}/{service}/Any");
    let t = GrpcTarget::parse(&url)?;
    reflect(
        &t,
        target,
        Reflection::Ask(loadlab_run::defaults::CONNECT_TIMEOUT),
        &TlsSettings::default(),
    )
}

/// The types of `t`'s service, asked of its server by reflection.
/// A `grpcs://` server is asked over TLS as `settings` say (`--cacert`, `--insecure`).
fn reflect(
    t: &GrpcTarget,
    url: &str,
    how: Reflection,
    settings: &TlsSettings,
) -> Result<Protos, GrpcError> {
    let no = |why: &str| GrpcError::NoProto {
        url: url.to_string(),
        why: why.to_string(),
    };
    let Reflection::Ask(wait) = how else {
        return Err(no(
            "a plan that runs elsewhere cannot ask the server for its types",
        ));
    };
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(t.host.as_str(), t.port))
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| no(&format!("{} does not resolve", t.host)))?;
    let tls = if t.tls {
        let config = loadlab_tls::client_config(settings, true).map_err(|e| no(&e.to_string()))?;
        let name = loadlab_tls::server_name(&t.host).map_err(|e| no(&e.to_string()))?;
        Some(ReflectionTls {
            config: std::sync::Arc::new(config),
            name,
        })
    } else {
        None
    };
    let server = Server {
        addr,
        authority: t.authority.clone(),
        tls,
    };
    loadlab_grpc::reflection::fetch(&server, &t.service, wait).map_err(|e| match e {
        FetchError::Tls { why, .. } => GrpcError::ReflectionTls {
            url: url.to_string(),
            why,
        },
        e => no(&format!(
            "no .proto given, and asking the server failed ({e})"
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference() -> (tempfile::TempDir, GrpcFlags) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("reference.proto");
        std::fs::write(&file, loadlab_grpc::method::REFERENCE_PROTO).unwrap();
        let flags = GrpcFlags {
            proto: vec![file],
            ..GrpcFlags::default()
        };
        (dir, flags)
    }

    fn request(body: &str, headers: &[(&str, &str)]) -> (Vec<(String, String)>, Vec<u8>) {
        let headers = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        (headers, body.as_bytes().to_vec())
    }

    /// `call_specs` of a request as [`request`] gives it.
    fn specs(
        urls: &[String],
        flags: &GrpcFlags,
        (headers, body): &(Vec<(String, String)>, Vec<u8>),
        method_given: bool,
        timeout: Option<Duration>,
    ) -> Result<Vec<RequestSpec>, GrpcError> {
        call_specs(
            urls,
            flags,
            (headers, body),
            method_given,
            timeout,
            Reflection::Never,
            &TlsSettings::default(),
        )
    }

    #[test]
    fn a_streaming_methods_calls_carry_their_pace_and_a_unary_one_refuses_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("chat.proto");
        std::fs::write(
            &file,
            "syntax = \"proto3\";\npackage chat;\nmessage Line { string text = 1; }\n\
             service Chat {\n  rpc Talk(stream Line) returns (stream Line);\n  \
             rpc Send(stream Line) returns (Line);\n  rpc Watch(Line) returns (stream Line);\n  \
             rpc Say(Line) returns (Line);\n}\n",
        )
        .unwrap();
        let ms = Duration::from_millis;
        let flags = GrpcFlags {
            proto: vec![file],
            stream_interval: Some(ms(100)),
            stream_call_count: Some(30),
            ..GrpcFlags::default()
        };
        let url = |m: &str| vec![format!("grpc://127.0.0.1:1/chat.Chat/{m}")];
        let two = request(r#"[{"text": "a"}, {"text": "b"}]"#, &[]);
        let talk = specs(&url("Talk"), &flags, &two, false, None).unwrap();
        let stream = talk[0].grpc_stream.expect("a bidirectional call streams");
        assert!(stream.client && stream.server && stream.paced());
        assert_eq!((stream.interval, stream.count), (Some(ms(100)), Some(30)));
        // 30 messages 100 ms apart take 2.9 s: the default deadline comes on top.
        assert_eq!(sending_span(&talk), ms(2900));
        let e = specs(&url("Talk"), &flags, &two, false, Some(ms(2900))).unwrap_err();
        assert!(matches!(e, GrpcError::TimeoutInsideStream { .. }), "{e}");
        let send = specs(&url("Send"), &flags, &two, false, Some(ms(3000))).unwrap();
        assert!(send[0].grpc_stream.is_some_and(|s| s.client && !s.server));
        for (method, kind) in [("Watch", "server-streaming"), ("Say", "unary")] {
            let one = request(r#"{"text": "a"}"#, &[]);
            let e = specs(&url(method), &flags, &one, false, None).unwrap_err();
            assert!(
                e.to_string().contains(&format!("is {kind}: drop them")),
                "{e}"
            );
        }
        let plain = GrpcFlags {
            stream_interval: None,
            stream_call_count: None,
            ..flags
        };
        let watch = specs(&url("Watch"), &plain, &request("{}", &[]), false, None).unwrap();
        let s = watch[0].grpc_stream.expect("a server stream is counted");
        assert!(!s.client && s.server && !s.paced());
        assert!(
            specs(&url("Say"), &plain, &request("{}", &[]), false, None).unwrap()[0]
                .grpc_stream
                .is_none()
        );
    }

    #[test]
    fn a_call_becomes_a_framed_post_with_grpcs_headers_and_its_metadata() {
        let (_dir, flags) = reference();
        let urls = ["grpc://127.0.0.1:50051/loadlab.reference.v1.Reference/Delay".to_string()];
        let made = specs(
            &urls,
            &flags,
            &request(r#"{"ms": 20}"#, &[("X-Tenant", "a")]),
            false,
            Some(Duration::from_millis(500)),
        )
        .unwrap();
        let s = &made[0];
        assert_eq!(s.method, "POST");
        assert_eq!(
            s.url,
            "http://127.0.0.1:50051/loadlab.reference.v1.Reference/Delay"
        );
        assert_eq!(s.name, urls[0]);
        let header = |k: &str| {
            s.headers
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(header("content-type"), Some("application/grpc"));
        assert_eq!(header("te"), Some("trailers"));
        assert_eq!(header("grpc-timeout"), Some("500000u"));
        assert_eq!(header("x-tenant"), Some("a"));
        // Uncompressed, four bytes of length, then field 1 (varint) = 20.
        assert_eq!(s.body, [0, 0, 0, 0, 2, 0x08, 20]);
        let own = specs(
            &urls,
            &flags,
            &request("", &[("Content-Type", "application/grpc+proto")]),
            false,
            None,
        )
        .unwrap();
        let types: Vec<_> = own[0]
            .headers
            .iter()
            .filter(|(k, _)| k == "content-type")
            .collect();
        assert_eq!(types.len(), 1, "{:?}", own[0].headers);
        assert_eq!(types[0].1, "application/grpc+proto");
        // No body is the empty message; TLS goes to https.
        let tls = ["grpcs://localhost:8443/loadlab.reference.v1.Reference/Ping".to_string()];
        let made = specs(&tls, &flags, &request("", &[]), false, None).unwrap();
        assert_eq!(made[0].body, [0, 0, 0, 0, 0]);
        assert!(made[0].url.starts_with("https://localhost:8443/"));
        assert!(!made[0].headers.iter().any(|(k, _)| k == "grpc-timeout"));
    }

    #[test]
    fn what_cannot_be_called_is_refused_with_what_to_write() {
        let (_dir, flags) = reference();
        let url = |m: &str| vec![format!("grpc://127.0.0.1:1/loadlab.reference.v1.{m}")];
        let err = |urls: &[String], body: &str, flags: &GrpcFlags, m: bool| {
            specs(urls, flags, &request(body, &[]), m, None)
                .unwrap_err()
                .to_string()
        };
        let e = err(&url("Reference/Pong"), "", &flags, false);
        assert!(e.contains("has no method Pong; its methods: Ping"), "{e}");
        assert!(e.contains("in /"), "names the file: {e}");
        let e = err(&url("Other/Ping"), "", &flags, false);
        assert!(e.contains("no service loadlab.reference.v1.Other"), "{e}");
        let e = err(&url("Reference/Delay"), r#"{"seconds": 1}"#, &flags, false);
        assert!(
            e.contains("is not a loadlab.reference.v1.DelayRequest"),
            "{e}"
        );
        let e = err(&url("Reference/Delay"), "{", &flags, false);
        assert!(e.contains("in JSON"), "{e}");
        let e = err(&url("Reference/Ping"), "", &GrpcFlags::default(), false);
        assert!(e.contains("add --proto FILE"), "{e}");
        let e = err(&url("Reference/Ping"), "", &flags, true);
        assert!(e.contains("drop -m"), "{e}");
        let e = err(&["grpc://127.0.0.1:1/Ping".to_string()], "", &flags, false);
        assert!(e.contains("package.Service/Method"), "{e}");
        let mixed = [
            "http://127.0.0.1/".to_string(),
            url("Reference/Ping").remove(0),
        ];
        assert!(any_grpc(&mixed)
            .unwrap_err()
            .to_string()
            .contains("cannot share a run"));
        assert!(!any_grpc(&mixed[..1]).unwrap());
        assert!(any_grpc(&mixed[1..]).unwrap());
    }
}
