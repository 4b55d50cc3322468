//! Artillery's `engine: playwright` scenarios: users drive the system's Chromium through the
//! script's flow functions (Playwright for Node.js from the processor's own `node_modules`,
//! `tests/fixtures/playwright-flows`), against the reference site on 127.0.0.1: steps, page
//! metrics and custom metrics counted, `loadAll` payloads in `context.vars`, a `before` flow,
//! and a flow that fails failing only its user.

use crate::support::{loadlab, loadlab_json, write_file};
use loadlab_service::TestServer;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The flows' module, beside the Playwright package that scripts/install-runtimes.sh installs.
fn flows() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/playwright-flows/flows.js")
}

/// A script in `dir` whose config targets nothing of its own (the tests give `--target`) and
/// names `processor`, followed by `rest` (more config keys, then the scenarios).
fn script_with(dir: &Path, processor: &Path, rest: &str) -> PathBuf {
    let text = format!(
        "config:\n  target: http://127.0.0.1:1\n  processor: {}\n{rest}",
        processor.display()
    );
    write_file(dir, "s.yml", &text)
}

fn run(script: &Path, server: &TestServer) -> (Value, String) {
    let target = server.url("");
    let (summary, out) = loadlab_json(&["run", script.to_str().unwrap(), "--target", &target]);
    (summary, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn histogram_count(m: &Value, name: &str) -> u64 {
    m["histograms"][name]["count"].as_u64().unwrap_or(0)
}

#[test]
fn browser_users_walk_the_site_with_steps_page_metrics_and_their_own_counters() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = script_with(
        dir.path(),
        &flows(),
        "  phases: [{ duration: 2, arrivalRate: 1 }]
  engines:
    playwright: {}
scenarios:
  - name: browse
    engine: playwright
    flowFunction: homeThenNews
",
    );
    let (s, stderr) = run(&script, &server);
    let users = &s["users"];
    assert_eq!(users["started"], 2, "{s:#}\n{stderr}");
    assert_eq!(users["completed"], 2, "{s:#}\n{stderr}");
    let m = &users["metrics"];
    // The flow clicked through to the news page: it read that page's heading.
    assert_eq!(m["counters"]["seen.news"], 2.0, "{m:#}");
    assert_eq!(histogram_count(m, "browser.step.home"), 2, "{m:#}");
    assert_eq!(histogram_count(m, "browser.step.news"), 2, "{m:#}");
    // Each page is its HTML, stylesheet, script, logo and picture: 5 requests, all 200.
    assert_eq!(m["counters"]["browser.http_requests"], 20.0, "{m:#}");
    assert_eq!(m["counters"]["browser.page.codes.200"], 20.0, "{m:#}");
    let home = server.url("/site/home");
    let news = server.url("/site/news");
    for vital in ["TTFB", "FCP", "LCP", "CLS"] {
        for page in [&home, &news] {
            let name = format!("browser.page.{vital}.{page}");
            assert_eq!(histogram_count(m, &name), 2, "{name}: {m:#}");
        }
    }
    // A page's first byte comes before its first paint.
    let at = |name: String| m["histograms"][&name]["max"].as_f64().unwrap();
    assert!(
        at(format!("browser.page.TTFB.{home}")) < at(format!("browser.page.FCP.{home}")),
        "{m:#}"
    );
    // The steps take real time: at least the page loads they wait for.
    assert!(
        m["histograms"]["browser.step.home"]["min"]
            .as_f64()
            .unwrap()
            > 1.0,
        "{m:#}"
    );
}

#[test]
fn payload_lists_before_flows_and_a_failing_flow_fail_only_their_users() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "pages.csv",
        "/site/home,home\n/site/about,about\n/site/news,not-news\n",
    );
    let script = script_with(
        dir.path(),
        &flows(),
        "  phases: [{ duration: 2, arrivalRate: 2 }]
  payload:
    - path: ./pages.csv
      fields: [path, heading]
      loadAll: true
      name: pages
  engines:
    playwright:
      aggregateByName: true
      defaultTimeout: 5
before:
  engine: playwright
  flowFunction: homeThenNews
scenarios:
  - name: check
    engine: playwright
    flowFunction: checkPages
  - name: fail
    engine: playwright
    testFunction: missingHeading
",
    );
    let (s, stderr) = run(&script, &server);
    assert!(stderr.contains("before: its flow ran once"), "{stderr}");
    let users = &s["users"];
    assert_eq!(users["started"], 4, "{s:#}\n{stderr}");
    assert_eq!(users["completed"], 2, "{s:#}\n{stderr}");
    assert_eq!(users["failed"], 2, "{s:#}\n{stderr}");
    // The failure is Playwright's, with where the flow threw it, counted once per message.
    let failures = users["failures"].as_object().unwrap();
    assert_eq!(failures.len(), 1, "{s:#}");
    let (why, n) = failures.iter().next().unwrap();
    assert_eq!(n, 2, "{s:#}");
    assert!(
        why.starts_with("missingHeading: TimeoutError: locator.waitFor: Timeout 500ms exceeded")
            && why.contains("flows.js:"),
        "{why}"
    );
    // Each checking user read the three rows of the payload: two pages right, one wrong.
    let m = &users["metrics"];
    assert_eq!(m["counters"]["pages.ok"], 4.0, "{m:#}");
    assert_eq!(m["counters"]["pages.wrong"], 2.0, "{m:#}");
    // aggregateByName: page metrics under the scenario's name, not the URL.
    assert_eq!(histogram_count(m, "browser.page.TTFB.check"), 6, "{m:#}");
    assert_eq!(histogram_count(m, "browser.page.TTFB.fail"), 2, "{m:#}");
}

#[test]
fn validate_shows_browser_flows_and_refuses_what_cannot_run() {
    let _shared = crate::support::shared();
    let dir = tempfile::tempdir().unwrap();
    let check = |text: &str| {
        let script = write_file(dir.path(), "s.yml", text);
        let out = loadlab(&["validate", script.to_str().unwrap()]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let with_processor = format!(
        "config:\n  target: http://127.0.0.1:1\n  processor: {}\n",
        flows().display()
    );
    let (ok, out) = check(&format!(
        "{with_processor}  engines:\n    playwright:\n      launchOptions: {{ headless: true }}\nscenarios:\n  - engine: playwright\n    testFunction: homeThenNews\n"
    ));
    assert!(ok, "{out}");
    assert!(
        out.contains("browser flow homeThenNews(page, context, events, test)")
            && out.contains("browser: Chromium driven by Playwright"),
        "{out}"
    );
    // Each of these is refused with the key and what to do.
    let refused = |text: &str, says: &str| {
        let (ok, out) = check(text);
        assert!(!ok && out.contains(says), "{says}: {out}");
    };
    refused(
        "config:\n  target: http://127.0.0.1:1\nscenarios:\n  - engine: playwright\n    flowFunction: f\n",
        "s.yml:5:19: scenario \"scenario 1\": flowFunction: names a Node.js function, but the script gives no config.processor",
    );
    refused(
        &format!("{with_processor}scenarios:\n  - engine: playwright\n    flow: []\n"),
        "engine: a playwright scenario runs a function of config.processor; give flowFunction: NAME",
    );
    refused(
        &format!(
            "{with_processor}scenarios:\n  - flowFunction: homeThenNews\n    flow:\n      - get: {{ url: / }}\n"
        ),
        "flowFunction: is a key of engine: playwright scenarios",
    );
    refused(
        &format!(
            "{with_processor}  engines:\n    grpc: {{}}\nscenarios:\n  - flow:\n      - get: {{ url: / }}\n"
        ),
        "config.engines.grpc: loadlab runs HTTP, ws, socketio and playwright scenarios only",
    );
}

#[test]
fn a_typescript_processor_is_bundled_with_its_own_imports_for_flows_and_hooks() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let processor = flows().with_file_name("flows.ts");
    let script = script_with(
        dir.path(),
        &processor,
        "  phases: [{ duration: 1, arrivalRate: 2 }]
  engines:
    playwright: {}
scenarios:
  - engine: playwright
    testFunction: aboutPage
  - flow:
      - function: tagged
      - get: { url: \"/site/{{ tag }}\" }
",
    );
    let (s, stderr) = run(&script, &server);
    let users = &s["users"];
    assert_eq!(users["completed"], 2, "{s:#}\n{stderr}");
    // The flow's helper (helpers/index.ts, imported without an extension) took the step.
    let m = &users["metrics"];
    assert_eq!(m["counters"]["ts.about"], 1.0, "{m:#}");
    assert_eq!(histogram_count(m, "browser.step.visit_about"), 1, "{m:#}");
    // The hook set the variable the request's path reads: /site/from-ts answered 200.
    assert_eq!(s["status"]["200"], 1, "{s:#}");
}

#[test]
fn without_playwright_beside_the_processor_the_run_stops_before_the_load_saying_what_to_install() {
    let _shared = crate::support::shared();
    let server = TestServer::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let processor = write_file(
        dir.path(),
        "flows.js",
        "module.exports = { async go(page) { await page.goto('/site/home'); } };\n",
    );
    let script = script_with(
        dir.path(),
        &processor,
        "  phases: [{ duration: 1, arrivalRate: 2 }]
  engines:
    playwright: {}
scenarios:
  - engine: playwright
    flowFunction: go
",
    );
    let target = server.url("");
    let out = loadlab(&["run", script.to_str().unwrap(), "--target", &target]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A processor that does not load (here: Playwright missing beside it) kills Artillery's
    // worker, and Artillery exits 11; loadlab does the same (docs/scenarios.md, processors).
    assert_eq!(out.status.code(), Some(11), "{stderr}");
    assert!(
        stderr.contains("needs Playwright for Node.js beside the processor")
            && stderr.contains("npm install playwright-core"),
        "{stderr}"
    );
    // The same settings with HTTP scenarios only need no browser.
    let script = script_with(
        dir.path(),
        &processor,
        "  phases: [{ duration: 1, arrivalRate: 2 }]
  engines:
    playwright: {}
scenarios:
  - flow:
      - get: { url: /ping }
",
    );
    let (s, out) = loadlab_json(&["run", script.to_str().unwrap(), "--target", &target]);
    assert_eq!(
        s["requests"]["ok"],
        2,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
