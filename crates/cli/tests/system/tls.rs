//! HTTPS and HTTP/2 against a real nginx on 127.0.0.1, on certificates the test makes: a
//! private CA, a leaf for localhost and 127.0.0.1, a leaf for another name and an expired leaf;
//! HTTP/2 over TLS (ALPN) and in the clear (h2c). Each test starts its own nginx and stops it
//! by its PID.

use crate::support::{loadlab, loadlab_json, loadlab_ok, read_json, Served};
use loadlab_lab::nginx::find_nginx;
use loadlab_lab::process::Supervised;
use rcgen::{date_time_ymd, BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde_json::Value;
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The ports of one nginx: each a server block of its own.
struct Ports {
    /// TLS with the leaf for localhost and 127.0.0.1.
    good: u16,
    /// TLS with a leaf for another name.
    other_name: u16,
    /// TLS with an expired leaf.
    expired: u16,
    /// Plain HTTP.
    plain: u16,
    /// TLS with the good leaf and HTTP/2; `/delay` goes to the upstream when there is one.
    h2: u16,
    /// HTTP/2 in the clear (h2c); a connection ends with a graceful GOAWAY after 50 requests,
    /// and `/reset` resets its stream.
    h2c: u16,
    /// TLS with a self-signed certificate (a CA, as `openssl req -x509` makes it) used as the
    /// server's own.
    self_signed: u16,
}

/// An nginx with its certificates, in a directory of its own; stopped when dropped.
struct Nginx {
    dir: tempfile::TempDir,
    ports: Ports,
    process: Supervised,
}

impl Nginx {
    /// The private CA's certificate, as `--cacert` takes it.
    fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A file in the test's directory.
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Stops nginx (by its PID) and returns the lines of its access log:
    /// `<$ssl_session_reused> <$ssl_protocol> <$connection> <$server_protocol> <$status>` for
    /// each request.
    fn stop_and_read_log(mut self) -> Vec<String> {
        self.process.stop(Duration::from_secs(5));
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// Writes a certificate and its key as PEM files `name.pem` and `name.key`.
fn write_pair(dir: &Path, name: &str, cert: &rcgen::Certificate, key: &KeyPair) {
    std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
    std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
}

/// Makes the CA and the leaves in `dir`: `ca.pem`, `good` (localhost and 127.0.0.1), `other` (another
/// name), `expired`, and the self-signed `selfsigned` and `stranger` (each `NAME.pem`, `NAME.key`).
pub(crate) fn make_certificates(dir: &Path) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "loadlab test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = |names: &[&str], name: &str, expired: bool| {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        if expired {
            params.not_before = date_time_ymd(2000, 1, 1);
            params.not_after = date_time_ymd(2001, 1, 1);
        }
        let cert = params.signed_by(&key, &issuer).unwrap();
        write_pair(dir, name, &cert, &key);
    };
    leaf(&["localhost", "127.0.0.1"], "good", false);
    leaf(&["other.invalid"], "other", false);
    leaf(&["localhost", "127.0.0.1"], "expired", true);
    // Self-signed certificates a server uses as its own, as `openssl req -x509 -subj
    // /CN=localhost -addext subjectAltName=IP:127.0.0.1` makes them: CA:TRUE, no separate CA.
    let self_signed = |name: &str| {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        let cert = params.self_signed(&key).unwrap();
        write_pair(dir, name, &cert, &key);
    };
    self_signed("selfsigned");
    self_signed("stranger");
}

/// Seven distinct ports nothing listens on now (the system's choice of free ones, held open
/// together so none is handed out twice).
fn free_ports() -> [u16; 7] {
    let listeners: Vec<TcpListener> = (0..7)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    std::array::from_fn(|i| listeners[i].local_addr().unwrap().port())
}

/// Starts nginx on seven free ports of 127.0.0.1 and waits until each accepts connections.
fn start_nginx() -> Nginx {
    start_nginx_proxying(None)
}

/// [`start_nginx`], with the HTTP/2 port's `/delay` proxied to `upstream` on 127.0.0.1.
fn start_nginx_proxying(upstream: Option<u16>) -> Nginx {
    let nginx = find_nginx().expect("nginx is installed (scripts/test.sh installs it)");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    make_certificates(p);
    std::fs::create_dir_all(p.join("tmp")).unwrap();
    let [good, other_name, expired, plain, h2, h2c, self_signed] = free_ports();
    let ports = Ports {
        good,
        other_name,
        expired,
        plain,
        h2,
        h2c,
        self_signed,
    };
    let delay = upstream.map_or(String::new(), |port| {
        format!("location /delay {{ proxy_pass http://127.0.0.1:{port}; }}")
    });
    let server = |port: u16, cert: &str| {
        format!(
            "    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {d}/{cert}.pem;
        ssl_certificate_key {d}/{cert}.key;
        location / {{ return 200 \"pong\\n\"; }}
    }}
",
            d = p.display()
        )
    };
    let conf = format!(
        "worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format tls '$ssl_session_reused $ssl_protocol $connection $server_protocol $status';
    access_log {d}/access.log tls;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    ssl_session_cache shared:tls:1m;
{good}{other}{expired}{self_signed}    server {{
        listen 127.0.0.1:{plain};
        location / {{ return 200 \"pong\\n\"; }}
    }}
    server {{
        listen 127.0.0.1:{h2} ssl http2;
        ssl_certificate {d}/good.pem;
        ssl_certificate_key {d}/good.key;
        {delay}
        location / {{ return 200 \"pong\\n\"; }}
    }}
    server {{
        listen 127.0.0.1:{h2c} http2;
        keepalive_requests 50;
        location /reset {{ return 444; }}
        location / {{ return 200 \"pong\\n\"; }}
    }}
}}
",
        d = p.display(),
        good = server(ports.good, "good"),
        other = server(ports.other_name, "other"),
        expired = server(ports.expired, "expired"),
        self_signed = server(ports.self_signed, "selfsigned"),
        plain = ports.plain,
        h2 = ports.h2,
        h2c = ports.h2c,
    );
    let conf_path = p.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let mut cmd = Command::new(nginx);
    cmd.arg("-p").arg(p).arg("-c").arg(&conf_path);
    let mut process = Supervised::spawn("nginx", cmd).expect("nginx starts");
    let deadline = Instant::now() + Duration::from_secs(10);
    for port in [good, other_name, expired, plain, h2, h2c, self_signed] {
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                process.exited().is_none(),
                "nginx exited: {}",
                process.stderr_tail()
            );
            assert!(Instant::now() < deadline, "nginx did not listen on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Nginx {
        dir,
        ports,
        process,
    }
}

/// Runs `loadlab run` with `args` and `--json` into the test's directory; the summary and
/// what it printed.
fn run(nginx: &Nginx, name: &str, args: &[&str]) -> (Value, String) {
    let json = nginx.path(&format!("{name}.json"));
    let mut all = vec!["run", "--json", json.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = loadlab(&all);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    // Exit code 4 says not one request reached the target (every handshake failed, say).
    let summary = read_json(&json);
    match out.status.code() {
        Some(0) => {}
        Some(4) => assert_eq!(summary["requests"]["ok"], 0, "{args:?}: {summary}"),
        code => panic!("{args:?} exited {code:?}: {stderr}"),
    }
    (summary, String::from_utf8_lossy(&out.stdout).to_string())
}

/// The summary's generator warnings, joined.
fn warnings(s: &Value) -> String {
    s["generator"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The access log's lines of HTTP/2 requests, split into their fields.
fn http2_lines(log: &[String]) -> Vec<Vec<&str>> {
    log.iter()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .filter(|f| f.len() == 5 && f[3] == "HTTP/2.0")
        .collect()
}

#[test]
fn https_succeeds_with_the_private_ca_and_fails_as_tls_unknown_issuer_without_it() {
    let _shared = crate::support::shared();
    let nginx = start_nginx();
    let url = format!("https://127.0.0.1:{}/", nginx.ports.good);
    let ca = nginx.ca();
    let (s, stdout) = run(
        &nginx,
        "with-ca",
        &[
            "-n",
            "20",
            "-c",
            "2",
            "-t",
            "1",
            "--cacert",
            ca.to_str().unwrap(),
            &url,
        ],
    );
    assert_eq!(s["requests"]["ok"], 20, "{s}");
    assert_eq!(s["errors"]["tls"], 0);
    assert_eq!(s["tls"]["verify"], true);
    assert_eq!(s["tls"]["cacert"], ca.to_str().unwrap());
    assert!(stdout.contains("certificates verified"), "{stdout}");
    assert!(stdout.contains("timings      connect"), "{stdout}");
    assert!(stdout.contains("  tls "), "{stdout}");

    let (s, stdout) = run(
        &nginx,
        "without-ca",
        &["-n", "4", "-c", "1", "-t", "1", &url],
    );
    assert_eq!(s["requests"]["ok"], 0, "{s}");
    assert_eq!(
        s["errors"]["tls"], 4,
        "every request failed its handshake: {s}"
    );
    assert!(s["tls"]["failures"]["unknown_issuer"].as_u64().unwrap() >= 1);
    let w = warnings(&s);
    assert!(
        w.contains(
            "tls: certificate signed by an unknown issuer (pass --cacert FILE, or --insecure)"
        ),
        "{w}"
    );
    assert!(stdout.contains("tls × 4"), "{stdout}");
    assert!(stdout.contains("unknown_issuer"), "{stdout}");
    let findings = s["findings"].to_string();
    assert!(findings.contains("unknown issuer"), "{findings}");
    let log = nginx.stop_and_read_log();
    assert_eq!(
        log.iter().filter(|l| l.ends_with(" 200")).count(),
        20,
        "only the run with the CA got answers: {log:?}"
    );
}

#[test]
fn insecure_skips_verification_and_says_so() {
    let _shared = crate::support::shared();
    let nginx = start_nginx();
    let url = format!("https://127.0.0.1:{}/", nginx.ports.other_name);
    let (s, stdout) = run(
        &nginx,
        "insecure",
        &["-n", "10", "-c", "1", "-t", "1", "--insecure", &url],
    );
    assert_eq!(s["requests"]["ok"], 10, "{s}");
    assert_eq!(s["tls"]["verify"], false);
    assert!(warnings(&s).contains("verification was off (--insecure)"));
    assert!(stdout.contains("NOT verified (--insecure)"), "{stdout}");
    assert!(stdout.contains("--insecure"), "{stdout}");
}

#[test]
fn a_wrong_name_an_expired_leaf_and_a_plain_port_fail_with_their_causes() {
    let _shared = crate::support::shared();
    let nginx = start_nginx();
    let ca = nginx.ca();
    let ca = ca.to_str().unwrap();
    let cases = [
        (
            nginx.ports.other_name,
            "name_mismatch",
            "not valid for the URL's host name",
        ),
        (nginx.ports.expired, "expired", "certificate expired"),
        (nginx.ports.plain, "not_tls", "did not answer in TLS"),
    ];
    for (port, cause, words) in cases {
        let url = format!("https://127.0.0.1:{port}/");
        let (s, _) = run(
            &nginx,
            cause,
            &["-n", "2", "-c", "1", "-t", "1", "--cacert", ca, &url],
        );
        assert_eq!(s["errors"]["tls"], 2, "{cause}: {s}");
        assert!(
            s["tls"]["failures"][cause].as_u64().unwrap_or(0) >= 1,
            "{cause}: {}",
            s["tls"]
        );
        assert!(warnings(&s).contains(words), "{cause}: {}", warnings(&s));
    }
    // A host name rather than an address: SNI and the check use the URL's host. Only where
    // localhost resolves to the IPv4 loopback nginx listens on.
    let v4 = ("localhost", 0u16)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|a| a.ip() == std::net::Ipv4Addr::LOCALHOST);
    if v4 {
        let url = format!("https://localhost:{}/", nginx.ports.good);
        let (s, _) = run(
            &nginx,
            "localhost",
            &["-n", "2", "-c", "1", "-t", "1", "--cacert", ca, &url],
        );
        assert_eq!(s["requests"]["ok"], 2, "{s}");
    }
}

#[test]
fn closed_and_open_models_run_over_https_with_a_time_breakdown() {
    let _shared = crate::support::shared();
    let nginx = start_nginx();
    let url = format!("https://127.0.0.1:{}/", nginx.ports.good);
    let ca = nginx.ca();
    let ca = ca.to_str().unwrap();
    let (closed, _) = run(
        &nginx,
        "closed",
        &["-c", "4", "-d", "1s", "-t", "1", "--cacert", ca, &url],
    );
    assert_eq!(closed["model"], "closed");
    let ok = closed["requests"]["ok"].as_u64().unwrap();
    assert!(ok > 10, "{closed}");
    assert_eq!(closed["requests"]["errors"], 0, "{closed}");
    let t = &closed["timings_ms"];
    assert!(t["waiting"]["p50"].as_f64().unwrap() > 0.0, "{t}");
    assert!(
        t["waiting"]["max"].as_f64().unwrap()
            <= closed["service_latency_ms"]["max"].as_f64().unwrap() + 0.01
    );
    assert_eq!(
        t["connect"]["p50"], 0.0,
        "kept-alive connections open no new ones: {t}"
    );
    assert_eq!(t["tls"]["p50"], 0.0, "{t}");

    let (open, _) = run(
        &nginx,
        "open",
        &[
            "-R", "100", "-d", "1s", "-c", "2", "-t", "1", "--cacert", ca, &url,
        ],
    );
    assert_eq!(open["model"], "open");
    let ok = open["requests"]["ok"].as_u64().unwrap();
    assert!(
        (80..=101).contains(&ok),
        "about 100 arrivals in a second: {open}"
    );
    assert_eq!(open["requests"]["errors"], 0, "{open}");
    let log = nginx.stop_and_read_log();
    let answered = log.iter().filter(|l| l.ends_with(" 200")).count() as u64;
    let counted = |field: &str| {
        closed["requests"][field].as_u64().unwrap() + open["requests"][field].as_u64().unwrap()
    };
    // Requests still in flight when a run stopped were answered but not counted.
    assert!(
        (counted("ok")..=counted("sent")).contains(&answered),
        "nginx answered every request loadlab counted ({answered}): {closed} {open}"
    );
    assert!(log.iter().all(|l| l.contains("TLS")), "{log:?}");
}

#[test]
fn reconnects_resume_their_tls_sessions_and_time_their_handshakes() {
    let _shared = crate::support::shared();
    let nginx = start_nginx();
    let url = format!("https://127.0.0.1:{}/", nginx.ports.good);
    let ca = nginx.ca();
    // The server closes each connection after its answer: every request reconnects.
    let (s, stdout) = run(
        &nginx,
        "resume",
        &[
            "-n",
            "30",
            "-c",
            "1",
            "-t",
            "1",
            "--no-keepalive",
            "--cacert",
            ca.to_str().unwrap(),
            &url,
        ],
    );
    assert_eq!(s["requests"]["ok"], 30, "{s}");
    let t = &s["timings_ms"];
    // The first request goes on the connection opened before the load.
    assert!(t["new_connections"].as_u64().unwrap() >= 29, "{t}");
    assert!(t["connect"]["p50"].as_f64().unwrap() > 0.0, "{t}");
    assert!(t["tls"]["p50"].as_f64().unwrap() > 0.0, "{t}");
    assert!(stdout.contains("new connections"), "{stdout}");
    let log = nginx.stop_and_read_log();
    assert_eq!(log.len(), 30, "{log:?}");
    let resumed = log.iter().filter(|l| l.starts_with("r ")).count();
    // Only the connection opened before the load makes a full handshake.
    assert!(
        resumed >= 28,
        "reconnects resume their sessions ({resumed} of 30 did): {log:?}"
    );
}

#[test]
fn scenarios_reach_https_as_arrivals_sessions_and_users_phases() {
    let _shared = crate::support::shared();
    let nginx = start_nginx();
    let target = format!("https://127.0.0.1:{}", nginx.ports.good);
    // Two steps: virtual users with connections of their own.
    let users = nginx.path("users.yaml");
    std::fs::write(
        &users,
        format!(
            "config:\n  target: \"{target}\"\n  tls:\n    cacert: ca.pem\n  phases:\n    - {{ duration: 1, arrivalRate: 10 }}\nscenarios:\n  - flow:\n      - get: {{ url: \"/a\" }}\n      - get: {{ url: \"/b\" }}\n"
        ),
    )
    .unwrap();
    let (s, _) = run(&nginx, "users", &[users.to_str().unwrap(), "-t", "1"]);
    assert!(s["users"]["completed"].as_u64().unwrap() >= 8, "{s}");
    assert_eq!(s["requests"]["errors"], 0, "{s}");
    assert_eq!(s["tls"]["verify"], true);
    // Artillery's spelling of --insecure, with one plain request per arrival.
    let plain = nginx.path("plain.yaml");
    std::fs::write(
        &plain,
        format!(
            "config:\n  target: \"{target}\"\n  tls:\n    rejectUnauthorized: false\n  phases:\n    - {{ duration: 1, arrivalRate: 10 }}\nscenarios:\n  - flow:\n      - get: {{ url: \"/x\" }}\n"
        ),
    )
    .unwrap();
    let (s, _) = run(&nginx, "plain", &[plain.to_str().unwrap(), "-t", "1"]);
    assert!(s["requests"]["ok"].as_u64().unwrap() >= 8, "{s}");
    assert_eq!(s["tls"]["verify"], false);
    // Users phases (the closed model with virtual users), verification from the flag.
    let closed = nginx.path("closed.yaml");
    std::fs::write(
        &closed,
        format!(
            "config:\n  target: \"{target}\"\n  phases:\n    - {{ duration: 1, users: 2 }}\nscenarios:\n  - flow:\n      - get: {{ url: \"/a\" }}\n      - think: 0.05\n"
        ),
    )
    .unwrap();
    let ca = nginx.ca();
    let (s, _) = run(
        &nginx,
        "closed",
        &[
            closed.to_str().unwrap(),
            "-t",
            "1",
            "--cacert",
            ca.to_str().unwrap(),
        ],
    );
    assert_eq!(s["model"], "closed");
    assert!(s["requests"]["ok"].as_u64().unwrap() >= 10, "{s}");
    assert_eq!(s["requests"]["errors"], 0, "{s}");
    assert_eq!(s["tls"]["verify"], true);
    let out = loadlab_ok(&["run", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("--cacert") && help.contains("--insecure"),
        "{help}"
    );
}

#[test]
fn http2_multiplexes_streams_on_few_connections_over_tls_and_in_the_clear() {
    let _shared = crate::support::shared();
    let mut service = Served::start(&[]);
    let nginx = start_nginx_proxying(Some(service.port));
    let ca = nginx.ca();
    // Closed model over TLS: 2 connections × 8 streams keep 16 requests of 50 ms in flight.
    // Without multiplexing, two connections could not pass 40 req/s.
    let url = format!("https://localhost:{}/delay?ms=50", nginx.ports.h2);
    let (closed, stdout) = run(
        &nginx,
        "h2-closed",
        &[
            &url,
            "--http2",
            "--streams",
            "8",
            "-c",
            "2",
            "-d",
            "2s",
            "-t",
            "1",
            "--cacert",
            ca.to_str().unwrap(),
        ],
    );
    assert_eq!(closed["requests"]["errors"], 0, "{closed}");
    let rps = closed["throughput"]["rps"].as_f64().unwrap();
    assert!(rps > 100.0, "16 streams of 50 ms go at once: {rps} req/s");
    assert_eq!(closed["http2"]["streams"], 8, "{closed}");
    assert_eq!(closed["http2"]["cleartext"], false, "{closed}");
    assert_eq!(closed["http2"]["connections"], 2, "{closed}");
    assert!(
        stdout.contains("h2 (TLS ALPN), up to 8 stream(s)"),
        "{stdout}"
    );
    // Open model in the clear; nginx ends each connection after 50 requests with a graceful
    // GOAWAY, which costs no request.
    let url = format!("http://127.0.0.1:{}/", nginx.ports.h2c);
    let (open, _) = run(
        &nginx,
        "h2c-open",
        &[
            &url,
            "--http2",
            "--streams",
            "4",
            "-R",
            "200",
            "-d",
            "1s",
            "-t",
            "1",
        ],
    );
    let ok = open["requests"]["ok"].as_u64().unwrap();
    assert!((150..=201).contains(&ok), "about 200 arrivals: {open}");
    assert_eq!(open["requests"]["errors"], 0, "{open}");
    assert_eq!(open["http2"]["cleartext"], true, "{open}");
    let reconnected = open["http2"]["connections"].as_u64().unwrap();
    assert!(
        reconnected >= ok / 50,
        "a connection per 50 requests: {open}"
    );
    service.interrupt();
    let log = nginx.stop_and_read_log();
    let h2 = http2_lines(&log);
    let over_tls: Vec<_> = h2.iter().filter(|f| f[1].starts_with("TLS")).collect();
    let in_clear: Vec<_> = h2.iter().filter(|f| f[1] == "-").collect();
    let answered = closed["requests"]["ok"].as_u64().unwrap() as usize;
    assert!(
        over_tls.len() >= answered,
        "{} of {answered}",
        over_tls.len()
    );
    let connections: std::collections::BTreeSet<&str> = over_tls.iter().map(|f| f[2]).collect();
    assert_eq!(
        connections.len(),
        2,
        "nginx saw 2 connections for 16 requests in flight: {connections:?}"
    );
    assert!(in_clear.len() as u64 >= ok, "{} h2c lines", in_clear.len());
    assert!(
        log.len() == h2.len(),
        "every request went over HTTP/2: {log:?}"
    );
}

#[test]
fn http2_failures_count_as_their_own_kinds_with_what_to_do() {
    let _shared = crate::support::shared();
    let nginx = start_nginx();
    // A stream the server resets (nginx's 444 over HTTP/2) is a stream_reset; the connection
    // goes on.
    let url = format!("http://127.0.0.1:{}/reset", nginx.ports.h2c);
    let (s, stdout) = run(
        &nginx,
        "reset",
        &[
            &url,
            "--http2",
            "--streams",
            "4",
            "-c",
            "1",
            "-n",
            "20",
            "-t",
            "1",
        ],
    );
    assert_eq!(s["errors"]["stream_reset"], 20, "{s}");
    assert_eq!(s["http2"]["connections"], 1, "{s}");
    assert!(stdout.contains("stream_reset × 20"), "{stdout}");
    assert!(s["findings"].to_string().contains("RST_STREAM"), "{s}");
    // A TLS server without HTTP/2 refuses ALPN h2: a tls failure, no_h2.
    let url = format!("https://localhost:{}/", nginx.ports.good);
    let ca = nginx.ca();
    let (s, _) = run(
        &nginx,
        "no-h2",
        &[
            &url,
            "--http2",
            "-c",
            "1",
            "-n",
            "3",
            "-t",
            "1",
            "--cacert",
            ca.to_str().unwrap(),
        ],
    );
    assert_eq!(s["errors"]["tls"], 3, "{s}");
    assert!(s["tls"]["failures"]["no_h2"].as_u64().unwrap() >= 1, "{s}");
    assert!(warnings(&s).contains("did not offer HTTP/2"), "{s}");
    // Prior knowledge against an HTTP/1.1 port: protocol errors, and the finding says h2c.
    let url = format!("http://127.0.0.1:{}/", nginx.ports.plain);
    let (s, _) = run(
        &nginx,
        "no-h2c",
        &[&url, "--http2", "-c", "1", "-n", "3", "-t", "1"],
    );
    assert_eq!(s["errors"]["protocol"], 3, "{s}");
    assert!(s["findings"].to_string().contains("h2c"), "{s}");
    // --streams is HTTP/2's (refused on an HTTP/1.1 URL once the URLs are read, since a gRPC
    // URL takes it alone); pipelining is HTTP/1.1's.
    let out = loadlab(&["run", &url, "--streams", "4", "-n", "1"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("add --http2"),
        "{out:?}"
    );
    let out = loadlab(&["run", &url, "--http2", "-p", "4", "-n", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--streams"), "{stderr}");
}

#[test]
fn virtual_users_share_http2_connections_from_a_scenario() {
    let _shared = crate::support::shared();
    let nginx = start_nginx();
    let target = format!("https://localhost:{}", nginx.ports.h2);
    let file = nginx.path("h2-users.yaml");
    std::fs::write(
        &file,
        format!(
            "config:\n  target: \"{target}\"\n  http:\n    http2: true\n    streams: 4\n  tls:\n    cacert: ca.pem\n  phases:\n    - {{ duration: 1, users: 4 }}\nscenarios:\n  - flow:\n      - get: {{ url: \"/a\" }}\n      - post: {{ url: \"/b\", json: {{ n: 1 }} }}\n      - think: 0.05\n"
        ),
    )
    .unwrap();
    let (s, _) = run(&nginx, "h2-users", &[file.to_str().unwrap(), "-t", "1"]);
    assert!(s["requests"]["ok"].as_u64().unwrap() >= 20, "{s}");
    assert_eq!(s["requests"]["errors"], 0, "{s}");
    assert_eq!(s["http2"]["streams"], 4, "{s}");
    // Four users, one connection's four streams.
    assert_eq!(s["http2"]["connections"], 1, "{s}");
    let log = nginx.stop_and_read_log();
    let h2 = http2_lines(&log);
    assert_eq!(h2.len(), log.len(), "{log:?}");
    assert!(h2.iter().all(|f| f[4] == "200"), "{log:?}");
}

#[test]
fn probe_and_capacity_reach_https_and_http2_targets() {
    let _shared = crate::support::shared();
    let mut service = Served::start(&[]);
    let nginx = start_nginx_proxying(Some(service.port));
    let ca = nginx.ca();
    let url = format!("https://localhost:{}/delay?ms=5", nginx.ports.h2);
    let (probe, _) = loadlab_json(&[
        "probe",
        &url,
        "--http2",
        "--cacert",
        ca.to_str().unwrap(),
        "--max-time",
        "4s",
        "--max-concurrency",
        "4",
    ]);
    let steps = probe["steps"].as_array().unwrap();
    assert!(!steps.is_empty(), "{probe}");
    assert!(
        steps
            .iter()
            .all(|s| s["error_pct"] == 0.0 && s["requests"].as_u64() > Some(0)),
        "{probe}"
    );
    // Without the CA the one request capacity starts with fails, and it says so.
    let out = loadlab(&["capacity", &url, "--slo", "p99<100ms", "--max-time", "5s"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("did not answer one request"), "{stderr}");
    // With --insecure it searches: the one request is answered and rates are tried.
    let out = loadlab(&[
        "capacity",
        &url,
        "--slo",
        "p99<100ms",
        "--insecure",
        "--max-time",
        "4s",
        "--warmup",
        "1s",
        "--step",
        "1s",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("rate/s"), "{stdout}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("did not answer"));
    let out = loadlab(&["probe", &url, "--http2", "--streams", "4"]);
    assert!(!out.status.success());
    service.interrupt();
    let log = nginx.stop_and_read_log();
    assert!(!http2_lines(&log).is_empty(), "{log:?}");
}

#[test]
fn a_self_signed_server_certificate_given_with_cacert_is_trusted_and_no_other() {
    let _shared = crate::support::shared();
    let nginx = start_nginx();
    let url = format!("https://127.0.0.1:{}/", nginx.ports.self_signed);
    let own = nginx.path("selfsigned.pem");
    let (s, _) = run(
        &nginx,
        "own",
        &[
            "-n",
            "4",
            "-c",
            "1",
            "-t",
            "1",
            "--cacert",
            own.to_str().unwrap(),
            &url,
        ],
    );
    assert_eq!(s["requests"]["ok"], 4, "{s:#}");
    // Another self-signed certificate, or the test CA, does not vouch for it.
    for other in ["stranger.pem", "ca.pem"] {
        let file = nginx.path(other);
        let (s, _) = run(
            &nginx,
            other,
            &[
                "-n",
                "2",
                "-c",
                "1",
                "-t",
                "1",
                "--cacert",
                file.to_str().unwrap(),
                &url,
            ],
        );
        assert_eq!(s["requests"]["ok"], 0, "{other}: {s:#}");
        assert!(
            s["tls"]["failures"]
                .as_object()
                .is_some_and(|f| !f.is_empty()),
            "{other}: {s:#}"
        );
    }
}
