//! The generated nginx configuration, checked by the real nginx.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use loadlab_lab::nginx::{disabled_a_server, prepare, start, NginxConfig};

#[test]
fn the_generated_config_passes_nginx_t() {
    let prefix = std::env::temp_dir().join(format!("loadlab-nginx-test-{}", std::process::id()));
    let config = NginxConfig {
        port: 18_181,
        upstreams: vec![18_182, 18_183],
        proxy_timeout: Duration::from_secs(60),
        keepalive: 64,
        connections: None,
        static_dir: None,
    };
    let result = prepare(&config, &prefix);
    let _ = std::fs::remove_dir_all(&prefix);
    let conf = result.expect("nginx -t accepts the configuration");
    assert!(conf.ends_with("nginx.conf"));
}

/// A replica that answers every request 400 ms after reading it, each on its own thread.
fn slow_replica() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut buf = [0u8; 4096];
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(400));
                    let body = "ok";
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// Sends one request on a new connection: its status line, or `None` when the connection
/// closed without an answer.
fn status_of_one_request(port: u16) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
        .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    text.lines()
        .next()
        .filter(|l| !l.is_empty())
        .map(String::from)
}

/// A port free on 127.0.0.1 a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// nginx in front of `upstreams`, with at most `connections` requests at once, listening on
/// its front port once this returns; its prefix directory named after `test`.
fn nginx_listening(
    test: &str,
    upstreams: Vec<u16>,
    connections: Option<usize>,
) -> (loadlab_lab::process::Supervised, u16, std::path::PathBuf) {
    let front = free_port();
    let prefix = std::env::temp_dir().join(format!("loadlab-nginx-{test}-{}", std::process::id()));
    let config = NginxConfig {
        port: front,
        upstreams,
        proxy_timeout: Duration::from_secs(10),
        keepalive: 4,
        connections,
        static_dir: None,
    };
    let conf = prepare(&config, &prefix).expect("nginx -t accepts the configuration");
    let nginx = start(&prefix, &conf, |_| Ok(())).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", front)).is_err() {
        assert!(Instant::now() < deadline, "nginx never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    (nginx, front, prefix)
}

#[test]
fn past_its_connections_nginx_closes_a_request_without_an_answer() {
    let replica = slow_replica();
    let (mut nginx, front, prefix) = nginx_listening("limit", vec![replica], Some(2));
    // Five requests at once on five connections: two are served, three are closed unanswered.
    let clients: Vec<_> = (0..5)
        .map(|_| std::thread::spawn(move || status_of_one_request(front)))
        .collect();
    let statuses: Vec<Option<String>> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    // Once they are done, the limit has room again.
    let after = status_of_one_request(front);
    nginx.stop(Duration::from_secs(2));
    let _ = std::fs::remove_dir_all(&prefix);
    let served = statuses
        .iter()
        .filter(|s| s.as_deref().is_some_and(|l| l.contains(" 200 ")))
        .count();
    let closed = statuses.iter().filter(|s| s.is_none()).count();
    assert_eq!((served, closed), (2, 3), "{statuses:?}");
    assert!(after.is_some_and(|l| l.contains(" 200 ")));
}

#[test]
fn nginx_says_in_its_log_when_it_takes_a_failed_replica_out_of_its_round() {
    let live = slow_replica();
    // A port nobody listens on: nginx's connect is refused, a failure of that server.
    let dead = free_port();
    let (mut nginx, front, prefix) = nginx_listening("disabled", vec![dead, live], None);
    let before = std::fs::read_to_string(prefix.join("error.log")).unwrap_or_default();
    // Round robin sends one of the two to the dead port; nginx then tries the live one.
    let statuses: Vec<_> = (0..2).map(|_| status_of_one_request(front)).collect();
    nginx.stop(Duration::from_secs(2));
    let log = std::fs::read_to_string(prefix.join("error.log")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&prefix);
    assert!(statuses
        .iter()
        .all(|s| s.as_deref().is_some_and(|l| l.contains(" 200 "))));
    assert!(!disabled_a_server(&before), "{before}");
    assert!(disabled_a_server(&log), "{log}");
}
