//! A virtual user's cookie jar and redirects, as Artillery's users have them: `Set-Cookie`
//! kept per user and sent back on its later requests (and not to other users), `cookie` on a
//! request, redirects followed on the same origin (303 as GET; one past 10 in a row, or past
//! `maxRedirects`, fails the user), not followed with `followRedirect: false` — checked on what
//! a recording server on 127.0.0.1 saw.

use crate::support::loadlab_json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// What the recording server saw of one request.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    method: String,
    path: String,
    cookie: Option<String>,
    body: String,
}

/// An HTTP/1.1 server on 127.0.0.1 that records every request and answers by path.
struct Recorder {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Recorder {
    fn start() -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let all = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let all = all.clone();
                std::thread::spawn(move || serve(stream, &all));
            }
        });
        Recorder { port, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Answers the requests of one connection until it closes.
fn serve(stream: TcpStream, seen: &Mutex<Vec<Seen>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let (mut length, mut cookie) = (0usize, None);
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                match k.to_ascii_lowercase().as_str() {
                    "content-length" => length = v.trim().parse().unwrap_or(0),
                    "cookie" => cookie = Some(v.trim().to_string()),
                    _ => {}
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        seen.lock().unwrap().push(Seen {
            method: method.clone(),
            path: path.clone(),
            cookie,
            body: String::from_utf8_lossy(&body).into_owned(),
        });
        let (status, extra) = match path.split('?').next().unwrap_or("") {
            // Each user logs in as itself: the cookie names it.
            "/login" => {
                let user = path.split("user=").nth(1).unwrap_or("x").to_string();
                (
                    "302 Found",
                    format!("Location: /home\r\nSet-Cookie: sid={user}; Path=/; HttpOnly\r\n"),
                )
            }
            "/form" => ("303 See Other", "Location: /done?from=form\r\n".into()),
            "/keep" => (
                "307 Temporary Redirect",
                "Location: /done?from=keep\r\n".into(),
            ),
            "/away" => (
                "302 Found",
                "Location: http://127.0.0.2:9/elsewhere\r\n".into(),
            ),
            "/circle" => ("302 Found", "Location: /circle\r\n".into()),
            _ => ("200 OK", String::new()),
        };
        let reply = format!("HTTP/1.1 {status}\r\n{extra}Content-Length: 2\r\n\r\nok");
        if out.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

fn run_script(dir: &Path, text: &str) -> serde_json::Value {
    let file = dir.join("s.yml");
    std::fs::write(&file, text).unwrap();
    loadlab_json(&["run", file.to_str().unwrap()]).0
}

#[test]
fn each_user_keeps_its_own_cookies_and_follows_redirects_on_its_origin() {
    let server = Recorder::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("users.csv"), "ana\nbob\ncid\n").unwrap();
    let s = run_script(
        dir.path(),
        &format!(
            "config:
  target: http://127.0.0.1:{}
  phases: [{{ duration: 1, arrivalCount: 3 }}]
  payload:
    path: users.csv
    fields: [user]
    order: sequence
scenarios:
  - flow:
      - get: {{ url: \"/login?user={{{{ user }}}}\" }}
      - get: {{ url: /account, cookie: {{ theme: dark }} }}
      - post: {{ url: /form, body: \"a=1\" }}
      - post: {{ url: /keep, body: \"b=2\" }}
      - get: {{ url: /away }}
      - get: {{ url: /login, followRedirect: false }}
",
            server.port
        ),
    );
    assert_eq!(s["users"]["completed"], 3, "{s:#}");
    let seen = server.seen();
    for user in ["ana", "bob", "cid"] {
        let login = format!("/login?user={user}");
        let sid = format!("sid={user}");
        // A user's requests: its login, then every request that carries its cookie (and no
        // other user's).
        let mine: Vec<&Seen> = seen
            .iter()
            .filter(|r| r.path == login || r.cookie.as_deref().is_some_and(|c| c.contains(&sid)))
            .collect();
        assert!(
            seen.iter()
                .filter(|r| r.cookie.as_deref().is_some_and(|c| c.contains(&sid)))
                .all(|r| !["ana", "bob", "cid"]
                    .iter()
                    .any(|o| *o != user
                        && r.cookie.as_deref().unwrap().contains(&format!("sid={o}")))),
            "{seen:#?}"
        );
        let paths: Vec<(&str, &str)> = mine
            .iter()
            .map(|r| (r.method.as_str(), r.path.as_str()))
            .collect();
        assert_eq!(
            paths,
            [
                ("GET", login.as_str()),
                // The redirect, followed with the cookie the 302 set.
                ("GET", "/home"),
                ("GET", "/account"),
                // 303: the next request is a GET without the body.
                ("POST", "/form"),
                ("GET", "/done?from=form"),
                // 307 keeps the method and the body.
                ("POST", "/keep"),
                ("POST", "/done?from=keep"),
                // Another origin: not followed.
                ("GET", "/away"),
                // followRedirect: false: the 302 is the answer.
                ("GET", "/login"),
            ],
            "{user}: {seen:#?}"
        );
        let sid = format!("sid={user}");
        assert_eq!(mine[0].cookie, None, "{user}");
        assert_eq!(mine[1].cookie.as_deref(), Some(sid.as_str()), "{user}");
        // The request's own cookie joins the jar's.
        let account = mine[2].cookie.clone().unwrap_or_default();
        assert!(
            account.contains(&sid) && account.contains("theme=dark"),
            "{user}: {account}"
        );
        assert_eq!(mine[4].body, "", "{user}");
        assert_eq!(mine[6].body, "b=2", "{user}");
    }
    assert!(!seen.iter().any(|r| r.path == "/elsewhere"));
}

#[test]
fn a_redirect_loop_fails_its_user_past_ten_hops_or_maxredirects() {
    // As Artillery 2.0.34 runs it against such a loop (measured): the request and 10
    // redirects go out, the 11th redirect fails the user with ERR_TOO_MANY_REDIRECTS.
    let server = Recorder::start();
    let dir = tempfile::tempdir().unwrap();
    let s = run_script(
        dir.path(),
        &format!(
            "config:\n  target: http://127.0.0.1:{}\nscenarios:\n  - flow:\n      - get: {{ url: /circle }}\n",
            server.port
        ),
    );
    assert_eq!(s["users"]["failed"], 1, "{s:#}");
    let failures = s["users"]["failures"].to_string();
    assert!(
        failures.contains("too many redirects (over 10)"),
        "{failures}"
    );
    let hops = server.seen().iter().filter(|r| r.path == "/circle").count();
    assert_eq!(hops, 11, "the request and 10 redirects");
    assert_eq!(s["status"]["302"], 11, "{s:#}");
    // `maxRedirects: 2`: the request and two redirects.
    let server = Recorder::start();
    let s = run_script(
        dir.path(),
        &format!(
            "config:\n  target: http://127.0.0.1:{}\nscenarios:\n  - flow:\n      - get: {{ url: /circle, maxRedirects: 2 }}\n",
            server.port
        ),
    );
    assert_eq!(s["users"]["failed"], 1, "{s:#}");
    let hops = server.seen().iter().filter(|r| r.path == "/circle").count();
    assert_eq!(hops, 3, "the request and 2 redirects");
}

#[test]
fn cookies_set_by_a_step_go_with_later_requests_only_once_a_response_set_one() {
    // Artillery 2.0.34 attaches a user's jar to every request only after a response set a
    // cookie (its using-cookies example sends `state` once, not on the next request).
    let server = Recorder::start();
    let dir = tempfile::tempdir().unwrap();
    let s = run_script(
        dir.path(),
        &format!(
            "config:\n  target: http://127.0.0.1:{}\n  phases: [{{ duration: 1, arrivalCount: 1 }}]\nscenarios:\n  - flow:\n      - post: {{ url: /set-state, cookie: {{ state: online }} }}\n      - get: {{ url: /state }}\n      - get: {{ url: \"/login?user=ana\", followRedirect: false }}\n      - get: {{ url: /after }}\n",
            server.port
        ),
    );
    assert_eq!(s["users"]["completed"], 1, "{}", s["users"]);
    let cookie = |path: &str| {
        server
            .seen()
            .into_iter()
            .find(|r| r.path == path)
            .unwrap_or_else(|| panic!("{path} not seen"))
            .cookie
    };
    assert_eq!(cookie("/set-state").as_deref(), Some("state=online"));
    assert_eq!(cookie("/state"), None, "no response has set a cookie yet");
    let after = cookie("/after").unwrap_or_default();
    assert!(
        after.contains("state=online") && after.contains("sid=ana"),
        "{after}"
    );
}
