//! Lowers `loadlab run` flags into one [`Plan`]: URLs parsed and resolved, defaults filled in.

use std::net::ToSocketAddrs;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use loadlab_run::{
    Arrival, Arrivals, Endpoint, Model, Plan, RatePhase, RequestTemplate, Stop, ValidPlan,
};

use crate::args::{ArrivalArg, RunArgs};

/// Closed-model connections when -c is not given (as wrk and autocannon).
const DEFAULT_CONNECTIONS: usize = 10;
/// Open-model connection cap when --max-connections is not given.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1000;
/// Run length when neither -d nor -n is given.
const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// Connect timeout when --connect-timeout is not given (or the request timeout if shorter).
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A parsed target URL.
struct Target {
    url: String,
    host: String,
    port: u16,
    authority: String,
    path: String,
}

fn parse_target(raw: &str) -> Result<Target> {
    let url = url::Url::parse(raw).map_err(|e| {
        anyhow::anyhow!("{raw:?} is not a URL ({e}); write it as http://host[:port]/path")
    })?;
    match url.scheme() {
        "http" => {}
        "https" => bail!(
            "{raw:?}: https is not supported yet; loadlab speaks plain HTTP/1.1 (use http://)"
        ),
        other => bail!("{raw:?}: unsupported scheme {other:?}; use http://"),
    }
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .with_context(|| format!("{raw:?} has no host"))?
        .to_string();
    let port = url.port_or_known_default().unwrap_or(80);
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
        authority,
        path,
    })
}

fn parse_header(raw: &str) -> Result<(String, String)> {
    let (k, v) = raw
        .split_once(':')
        .with_context(|| format!("header {raw:?} must look like 'Name: value'"))?;
    let k = k.trim();
    if k.is_empty()
        || k.bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        bail!("header {raw:?} has an invalid name");
    }
    if v.bytes().any(|b| b == b'\r' || b == b'\n') {
        bail!("header {raw:?} must not contain line breaks");
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
}

/// Parses and resolves a URL; returns the index of its endpoint in `endpoints` (added when no
/// endpoint has its address yet) and the parsed URL.
fn endpoint_of(endpoints: &mut Vec<Endpoint>, raw: &str) -> Result<(usize, Target)> {
    let t = parse_target(raw)?;
    let addr = (t.host.as_str(), t.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve the host of {raw:?}"))?
        .next()
        .with_context(|| format!("the host of {raw:?} has no address"))?;
    let index = match endpoints.iter().position(|e| e.addr == addr) {
        Some(i) => i,
        None => {
            endpoints.push(Endpoint {
                addr,
                authority: t.authority.clone(),
            });
            endpoints.len() - 1
        }
    };
    Ok((index, t))
}

/// The endpoint of `url` in `endpoints`, added when new (scenario flows resolve their origins).
pub fn endpoint_index(endpoints: &mut Vec<Endpoint>, url: &str) -> Result<usize> {
    endpoint_of(endpoints, url).map(|(i, _)| i)
}

/// Parses and resolves each request's URL; requests to the same address share an endpoint.
pub fn resolve(specs: &[RequestSpec]) -> Result<(Vec<Endpoint>, Vec<RequestTemplate>)> {
    let mut endpoints: Vec<Endpoint> = Vec::new();
    let mut requests = Vec::new();
    for spec in specs {
        let (endpoint, t) = endpoint_of(&mut endpoints, &spec.url)?;
        requests.push(RequestTemplate {
            name: spec.name.clone(),
            url: t.url,
            endpoint,
            method: spec.method.clone(),
            path: t.path,
            headers: spec.headers.clone(),
            body: spec.body.clone(),
        });
    }
    Ok((endpoints, requests))
}

/// A plan of `GET url` requests under `model` until `stop`, on `threads` generator threads:
/// what the probe and the capacity search run step by step.
pub fn plan_for_url(
    url: &str,
    model: Model,
    stop: Stop,
    timeout: Duration,
    threads: usize,
) -> Result<ValidPlan> {
    let spec = RequestSpec {
        name: url.to_string(),
        url: url.to_string(),
        method: "GET".into(),
        headers: Vec::new(),
        body: Vec::new(),
    };
    let (endpoints, requests) = resolve(std::slice::from_ref(&spec))?;
    let plan = Plan {
        endpoints,
        requests,
        model,
        stop,
        timeout,
        connect_timeout: DEFAULT_CONNECT_TIMEOUT.min(timeout),
        threads,
    };
    Ok(plan.check()?)
}

/// The plan's arrival spacing for the flag's value.
pub fn arrival(a: ArrivalArg) -> Arrival {
    match a {
        ArrivalArg::Uniform => Arrival::Uniform,
        ArrivalArg::Poisson => Arrival::Poisson,
    }
}

/// Turns `loadlab run` flags into a plan, resolving host names.
pub fn plan_from_args(a: &RunArgs) -> Result<ValidPlan> {
    let method = a.method.to_ascii_uppercase();
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        bail!("method {:?} is not an HTTP method", a.method);
    }
    let headers = a
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>>>()?;
    let body = match (&a.body, &a.body_file) {
        (Some(b), _) => b.clone().into_bytes(),
        (None, Some(f)) => std::fs::read(f)
            .with_context(|| format!("cannot read the body file {}", f.display()))?,
        (None, None) => Vec::new(),
    };

    let specs: Vec<RequestSpec> = a
        .urls
        .iter()
        .map(|url| RequestSpec {
            name: url.clone(),
            url: url.clone(),
            method: method.clone(),
            headers: headers.clone(),
            body: body.clone(),
        })
        .collect();
    let (endpoints, requests) = resolve(&specs)?;

    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let duration = match (a.duration, a.requests) {
        (None, None) => Some(DEFAULT_DURATION),
        (d, _) => d,
    };
    let model = match a.rate {
        None => Model::Closed {
            connections: a
                .connections
                .unwrap_or(DEFAULT_CONNECTIONS.max(endpoints.len())),
            pipeline: a.pipeline,
        },
        Some(rate) => {
            if a.pipeline > 1 {
                bail!("pipelining (-p) applies to the closed model only; drop -p or -R");
            }
            let connections = a.connections.unwrap_or(endpoints.len());
            // A constant rate lasts until the run stops; a ramp spans the run's duration.
            let phase = match (a.ramp_to, duration) {
                (Some(to), Some(d)) => RatePhase::ramp("main", rate, to, d),
                (Some(_), None) => bail!("--ramp-to needs a duration (-d) to ramp over"),
                (None, _) => RatePhase::constant("main", rate, None),
            };
            Model::Open {
                phases: vec![phase],
                arrival: arrival(a.arrival),
                seed: a.seed,
                arrivals: Arrivals::Requests {
                    connections,
                    max_connections: a
                        .max_connections
                        .unwrap_or(DEFAULT_MAX_CONNECTIONS.max(connections)),
                },
            }
        }
    };
    let plan = Plan {
        endpoints,
        requests,
        model,
        stop: Stop {
            duration,
            count: a.requests,
        },
        timeout: a.timeout,
        connect_timeout: a
            .connect_timeout
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT.min(a.timeout)),
        threads,
    };
    Ok(plan.check()?)
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
        let e = parse_target("not a url").err().unwrap().to_string();
        assert!(e.contains("is not a URL"), "{e}");
        let e = parse_target("https://127.0.0.1/")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("https is not supported"), "{e}");
        let e = parse_target("ftp://127.0.0.1/").err().unwrap().to_string();
        assert!(e.contains("unsupported scheme"), "{e}");
    }

    #[test]
    fn headers_need_a_name_and_a_colon() {
        assert_eq!(
            parse_header("X-Token:  abc ").unwrap(),
            ("X-Token".to_string(), "abc".to_string())
        );
        assert!(parse_header("no colon").is_err());
        assert!(parse_header(": empty").is_err());
    }
}
