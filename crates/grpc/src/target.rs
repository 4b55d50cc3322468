//! A gRPC target as users write it: `grpc://HOST:PORT/package.Service/Method`, or `grpcs://`
//! for TLS.

/// A `grpc://` or `grpcs://` URL that names no method.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{url}: {why}; write grpc://HOST:PORT/package.Service/Method (grpcs:// for TLS)")]
pub struct TargetError {
    /// The URL as given.
    pub url: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// A method on a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcTarget {
    /// TLS (`grpcs://`).
    pub tls: bool,
    /// `HOST:PORT` (the port 80 or 443 when left out).
    pub authority: String,
    /// The host alone, without brackets for IPv6.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The service's full name, e.g. `loadlab.reference.v1.Reference`.
    pub service: String,
    /// The method's name, e.g. `Ping`.
    pub method: String,
}

impl GrpcTarget {
    /// Whether `url` is a gRPC one (by its scheme), to tell it from an HTTP URL.
    pub fn is_grpc(url: &str) -> bool {
        let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
        lower.starts_with("grpc://") || lower.starts_with("grpcs://")
    }

    /// Reads `url`.
    pub fn parse(url: &str) -> Result<Self, TargetError> {
        let bad = |why| TargetError {
            url: url.to_string(),
            why,
        };
        let (tls, rest) = if let Some(r) = strip_scheme(url, "grpcs://") {
            (true, r)
        } else if let Some(r) = strip_scheme(url, "grpc://") {
            (false, r)
        } else {
            return Err(bad("not a grpc:// or grpcs:// URL"));
        };
        let (authority, path) = rest.split_once('/').ok_or_else(|| bad("no method named"))?;
        if path.contains(['?', '#']) {
            return Err(bad("a gRPC method takes no query or fragment"));
        }
        let (service, method) = path
            .split_once('/')
            .ok_or_else(|| bad("the path names no method after the service"))?;
        if service.is_empty() || method.is_empty() || method.contains('/') {
            return Err(bad("the path is not /package.Service/Method"));
        }
        let (host, port) = split_host_port(authority).ok_or_else(|| bad("no host"))?;
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| bad("the port is not a number up to 65535"))?,
            None if tls => 443,
            None => 80,
        };
        let authority = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        Ok(GrpcTarget {
            tls,
            authority,
            host: host.to_string(),
            port,
            service: service.to_string(),
            method: method.to_string(),
        })
    }

    /// The call's HTTP/2 path, `/package.Service/Method`.
    pub fn path(&self) -> String {
        format!("/{}/{}", self.service, self.method)
    }
}

/// `url` without `scheme`, matched without regard to case.
fn strip_scheme<'a>(url: &'a str, scheme: &str) -> Option<&'a str> {
    let head = url.get(..scheme.len())?;
    head.eq_ignore_ascii_case(scheme)
        .then(|| &url[scheme.len()..])
}

/// `host[:port]` or `[v6][:port]`: the host, and the port's text when given.
fn split_host_port(authority: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        return (!host.is_empty()).then_some((host, port));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    (!host.is_empty() && !host.contains(':')).then_some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_read_with_their_service_method_and_port() {
        let t = GrpcTarget::parse("grpc://127.0.0.1:50051/loadlab.reference.v1.Reference/Ping")
            .unwrap();
        assert!(!t.tls);
        assert_eq!(t.authority, "127.0.0.1:50051");
        assert_eq!(t.service, "loadlab.reference.v1.Reference");
        assert_eq!(t.method, "Ping");
        assert_eq!(t.path(), "/loadlab.reference.v1.Reference/Ping");
        let t = GrpcTarget::parse("GRPCS://[::1]/helloworld.Greeter/SayHello").unwrap();
        assert!(t.tls);
        assert_eq!((t.host.as_str(), t.port), ("::1", 443));
        assert_eq!(t.authority, "[::1]:443");
        assert!(GrpcTarget::is_grpc("grpc://h:1/a.B/C"));
        assert!(!GrpcTarget::is_grpc("http://h:1/a.B/C"));
    }

    #[test]
    fn urls_that_name_no_method_are_refused_with_the_form_to_write() {
        for url in [
            "http://127.0.0.1:1/a.B/C",
            "grpc://127.0.0.1:1",
            "grpc://127.0.0.1:1/a.B",
            "grpc://127.0.0.1:1/a.B/",
            "grpc://127.0.0.1:1//C",
            "grpc://127.0.0.1:1/a.B/C/D",
            "grpc://127.0.0.1:1/a.B/C?x=1",
            "grpc://127.0.0.1:99999/a.B/C",
            "grpc://:1/a.B/C",
            "grpc://[::1/a.B/C",
        ] {
            let e = GrpcTarget::parse(url).unwrap_err().to_string();
            assert!(e.contains("package.Service/Method"), "{url}: {e}");
        }
    }
}
