//! Each endpoint's contract, against the service on 127.0.0.1: answers, statuses, one-line
//! refusals, pages and their resources, logins and atomic tickets (what the endpoints cost in
//! time is the system tier's: `tests/system/endpoints.rs`).

mod support;

use loadlab_service::{ServiceConfig, TestServer};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use support::get;

/// An answer read as bytes: status, header lines, body.
struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    /// The value of header `name` (any case), if present.
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Any request with `Connection: close`: `headers` are whole lines, `body` is sent as is.
fn request(addr: SocketAddr, method: &str, path: &str, headers: &[&str], body: &str) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for h in headers {
        req += &format!("{h}\r\n");
    }
    req += &format!("Content-Length: {}\r\n\r\n{body}", body.len());
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8(raw[..split].to_vec()).unwrap();
    Answer {
        status: head[9..12].parse().unwrap(),
        body: raw[split + 4..].to_vec(),
        head,
    }
}

/// Every `attr="..."` value in `html`.
fn attrs<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
    let needle = format!("{attr}=\"");
    html.split(needle.as_str())
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap())
        .collect()
}

/// Logs `user` in and returns the token.
fn login(addr: SocketAddr, user: &str) -> String {
    let body = serde_json::json!({ "user": user, "password": "secret" }).to_string();
    let a = request(
        addr,
        "POST",
        "/login",
        &["Content-Type: application/json"],
        &body,
    );
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("content-type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_slice(&a.body).unwrap();
    assert_eq!(v["user"], user);
    v["token"].as_str().unwrap().to_string()
}

#[test]
fn ping_health_and_unknown_paths() {
    let s = TestServer::start(1).unwrap();
    assert_eq!(get(s.addr, "/ping"), (200, "pong".into()));
    assert_eq!(get(s.addr, "/health").0, 200);
    let (status, body) = get(s.addr, "/nope");
    assert_eq!(status, 404);
    assert!(body.starts_with("no endpoint /nope"), "{body}");
}

#[test]
fn a_bad_parameter_is_a_400_with_a_one_line_reason() {
    let s = TestServer::start(1).unwrap();
    for path in [
        "/delay?ms=abc",
        "/delay",
        "/block?ms=-1",
        "/calc?n=x",
        "/heavy?ms=99999999",
        "/info?log=maybe",
    ] {
        let (status, body) = get(s.addr, path);
        assert_eq!(status, 400, "{path}");
        assert_eq!(body.trim_end().lines().count(), 1, "{path}: {body}");
    }
}

#[test]
fn calc_returns_the_sum_of_sines() {
    let s = TestServer::start(1).unwrap();
    let (status, body) = get(s.addr, "/calc?n=1000");
    assert_eq!(status, 200);
    let expected: f64 = (0..1000).map(|i| (i as f64).sin()).sum();
    assert!((body.parse::<f64>().unwrap() - expected).abs() < 1e-9);
}

#[test]
fn info_reports_the_answering_process() {
    let s = TestServer::start(1).unwrap();
    let (status, body) = get(s.addr, "/info");
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["pid"], std::process::id());
    assert!(v["cpus"].as_u64().unwrap() >= 1);
    // The process's facts, as seed 004's handler returned them.
    let exe = std::env::current_exe().unwrap();
    assert_eq!(v["exec_path"], exe.to_string_lossy().as_ref());
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(v["cwd"], cwd.to_string_lossy().as_ref());
    assert_eq!(v["argv"][0], std::env::args().next().unwrap());
    let loadavg = v["loadavg"].as_array().expect("three load averages");
    assert_eq!(loadavg.len(), 3);
    assert!(loadavg.iter().all(|l| l.as_f64().is_some_and(|l| l >= 0.0)));
    assert!(v["rss_kb"].as_u64().is_some_and(|r| r > 1000), "{v}");
}

#[test]
fn tickets_increase_atomically_under_concurrency() {
    let s = TestServer::start(2).unwrap();
    let addr = s.addr;
    let handles: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                (0..25)
                    .map(|_| {
                        let (status, body) = get(addr, "/turno/store-1");
                        assert_eq!(status, 200);
                        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                        v["turno"].as_u64().unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort();
    assert_eq!(
        all,
        (1..=200).collect::<Vec<_>>(),
        "every ticket exactly once"
    );
    assert_eq!(get(addr, "/turno/other").1, "{\"turno\":1}");
}

#[test]
fn a_site_page_is_html_with_four_static_resources() {
    let s = TestServer::start(1).unwrap();
    let a = request(s.addr, "GET", "/site/news", &[], "");
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type"), Some("text/html; charset=utf-8"));
    let html = a.text();
    assert!(html.starts_with("<!doctype html>"), "{html}");
    assert!(html.contains("<h1>news</h1>"), "{html}");
    let mut statics: Vec<&str> = attrs(&html, "href")
        .into_iter()
        .chain(attrs(&html, "src"))
        .filter(|u| u.starts_with("/static/"))
        .collect();
    statics.sort();
    assert_eq!(
        statics,
        [
            "/static/app.js",
            "/static/logo.png",
            "/static/news.png",
            "/static/site.css"
        ]
    );
    let links = attrs(&html, "href");
    for page in ["/site/home", "/site/news", "/site/about"] {
        assert!(links.contains(&page), "{page} in {links:?}");
    }
    // Every resource the page names is served.
    for url in statics {
        assert_eq!(request(s.addr, "GET", url, &[], "").status, 200, "{url}");
    }
}

#[test]
fn a_bad_page_name_is_a_404() {
    let s = TestServer::start(1).unwrap();
    let long = format!("/site/{}", "a".repeat(33));
    for path in [
        "/site/Home",
        "/site/a_b",
        "/site/a.html",
        "/site/%FF",
        long.as_str(),
        "/site/",
        "/site/a/b",
    ] {
        let (status, body) = get(s.addr, path);
        assert_eq!(status, 404, "{path}");
        assert_eq!(body.trim_end().lines().count(), 1, "{path}: {body}");
    }
}

#[test]
fn static_resources_have_their_content_type_and_are_cacheable() {
    let s = TestServer::start(1).unwrap();
    for (path, content_type) in [
        ("/static/site.css", "text/css"),
        ("/static/app.js", "text/javascript"),
        ("/static/logo.png", "image/png"),
        ("/static/about-2.png", "image/png"),
    ] {
        let a = request(s.addr, "GET", path, &[], "");
        assert_eq!(a.status, 200, "{path}");
        assert_eq!(a.header("content-type"), Some(content_type), "{path}");
        assert_eq!(a.header("cache-control"), Some("max-age=3600"), "{path}");
        assert!(
            (100..2000).contains(&a.body.len()),
            "{path}: {} bytes",
            a.body.len()
        );
    }
    let png = request(s.addr, "GET", "/static/logo.png", &[], "");
    assert!(png.body.starts_with(b"\x89PNG\r\n\x1a\n"));
}

#[test]
fn an_unknown_static_resource_is_a_404() {
    let s = TestServer::start(1).unwrap();
    for path in [
        "/static/site.html",
        "/static/site",
        "/static/.css",
        "/static/Site.css",
        "/static/a.b.css",
        "/static/..%2Fetc%2Fpasswd",
        "/static/",
    ] {
        let (status, body) = get(s.addr, path);
        assert_eq!(status, 404, "{path}");
        assert_eq!(body.trim_end().lines().count(), 1, "{path}: {body}");
    }
}

#[test]
fn login_issues_a_random_token_of_32_hex_digits() {
    let s = TestServer::start(1).unwrap();
    let token = login(s.addr, "ana");
    assert_eq!(token.len(), 32, "{token}");
    assert!(
        token
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "{token}"
    );
    assert_ne!(login(s.addr, "ana"), token, "a new token per login");
}

#[test]
fn the_account_of_a_token_is_its_user() {
    let s = TestServer::start(1).unwrap();
    let ana = login(s.addr, "ana");
    let bob = login(s.addr, "bob");
    for (token, user) in [(&ana, "ana"), (&bob, "bob")] {
        let auth = format!("Authorization: Bearer {token}");
        let a = request(s.addr, "GET", "/account", &[&auth], "");
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(a.header("content-type"), Some("application/json"));
        let v: serde_json::Value = serde_json::from_slice(&a.body).unwrap();
        assert_eq!(v, serde_json::json!({ "user": user }));
    }
}

#[test]
fn the_account_without_a_known_token_is_a_401() {
    let s = TestServer::start(1).unwrap();
    let token = login(s.addr, "ana");
    let made_up = "0123456789abcdef0123456789abcdef";
    let made_up_auth = format!("Authorization: Bearer {made_up}");
    let basic = format!("Authorization: Basic {token}");
    let no_scheme = format!("Authorization: {token}");
    for headers in [
        vec![made_up_auth.as_str()],
        vec![],
        vec![basic.as_str()],
        vec![no_scheme.as_str()],
        vec!["Authorization: Bearer "],
    ] {
        let a = request(s.addr, "GET", "/account", &headers, "");
        assert_eq!(a.status, 401, "{headers:?}");
        assert_eq!(
            a.text().trim_end().lines().count(),
            1,
            "{headers:?}: {}",
            a.text()
        );
    }
}

#[test]
fn a_bad_login_body_is_a_400_with_a_one_line_reason() {
    let s = TestServer::start(1).unwrap();
    for body in [
        "",
        "not json",
        "{\"user\": ",
        "{\"password\": \"x\"}",
        "{\"user\": 7}",
        "{\"user\": \"\"}",
        "[\"ana\"]",
    ] {
        let a = request(
            s.addr,
            "POST",
            "/login",
            &["Content-Type: application/json"],
            body,
        );
        assert_eq!(a.status, 400, "{body:?}: {}", a.text());
        assert_eq!(
            a.text().trim_end().lines().count(),
            1,
            "{body:?}: {}",
            a.text()
        );
    }
}

#[test]
fn page_views_are_counted_in_the_process_without_redis() {
    let config = ServiceConfig {
        visits: true,
        ..Default::default()
    };
    let s = TestServer::start_with(1, config).unwrap();
    for _ in 0..3 {
        assert_eq!(get(s.addr, "/site/home").0, 200);
    }
    assert_eq!(
        get(s.addr, "/visits/home").1,
        "{\"page\":\"home\",\"visits\":3}"
    );
    assert_eq!(
        get(s.addr, "/visits/news").1,
        "{\"page\":\"news\",\"visits\":0}"
    );
    assert_eq!(get(s.addr, "/visits/NO").0, 404);
}
