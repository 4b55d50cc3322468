//! Artillery scripts as their users write them: the keys Artillery's own examples use, read
//! from real YAML and checked in the scenario they lower into.

use std::path::{Path, PathBuf};

use loadlab_run::users::{Behaviour, CaptureSource, Expect, Step};

use super::*;

/// Lowers `text` as the file `s.yml`, with `flags`, looking no host up.
fn lower(text: &str, flags: &ScriptFlags) -> Result<Scenario, ScenarioError> {
    from_text(text, Path::new("s.yml"), None, 1, Lookup::Skip, flags)
}

fn ok(text: &str) -> Scenario {
    lower(text, &ScriptFlags::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn refused(text: &str) -> String {
    match lower(text, &ScriptFlags::default()) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// The error `text` is refused with under `--strict`.
fn strictly_refused(text: &str) -> String {
    let strict = ScriptFlags {
        strict: true,
        ..ScriptFlags::default()
    };
    match lower(text, &strict) {
        Ok(_) => panic!("accepted with --strict:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// A file of this test's own in the temporary folder.
fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("loadlab-artillery-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn rates(s: &Scenario) -> Vec<(f64, f64, f64)> {
    let Phases::Rates(p) = &s.phases else {
        panic!("arrival phases expected");
    };
    p.iter()
        .map(|p| {
            (
                p.start_rps,
                p.end_rps,
                p.duration.map_or(0.0, |d| d.as_secs_f64()),
            )
        })
        .collect()
}

fn first_request(s: &Scenario) -> &loadlab_run::users::RequestStep {
    let users = s.users.as_ref().expect("virtual users");
    let Behaviour::Flow(steps) = &users.scenarios[0].behaviour else {
        panic!("a flow");
    };
    steps
        .iter()
        .find_map(|s| match s {
            Step::Request(r) => Some(r),
            _ => None,
        })
        .unwrap()
}

#[test]
fn a_script_without_phases_runs_one_user_and_its_version_changes_nothing() {
    let s = ok("version: 1\nconfig:\n  target: http://no-such-host.invalid:8080\nscenarios:\n  - flow:\n      - get: { url: /dino }\n");
    assert_eq!(rates(&s), [(1.0, 1.0, 1.0)]);
    assert!(
        s.notes.iter().any(|n| n.contains("one user")),
        "{:?}",
        s.notes
    );
}

#[test]
fn validate_needs_no_dns_for_the_target_host() {
    // Lookup::Skip is what validate passes: a name that cannot resolve still checks.
    let s = ok("config:\n  target: http://asciiart.artillery.invalid:8080\n  phases: [{ duration: 2, arrivalRate: 1 }]\nscenarios:\n  - flow: [{ get: { url: / } }]\n");
    assert_eq!(s.endpoints.len(), 1);
}

#[test]
fn an_environment_chosen_with_e_is_laid_over_config() {
    let text = "config:\n  target: http://127.0.0.1:1\n  variables: { a: x }\n  environments:\n    smoke:\n      target: http://127.0.0.1:2\n      phases: [{ duration: 10, arrivalRate: 3 }]\n      variables: { b: y }\nscenarios:\n  - flow: [{ get: { url: \"/{{ a }}/{{ b }}\" } }]\n";
    let flags = ScriptFlags {
        environment: Some("smoke".into()),
        ..ScriptFlags::default()
    };
    let s = lower(text, &flags).unwrap();
    assert_eq!(rates(&s), [(3.0, 3.0, 10.0)]);
    assert!(
        s.requests[0].url.starts_with("http://127.0.0.1:2/"),
        "{}",
        s.requests[0].url
    );
    let names: Vec<&str> = s
        .users
        .as_ref()
        .unwrap()
        .variables
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(names, ["a", "b"]);

    // An environment the script does not define: Artillery warns and runs its own config;
    // --strict refuses.
    let mut flags = ScriptFlags {
        environment: Some("prod".into()),
        ..ScriptFlags::default()
    };
    let s = lower(text, &flags).unwrap();
    assert!(s.requests[0].url.starts_with("http://127.0.0.1:1/"));
    assert!(
        s.warnings.iter().any(|w| w.contains(
            "-e prod: config.environments has no \"prod\" (it has: smoke); the script's own \
             config runs"
        )),
        "{:?}",
        s.warnings
    );
    flags.strict = true;
    let e = lower(text, &flags).unwrap_err().to_string();
    assert_eq!(
        e,
        "s.yml: -e prod: config.environments has no \"prod\" (it has: smoke)"
    );
}

#[test]
fn phase_numbers_may_come_from_the_environment_of_the_process() {
    let text = "config:\n  target: http://127.0.0.1:1\n  phases:\n    - arrivalRate: \"{{ $processEnvironment.LOADLAB_TEST_RATE_7 }}\"\n      duration: \"{{ $env.LOADLAB_TEST_DURATION_7 }}\"\nscenarios:\n  - flow: [{ get: { url: / } }]\n";
    let e = refused(text);
    assert!(
        e.contains("arrivalRate") && e.contains("LOADLAB_TEST_RATE_7, which is not set"),
        "{e}"
    );
    let target = refused("config:\n  target: \"{{ $env.LOADLAB_TEST_TARGET_7 }}\"\nscenarios:\n  - flow: [{ get: { url: / } }]\n");
    assert!(
        target.contains("config.target: $env.LOADLAB_TEST_TARGET_7 reads"),
        "{target}"
    );
    std::env::set_var("LOADLAB_TEST_TARGET_7", "http://127.0.0.1:5");
    let s = ok("config:\n  target: \"{{ $env.LOADLAB_TEST_TARGET_7 }}\"\nscenarios:\n  - flow: [{ get: { url: / } }]\n");
    assert_eq!(s.requests[0].url, "http://127.0.0.1:5/");
    std::env::set_var("LOADLAB_TEST_RATE_7", "4");
    std::env::set_var("LOADLAB_TEST_DURATION_7", "20");
    assert_eq!(rates(&ok(text)), [(4.0, 4.0, 20.0)]);
}

#[test]
fn a_file_of_scenarios_takes_its_config_from_config() {
    let config = temp_file(
        "common.yml",
        "config:\n  target: http://127.0.0.1:3\n  plugins:\n    metrics-by-endpoint: {}\n    expect: {}\n",
    );
    let text = "scenarios:\n  - name: dino\n    flow:\n      - get:\n          url: /dino\n          expect:\n            statusCode: 200\n";
    assert!(refused(text).contains("config.target is not set"));
    let flags = ScriptFlags {
        config: Some(config.clone()),
        ..ScriptFlags::default()
    };
    let s = lower(text, &flags).unwrap();
    assert_eq!(s.requests[0].url, "http://127.0.0.1:3/dino");
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    let e = lower(
        "config:\n  target: http://127.0.0.1:3\n",
        &ScriptFlags::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("no scenarios") && e.contains("--config"), "{e}");
}

#[test]
fn variables_from_v_are_set_over_the_files() {
    let text = "config:\n  target: http://127.0.0.1:1\n  variables: { id: [1, 2] }\nscenarios:\n  - flow: [{ get: { url: \"/u/{{ id }}\" } }]\n";
    let flags = ScriptFlags {
        variables: Some(r#"{"id": [7]}"#.into()),
        ..ScriptFlags::default()
    };
    let s = lower(text, &flags).unwrap();
    assert_eq!(
        s.users.unwrap().variables,
        [("id".to_string(), vec!["7".to_string()])]
    );
    let flags = ScriptFlags {
        variables: Some("[1]".into()),
        ..ScriptFlags::default()
    };
    assert!(lower(text, &flags)
        .unwrap_err()
        .to_string()
        .contains("-v/--variables takes a JSON object"));
}

#[test]
fn plugins_loadlab_does_not_run_are_warned_about_and_refused_when_strict() {
    let text = "config:\n  target: http://127.0.0.1:1\n  phases: [{ duration: 1, arrivalRate: 1 }]\n  plugins:\n    hello-world: { greeting: hi }\n    ensure: { maxErrorRate: 1 }\n    apdex: {}\n  apdex: { threshold: 100 }\n  http: { pool: 10 }\nscenarios:\n  - flow: [{ get: { url: / } }]\n";
    let s = ok(text);
    assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
    assert!(
        s.warnings[0].starts_with("config.plugins.hello-world: loadlab does not run this plugin")
    );
    assert_eq!(
        s.thresholds.len(),
        1,
        "plugins.ensure gives its maxErrorRate"
    );
    assert!(s
        .notes
        .iter()
        .any(|n| n.starts_with("apdex threshold 100 ms")));
    let strict = ScriptFlags {
        strict: true,
        ..ScriptFlags::default()
    };
    let e = lower(text, &strict).unwrap_err().to_string();
    assert!(
        e.contains("config.plugins.hello-world") && e.contains("--strict"),
        "{e}"
    );
}

#[test]
fn each_user_opens_its_own_connections_unless_a_pool_is_shared() {
    let script = |http: &str, step: &str| {
        format!(
            "config:\n  target: http://127.0.0.1:1\n  phases: [{{ duration: 1, arrivalRate: 3 }}]\n{http}scenarios:\n  - flow: [{{ get: {{ url: /a{step} }} }}]\n"
        )
    };
    // As Artillery: a plain script's users each connect on their own.
    let own = ok(&script("", ""));
    assert!(own.users.is_some() && own.pool.is_none());
    assert!(own
        .notes
        .iter()
        .any(|n| n.starts_with("connections: each user opens its own")));
    // `http.pool` shares that many connections among every user's requests.
    let pooled = ok(&script("  http: { pool: 4, maxSockets: 2 }\n", ""));
    assert!(pooled.users.is_none(), "a pool of plain requests");
    assert_eq!(pooled.pool, Some(4));
    assert!(pooled.warnings.is_empty(), "{:?}", pooled.warnings);
    assert!(pooled
        .notes
        .iter()
        .any(|n| n == "connections: a pool of 4 shared by every user (config.http.pool)"));
    // Users that capture share the pool too, as Artillery's engine gives every user its
    // shared agent whatever the user does; they stay users (cookies, variables of their own).
    let capturing = script("  http: { pool: 4 }\n", ", capture: { header: x, as: x }");
    let s = ok(&capturing);
    assert_eq!(s.users.as_ref().and_then(|u| u.pool), Some(4));
    assert!(s.pool.is_none());
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    assert!(s
        .notes
        .iter()
        .any(|n| n.starts_with("connections: every user's requests share a pool of 4")));
    let strict = ScriptFlags {
        strict: true,
        ..ScriptFlags::default()
    };
    assert!(lower(&capturing, &strict).is_ok());
    // The command line's connection counts pool a plain script's requests too.
    let flags = ScriptFlags {
        pooled: true,
        ..ScriptFlags::default()
    };
    assert!(lower(&script("", ""), &flags).unwrap().users.is_none());
    let e = refused(&script("  http: { pool: many }\n", ""));
    assert!(
        e.contains("config.http.pool") && e.contains("pool: 10"),
        "{e}"
    );
}

#[test]
fn max_vusers_caps_each_phase_of_its_own_as_artillery() {
    let s = ok("config:\n  target: http://127.0.0.1:1\n  phases:\n    - { duration: 5, arrivalRate: 3, maxVusers: 10 }\n    - { duration: 5, arrivalRate: 1 }\n    - { duration: 5, arrivalRate: 1, maxVusers: 2 }\nscenarios:\n  - flow: [{ get: { url: / } }]\n");
    assert_eq!(s.max_vusers, Some(10), "room for the largest cap");
    let Phases::Rates(phases) = &s.phases else {
        panic!("arrival phases")
    };
    let caps: Vec<Option<usize>> = phases.iter().map(|p| p.max_users).collect();
    assert_eq!(caps, [Some(10), None, Some(2)]);
    let e = refused("config:\n  target: http://127.0.0.1:1\n  phases:\n    - { duration: 5, arrivalRate: 3, maxVusers: 0 }\nscenarios:\n  - flow: [{ get: { url: / } }]\n");
    assert!(e.contains("maxVusers is a whole number"), "{e}");
}

#[test]
fn object_variables_random_strings_and_default_headers_lower_into_the_requests() {
    let s = ok("config:\n  target: http://127.0.0.1:1\n  variables:\n    user: { name: ann, tags: { first: a } }\n  defaults:\n    headers: { x-api-key: k1, accept: text/plain }\nscenarios:\n  - flow:\n      - post:\n          url: \"/u/{{ user.name }}/{{ user.tags.first }}\"\n          headers: { Accept: application/json }\n          json: { id: \"{{ $randomString() }}\" }\n");
    let names: Vec<&str> = s
        .users
        .as_ref()
        .unwrap()
        .variables
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(names, ["user.name", "user.tags.first"]);
    let r = first_request(&s);
    let headers: Vec<&str> = r.headers.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        headers,
        ["Accept", "Content-Type", "x-api-key"],
        "the request's own Accept wins"
    );
}

#[test]
fn a_url_that_is_a_template_is_a_path_on_the_target() {
    let csv = temp_file("urls.csv", "/\n/dino\n");
    let text = format!("config:\n  target: http://127.0.0.1:4\n  phases: [{{ arrivalCount: 3, duration: 1 }}]\n  payload:\n    - path: {}\n      fields: [url]\nscenarios:\n  - flow: [{{ get: {{ url: \"{{{{ url }}}}\" }} }}]\n", csv.display());
    let s = ok(&text);
    assert_eq!(s.requests[0].url, "http://127.0.0.1:4{{ url }}");
    assert_eq!(
        first_request(&s).path.variables().collect::<Vec<_>>(),
        ["url"]
    );
}

#[test]
fn expect_items_may_hold_several_checks_and_other_checks_are_refused_where_they_are() {
    let s = ok("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get:\n          url: /\n          expect: { statusCode: [200, 201], contentType: json }\n");
    assert_eq!(
        first_request(&s).checks,
        [
            Expect::ContentType("json".into()),
            Expect::Status(vec![200, 201])
        ]
    );
    assert!(first_request(&s).expects.is_empty(), "expect is not match");
    let e = refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get:\n          url: /\n          expect:\n            - statusCode: 200\n            - jmespath: \"length(items) > `0`\"\n");
    assert!(
        e.starts_with("s.yml:9:25: scenario \"scenario 1\": flow step 1: expect jmespath: loadlab does not make this check yet"),
        "{e}"
    );
    // A name the plugin does not know is ignored, as the plugin ignores it, with a warning.
    let s = ok("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get: { url: /, expect: [{ statusCod: 200 }, { notStatusCode: [500, 503] }, { cdnHit: false }] }\n");
    assert_eq!(
        first_request(&s).checks,
        [Expect::NotStatus(vec![500, 503]), Expect::CdnHit(false)]
    );
    assert!(
        s.warnings
            .iter()
            .any(|w| w.starts_with("expect statusCod: not a check of the expect plugin")),
        "{:?}",
        s.warnings
    );
    let e = refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get: { url: /, expect: [{ statusCode: ok }] }\n");
    assert!(
        e.starts_with("s.yml:5:47: ") && e.contains("expect statusCode: takes a status code"),
        "{e}"
    );
}

#[test]
fn an_item_of_one_or_a_list_says_what_is_wrong_in_it_and_where() {
    let e = refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get:\n          url: /\n          capture: { json: $.id, as: id, into: x }\n");
    assert!(e.starts_with("s.yml:7:"), "{e}");
    assert!(e.contains("unknown field `into`"), "{e}");
}

#[test]
fn parallel_steps_lower_with_the_steps_they_hold() {
    let s = ok("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - parallel:\n          - get: { url: /a }\n          - think: 1\n          - loop: [{ get: { url: /b } }]\n            count: 2\n");
    let users = s.users.as_ref().unwrap();
    let Behaviour::Flow(steps) = &users.scenarios[0].behaviour else {
        panic!("a flow");
    };
    let [Step::Parallel(steps)] = &steps[..] else {
        panic!("{steps:?}");
    };
    assert!(matches!(
        steps[..],
        [Step::Request(_), Step::Think(_), Step::Loop { .. }]
    ));
    for other in ["think: 1", "count: 2", "get: { url: /c }"] {
        let e = refused(&format!("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - parallel: [{{ get: {{ url: /a }} }}]\n        {other}\n"));
        assert!(e.contains("flow step 1"), "{other}: {e}");
    }
    let e = refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - engine: ws\n    flow:\n      - parallel: [{ send: hi }]\n");
    assert!(e.contains("parallel: runs HTTP steps"), "{e}");
}

#[test]
fn keys_the_engine_cannot_run_are_refused_with_their_place() {
    let base = "config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n";
    for (step, key) in [
        ("      - get: { url: /, ifTrue: \"a >> 1\" }\n", "ifTrue"),
        ("      - parallel: []\n", "parallel"),
        (
            "      - loop: [{ get: { url: / } }]\n        whileTrue: more\n",
            "whileTrue",
        ),
    ] {
        let e = refused(&format!("{base}{step}"));
        let line = if key == "over" || key == "whileTrue" {
            "s.yml:6:"
        } else {
            "s.yml:5:"
        };
        assert!(e.starts_with(line), "{key}: {e}");
        assert!(e.contains(&format!("flow step 1: {key}: ")), "{key}: {e}");
    }
    let e = refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - engine: grpc\n    flow:\n      - emit: { channel: x }\n");
    assert!(
        e.starts_with(
            "s.yml:4:13: engine: grpc: loadlab runs HTTP, WebSocket (ws), Socket.IO (socketio) and browser (playwright) scenarios only"
        ),
        "{e}"
    );
    // A before section holds a flow and its name: another key is read as Artillery reads it
    // (not at all), said with its place, and refused with --strict.
    let text = "config:\n  target: http://127.0.0.1:1\nbefore:\n  flow: [{ get: { url: / } }]\n  weight: 2\nscenarios:\n  - flow: [{ get: { url: / } }]\n";
    let s = ok(text);
    assert!(
        s.warnings.iter().any(|w| {
            w.starts_with(
            "s.yml:5:3: before.weight: not a key of a before or after section; Artillery ignores it"
        )
        }),
        "{:?}",
        s.warnings
    );
    let strict = ScriptFlags {
        strict: true,
        ..ScriptFlags::default()
    };
    let e = lower(text, &strict).unwrap_err().to_string();
    assert!(
        e.starts_with("s.yml:5:3: before.weight: not a key of a before or after section")
            && e.ends_with("(--strict refuses a key loadlab does not read)"),
        "{e}"
    );
}

/// Lowers `text` as a script beside a processor `p.js`, in a folder of the test's own.
fn with_processor(name: &str, text: &str) -> Result<Scenario, ScenarioError> {
    temp_file(&format!("{name}-p.js"), "module.exports = {};\n");
    let text = text.replace("./p.js", &format!("./{name}-p.js"));
    let path = temp_file(&format!("{name}.yml"), &text);
    from_text(&text, &path, None, 1, Lookup::Skip, &ScriptFlags::default())
}

#[test]
fn processor_functions_become_steps_and_request_hooks_in_artillerys_order() {
    let s = with_processor(
        "hooks",
        "config:\n  target: http://127.0.0.1:1\n  processor: ./p.js\nscenarios:\n  - beforeScenario: [a, b]\n    afterScenario: z\n    beforeRequest: sign\n    afterResponse: [keep]\n    flow:\n      - function: setToken\n      - get: { url: \"/{{ token }}\", beforeRequest: [own], afterResponse: log }\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let users = s.users.as_ref().expect("virtual users");
    let processor = users.processor.as_ref().expect("a processor");
    assert!(processor.path.is_absolute() && processor.path.ends_with("hooks-p.js"));
    assert_eq!(processor.target, "http://127.0.0.1:1");
    let Behaviour::Flow(steps) = &users.scenarios[0].behaviour else {
        panic!("a flow");
    };
    let functions: Vec<&str> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Function(f) => Some(f.as_str()),
            _ => None,
        })
        .collect();
    // beforeScenario first, afterScenario last, as Artillery turns them into function steps.
    assert_eq!(functions, ["a", "b", "setToken", "z"]);
    assert!(matches!(steps.last(), Some(Step::Function(f)) if f == "z"));
    let r = first_request(&s);
    // The scenario's hooks run before the request's own.
    assert_eq!(r.before_request, ["sign", "own"]);
    assert_eq!(r.after_response, ["keep", "log"]);
    assert!(r.needs_body(), "afterResponse reads the body");
    assert_eq!(
        users.function_names(),
        ["a", "b", "setToken", "sign", "own", "keep", "log", "z"]
    );
}

#[test]
fn hooks_need_a_processor_that_exists() {
    // A variable only a function sets is no error with a processor.
    with_processor(
        "defined",
        "config:\n  target: http://127.0.0.1:1\n  processor: ./p.js\nscenarios:\n  - flow:\n      - get: { url: \"/{{ token }}\", headers: { x: \"{{ other }}\" } }\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Without a processor, Artillery skips a function it cannot find; so does loadlab, with a
    // warning; --strict refuses.
    let hooked = "config:\n  target: http://127.0.0.1:1\nscenarios:\n  - afterResponse: printStatus\n    flow:\n      - function: f\n      - get: { url: / }\n";
    let s = ok(hooked);
    let w = s.warnings.join("\n");
    assert!(
        w.contains("afterResponse printStatus, function f: named, but the script gives no config.processor"),
        "{w}"
    );
    let e = strictly_refused(hooked);
    assert!(
        e.starts_with("s.yml:4:20: ")
            && e.contains(
                "afterResponse: names a Node.js function, but the script gives no config.processor"
            ),
        "{e}"
    );
    let e = refused("config:\n  target: http://127.0.0.1:1\n  processor: ./missing.js\nscenarios:\n  - flow:\n      - get: { url: / }\n");
    assert!(
        e.starts_with("s.yml:3:14: config.processor: ") && e.contains("missing.js is not a file"),
        "{e}"
    );
    let e = with_processor(
        "bad",
        "config:\n  target: http://127.0.0.1:1\n  processor: ./p.js\nscenarios:\n  - flow:\n      - function: { name: f }\n      - get: { url: / }\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("function: takes a function name or a list of them"),
        "{e}"
    );
}

#[test]
fn if_true_is_an_expression_or_with_a_processor_a_function() {
    let s = ok("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get: { url: /a, ifTrue: \"$loopCount > 1 and status in (200, 201)\" }\n      - get: { url: /b, ifTrue: premium }\n");
    let users = s.users.as_ref().expect("virtual users");
    let Behaviour::Flow(steps) = &users.scenarios[0].behaviour else {
        panic!("a flow");
    };
    let [Step::Request(a), Step::Request(b)] = &steps[..] else {
        panic!("two requests");
    };
    let a = a.if_true.as_ref().expect("a condition");
    assert_eq!(a.expr.variables(), ["$loopCount", "status"]);
    assert_eq!(a.function, None);
    // A bare name without a processor is a variable.
    assert_eq!(b.if_true.as_ref().unwrap().function, None);
    let s = with_processor(
        "iftrue",
        "config:\n  target: http://127.0.0.1:1\n  processor: ./p.js\nscenarios:\n  - flow:\n      - loop:\n          - get: { url: /b, ifTrue: premium }\n        whileTrue: more\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let users = s.users.as_ref().expect("virtual users");
    let Behaviour::Flow(steps) = &users.scenarios[0].behaviour else {
        panic!("a flow");
    };
    let Step::Loop {
        steps, while_true, ..
    } = &steps[0]
    else {
        panic!("a loop");
    };
    assert_eq!(while_true.as_deref(), Some("more"));
    let Step::Request(b) = &steps[0] else {
        panic!("a request");
    };
    assert_eq!(
        b.if_true.as_ref().unwrap().function.as_deref(),
        Some("premium")
    );
}

#[test]
fn a_regexp_capture_takes_a_group_and_flags() {
    let s = ok("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get:\n          url: /a\n          capture:\n            - { regexp: \"id=(\\\\d+)\", group: 1, as: id }\n            - { regexp: \"name: (?P<who>\\\\w+)\", group: who, flags: i, as: who, strict: false }\n      - get: { url: \"/{{ id }}/{{ who }}\" }\n");
    let r = first_request(&s);
    assert_eq!(
        r.captures[0].source,
        CaptureSource::Regexp {
            re: "id=(\\d+)".into(),
            group: Some("1".into())
        }
    );
    assert!(r.captures[0].strict && !r.captures[1].strict);
    assert_eq!(
        r.captures[1].source,
        CaptureSource::Regexp {
            re: "(?i)name: (?P<who>\\w+)".into(),
            group: Some("who".into())
        }
    );
    assert!(r.needs_body());
    let e = refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get: { url: /a, capture: { regexp: \"(a\", as: x } }\n");
    assert!(
        e.contains("capture \"x\": \"(a\" is not a regular expression"),
        "{e}"
    );
    let e = refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get: { url: /a, capture: { regexp: \"a\", group: 2, as: x } }\n");
    assert!(e.contains("has no group 2"), "{e}");
}

#[test]
fn cookies_and_redirects_are_artillerys() {
    let s = ok("config:\n  target: http://127.0.0.1:1\n  variables: { id: [7] }\nscenarios:\n  - flow:\n      - get: { url: /a, cookie: { session: \"s-{{ id }}\", theme: dark } }\n      - get: { url: /b, followRedirect: false }\n");
    let users = s.users.as_ref().expect("virtual users");
    let Behaviour::Flow(steps) = &users.scenarios[0].behaviour else {
        panic!("a flow");
    };
    let [Step::Request(a), Step::Request(b)] = &steps[..] else {
        panic!("two requests");
    };
    let cookies: Vec<(String, String)> = a
        .cookies
        .iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect();
    assert_eq!(
        cookies,
        [
            ("session".to_string(), "s-{{ id }}".to_string()),
            ("theme".to_string(), "dark".to_string())
        ]
    );
    // Redirects are followed unless a request says not to.
    assert!(a.follow_redirect && !b.follow_redirect);
    let e = refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get: { url: /, cookie: [a] }\n");
    assert!(
        e.contains("cookie [\"a\"]: write a map of cookie names to values"),
        "{e}"
    );
    let e = strictly_refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get: { url: /, cookie: { a: \"{{ nope }}\" } }\n");
    assert!(e.contains("nope"), "{e}");
}

#[test]
fn a_form_is_sent_url_encoded() {
    let s = ok("config:\n  target: http://127.0.0.1:1\n  phases: [{ duration: 1, arrivalRate: 1 }]\nscenarios:\n  - flow:\n      - post: { url: /login, form: { user: a b, n: 1 } }\n");
    assert_eq!(s.requests[0].body, b"n=1&user=a+b");
    assert!(s.requests[0].headers.contains(&(
        "Content-Type".into(),
        "application/x-www-form-urlencoded".into()
    )));
    // A template in a value is rendered and encoded for each request (Artillery's own test
    // script posts `number={{ input }}` from a payload).
    let s = ok("config:\n  target: http://127.0.0.1:1\n  variables: { u: [\"a&b\"] }\nscenarios:\n  - flow:\n      - post: { url: /login, form: { user: \"{{ u }}\", n: 1 } }\n");
    let step = first_request(&s);
    assert!(s.requests[0].body.is_empty());
    let form: Vec<(String, String)> = step
        .form
        .iter()
        .map(|(k, t)| (k.clone(), t.to_string()))
        .collect();
    assert_eq!(
        form,
        [("n".into(), "1".into()), ("user".into(), "{{ u }}".into())]
    );
    let e = refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - post: { url: /login, form: { \"{{ k }}\": 1 } }\n");
    assert!(e.contains("form \"{{ k }}\""), "{e}");
}

#[test]
fn the_expect_plugins_settings_say_whether_a_failed_check_ends_the_user_and_sets_the_exit_code() {
    let script = |plugins: &str| {
        format!("config:\n  target: http://127.0.0.1:1\n{plugins}scenarios:\n  - flow:\n      - get: {{ url: /a, expect: {{ statusCode: 201 }} }}\n      - get: {{ url: /b }}\n")
    };
    let model = |s: &Scenario| s.users.clone().expect("virtual users");
    let without = ok(&script(""));
    let m = model(&without);
    assert!(m.has_checks() && !m.checks_fail_user && !m.checks_set_exit_code);
    let named = ok(&script("  plugins: { expect: {} }\n"));
    let m = model(&named);
    assert!(!m.checks_fail_user && m.checks_set_exit_code);
    let errors = ok(&script(
        "  plugins: { expect: { reportFailuresAsErrors: \"yes\", expectDefault200: \"true\" } }\n",
    ));
    let m = model(&errors);
    assert!(m.checks_fail_user && m.checks_set_exit_code);
    let Behaviour::Flow(steps) = &m.scenarios[0].behaviour else {
        panic!("a flow");
    };
    let checks: Vec<&[Expect]> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Request(r) => Some(&r.checks[..]),
            _ => None,
        })
        .collect();
    assert_eq!(
        checks,
        [
            &[Expect::Status(vec![201])][..],
            &[Expect::Status(vec![200])][..]
        ],
        "expectDefault200 gives a request without checks a 200"
    );
    // The before flow's checks end it: the load depends on what it captures.
    let once = m.once(&m.scenarios[0]);
    assert!(model(&without).once(&m.scenarios[0]).checks_fail_user && once.checks_fail_user);
}

#[test]
fn the_expect_plugins_checks_lower_with_their_arguments() {
    let s = ok("config:\n  target: http://127.0.0.1:1\n  variables: { who: ann }\nscenarios:\n  - flow:\n      - get:\n          url: /\n          expect:\n            - hasProperty: user.name\n            - notHasProperty: error\n            - equals: [\"{{ who }}\", ann]\n            - hasHeader: etag\n            - headerEquals: [x-who, \"{{ who }}\"]\n            - matchesRegexp: \"^pong\"\n");
    let keys: Vec<&str> = first_request(&s).checks.iter().map(Expect::key).collect();
    assert_eq!(
        keys,
        [
            "hasProperty",
            "notHasProperty",
            "equals",
            "hasHeader",
            "headerEquals",
            "matchesRegexp"
        ]
    );
    let e = strictly_refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get: { url: /, expect: { equals: [\"{{ nobody }}\", a] } }\n");
    assert!(e.contains("{{ nobody }} is not defined"), "{e}");
    let e = refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get: { url: /, expect: { matchesRegexp: \"(\" } }\n");
    assert!(
        e.contains("expect matchesRegexp: \"(\" is not a regular expression"),
        "{e}"
    );
}

#[test]
fn a_log_step_is_a_message_template_of_defined_variables() {
    let s = ok("config:\n  target: http://127.0.0.1:1\n  variables: { id: 7 }\nscenarios:\n  - flow:\n      - log: \"user {{ id }}\"\n      - get: { url: / }\n");
    let Behaviour::Flow(steps) = &s.users.as_ref().unwrap().scenarios[0].behaviour else {
        panic!("a flow");
    };
    let Step::Log(t) = &steps[0] else {
        panic!("{steps:?}");
    };
    assert_eq!(t.to_string(), "user {{ id }}");
    let e = strictly_refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - log: \"{{ token }}\"\n      - get: { url: / }\n");
    assert!(e.contains("flow step 1: {{ token }} is not defined"), "{e}");
}

#[test]
fn a_phase_error_is_placed_at_its_phase() {
    let e = refused("config:\n  target: http://127.0.0.1:1\n  phases:\n    - { duration: 5, arrivalRate: 1 }\n    - duration: 10\n      spike: { base: 1, to: 5, length: 1, every: 5 }\n      arrivalRate: 3\nscenarios:\n  - flow: [{ get: { url: / } }]\n");
    assert!(
        e.starts_with("s.yml:5:7: phase \"phase 2\" needs one of arrivalRate"),
        "{e}"
    );
}

#[test]
fn ramp_to_without_an_arrival_rate_ramps_from_zero_as_artillery_runs_it() {
    // Artillery 2.0.34 ran `{duration: 2, rampTo: 4}` after a 1 s phase of 1/s as 5 users in
    // all: 1, then 4 ramping from 0.
    let s = ok("config:\n  target: http://127.0.0.1:1\n  phases:\n    - { duration: 1, arrivalRate: 1 }\n    - { duration: 2, rampTo: 4 }\nscenarios:\n  - flow: [{ get: { url: / } }]\n");
    assert_eq!(rates(&s), vec![(1.0, 1.0, 1.0), (0.0, 4.0, 2.0)]);
}

#[test]
fn form_data_fields_are_text_or_files_relative_to_the_scenario_file() {
    let s = ok("config:\n  target: http://127.0.0.1:1\n  variables: { f: [a.png, b.png] }\nscenarios:\n  - flow:\n      - post:\n          url: /upload\n          formData:\n            note: hi\n            doc: { fromFile: \"./files/{{ f }}\", contentType: image/png }\n");
    let fields = &first_request(&s).form_data;
    assert_eq!(fields.len(), 2);
    assert_eq!(fields[0].name, "doc");
    let loadlab_run::users::FormValue::File(path) = &fields[0].value else {
        panic!("{fields:?}");
    };
    assert_eq!(
        path.to_string(),
        "./files/{{ f }}",
        "relative to s.yml's folder (none here)"
    );
    assert_eq!(fields[0].content_type.as_deref(), Some("image/png"));
    let e = refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - post: { url: /, formData: { doc: { fromFile: x, path: y } } }\n");
    assert!(
        e.starts_with("s.yml:5:35: ") && e.contains("formData \"doc\": a field is text"),
        "{e}"
    );
}

#[test]
fn match_is_a_check_of_a_json_query_against_a_value() {
    let s = ok("config:\n  target: http://127.0.0.1:1\n  variables: { email: a@b.c }\nscenarios:\n  - flow:\n      - get:\n          url: /account\n          match:\n            json: $.user.email\n            value: \"{{ email }}\"\n");
    assert_eq!(
        first_request(&s).expects,
        [Expect::JsonMatch(
            "$.user.email".into(),
            loadlab_run::Template::parse("{{ email }}").unwrap()
        )]
    );
    let e = refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get: { url: /, match: { regexp: a, value: b } }\n");
    assert!(
        e.starts_with("s.yml:5:31: ") && e.contains("loadlab reads { json: QUERY"),
        "{e}"
    );
}

#[test]
fn an_environments_phases_are_laid_over_configs_by_position_as_artillery_merges_them() {
    let text = "config:\n  target: http://127.0.0.1:1\n  phases:\n    - { duration: 60, arrivalRate: 5, rampTo: 10 }\n    - { duration: 30, arrivalRate: 2 }\n  environments:\n    local:\n      phases:\n        - { duration: 10, arrivalRate: 1 }\nscenarios:\n  - flow: [{ get: { url: / } }]\n";
    let flags = ScriptFlags {
        environment: Some("local".into()),
        ..ScriptFlags::default()
    };
    // The first phase takes the environment's duration and rate and keeps config's rampTo;
    // the second stays.
    assert_eq!(
        rates(&lower(text, &flags).unwrap()),
        [(1.0, 10.0, 10.0), (2.0, 2.0, 30.0)]
    );
    // A count laid over a rate: Artillery runs the count (it looks for arrivalCount first).
    let text = text.replace("{ duration: 10, arrivalRate: 1 }", "{ arrivalCount: 20 }");
    assert_eq!(
        rates(&lower(&text, &flags).unwrap()),
        [(1.0 / 3.0, 1.0 / 3.0, 60.0), (2.0, 2.0, 30.0)]
    );
}

#[test]
fn a_loop_runs_over_a_list_or_a_payload_read_whole() {
    let s = ok("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - loop:\n          - get: { url: \"/p/{{ $loopElement }}?n={{ $loopCount }}\" }\n        over: [a, b, c]\n");
    let Behaviour::Flow(steps) = &s.users.as_ref().unwrap().scenarios[0].behaviour else {
        panic!("a flow");
    };
    let Step::Loop { count, over, .. } = &steps[0] else {
        panic!("{steps:?}");
    };
    assert_eq!((count, over.len()), (&None, 3));

    let csv = temp_file("table.csv", "/,200\n/dino,200\n/nope,404\n");
    let text = format!("config:\n  target: http://127.0.0.1:1\n  payload:\n    - path: {}\n      fields: [url, code]\n      loadAll: true\n      name: data\nscenarios:\n  - flow:\n    - loop:\n        - get:\n            url: \"{{{{ $loopElement.url }}}}\"\n            followRedirect: false\n            expect:\n              statusCode: \"{{{{ $loopElement.code }}}}\"\n      over: data\n", csv.display());
    let s = ok(&text);
    let Behaviour::Flow(steps) = &s.users.as_ref().unwrap().scenarios[0].behaviour else {
        panic!("a flow");
    };
    let Step::Loop {
        over, steps: body, ..
    } = &steps[0]
    else {
        panic!("{steps:?}");
    };
    assert_eq!(over[2], serde_json::json!({"url": "/nope", "code": "404"}));
    let Step::Request(r) = &body[0] else {
        panic!("{body:?}");
    };
    assert!(
        matches!(r.checks[..], [Expect::StatusOf(_)]),
        "{:?}",
        r.checks
    );
    assert!(
        s.users.as_ref().unwrap().payloads.is_empty(),
        "a list, not rows per user"
    );

    // An item that makes the URL absolute goes to its own host, as Artillery sends it: the
    // step knows that origin and the request (an endpoint of its own) that goes there.
    let csv = temp_file("abs.csv", "/,200\nhttps://example.invalid/x,404\n");
    let s = ok(&text.replace(
        &temp_file("table.csv", "/,200\n/dino,200\n/nope,404\n")
            .display()
            .to_string(),
        &csv.display().to_string(),
    ));
    let Some(Step::Loop { steps: body, .. }) =
        s.users
            .as_ref()
            .and_then(|u| match &u.scenarios[0].behaviour {
                loadlab_run::users::Behaviour::Flow(steps) => steps.first(),
                _ => None,
            })
    else {
        panic!("a loop");
    };
    let Step::Request(r) = &body[0] else {
        panic!("{body:?}");
    };
    let [(origin, other)] = &r.origins[..] else {
        panic!("{:?}", r.origins);
    };
    assert_eq!(origin, "https://example.invalid");
    assert_eq!(s.requests[*other].path, "/x");
    assert_eq!(s.requests[*other].name, s.requests[r.request].name);
    assert_ne!(s.requests[*other].endpoint, s.requests[r.request].endpoint);

    let e = refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - loop: [{ get: { url: / } }]\n        over: rows\n");
    assert!(
        e.starts_with("s.yml:6:15: ") && e.contains("over: \"rows\" is not a list loadlab knows"),
        "{e}"
    );
    let e = refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - loop: [{ get: { url: / } }]\n        over: [1]\n        count: 2\n");
    assert!(
        e.contains("over: a loop takes count or over, not both"),
        "{e}"
    );
}

#[test]
fn basic_auth_is_an_authorization_header_unless_the_request_sets_one() {
    // "Aladdin:open sesame", RFC 7617's example.
    let s = ok("config:\n  target: http://127.0.0.1:1\n  phases: [{ duration: 1, arrivalRate: 1 }]\nscenarios:\n  - flow:\n      - get: { uri: /a, auth: { user: Aladdin, pass: open sesame } }\n      - get: { url: /b, auth: { user: x, pass: y }, headers: { Authorization: Bearer t } }\n");
    assert_eq!(s.requests[0].path, "/a");
    assert!(
        s.requests[0].headers.contains(&(
            "authorization".into(),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==".into()
        )),
        "{:?}",
        s.requests[0].headers
    );
    let auth: Vec<_> = s.requests[1]
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        .collect();
    assert_eq!(auth, [&("Authorization".into(), "Bearer t".into())]);
    // A user's variable (a captured token) is encoded for each request; one no source sets is
    // refused as any other.
    let e = strictly_refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get: { url: /, auth: { user: \"{{ u }}\", pass: p } }\n");
    assert!(e.contains("u"), "{e}");
    let s = ok("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get: { url: /, capture: { json: $.u, as: u } }\n      - get: { url: /b, auth: { user: \"{{ u }}\", pass: p } }\n");
    let users = s.users.expect("a users model");
    let Behaviour::Flow(steps) = &users.scenarios[0].behaviour else {
        panic!("a flow")
    };
    let auth = steps.iter().find_map(|step| match step {
        Step::Request(r) => r.headers.iter().find(|(k, _)| k == "authorization"),
        _ => None,
    });
    let (_, t) = auth.expect("an authorization header of the user's variable");
    assert_eq!(t.variables().collect::<Vec<_>>(), ["u"]);
}

#[test]
fn keys_artillery_ignores_are_warned_about_and_keys_it_runs_that_loadlab_does_not_are_refused() {
    let s = ok("config:\n  target: http://127.0.0.1:1\n  statsInterval: 5\n  phases:\n    - duration: 1\n      arrivalRate: 1\n      ramp: 2\nscenarios:\n  - flow:\n      - get: { url: /, header: { a: b } }\n");
    let w = s.warnings.join("\n");
    assert!(
        w.contains("s.yml:3:3: config.statsInterval: ignored: "),
        "{w}"
    );
    assert!(
        w.contains("s.yml:7:7: config.phases[0].ramp: not a key of a phase; Artillery ignores it, and so does loadlab — did you mean `rampTo`?"),
        "{w}"
    );
    assert!(w.contains("did you mean `headers`?"), "{w}");
    let e = refused("config:\n  target: http://127.0.0.1:1\n  http:\n    distributedTracing: { enabled: true }\nscenarios:\n  - flow: [{ get: { url: / } }]\n");
    assert!(
        e.starts_with("s.yml:4:5: config.http.distributedTracing: "),
        "{e}"
    );
}

#[test]
fn default_headers_under_config_http_replace_those_under_config_whole() {
    let s = ok("config:\n  target: http://127.0.0.1:1\n  phases: [{ duration: 1, arrivalRate: 1 }]\n  defaults:\n    headers: { x-old: a, x-both: old }\n  http:\n    defaults:\n      headers: { x-both: new }\nscenarios:\n  - flow:\n      - get: { url: / }\n");
    let headers = &s.requests[0].headers;
    assert!(
        headers.contains(&("x-both".into(), "new".into())),
        "{headers:?}"
    );
    assert!(!headers.iter().any(|(k, _)| k == "x-old"), "{headers:?}");
}

#[test]
fn a_variable_nothing_sets_is_a_warning_and_renders_as_in_artillery() {
    // Artillery runs it: the value may come with -v, or renders as "undefined".
    let text = "config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get: { url: \"/u/{{ bar }}\", headers: { x-t: \"{{ token }}\" } }\n";
    let s = ok(text);
    let unset: Vec<&String> = s
        .warnings
        .iter()
        .filter(|w| w.contains("is set by none of this file's sources"))
        .collect();
    assert_eq!(unset.len(), 2, "{:?}", s.warnings);
    assert!(unset[0].starts_with("{{ bar }}") && unset[0].contains("-v '{\"bar\": …}'"));
    assert!(strictly_refused(text).contains("{{ bar }} is not defined"));
    // Given with -v, it is defined.
    let flags = ScriptFlags {
        variables: Some(r#"{"bar": 1, "token": "t"}"#.into()),
        ..ScriptFlags::default()
    };
    let s = lower(text, &flags).unwrap();
    assert!(
        !s.warnings.iter().any(|w| w.contains("set by none")),
        "{:?}",
        s.warnings
    );
}

#[test]
fn overrides_lay_a_json_object_over_the_script_and_its_lists_replace() {
    let text = "config:\n  target: http://127.0.0.1:1\n  phases:\n    - { duration: 10, arrivalRate: 1 }\n    - { duration: 20, arrivalRate: 2 }\n  variables: { a: x }\nscenarios:\n  - flow: [{ get: { url: \"/{{ a }}\" } }]\n";
    let flags = ScriptFlags {
        overrides: Some(
            r#"{"config": {"target": "http://127.0.0.1:2", "phases": [{"duration": 3, "arrivalRate": 5}], "variables": {"b": "y"}}, "scenarios": [{"flow": [{"get": {"url": "/o/{{ b }}"}}]}]}"#
                .into(),
        ),
        ..ScriptFlags::default()
    };
    let s = lower(text, &flags).unwrap();
    assert_eq!(rates(&s), [(5.0, 5.0, 3.0)], "a list replaces the list");
    assert!(
        s.requests[0].url.starts_with("http://127.0.0.1:2/o/"),
        "{}",
        s.requests[0].url
    );
    let names: Vec<&str> = s
        .users
        .as_ref()
        .unwrap()
        .variables
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(names, ["a", "b"], "a map merges key by key");
    for bad in ["[1]", "{", "\"x\""] {
        let flags = ScriptFlags {
            overrides: Some(bad.into()),
            ..ScriptFlags::default()
        };
        let e = lower(text, &flags).unwrap_err().to_string();
        assert!(e.contains("--overrides takes a JSON object"), "{e}");
    }
}

#[test]
fn solo_runs_one_user_and_scenario_name_one_scenario() {
    let text = "config:\n  target: http://127.0.0.1:1\n  phases: [{ duration: 60, arrivalRate: 50 }]\nscenarios:\n  - name: browse\n    flow: [{ get: { url: /b } }]\n  - name: buy\n    flow: [{ get: { url: /c } }]\n";
    let flags = ScriptFlags {
        solo: true,
        scenario_name: Some("buy".into()),
        ..ScriptFlags::default()
    };
    let s = lower(text, &flags).unwrap();
    let one = lower("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - name: buy\n    flow: [{ get: { url: /c } }]\n", &ScriptFlags::default()).unwrap();
    assert_eq!(format!("{:?}", s.phases), format!("{:?}", one.phases));
    let urls = |s: &Scenario| s.requests.iter().map(|r| r.url.clone()).collect::<Vec<_>>();
    assert_eq!(urls(&s), urls(&one));
    let flags = ScriptFlags {
        scenario_name: Some("sell".into()),
        ..ScriptFlags::default()
    };
    let e = lower(text, &flags).unwrap_err().to_string();
    assert!(
        e.contains(
            "--scenario-name \"sell\": no scenario has this name (the file has: browse, buy)"
        ),
        "{e}"
    );
}

#[test]
fn a_payload_without_a_path_takes_its_file_from_payload_and_validate_only_warns() {
    let csv = temp_file("later.csv", "ann,1\nbob,2\n");
    let text = "config:\n  target: http://127.0.0.1:1\n  payload:\n    fields: [name, id]\nscenarios:\n  - flow: [{ get: { url: \"/u/{{ name }}/{{ id }}\" } }]\n";
    let e = refused(text);
    assert!(
        e.contains(
            "config.payload (fields name, id) has no path: give its CSV file with --payload FILE"
        ),
        "{e}"
    );
    let flags = ScriptFlags {
        payload: Some(csv.clone()),
        ..ScriptFlags::default()
    };
    let s = lower(text, &flags).unwrap();
    let users = s.users.as_ref().unwrap();
    assert_eq!(users.payloads[0].rows.len(), 2);
    // Checking the script (validate): a warning, and its fields are defined.
    let checking = ScriptFlags {
        checking: true,
        ..ScriptFlags::default()
    };
    let s = lower(text, &checking).unwrap();
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("config.payload (fields name, id) has no path")),
        "{:?}",
        s.warnings
    );
    assert!(
        !s.warnings.iter().any(|w| w.contains("set by none")),
        "{:?}",
        s.warnings
    );
}

#[test]
fn validate_warns_of_a_target_left_to_run_time() {
    let text = "config:\n  phases: [{ duration: 1, arrivalRate: 1 }]\nscenarios:\n  - flow: [{ get: { url: /x } }]\n";
    assert!(refused(text).contains("config.target is not set"));
    let checking = ScriptFlags {
        checking: true,
        ..ScriptFlags::default()
    };
    let s = lower(text, &checking).unwrap();
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("config.target is not set: give --target URL when it runs")),
        "{:?}",
        s.warnings
    );
    let env = "config:\n  target: \"{{ $env.LOADLAB_TEST_UNSET_TARGET_9C }}\"\nscenarios:\n  - flow: [{ get: { url: /x } }]\n";
    let s = lower(env, &checking).unwrap();
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("LOADLAB_TEST_UNSET_TARGET_9C")),
        "{:?}",
        s.warnings
    );
    let strict = ScriptFlags {
        checking: true,
        strict: true,
        ..ScriptFlags::default()
    };
    assert!(lower(text, &strict).is_err());
}

#[test]
fn the_configs_templates_read_the_environment_chosen_and_the_variables_given() {
    let dir = temp_file("names-ci.csv", "ann\n")
        .parent()
        .unwrap()
        .to_path_buf();
    let text = "config:\n  target: http://127.0.0.1:1\n  http: { timeout: \"{{ wait }}\" }\n  payload: { path: \"{{ $dirname }}/names-{{ $environment }}.csv\", fields: [name] }\n  variables:\n    home: \"{{ $env.LOADLAB_TEST_UNSET_HOME_5D }}\"\n  environments: { ci: { target: http://127.0.0.1:2 } }\nscenarios:\n  - flow: [{ get: { url: \"/{{ name }}/{{ home }}\" } }]\n";
    let path = dir.join("s.yml");
    let flags = ScriptFlags {
        environment: Some("ci".into()),
        variables: Some(r#"{"wait": 3}"#.into()),
        ..ScriptFlags::default()
    };
    let s = from_text(text, &path, None, 1, Lookup::Skip, &flags).unwrap();
    assert_eq!(s.timeout, Some(std::time::Duration::from_secs(3)));
    let users = s.users.as_ref().unwrap();
    assert_eq!(users.payloads[0].rows, [vec!["ann".to_string()]]);
    // An unset environment variable alone leaves `home` undefined: the request renders it
    // as Artillery does, and the script says so.
    assert!(!users.variables.iter().any(|(n, _)| n == "home"));
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("config.variables.home")),
        "{:?}",
        s.warnings
    );
    // Without -v the timeout is Artillery's default; without -e the payload names no file
    // until it runs (a warning when only checked).
    let checking = ScriptFlags {
        checking: true,
        ..ScriptFlags::default()
    };
    let s = from_text(text, &path, None, 1, Lookup::Skip, &checking).unwrap();
    assert_eq!(s.timeout, None);
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("names-{{ $environment }}.csv: no such file")),
        "{:?}",
        s.warnings
    );
}

#[test]
fn config_timeout_and_the_default_strictness_of_captures_are_artillerys() {
    let s = ok("config:\n  target: http://127.0.0.1:1\n  timeout: 3\n  http: { timeout: 20 }\n  defaults: { strictCapture: false }\nscenarios:\n  - flow:\n      - get: { url: /a, capture: [{ json: \"$.id\", as: id }, { json: \"$.n\", as: n, strict: true }] }\n");
    assert_eq!(s.timeout, Some(std::time::Duration::from_secs(3)));
    let strict: Vec<bool> = first_request(&s)
        .captures
        .iter()
        .map(|c| c.strict)
        .collect();
    assert_eq!(strict, [false, true]);
    let s = ok("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - get: { url: /a, capture: { json: \"$.id\", as: id } }\n");
    assert!(first_request(&s).captures[0].strict);
}

#[test]
fn a_loop_step_with_a_think_beside_it_runs_the_loop_and_warns_of_the_think() {
    // Artillery's engine reads `loop` before `think`, and its script check lets a loop step
    // hold other keys: the loop runs, the think is not read.
    for step in [
        "      - think: 3\n        loop:\n          - get: { url: /a }\n        count: 2\n",
        "      - loop:\n          - get: { url: /a }\n        count: 2\n        think: 3\n",
    ] {
        let s = ok(&format!(
            "config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n{step}      - get: {{ url: /b }}\n"
        ));
        let users = s.users.as_ref().unwrap();
        let Behaviour::Flow(steps) = &users.scenarios[0].behaviour else {
            panic!("a flow");
        };
        let [Step::Loop {
            count: Some(2),
            steps: inner,
            ..
        }, Step::Request(_)] = &steps[..]
        else {
            panic!("{steps:?}");
        };
        assert!(matches!(inner[..], [Step::Request(_)]), "{inner:?}");
        assert!(
            s.warnings
                .iter()
                .any(|w| w.contains("flow step 1") && w.contains("think beside loop is not read")),
            "{:?}",
            s.warnings
        );
    }
    // Without a loop, a step of two kinds is refused, as Artillery's script check refuses it.
    let e = refused("config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - think: 1\n        log: hi\n");
    assert!(e.contains("flow step 1"), "{e}");
}

#[test]
fn a_variable_holding_a_list_of_objects_gives_each_user_one_of_them_read_by_its_paths() {
    let s = ok("config:\n  target: http://127.0.0.1:1\n  variables:\n    item:\n      - { name: ana, tags: { t: one } }\n      - { name: bea, tags: { t: two } }\nscenarios:\n  - flow:\n      - post: { url: \"/users/{{ item.name }}/{{ item.tags.t }}\", json: { item: \"{{ item }}\" } }\n");
    let users = s.users.as_ref().unwrap();
    assert_eq!(
        users.variable_objects.len(),
        1,
        "{:?}",
        users.variable_objects
    );
    let (name, items) = &users.variable_objects[0];
    assert_eq!(name, "item");
    assert_eq!(items[1]["tags"]["t"], "two");
    assert!(users.variables.iter().all(|(n, _)| !n.starts_with("item")));
    // Under --strict every template must read a variable some source sets: these do.
    let strict = ScriptFlags {
        strict: true,
        ..ScriptFlags::default()
    };
    lower("config:\n  target: http://127.0.0.1:1\n  variables:\n    item: [{ name: ana }]\nscenarios:\n  - flow:\n      - get: { url: \"/u/{{ item.name }}\" }\n", &strict)
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_processor_export_called_in_a_template_is_warned_about_and_refused_under_strict() {
    // Artillery 2.0.34's templates do not call a processor's exports: the text renders as
    // undefined there, and here, with a warning.
    let text = "config:\n  target: http://127.0.0.1:1\nscenarios:\n  - flow:\n      - post: { url: /a, json: { e: \"{{ $randomEmail() }}\" } }\n";
    let s = ok(text);
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("{{ $randomEmail() }}") && w.contains("not a processor's exports")),
        "{:?}",
        s.warnings
    );
    let e = strictly_refused(text);
    assert!(e.contains("$randomEmail()"), "{e}");
}

#[test]
fn an_empty_list_of_values_leaves_its_variable_undefined_and_says_so() {
    let s = ok("config:\n  target: http://127.0.0.1:1\n  variables:\n    id: []\n    name: [a, b]\nscenarios:\n  - flow: [{ get: { url: \"/{{ name }}/{{ id }}\" } }]\n");
    let w = s.warnings.join("\n");
    assert!(
        w.contains("config.variables.id is an empty list: it is undefined, as in Artillery"),
        "{w}"
    );
    assert!(!w.contains("environment variable"), "{w}");
    assert!(!w.contains("{{ id }} is set by none"), "{w}");
}
