//! Artillery scripts as their users write them (environments, `--config`, plugins, no phases,
//! `defaults`, `log` steps, the expect plugin's checks): validated offline and run against the
//! real reference service on 127.0.0.1.

use crate::support::{loadlab, loadlab_json, write_file};
use loadlab_service::TestServer;
use serde_json::Value;

/// Runs `args` (a scenario and its flags) against `server` and returns the summary and stderr.
fn run(args: &[&str], server: &TestServer) -> (Value, String) {
    let target = server.url("");
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend(["--target", &target]);
    let (summary, out) = loadlab_json(&all);
    (summary, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The expect plugin's checks, with the results Artillery 2.0.34 gives against the reference
/// service (measured with `artillery run` on this script: 5 ok, 5 failed, exit code 21),
/// including its quirks: Node keys headers in lower case, `contentType` other than `json` is
/// compared whole, and `matchesRegexp` reads a JSON body as `[object Object]`.
const CHECKS: &str = r#"
scenarios:
  - flow:
      - post:
          url: /login
          json: { user: ann }
          expect:
            - statusCode: 200
            - contentType: json
            - hasHeader: Content-Type
            - matchesRegexp: token
            - matchesRegexp: "object Object"
            - notStatusCode: 200
      - get:
          url: /ping
          expect:
            - contentType: text/plain
            - matchesRegexp: "^pong"
            - hasProperty: x
            - headerEquals: [content-type, "text/plain; charset=utf-8"]
      - get: { url: /ping, name: after }
"#;

/// A one-shot HTTP server on 127.0.0.1 that answers 200 to each request and hands back the
/// requests it read (headers and body, by Content-Length).
fn recording_server(requests: usize) -> (String, std::thread::JoinHandle<Vec<Vec<u8>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream;
        for _ in 0..requests {
            let mut head = Vec::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                head.extend_from_slice(line.as_bytes());
                if line == "\r\n" || line.is_empty() {
                    break;
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            head.extend_from_slice(&body);
            seen.push(head);
            writer
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .unwrap();
        }
        seen
    });
    (url, handle)
}

#[test]
fn validate_needs_no_network_and_shows_what_it_accepted_and_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(
        dir.path(),
        "s.yml",
        "version: 1\nconfig:\n  target: http://asciiart.artillery.invalid:8080\n  plugins:\n    hello-world: { greeting: hi }\n    ensure: { maxErrorRate: 1 }\n  apdex: { threshold: 100 }\nscenarios:\n  - flow:\n      - get: { url: /dino, expect: { statusCode: 200, contentType: json } }\n",
    );
    let out = loadlab(&["validate", file.to_str().unwrap()]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("no phases: one user"), "{stdout}");
    assert!(stdout.contains("apdex threshold 100 ms"), "{stdout}");
    assert!(
        stdout.contains("ensure (exit code 1 when one fails, as Artillery's): errors<=1%"),
        "{stdout}"
    );
    assert!(
        stdout.contains("expect contentType, statusCode"),
        "{stdout}"
    );
    assert!(
        stderr.contains("warning: config.plugins.hello-world: loadlab does not run this plugin"),
        "{stderr}"
    );
    let strict = loadlab(&["validate", "--strict", file.to_str().unwrap()]);
    assert!(!strict.status.success());
    assert!(String::from_utf8_lossy(&strict.stderr).contains("config.plugins.hello-world"));
}

#[test]
fn a_file_of_scenarios_runs_with_config_from_config_and_an_environment() {
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_file(
        dir.path(),
        "common.yml",
        "config:\n  target: http://127.0.0.1:9\n  phases: [{ duration: 1, arrivalRate: 1 }]\n  environments:\n    local:\n      phases: [{ duration: 2, arrivalCount: 6 }]\n  plugins:\n    metrics-by-endpoint: {}\n",
    );
    let scenarios = write_file(
        dir.path(),
        "dino.yml",
        "scenarios:\n  - name: dino\n    flow:\n      - get: { url: /ping, name: ping, expect: { statusCode: 200 } }\n",
    );
    let (s, _) = run(
        &[
            scenarios.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            "-e",
            "local",
        ],
        &server,
    );
    // The environment's 6 arrivals over 2 s, not config's 1 per second.
    assert_eq!(s["requests"]["completed"], 6, "{s}");
    assert_eq!(s["phases"][0]["offered_rps"], 3.0, "{s}");
}

#[test]
fn the_expect_plugins_checks_log_steps_and_default_headers_run_in_each_session() {
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // No phases: one user, as Artillery runs it.
    let file = write_file(
        dir.path(),
        "s.yml",
        r#"config:
  target: http://127.0.0.1:9
  variables:
    who: ann
  defaults:
    headers:
      x-from: loadlab
scenarios:
  - flow:
      - post:
          url: /login
          json: { user: "{{ who }}" }
          capture: { json: $.token, as: token }
          expect:
            - statusCode: 200
            - hasProperty: token
            - notHasProperty: error
            - equals: ["{{ who }}", ann]
      - log: "logged in as {{ who }}"
      - get:
          url: /account
          headers: { Authorization: "Bearer {{ token }}" }
          match: { json: $.user, value: "{{ who }}" }
          expect:
            - hasProperty: user
            - matchesRegexp: '"user":\s*"ann"'
            - headerEquals: [content-type, application/json]
            - hasHeader: content-length
"#,
    );
    let (s, stderr) = run(&[file.to_str().unwrap()], &server);
    assert_eq!(s["users"]["completed"], 1, "{}", s["users"]);
    assert_eq!(s["users"]["failed"], 0, "{}", s["users"]);
    assert!(stderr.contains("logged in as ann"), "{stderr}");

    // A check that fails is counted and the session goes on, as under Artillery's plugin;
    // without the plugin named, the exit code stays 0.
    let failing = write_file(
        dir.path(),
        "f.yml",
        "config:\n  target: http://127.0.0.1:9\nscenarios:\n  - flow:\n      - post:\n          url: /login\n          json: { user: bo }\n          expect: { notHasProperty: token }\n  - flow:\n      - post:\n          url: /login\n          json: { user: bo }\n          match: { json: $.user, value: al }\n",
    );
    let (s, _) = run(&[failing.to_str().unwrap()], &server);
    assert_eq!(s["users"]["failed"], 0, "{}", s["users"]);
    assert_eq!(
        s["users"]["checks_failed"]["expect notHasProperty on POST /login"], 1,
        "{}",
        s["users"]
    );
    assert_eq!(
        s["users"]["metrics"]["counters"]["plugins.expect.failed"], 1.0,
        "{}",
        s["users"]
    );
}

#[test]
fn the_expect_plugin_counts_checks_as_artillery_does_and_sets_exit_code_21() {
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = server.url("");
    let run_with = |plugin: &str| {
        let file = write_file(
            dir.path(),
            "checks.yml",
            &format!("config:\n  target: http://127.0.0.1:9\n{plugin}{CHECKS}"),
        );
        let json = dir.path().join("summary.json");
        let out = loadlab(&[
            "run",
            file.to_str().unwrap(),
            "--target",
            &target,
            "--json",
            json.to_str().unwrap(),
        ]);
        (crate::support::read_json(&json), out)
    };
    let counter = |s: &Value, name: &str| s["users"]["metrics"]["counters"][name].clone();

    let (s, out) = run_with("  plugins: { expect: {} }\n");
    assert_eq!(out.status.code(), Some(21), "{out:?}");
    assert_eq!(s["users"]["completed"], 1, "{}", s["users"]);
    assert_eq!(
        s["requests"]["completed"], 3,
        "the user went on past failed checks"
    );
    assert_eq!(counter(&s, "plugins.expect.ok"), 5.0, "{}", s["users"]);
    assert_eq!(counter(&s, "plugins.expect.failed"), 5.0, "{}", s["users"]);
    for (name, n) in [
        ("plugins.expect.ok.matchesRegexp", 2.0),
        ("plugins.expect.ok.header content-type values equals", 1.0),
        ("plugins.expect.failed.hasHeader", 1.0),
        ("plugins.expect.failed.contentType", 1.0),
        ("plugins.expect.failed.notStatusCode", 1.0),
    ] {
        assert_eq!(counter(&s, name), n, "{name}: {}", s["users"]);
    }
    assert_eq!(
        s["users"]["checks_failed"]["expect hasProperty on GET /ping"], 1,
        "{}",
        s["users"]
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("5 check(s) failed (config.plugins.expect)"),
        "{out:?}"
    );

    // reportFailuresAsErrors: the first request's failures end the user there.
    let (s, out) = run_with("  plugins: { expect: { reportFailuresAsErrors: true } }\n");
    assert_eq!(out.status.code(), Some(21), "{out:?}");
    assert_eq!(s["requests"]["completed"], 1, "{s}");
    assert_eq!(s["users"]["failed"], 1, "{}", s["users"]);
    assert_eq!(
        s["users"]["failures"]["expect hasHeader on POST /login"], 1,
        "{}",
        s["users"]
    );
    assert_eq!(counter(&s, "plugins.expect.failed"), 3.0, "{}", s["users"]);

    // Without the plugin named, Artillery checks nothing: loadlab counts, the exit code is 0.
    let (s, out) = run_with("");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(counter(&s, "plugins.expect.failed"), 5.0, "{}", s["users"]);
}

#[test]
fn form_data_sends_a_multipart_body_with_the_file_a_template_names() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("files")).unwrap();
    std::fs::write(dir.path().join("files/a.bin"), b"\x00\x01binary\xff").unwrap();
    let file = write_file(
        dir.path(),
        "up.yml",
        "config:\n  target: http://127.0.0.1:9\n  variables: { name: [a.bin] }\nscenarios:\n  - flow:\n      - post:\n          url: /upload\n          formData:\n            note: \"for {{ name }}\"\n            document: { fromFile: \"./files/{{ name }}\" }\n",
    );
    let (url, server) = recording_server(1);
    let (s, _) = loadlab_json(&["run", file.to_str().unwrap(), "--target", &url]);
    assert_eq!(s["users"]["completed"], 1, "{}", s["users"]);
    let request = server.join().unwrap();
    let text = String::from_utf8_lossy(&request[0]).into_owned();
    let boundary = text
        .split("multipart/form-data; boundary=")
        .nth(1)
        .and_then(|rest| rest.split("\r\n").next())
        .unwrap_or_else(|| panic!("{text}"))
        .to_string();
    assert!(
        text.contains("Content-Disposition: form-data; name=\"note\"\r\n\r\nfor a.bin\r\n"),
        "{text}"
    );
    assert!(
        text.contains("name=\"document\"; filename=\"a.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n"),
        "{text}"
    );
    let bytes = &request[0];
    let at = bytes
        .windows(8)
        .position(|w| w == b"\x00\x01binary")
        .unwrap();
    assert_eq!(&bytes[at..at + 9], b"\x00\x01binary\xff");
    assert!(text.ends_with(&format!("--{boundary}--\r\n")), "{text}");

    // A file that is not there fails the session, naming it.
    let missing = write_file(
        dir.path(),
        "missing.yml",
        "config:\n  target: http://127.0.0.1:9\nscenarios:\n  - flow:\n      - post: { url: /upload, formData: { d: { fromFile: ./files/none.bin } } }\n",
    );
    let (s, _) = loadlab_json(&["run", missing.to_str().unwrap(), "--target", &url]);
    assert_eq!(s["users"]["failed"], 1, "{}", s["users"]);
    assert!(
        s["users"]["failures"].to_string().contains("none.bin"),
        "{}",
        s["users"]
    );
}

#[test]
fn a_table_of_urls_and_codes_loops_over_each_row_checking_its_code() {
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "table.csv",
        "/ping,200\n/health,200\n/nowhere,404\n",
    );
    let file = write_file(
        dir.path(),
        "t.yml",
        "config:\n  target: http://127.0.0.1:9\n  payload:\n    - path: table.csv\n      fields: [url, code]\n      loadAll: true\n      name: rows\nscenarios:\n  - flow:\n      - loop:\n          - get:\n              url: \"{{ $loopElement.url }}\"\n              name: row\n              expect: { statusCode: \"{{ $loopElement.code }}\" }\n          - log: \"row {{ $loopCount }} {{ $loopElement.url }}\"\n        over: rows\n",
    );
    let (s, stderr) = run(&[file.to_str().unwrap()], &server);
    assert_eq!(s["users"]["completed"], 1, "{}", s["users"]);
    assert_eq!(s["users"]["failed"], 0, "{}", s["users"]);
    assert_eq!(s["requests"]["completed"], 3, "{s}");
    assert_eq!(s["status"]["404"], 1, "{s}");
    // $loopCount counts from 0, as in Artillery.
    assert!(stderr.contains("row 2 /nowhere"), "{stderr}");
}

#[test]
fn the_apdex_plugin_scores_the_run_against_its_threshold() {
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(
        dir.path(),
        "apdex.yml",
        "config:\n  target: http://127.0.0.1:9\n  phases: [{ duration: 1, arrivalCount: 5 }]\n  plugins:\n    apdex: { threshold: 50 }\nscenarios:\n  - flow:\n      - get: { url: /ping }\n      - get: { url: /delay?ms=100 }\n      - get: { url: /delay?ms=300 }\n",
    );
    let (s, _) = run(&[file.to_str().unwrap()], &server);
    let a = &s["apdex"];
    // Per user: /ping within T, 100 ms within 4T, 300 ms past it. Each class sits at least
    // 50 ms from a boundary, so a machine busy compiling (where a /ping once took over 10 ms)
    // cannot move a request into the next class.
    assert_eq!(a["threshold_ms"], 50.0, "{a:#}");
    assert_eq!(
        (&a["satisfied"], &a["tolerated"], &a["frustrated"]),
        (&Value::from(5), &Value::from(5), &Value::from(5)),
        "{a:#}"
    );
    assert_eq!(a["score"], 0.5, "{a:#}");
    assert_eq!(a["ranking"], "poor", "{a:#}");
}

#[test]
fn the_before_flow_runs_once_first_and_its_captures_are_every_users() {
    // As Artillery's generating-vu-tokens example: one login before the load, its token sent
    // by every user; the after flow runs once at the end.
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = |user: &str| {
        write_file(
            dir.path(),
            "s.yml",
            &format!(
                "config:\n  target: http://127.0.0.1:1\n  phases: [{{ duration: 1, arrivalRate: 5 }}]\n  variables: {{ color: [red, blue] }}\nbefore:\n  flow:\n    - get: {{ url: /turno/before }}\n    - post:\n        url: /login\n        json: {{ user: {user} }}\n        capture: {{ json: $.token, as: token }}\nscenarios:\n  - flow:\n      - get:\n          url: /account\n          headers: {{ authorization: 'Bearer {{{{ token }}}}' }}\n          match: {{ json: $.user, value: ops }}\n      - get: {{ url: '/turno/{{{{ color }}}}' }}\nafter:\n  flow:\n    - get: {{ url: /turno/after }}\n"
            ),
        )
    };
    let file = script("ops");
    let out = loadlab(&["validate", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (s, stderr) = run(&[file.to_str().unwrap()], &server);
    assert_eq!(s["users"]["completed"], 5, "{}\n{stderr}", s["users"]);
    assert_eq!(
        s["status"]["200"], 10,
        "the load's requests alone: {}",
        s["status"]
    );
    assert!(
        stderr.contains("before: its flow ran once (2 request(s)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("after: its flow ran once (1 request(s)"),
        "{stderr}"
    );
    assert_eq!(
        crate::support::next_ticket(&server, "before"),
        2,
        "one before flow"
    );
    assert_eq!(
        crate::support::next_ticket(&server, "after"),
        2,
        "one after flow"
    );
    // The users' own variables keep their per-user values.
    let red = crate::support::next_ticket(&server, "red") - 1;
    let blue = crate::support::next_ticket(&server, "blue") - 1;
    assert_eq!(red + blue, 5);
    // A before flow that fails stops the run before the load, saying why.
    let bad = write_file(
        dir.path(),
        "bad.yml",
        "config:\n  target: http://127.0.0.1:1\n  phases: [{ duration: 1, arrivalRate: 5 }]\nbefore:\n  flow:\n    - post: { url: /login, json: { nobody: 1 }, expect: { statusCode: 200 } }\nscenarios:\n  - flow:\n      - get: { url: /turno/never }\n",
    );
    let target = server.url("");
    let out = loadlab(&["run", bad.to_str().unwrap(), "--target", &target]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "the before flow failed: expect statusCode on POST /login; the load was not run"
        ),
        "{err}"
    );
    assert_eq!(
        crate::support::next_ticket(&server, "never"),
        1,
        "no load ran"
    );
}

#[test]
fn loop_items_that_name_another_host_send_their_requests_there() {
    // As Artillery's table-driven example: the items' URLs, some on another host.
    let (a, b) = (TestServer::start(1).unwrap(), TestServer::start(1).unwrap());
    let other = b.url("").trim_end_matches('/').to_string();
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(
        dir.path(),
        "table.yml",
        &format!(
            "config:\n  target: http://127.0.0.1:1\n  phases: [{{ duration: 1, arrivalCount: 2 }}]\nscenarios:\n  - flow:\n    - loop:\n        - get:\n            url: \"{{{{ $loopElement }}}}\"\n            expect: {{ statusCode: 200 }}\n      over: [\"/turno/here\", \"{other}/turno/there\", \"{other}/turno/there\"]\n"
        ),
    );
    let (s, stderr) = run(&[file.to_str().unwrap()], &a);
    assert_eq!(s["users"]["completed"], 2, "{}\n{stderr}", s["users"]);
    assert_eq!(
        crate::support::next_ticket(&a, "here"),
        3,
        "two users, once each on the target"
    );
    assert_eq!(
        crate::support::next_ticket(&b, "there"),
        5,
        "twice each on the other host"
    );
    assert_eq!(
        crate::support::next_ticket(&a, "there"),
        1,
        "never on the target"
    );
}

#[test]
fn a_selector_capture_takes_an_attribute_of_the_element_its_index_names() {
    // The reference site's pages: `<img src=/static/logo.png alt=logo>` first, and a nav of
    // /site/home, /site/news, /site/about.
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(
        dir.path(),
        "selector.yml",
        "config:\n  target: http://127.0.0.1:1\n  phases: [{ duration: 1, arrivalCount: 2 }]\nscenarios:\n  - flow:\n    - get:\n        url: /site/home\n        capture:\n          - { selector: \"img\", attr: alt, as: alt }\n          - { selector: \"nav a\", attr: href, index: last, as: last }\n          - { selector: \"nav a\", attr: href, index: \"1\", as: second }\n          - { selector: \"nav a\", attr: href, index: random, as: any }\n    - get: { url: \"/turno/{{ alt }}\" }\n    - log: \"last {{ last }} second {{ second }} any {{ any }}.\"\n",
    );
    let (s, stderr) = run(&[file.to_str().unwrap()], &server);
    assert_eq!(s["users"]["completed"], 2, "{}\n{stderr}", s["users"]);
    assert_eq!(
        crate::support::next_ticket(&server, "logo"),
        3,
        "the first img's alt"
    );
    assert_eq!(
        stderr
            .matches("last /site/about second /site/news any /site/")
            .count(),
        2,
        "{stderr}"
    );
    // A selector that does not parse, and one without attr, are refused with the key's place.
    for (capture, says) in [
        ("{ selector: \"a[\", attr: href, as: x }", "does not parse"),
        ("{ selector: \"a\", as: x }", "needs attr"),
    ] {
        let bad = write_file(
            dir.path(),
            "bad.yml",
            &format!("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n    - get:\n        url: /site/home\n        capture: [{capture}]\n"),
        );
        let out = loadlab(&["validate", bad.to_str().unwrap()]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{err}");
    }
}

#[test]
fn a_host_that_does_not_resolve_fails_its_users_there_and_the_run_goes_on() {
    // As Artillery's table-driven example, whose last item is on a host that does not resolve:
    // Artillery counts ENOTFOUND for it and ends that user; the requests before are sent.
    // `.invalid` never resolves (RFC 2606).
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(
        dir.path(),
        "nohost.yml",
        "config:\n  target: http://127.0.0.1:1\n  phases: [{ duration: 1, arrivalCount: 2 }]\nscenarios:\n  - flow:\n    - loop:\n        - get: { url: \"{{ $loopElement }}\" }\n      over: [\"/turno/here\", \"http://no-such-host.invalid/turno/gone\", \"/turno/after\"]\n",
    );
    let (s, stderr) = run(&[file.to_str().unwrap()], &server);
    assert!(
        stderr.contains("no-such-host.invalid does not resolve"),
        "{stderr}"
    );
    assert_eq!(s["errors"]["unresolved"], 2, "{}", s["errors"]);
    assert!(
        s["findings"]
            .to_string()
            .contains("no-such-host.invalid did not resolve"),
        "{}",
        s["findings"]
    );
    assert_eq!(s["users"]["failed"], 2, "{}\n{stderr}", s["users"]);
    assert_eq!(
        crate::support::next_ticket(&server, "here"),
        3,
        "sent before it"
    );
    assert_eq!(
        crate::support::next_ticket(&server, "after"),
        1,
        "nothing after it: the user ended there"
    );
}

#[test]
fn a_url_that_is_neither_a_path_nor_a_url_fails_each_user_there_as_in_artillery() {
    // Artillery 2.0.34 on this script: `errors.Invalid URL - ping: 2`, 2 requests, 2 users
    // failed: the request before is sent, the one after is not.
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(
        dir.path(),
        "rel.yml",
        "config:\n  target: http://127.0.0.1:1\n  phases: [{ duration: 1, arrivalRate: 2 }]\nscenarios:\n  - flow:\n      - get: { url: /turno/before }\n      - get: { url: turno/bad }\n      - get: { url: /turno/after }\n",
    );
    let out = loadlab(&["validate", file.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("url \"turno/bad\" is neither a path starting with / nor a URL"),
        "{text}"
    );
    let (s, _) = run(&[file.to_str().unwrap()], &server);
    assert_eq!(s["users"]["failed"], 2, "{}", s["users"]);
    assert_eq!(
        s["users"]["failures"]["Invalid URL - turno/bad on GET turno/bad"], 2,
        "{}",
        s["users"]
    );
    assert_eq!(crate::support::next_ticket(&server, "before"), 3);
    assert_eq!(
        crate::support::next_ticket(&server, "after"),
        1,
        "nothing after the bad url"
    );
}

#[test]
fn parallel_steps_queue_on_the_users_connection_timed_from_the_steps_start_as_artillery() {
    // Artillery 2.0.34 issues a parallel step's requests together, but its user's agent has
    // one socket (maxSockets: 1): they go one after another on one connection (corpus script
    // 72 through bench/artillery-diff.py: 3 users, 12 requests, 3 connections, in Artillery
    // as in loadlab), each timed from its issue.
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(
        dir.path(),
        "p.yml",
        "config:\n  target: http://127.0.0.1:9\nscenarios:\n  - flow:\n      - parallel:\n          - get: { url: \"/delay?ms=150\", name: first }\n          - get: { url: \"/delay?ms=150\", name: second }\n          - post: { url: /login, json: { user: ann }, capture: { json: $.token, as: token } }\n      - get: { url: /account, headers: { authorization: \"Bearer {{ token }}\" }, name: account }\n",
    );
    let validate = loadlab(&["validate", file.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&validate.stdout).contains("parallel (issued together"),
        "{validate:?}"
    );
    let (s, _) = run(&[file.to_str().unwrap()], &server);
    assert_eq!(s["users"]["completed"], 1, "{}", s["users"]);
    assert_eq!(s["requests"]["completed"], 4, "{s}");
    assert_eq!(s["timings_ms"]["new_connections"], 1, "{}", s["timings_ms"]);
    // The second waited for the first: timed from the step's start, at least 2 × 150 ms.
    let second = s["requests_by_name"]["second"]["latency_ms"]["p50"]
        .as_f64()
        .unwrap();
    assert!(second >= 290.0, "second: {second} ms");
    // What a step of it captured is the user's after it.
    assert_eq!(s["requests_by_name"]["account"]["status"]["200"], 1, "{s}");
}

#[test]
fn a_users_connection_idle_past_four_seconds_is_closed_as_artillerys_agent_closes_it() {
    // Artillery's user agent (agentkeepalive) drops a socket idle for 4 s: after a 5 s think
    // the next request comes on a new connection (its refresh-auth-token example: 6
    // connections for 3 users), after a 1 s think on the same one.
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (think, connections) in [(1, 1), (5, 2)] {
        let file = write_file(
            dir.path(),
            "idle.yml",
            &format!(
                "config:\n  target: http://127.0.0.1:9\nscenarios:\n  - flow:\n      - get: {{ url: /ping }}\n      - think: {think}\n      - get: {{ url: /ping }}\n"
            ),
        );
        let (s, _) = run(&[file.to_str().unwrap()], &server);
        assert_eq!(s["requests"]["ok"], 2, "{s}");
        assert_eq!(
            s["timings_ms"]["new_connections"], connections,
            "think {think}: {}",
            s["timings_ms"]
        );
    }
}

#[test]
fn artillerys_run_flags_shape_the_script_and_an_unset_variable_renders_as_artillery_renders_it() {
    // A script that leaves its target, its payload's file and a variable to run time, and a
    // scenario a run picks by name: Artillery's --dotenv, --payload, --overrides,
    // --scenario-name and --solo give them, and what no source sets renders as in Artillery
    // ("undefined" within text, a JSON member of it left out).
    let dir = tempfile::tempdir().unwrap();
    let (url, server) = recording_server(1);
    write_file(
        dir.path(),
        "run.env",
        &format!("# the target\nLOADLAB_TEST_DOTENV_TARGET={url}\n"),
    );
    write_file(dir.path(), "names.csv", "ann\n");
    let file = write_file(
        dir.path(),
        "later.yml",
        "config:\n  target: \"{{ $env.LOADLAB_TEST_DOTENV_TARGET }}\"\n  phases:\n    - { duration: 30, arrivalRate: 20 }\n  payload:\n    fields: [name]\nscenarios:\n  - name: browse\n    flow:\n      - get: { url: \"/browse\" }\n  - name: buy\n    flow:\n      - post: { url: \"/buy/{{ name }}/{{ bar }}\", json: { who: \"{{ name }}\", note: \"{{ bar }}\" } }\n",
    );
    let file = file.to_str().unwrap();
    // validate: what comes at run time is a warning.
    let out = loadlab(&["validate", file]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for said in [
        "LOADLAB_TEST_DOTENV_TARGET",
        "config.payload (fields name) has no path",
        "{{ bar }} is set by none of this file's sources",
    ] {
        assert!(stderr.contains(said), "{said}: {stderr}");
    }
    assert!(!loadlab(&["validate", "--strict", file]).status.success());
    // run, from the test's folder as Artillery's -p is read from the current directory.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_loadlab"))
        .current_dir(dir.path())
        .args([
            "run",
            "--dotenv",
            "run.env",
            "--payload",
            "names.csv",
            "--scenario-name",
            "buy",
            "--solo",
            "--overrides",
            r#"{"config": {"http": {"timeout": 5}}}"#,
            "--json",
            "summary.json",
            file,
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["users"]["completed"], 1, "{}", summary["users"]);
    let request = server.join().unwrap();
    let text = String::from_utf8_lossy(&request[0]).into_owned();
    assert!(
        text.starts_with("POST /buy/ann/undefined HTTP/1.1\r\n"),
        "{text}"
    );
    assert!(text.ends_with("\r\n\r\n{\"who\":\"ann\"}"), "{text}");
}

#[test]
fn a_form_of_templates_and_the_default_cookies_go_with_each_request() {
    // config.defaults.cookie on every request, the request's own cookie over it; a form's
    // templated value rendered and URL-encoded, as Artillery sends them.
    let dir = tempfile::tempdir().unwrap();
    let (url, server) = recording_server(1);
    let file = write_file(
        dir.path(),
        "form.yml",
        "config:\n  target: http://127.0.0.1:9\n  variables: { who: [\"a&b c\"] }\n  defaults:\n    cookie: { session: s1, theme: dark }\nscenarios:\n  - flow:\n      - post:\n          url: /login\n          cookie: { theme: light }\n          form: { user: \"{{ who }}\", n: 1 }\n",
    );
    let (s, _) = loadlab_json(&["run", file.to_str().unwrap(), "--target", &url]);
    assert_eq!(s["users"]["completed"], 1, "{}", s["users"]);
    let request = server.join().unwrap();
    let text = String::from_utf8_lossy(&request[0]).into_owned();
    assert!(text.ends_with("\r\n\r\nn=1&user=a%26b+c"), "{text}");
    assert!(
        text.contains("Content-Type: application/x-www-form-urlencoded\r\n"),
        "{text}"
    );
    let cookie = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("cookie: ")
                .or_else(|| l.strip_prefix("Cookie: "))
        })
        .unwrap_or_else(|| panic!("no cookie header: {text}"));
    let mut pairs: Vec<&str> = cookie.split("; ").collect();
    pairs.sort_unstable();
    assert_eq!(pairs, ["session=s1", "theme=light"], "{text}");
}

#[test]
fn a_json_script_runs_and_validates_as_its_yaml_twin_does_and_its_errors_have_a_position() {
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = r#"{
  "config": {
    "target": "http://127.0.0.1:9",
    "phases": [{ "duration": 1, "arrivalCount": 2 }]
  },
  "scenarios": [
    { "flow": [{ "get": { "url": "/ping", "expect": { "statusCode": 200 } } }] }
  ]
}
"#;
    // By its extension, and by its content under a name that says nothing.
    for name in ["hello.json", "hello-script"] {
        let file = write_file(dir.path(), name, script);
        let (s, stderr) = run(&[file.to_str().unwrap()], &server);
        assert_eq!(s["requests"]["completed"], 2, "{name}: {s}\n{stderr}");
        let checked = loadlab(&["validate", file.to_str().unwrap()]);
        assert!(checked.status.success(), "{name}: {checked:?}");
    }
    let broken = write_file(
        dir.path(),
        "broken.json",
        &script.replace(r#""url": "/ping""#, r#""url": "/ping", "bogus": {"#),
    );
    let out = loadlab(&["run", broken.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    // `file:line:col`: the line and column of the broken member.
    let at = stderr.split("broken.json:").nth(1).and_then(|rest| {
        rest.split(':')
            .take(2)
            .map(|n| n.trim().parse::<u32>().ok())
            .collect::<Option<Vec<_>>>()
    });
    assert!(matches!(at.as_deref(), Some([7, _])), "{stderr}");
    assert!(!stderr.contains("is not a URL"), "{stderr}");
    let notes = write_file(dir.path(), "notes.txt", "just: text\n");
    let out = loadlab(&["run", notes.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is a file but not an Artillery script"),
        "{stderr}"
    );
}

#[test]
fn users_that_capture_share_config_http_pool_as_artillerys_agent() {
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = |http: &str| {
        format!(
            "config:\n  target: http://127.0.0.1:9\n  phases: [{{ duration: 1, arrivalCount: 4 }}]\n{http}scenarios:\n  - flow:\n      - get: {{ url: /info, capture: {{ json: $.pid, as: pid }} }}\n      - get: {{ url: \"/ping?pid={{{{ pid }}}}\" }}\n"
        )
    };
    let pooled = write_file(dir.path(), "pooled.yml", &script("  http: { pool: 1 }\n"));
    let (s, stderr) = run(&[pooled.to_str().unwrap()], &server);
    assert_eq!(s["users"]["completed"], 4, "{s}\n{stderr}");
    assert_eq!(s["requests"]["completed"], 8, "{s}");
    // One connection for every user, as Artillery's agent of one socket.
    assert_eq!(s["timings_ms"]["new_connections"], 1, "{s}");
    assert!(!stderr.contains("config.http.pool"), "{stderr}");
    // Without the pool each user connects on its own.
    let own = write_file(dir.path(), "own.yml", &script(""));
    let (s, _) = run(&[own.to_str().unwrap()], &server);
    assert_eq!(s["timings_ms"]["new_connections"], 4, "{s}");
}
