//! Artillery processors run by Node.js: `function` steps, `beforeScenario` / `afterScenario`,
//! `beforeRequest` / `afterResponse` with Artillery's signatures (callbacks and async
//! functions, CommonJS and ES modules), variables both ways, `events.emit` metrics, and a
//! function that fails failing its user only, against the reference service on 127.0.0.1.

use crate::support::{loadlab, loadlab_json, write_file};
use loadlab_service::TestServer;
use serde_json::Value;
use std::path::Path;

/// A login flow whose every step goes through the processor: the user picked in
/// `beforeScenario`, the login body written by an async `beforeRequest`, the token read from
/// the response by `afterResponse`, the `Authorization` header set by a callback hook, and the
/// account checked against the user, each emitting a metric.
const PROCESSOR: &str = r#"
module.exports = {
  pickUser(context, events, next) {
    context.vars.profile = { name: 'ana', n: 3 };
    events.emit('counter', 'picked', 1);
    next();
  },
  async signIn(requestParams, context, events) {
    requestParams.json = { user: context.vars.profile.name + '-' + context.vars.profile.n };
  },
  keepToken(requestParams, response, context, events, next) {
    const body = JSON.parse(response.body);
    context.vars.token = body.token;
    events.emit('histogram', 'token_length', body.token.length);
    next();
  },
  auth(requestParams, context, events, next) {
    requestParams.headers = requestParams.headers || {};
    requestParams.headers['Authorization'] = 'Bearer {{ token }}';
    next();
  },
  checkUser(requestParams, response, context, events, next) {
    const body = JSON.parse(response.body);
    if (response.statusCode !== 200 || body.user !== 'ana-3') {
      return next(new Error(`wrong account ${response.statusCode} ${response.body}`));
    }
    events.emit('rate', 'checked');
    next();
  },
  done(context, events, next) {
    console.log(`done ${context.vars.profile.name}`);
    events.emit('counter', 'done', 2);
    next();
  },
};
"#;

const SCRIPT: &str = "config:
  target: http://127.0.0.1:1
  processor: ./functions.js
  phases: [{ duration: 2, arrivalRate: 10 }]
scenarios:
  - name: account
    beforeScenario: pickUser
    afterScenario: done
    flow:
      - post: { url: /login, beforeRequest: signIn, afterResponse: keepToken }
      - get: { url: /account, beforeRequest: auth, afterResponse: checkUser }
      - get: { url: \"/delay?ms={{ profile.n }}\", name: delay }
";

fn run(script: &Path, server: &TestServer, extra: &[&str]) -> (Value, String) {
    let target = server.url("");
    let mut args = vec!["run", script.to_str().unwrap(), "--target", &target];
    args.extend_from_slice(extra);
    let (summary, out) = loadlab_json(&args);
    (summary, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Functions that fail in each of the ways Artillery's engine tells apart.
const THROWING: &str = r#"
module.exports = {
  boomAfter(requestParams, response, context, events, next) {
    throw new Error('after went wrong');
  },
  async rejectAfter(requestParams, response, context, events) {
    throw new Error('async after went wrong');
  },
  boomStep(context, events, next) {
    throw new Error('step went wrong');
  },
};
"#;

/// Runs `flow` (steps of one scenario, with `THROWING` as its processor) for `users` users a
/// second apart against `server`: the exit code and the summary.
fn run_throwing(flow: &str, users: u32, server: &TestServer) -> (Option<i32>, Value) {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "functions.js", THROWING);
    let script = write_file(
        dir.path(),
        "s.yml",
        &format!(
            "config:\n  target: http://127.0.0.1:1\n  processor: ./functions.js\n  phases: [{{ duration: {users}, arrivalCount: {users} }}]\nscenarios:\n  - flow:\n{flow}"
        ),
    );
    let json = dir.path().join("summary.json");
    let target = server.url("");
    let out = loadlab(&[
        "run",
        script.to_str().unwrap(),
        "--target",
        &target,
        "--json",
        json.to_str().unwrap(),
    ]);
    (out.status.code(), crate::support::read_json(&json))
}

#[test]
fn a_login_flow_runs_through_its_processor_functions() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "functions.js", PROCESSOR);
    let script = write_file(dir.path(), "s.yml", SCRIPT);
    let (s, stderr) = run(&script, &server, &[]);
    let users = &s["users"];
    assert_eq!(users["started"], 20, "{s:#}\n{stderr}");
    assert_eq!(users["completed"], 20, "{s:#}\n{stderr}");
    assert_eq!(users["failed"], 0, "{s:#}\n{stderr}");
    // Every login, account and delay answered 200: the body, the header and the path were
    // what the functions made them.
    assert_eq!(s["status"]["200"], 60, "{s:#}");
    assert_eq!(s["requests_by_name"]["delay"]["ok"], 20, "{s:#}");
    let m = &users["metrics"];
    assert_eq!(m["counters"]["picked"], 20.0, "{m:#}");
    assert_eq!(m["counters"]["done"], 40.0, "{m:#}");
    assert_eq!(m["histograms"]["token_length"]["count"], 20, "{m:#}");
    let p50 = m["histograms"]["token_length"]["p50"].as_f64().unwrap();
    assert!((p50 - 32.0).abs() < 0.1, "{m:#}");
    assert!(m["rates"]["checked"].as_f64().unwrap() > 0.0, "{m:#}");
    // What the processor prints reaches the terminal, not the protocol.
    assert_eq!(stderr.matches("done ana").count(), 20, "{stderr}");
}

#[test]
fn the_terminal_and_validate_show_the_functions_and_their_metrics() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "functions.js", PROCESSOR);
    let script = write_file(dir.path(), "s.yml", SCRIPT);
    let out = loadlab(&["validate", script.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("processor: "), "{stdout}");
    assert!(stdout.contains("function pickUser"), "{stdout}");
    assert!(
        stdout.contains("beforeRequest signIn") && stdout.contains("afterResponse checkUser"),
        "{stdout}"
    );
    let target = server.url("");
    let out = loadlab(&["run", script.to_str().unwrap(), "--target", &target]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every user that started picked once and measured its token: the 20 arrivals, less any a
    // late generator counted dropped at the run's end (beside busy tests a suite read 18
    // started and 2 dropped, schedule lag p99 236 ms).
    let after = |key: &str| -> u64 {
        let rest = stdout
            .split(key)
            .nth(1)
            .unwrap_or_else(|| panic!("{key}: {stdout}"));
        let digits: String = rest
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().unwrap_or_else(|_| panic!("{key}: {stdout}"))
    };
    let started = after("users        started");
    assert_eq!(started + after("  dropped"), 20, "{stdout}");
    assert_eq!(after("counter      picked"), started, "{stdout}");
    assert_eq!(
        after("histogram    token_length  count"),
        started,
        "{stdout}"
    );
    // The helpers' CPU is in the generator's line, beside its own.
    assert!(stdout.contains("processor (Node.js) cpu "), "{stdout}");
}

#[test]
fn a_function_that_fails_fails_its_user_with_the_message_and_where_it_was_thrown() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "functions.mjs",
        "export function throws(context, events, next) {\n  if (context.vars.$loopCount === '0') throw new TypeError('no coffee');\n  next();\n}\nexport async function rejects(context) {\n  throw new Error('async no');\n}\nexport function hangs(context, events, next) {}\nexport function passes(context, events, next) { next(); }\n",
    );
    // `throws` throws in its loop's first pass, before the loop step waited on I/O: there
    // Artillery catches it and fails the user (in a later pass its worker would die of it, as
    // `a_function_that_throws_after_its_loop_waited_on_a_request_ends_the_run_with_exit_11`
    // checks).
    let script = write_file(
        dir.path(),
        "s.yml",
        "config:
  target: http://127.0.0.1:1
  processor: ./functions.mjs
  http: { timeout: 1 }
  phases: [{ duration: 1, arrivalCount: 6 }]
scenarios:
  - name: throws
    flow:
      - get: { url: /ping }
      - loop:
          - function: throws
          - get: { url: /ping }
        count: 3
  - name: rejects
    flow:
      - get: { url: /ping }
      - function: rejects
  - name: hangs
    flow:
      - function: passes
      - get: { url: /ping }
      - function: hangs
      - get: { url: /ping }
",
    );
    let (s, stderr) = run(&script, &server, &[]);
    let users = &s["users"];
    assert_eq!(users["started"], 6, "{s:#}\n{stderr}");
    assert_eq!(users["failed"], 6, "{s:#}\n{stderr}");
    let failures = users["failures"].as_object().unwrap();
    let count = |text: &str| -> u64 {
        failures
            .iter()
            .filter(|(why, _)| why.contains(text))
            .map(|(_, n)| n.as_u64().unwrap())
            .sum()
    };
    assert_eq!(
        count("throws: TypeError: no coffee (at throws ("),
        2,
        "{failures:?}"
    );
    assert!(
        failures.keys().any(|k| k.contains("functions.mjs:2:")),
        "{failures:?}"
    );
    assert_eq!(count("rejects: Error: async no"), 2, "{failures:?}");
    assert_eq!(count("hangs: did not finish within 1 s"), 2, "{failures:?}");
    // Each failed user sent what came before its failure: one ping.
    assert_eq!(s["status"]["200"], 6, "{s:#}");
}

#[test]
fn while_true_and_if_true_ask_the_processor() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "functions.js",
        "module.exports = {\n  more(context, next) { next(Number(context.vars.$loopCount) < 3); },\n  premium(vars) { return vars.plan === 'gold'; },\n};\n",
    );
    let script = write_file(
        dir.path(),
        "s.yml",
        "config:
  target: http://127.0.0.1:1
  processor: ./functions.js
  variables: { plan: [gold] }
  phases: [{ duration: 1, arrivalCount: 2 }]
scenarios:
  - flow:
      - loop:
          - get: { url: \"/ping?pass={{ $loopCount }}\", name: pass }
        whileTrue: more
        count: 100
      - get: { url: /delay?ms=1, name: premium, ifTrue: premium }
      - get: { url: /delay?ms=2, name: silver, ifTrue: \"plan == \\\"silver\\\"\" }
      - get: { url: /delay?ms=3, name: gold, ifTrue: \"plan == \\\"gold\\\" and $loopCount >= 3\" }
",
    );
    let (s, stderr) = run(&script, &server, &[]);
    assert_eq!(s["users"]["completed"], 2, "{s:#}\n{stderr}");
    let by_name = &s["requests_by_name"];
    // Three passes: the function said go on after the first two.
    assert_eq!(by_name["pass"]["ok"], 6, "{by_name:#}");
    assert_eq!(by_name["premium"]["ok"], 2, "{by_name:#}");
    assert!(
        by_name.get("silver").is_none_or(|n| n["completed"] == 0),
        "{by_name:#}"
    );
    assert_eq!(by_name["gold"]["ok"], 2, "{by_name:#}");
}

#[test]
fn a_processor_that_does_not_load_stops_the_run_with_nodes_error() {
    let _shared = crate::support::shared();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "functions.js",
        "module.exports = {\n  broken(\n};\n",
    );
    let script = write_file(
        dir.path(),
        "s.yml",
        "config:\n  target: http://127.0.0.1:1\n  processor: ./functions.js\nscenarios:\n  - flow:\n      - function: broken\n      - get: { url: /ping }\n",
    );
    let out = loadlab(&["run", script.to_str().unwrap()]);
    // Artillery's worker dies on a processor that does not load, and Artillery exits 11.
    assert_eq!(out.status.code(), Some(11), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("functions.js failed to load: SyntaxError"),
        "{stderr}"
    );
}

#[test]
fn a_processor_requiring_a_package_nobody_installed_exits_11_saying_what_to_install() {
    let _shared = crate::support::shared();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "functions.js",
        "const pad = require('left-pad-nobody-installed/lib');\nmodule.exports = { f(c, e, next) { next(); } };\n",
    );
    let script = write_file(
        dir.path(),
        "s.yml",
        "config:\n  target: http://127.0.0.1:1\n  processor: ./functions.js\nscenarios:\n  - flow:\n      - function: f\n      - get: { url: /ping }\n",
    );
    let out = loadlab(&["run", script.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(11), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("requires the package \"left-pad-nobody-installed\", which is not installed: run `npm install left-pad-nobody-installed`"),
        "{stderr}"
    );
}

#[test]
fn a_flow_of_functions_alone_runs_its_users_without_a_target_of_its_own() {
    let _shared = crate::support::shared();
    // As Artillery's SOAP and Twirp examples: the function sends its own traffic (here, none),
    // and the target's host is never looked up.
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "p.js",
        "module.exports = { async call(context, events) {\n  await new Promise((r) => setTimeout(r, 20));\n  events.emit('counter', 'calls', 1);\n} };\n",
    );
    let script = write_file(
        dir.path(),
        "s.yml",
        "config:\n  target: http://doesntmatter.invalid\n  processor: ./p.js\n  phases: [{ duration: 1, arrivalRate: 4 }]\nscenarios:\n  - flow:\n      - function: call\n",
    );
    let path = script.to_str().unwrap();
    let (s, out) = loadlab_json(&["run", path]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(s["users"]["completed"], 4, "{stdout}");
    assert_eq!(s["users"]["metrics"]["counters"]["calls"], 4.0, "{stdout}");
    assert_eq!(s["requests"]["sent"], 0, "{stdout}");
    assert!(
        stdout
            .contains("no request of its own (a processor's functions may send their own traffic)"),
        "{stdout}"
    );
    // Without a function the scenario is refused, naming what is missing.
    let bare = write_file(
        dir.path(),
        "bare.yml",
        "config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - think: 1\n",
    );
    let refused = loadlab(&["validate", bare.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("sends no request and calls no function")
    );
}

#[test]
fn an_exit_code_the_processor_suggests_is_the_runs_as_in_artillery() {
    let _shared = crate::support::shared();
    // Artillery's own test script: an afterResponse hook sets artillery.suggestedExitCode.
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "suggest.js",
        "module.exports = {\n  setCode(req, res, context, events, next) {\n    artillery.suggestedExitCode = 17;\n    next();\n  },\n};\n",
    );
    let script = write_file(
        dir.path(),
        "suggest.yml",
        "config:\n  target: http://127.0.0.1:1\n  processor: ./suggest.js\n  phases: [{ duration: 1, arrivalCount: 2 }]\nscenarios:\n  - flow:\n      - get: { url: /ping, afterResponse: setCode }\n",
    );
    let server = TestServer::start(1).unwrap();
    let target = server.url("");
    let json = dir.path().join("s.json");
    let out = loadlab(&[
        "run",
        script.to_str().unwrap(),
        "--target",
        &target,
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(17), "{stdout}");
    assert!(
        stdout.contains("exit code    17, as the script's processor suggested"),
        "{stdout}"
    );
    let summary: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(summary["users"]["suggested_exit_code"], 17);
    assert_eq!(summary["users"]["completed"], 2, "{}", summary["users"]);
}

/// `onError`: the functions are called with the error, the request and the context when a
/// request fails (a capture that finds nothing, a refused connection), and the user then
/// fails as without them; requests that succeed call none.
#[test]
fn on_error_functions_are_called_when_a_request_fails_and_the_user_still_fails() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "functions.js",
        r#"
module.exports = {
  seen(error, requestParams, context, events, next) {
    events.emit('counter', `failed ${requestParams.method} ${new URL(requestParams.url).pathname}`, 1);
    if (error instanceof Error && error.message.length > 0) events.emit('counter', 'with a message', 1);
    next();
  },
};
"#,
    );
    // Half the users send a request nothing accepts (its host's port 1 is closed): Artillery
    // calls onError for it. The other half capture nothing: Artillery ends those users with
    // `Failed capture or match` and calls no onError (its engine fails the step after the
    // response, where the hooks are not run).
    let script = write_file(
        dir.path(),
        "s.yml",
        "config:
  target: http://127.0.0.1:1
  processor: ./functions.js
  phases: [{ duration: 1, arrivalCount: 4 }]
scenarios:
  - onError: seen
    flow:
      - get: { url: /ping }
      - get: { url: http://127.0.0.1:1/gone }
      - get: { url: /account }
  - onError: seen
    flow:
      - get: { url: /ping }
      - get: { url: /ping, capture: { json: $.nothing.here, as: x } }
      - get: { url: /account }
",
    );
    let (s, stderr) = run(&script, &server, &[]);
    let users = &s["users"];
    assert_eq!(users["failed"], 4, "{s:#}\n{stderr}");
    let counters = &users["metrics"]["counters"];
    assert_eq!(counters["failed GET /gone"], 2.0, "{counters:#}\n{stderr}");
    assert_eq!(counters["with a message"], 2.0, "{counters:#}");
    assert!(counters.get("failed GET /ping").is_none(), "{counters:#}");
    assert!(
        counters.get("failed GET /account").is_none(),
        "{counters:#}"
    );
    assert_eq!(
        counters["errors.Failed capture or match"], 2.0,
        "{counters:#}"
    );
}

#[test]
fn an_after_response_hook_that_throws_ends_the_run_with_exit_11_as_artillerys_worker_dies() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let (code, s) = run_throwing(
        "      - get: { url: /ping, afterResponse: boomAfter }\n      - get: { url: /account }\n",
        3,
        &server,
    );
    assert_eq!(code, Some(11), "{s:#}");
    // Artillery's process exits on the first user's throw, before the next user arrives.
    assert_eq!(s["requests"]["completed"], 1, "{s:#}");
    let crashed = s["users"]["crashed"].as_str().unwrap_or_default();
    assert!(
        crashed.contains("boomAfter: Error: after went wrong"),
        "{s:#}"
    );
}

#[test]
fn a_hook_that_rejects_or_a_function_that_throws_in_the_flow_fails_its_user_only() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    // An async hook's rejection reaches Artillery's callback: the user fails, the run goes on.
    let (code, s) = run_throwing(
        "      - get: { url: /ping, afterResponse: rejectAfter }\n      - get: { url: /account }\n",
        2,
        &server,
    );
    assert_eq!(code, Some(0), "{s:#}");
    assert_eq!(s["users"]["failed"], 2, "{s:#}");
    assert_eq!(s["requests"]["completed"], 2, "{s:#}");
    assert_eq!(
        s["users"]["metrics"]["counters"]["errors.async after went wrong"], 2.0,
        "{s:#}"
    );
    // A function step that throws where Artillery calls it from the step's start (a step of
    // the flow, or a loop's first before any I/O) fails its user only.
    let (code, s) = run_throwing(
        "      - get: { url: /ping }\n      - loop:\n          - function: boomStep\n          - get: { url: /account }\n        count: 2\n",
        2,
        &server,
    );
    assert_eq!(code, Some(0), "{s:#}");
    assert_eq!(s["users"]["failed"], 2, "{s:#}");
    assert_eq!(s["requests"]["completed"], 2, "{s:#}");
}

#[test]
fn a_function_that_throws_after_its_loop_waited_on_a_request_ends_the_run_with_exit_11() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let (code, s) = run_throwing(
        "      - get: { url: /ping }\n      - loop:\n          - get: { url: /account }\n          - function: boomStep\n        count: 2\n",
        3,
        &server,
    );
    assert_eq!(code, Some(11), "{s:#}");
    assert_eq!(s["requests"]["completed"], 2, "{s:#}");
    assert!(
        s["users"]["crashed"]
            .as_str()
            .is_some_and(|c| c.contains("step went wrong")),
        "{s:#}"
    );
}
