//! Target URLs and headers as users write them, parsed and resolved into the plan's
//! endpoints and requests.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};

use loadlab_run::{Endpoint, RequestTemplate};

/// A target URL that cannot be loaded, and why.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    /// Not a URL at all.
    #[error("{url:?} is not a URL ({reason}); write it as http[s]://host[:port]/path")]
    Invalid {
        /// The URL as given.
        url: String,
        /// The URL parser's reason.
        reason: url::ParseError,
    },
    /// A file that is no Artillery script (its content is not a map with `config` or
    /// `scenarios`), given where a URL or a script goes.
    #[error(
        "{file:?} is a file but not an Artillery script (YAML or JSON with config or \
         scenarios), and not a URL; `loadlab validate {file}` says what is wrong in it"
    )]
    NotAScript {
        /// The file as given.
        file: String,
    },
    /// A scheme other than `http` and `https`.
    #[error("{url:?}: unsupported scheme {scheme:?}; use http:// or https://")]
    UnsupportedScheme {
        /// The URL as given.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// A `grpc://` URL where only HTTP is taken (probe, capacity, a scenario file's target).
    #[error(
        "{url:?}: gRPC methods are called by `loadlab run` (and a lab's workloads) so far; \
         here, use an http:// or https:// URL"
    )]
    GrpcHere {
        /// The URL as given.
        url: String,
    },
    /// A URL without a host.
    #[error("{url:?} has no host")]
    NoHost {
        /// The URL as given.
        url: String,
    },
    /// A host name the resolver could not look up.
    #[error("cannot resolve the host of {url:?}: {error}")]
    Unresolved {
        /// The URL as given.
        url: String,
        /// The resolver's failure.
        error: io::Error,
    },
    /// A host name that resolves to no address.
    #[error("the host of {url:?} has no address")]
    NoAddress {
        /// The URL as given.
        url: String,
    },
}

/// A request header, as `-H` takes it, that cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// No colon (or equals sign) between name and value.
    #[error("header {0:?} must look like 'Name: value' (or name=value)")]
    NoColon(String),
    /// An empty name, or one with spaces or control characters.
    #[error("header {0:?} has an invalid name")]
    InvalidName(String),
    /// A line break, which would end the header early.
    #[error("header {0:?} must not contain line breaks")]
    LineBreak(String),
}

/// A parsed target URL.
pub struct Target {
    /// The URL, normalized.
    pub url: String,
    /// Host name or address.
    pub host: String,
    /// Port (80 for http, 443 for https, when not given).
    pub port: u16,
    /// True for `https://`.
    pub tls: bool,
    /// `host[:port]` for the Host header.
    pub authority: String,
    /// Path and query.
    pub path: String,
}

/// Parses an `http://` or `https://` URL; other schemes are refused with what to write
/// instead.
pub fn parse_target(raw: &str) -> Result<Target, UrlError> {
    if !raw.contains("://") && std::path::Path::new(raw).is_file() {
        return Err(UrlError::NotAScript {
            file: raw.to_string(),
        });
    }
    let url = url::Url::parse(raw).map_err(|reason| UrlError::Invalid {
        url: raw.into(),
        reason,
    })?;
    let tls = match url.scheme() {
        "http" => false,
        "https" => true,
        "grpc" | "grpcs" => return Err(UrlError::GrpcHere { url: raw.into() }),
        other => {
            return Err(UrlError::UnsupportedScheme {
                url: raw.into(),
                scheme: other.into(),
            })
        }
    };
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| UrlError::NoHost { url: raw.into() })?
        .to_string();
    let port = url
        .port_or_known_default()
        .unwrap_or(if tls { 443 } else { 80 });
    let authority = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.clone(),
    };
    let mut path = url.path().to_string();
    if let Some(q) = url.query() {
        path.push('?');
        path.push_str(q);
    }
    Ok(Target {
        url: url.to_string(),
        host,
        port,
        tls,
        authority,
        path,
    })
}

/// Parses a header written `Name: value` (curl's form) or `name=value` (OpenTelemetry's):
/// the name ends at the first `:` or `=`, which no header name holds.
pub fn parse_header(raw: &str) -> Result<(String, String), HeaderError> {
    let at = raw
        .find([':', '='])
        .ok_or_else(|| HeaderError::NoColon(raw.into()))?;
    let (k, v) = (&raw[..at], &raw[at + 1..]);
    let k = k.trim();
    if k.is_empty()
        || k.bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(HeaderError::InvalidName(raw.into()));
    }
    if v.bytes().any(|b| b == b'\r' || b == b'\n') {
        return Err(HeaderError::LineBreak(raw.into()));
    }
    Ok((k.to_string(), v.trim().to_string()))
}

/// One request as flags or a scenario describe it, before its URL is resolved.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    /// Name for per-request results.
    pub name: String,
    /// Absolute URL.
    pub url: String,
    /// HTTP method, upper case.
    pub method: String,
    /// Headers, in order.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
    /// A streaming gRPC call's messages, how they go (`None` for any other request).
    pub grpc_stream: Option<loadlab_run::GrpcStream>,
}

/// Whether the lowering looks host names up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Lookup {
    /// Resolve every host now, as a run on this machine needs: a name that does not resolve is
    /// refused before anything runs.
    #[default]
    Resolve,
    /// Resolve every host now, but keep a name that does not resolve as an endpoint whose
    /// requests fail as `unresolved` (nothing is dialled): scripts run as Artillery runs them,
    /// where such a host fails its own requests (ENOTFOUND) and the others go on.
    Defer,
    /// Look no name up, for a plan that runs elsewhere (`loadlab k8s job`: cluster-internal
    /// names resolve only in the pods). An IP literal keeps its address; a name's endpoint gets
    /// the unspecified IPv4 address with the URL's port, and each distinct `host:port` is an
    /// endpoint of its own (two names of one address would share one when resolved).
    Skip,
}

/// Parses and resolves a URL (as `lookup` says); returns the index of its endpoint in
/// `endpoints` (added when no endpoint has its address yet, or, for `https://`, its address and
/// host name: the name is the connection's SNI) and the parsed URL.
pub fn endpoint_of(
    endpoints: &mut Vec<Endpoint>,
    raw: &str,
    lookup: Lookup,
) -> Result<(usize, Target), UrlError> {
    let t = parse_target(raw)?;
    // The host without an IPv6 literal's brackets: the name a certificate is checked against.
    let literal = t.host.trim_start_matches('[').trim_end_matches(']');
    let ip = literal.parse::<IpAddr>().ok();
    let placeholder = SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), t.port);
    let looked_up = || {
        (t.host.as_str(), t.port)
            .to_socket_addrs()
            .map_err(|error| UrlError::Unresolved {
                url: raw.into(),
                error,
            })?
            .next()
            .ok_or_else(|| UrlError::NoAddress { url: raw.into() })
    };
    // A name left unresolved gets a placeholder address; its `host:port` tells it apart.
    let (addr, failed) = match (lookup, ip) {
        (Lookup::Resolve, _) => (looked_up()?, None),
        (Lookup::Defer, _) => match looked_up() {
            Ok(addr) => (addr, None),
            Err(e) => (placeholder, Some(e.to_string())),
        },
        (Lookup::Skip, Some(ip)) => (SocketAddr::new(ip, t.port), None),
        (Lookup::Skip, None) => (placeholder, None),
    };
    let unresolved = (lookup == Lookup::Skip && ip.is_none()) || failed.is_some();
    let tls = t.tls.then(|| literal.to_string());
    let same = |e: &Endpoint| {
        e.addr == addr
            && e.tls == tls
            && (!unresolved || e.authority == t.authority)
            && e.unresolved.is_some() == failed.is_some()
    };
    let index = match endpoints.iter().position(same) {
        Some(i) => i,
        None => {
            endpoints.push(Endpoint {
                addr,
                authority: t.authority.clone(),
                tls,
                unresolved: failed,
            });
            endpoints.len() - 1
        }
    };
    Ok((index, t))
}

/// The endpoint of `url` in `endpoints`, added when new (scenario flows resolve their origins).
pub fn endpoint_index(
    endpoints: &mut Vec<Endpoint>,
    url: &str,
    lookup: Lookup,
) -> Result<usize, UrlError> {
    endpoint_of(endpoints, url, lookup).map(|(i, _)| i)
}

/// Parses and resolves (as `lookup` says) each request's URL; requests to the same address
/// share an endpoint.
pub fn resolve(
    specs: &[RequestSpec],
    lookup: Lookup,
) -> Result<(Vec<Endpoint>, Vec<RequestTemplate>), UrlError> {
    let mut endpoints: Vec<Endpoint> = Vec::new();
    let mut requests = Vec::new();
    for spec in specs {
        let (endpoint, t) = endpoint_of(&mut endpoints, &spec.url, lookup)?;
        requests.push(RequestTemplate {
            name: spec.name.clone(),
            url: t.url,
            endpoint,
            method: spec.method.clone(),
            path: t.path,
            headers: spec.headers.clone(),
            body: spec.body.clone(),
            grpc_stream: spec.grpc_stream,
        });
    }
    Ok((endpoints, requests))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_keep_path_and_query_and_default_port() {
        let t = parse_target("http://127.0.0.1/a/b?x=1&y=2").unwrap();
        assert_eq!(t.port, 80);
        assert_eq!(t.authority, "127.0.0.1");
        assert_eq!(t.path, "/a/b?x=1&y=2");
        let t = parse_target("http://localhost:8080").unwrap();
        assert_eq!(t.path, "/");
        assert_eq!(t.authority, "localhost:8080");
    }

    #[test]
    fn bad_urls_and_schemes_are_refused_with_a_reason() {
        let e = parse_target("not a url").err().unwrap();
        assert!(matches!(e, UrlError::Invalid { .. }), "{e:?}");
        assert!(e.to_string().contains("is not a URL"), "{e}");
        let e = parse_target("ftp://127.0.0.1/").err().unwrap();
        assert!(
            matches!(&e, UrlError::UnsupportedScheme { scheme, .. } if scheme == "ftp"),
            "{e:?}"
        );
        assert!(e.to_string().contains("unsupported scheme"), "{e}");
        let e = parse_target("grpc://127.0.0.1:1/a.B/C").err().unwrap();
        assert!(e.to_string().contains("called by `loadlab run`"), "{e}");
    }

    #[test]
    fn https_urls_default_to_port_443_and_name_their_host_for_tls() {
        let t = parse_target("https://localhost/a").unwrap();
        assert!(t.tls);
        assert_eq!(t.port, 443);
        assert_eq!(t.authority, "localhost");
        let mut endpoints = Vec::new();
        let (i, _) =
            endpoint_of(&mut endpoints, "https://127.0.0.1:8443/x", Lookup::Resolve).unwrap();
        assert_eq!(endpoints[i].tls.as_deref(), Some("127.0.0.1"));
        assert_eq!(endpoints[i].addr.port(), 8443);
        let (j, _) =
            endpoint_of(&mut endpoints, "http://127.0.0.1:8443/x", Lookup::Resolve).unwrap();
        assert_ne!(
            i, j,
            "plain and TLS connections to one port are distinct endpoints"
        );
        assert_eq!(endpoints[j].tls, None);
    }

    #[test]
    fn skipping_the_lookup_leaves_names_unresolved_and_apart() {
        let mut endpoints = Vec::new();
        let skip = Lookup::Skip;
        let (web, _) = endpoint_of(&mut endpoints, "http://web.invalid/ping", skip).unwrap();
        let (api, _) = endpoint_of(&mut endpoints, "http://api.invalid/x", skip).unwrap();
        let (again, _) = endpoint_of(&mut endpoints, "http://web.invalid/other", skip).unwrap();
        let (ip, _) = endpoint_of(&mut endpoints, "http://127.0.0.2:81/", skip).unwrap();
        assert_eq!((web, api, again, ip), (0, 1, 0, 2));
        assert!(endpoints[0].addr.ip().is_unspecified());
        assert_eq!(endpoints[1].addr.port(), 80);
        assert_eq!(endpoints[2].addr, "127.0.0.2:81".parse().unwrap());
        assert!(endpoint_of(&mut endpoints, "http://web.invalid/", Lookup::Resolve).is_err());
    }

    #[test]
    fn a_deferred_name_that_does_not_resolve_is_an_endpoint_of_its_own_that_says_why() {
        let mut endpoints = Vec::new();
        let defer = Lookup::Defer;
        let (gone, _) = endpoint_of(&mut endpoints, "http://gone.invalid:8080/x", defer).unwrap();
        let (here, _) = endpoint_of(&mut endpoints, "http://127.0.0.1:8080/", defer).unwrap();
        let (zero, _) = endpoint_of(&mut endpoints, "http://0.0.0.0:8080/", defer).unwrap();
        assert_eq!((gone, here, zero), (0, 1, 2), "{endpoints:?}");
        let why = endpoints[0].unresolved.as_deref().unwrap();
        assert!(why.contains("gone.invalid"), "{why}");
        assert!(endpoints[1].unresolved.is_none() && endpoints[2].unresolved.is_none());
        assert_eq!(endpoints[1].addr, "127.0.0.1:8080".parse().unwrap());
    }

    #[test]
    fn headers_need_a_name_and_a_colon() {
        assert_eq!(
            parse_header("X-Token:  abc ").unwrap(),
            ("X-Token".to_string(), "abc".to_string())
        );
        assert_eq!(
            parse_header("no colon"),
            Err(HeaderError::NoColon("no colon".into()))
        );
        // Either form, and the other separator in the value.
        assert_eq!(
            parse_header("authorization=Bearer a:b"),
            Ok(("authorization".to_string(), "Bearer a:b".to_string()))
        );
        assert_eq!(
            parse_header("Cookie: a=b"),
            Ok(("Cookie".to_string(), "a=b".to_string()))
        );
        assert_eq!(
            parse_header(": empty"),
            Err(HeaderError::InvalidName(": empty".into()))
        );
    }
}
