//! A small web site and a login flow, for scenarios that act like a browser: HTML pages that
//! each pull in 4 static resources (seed 002's user model), and a token issued by `/login`
//! that `/account` checks (a value a scenario captures from one response and sends back).

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use crate::endpoints::{bad_request, busy_wait, millis};
use crate::state::Shared;

/// Most tokens kept at once; see [`login`].
const MAX_TOKENS: usize = 1_000_000;

/// Static resources are cached this long by clients that cache.
const CACHE_CONTROL: &str = "max-age=3600";

/// Served for every `.css`.
const SITE_CSS: &str = "\
/* loadlab reference site: a fixed stylesheet, the same for every page. */
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 40rem; color: #222; }
h1 { font-size: 1.6rem; border-bottom: 1px solid #ccc; padding-bottom: .3rem; }
nav a { margin-right: 1rem; color: #0645ad; text-decoration: none; }
nav a:hover { text-decoration: underline; }
img { display: inline-block; width: 40px; height: 40px; image-rendering: pixelated; }
p { line-height: 1.5; }
";

/// Served for every `.js`.
const APP_JS: &str = "\
// loadlab reference site: a fixed script, the same for every page. It requests nothing, so a
// page costs exactly its HTML and its four static resources.
document.addEventListener(\"DOMContentLoaded\", function () {
  var links = document.querySelectorAll(\"nav a\");
  for (var i = 0; i < links.length; i++) {
    if (links[i].getAttribute(\"href\") === location.pathname) links[i].className = \"here\";
  }
  document.body.setAttribute(\"data-loaded\", String(Date.now()));
});
";

/// A 10 × 10 PNG, served for every `.png`.
const IMAGE_PNG: &[u8] = include_bytes!("assets/image.png");

/// Query of `/site/{page}`.
#[derive(Deserialize, Default)]
pub struct SiteParams {
    work_ms: Option<String>,
    wait_ms: Option<String>,
}

/// A 404 with a one-line reason.
fn not_found(reason: String) -> Response {
    (StatusCode::NOT_FOUND, reason + "\n").into_response()
}

/// A 401 with a one-line reason and the scheme to use.
fn unauthorized(reason: &str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        format!("{reason}\n"),
    )
        .into_response()
}

/// Whether `name` is 1 to 32 characters of `a-z`, `0-9` and `-`.
fn is_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// An HTML page named `page` (`[a-z0-9-]{1,32}`, else 404) that links `/static/site.css`,
/// `/static/app.js`, `/static/logo.png` and `/static/{page}.png` (three distinct resources when
/// the page is `logo`), after busy-waiting `work_ms` (default 0) on the CPU like `/heavy`, then
/// sleeping `wait_ms` (default 0) on the thread that serves it, as a synchronous handler
/// waiting on a database holds its thread but not the CPU (seed 002's second test replaced
/// half its busy-wait by such a sleep).
pub async fn site(
    State(s): State<Shared>,
    page: Result<Path<String>, PathRejection>,
    Query(q): Query<SiteParams>,
) -> Response {
    let page = match page {
        Ok(Path(p)) if is_name(&p) => p,
        Ok(Path(p)) => {
            return not_found(format!(
                "no page {p:?}; a page name is 1 to 32 of a-z, 0-9 and -"
            ))
        }
        Err(_) => {
            return not_found("no such page; a page name is 1 to 32 of a-z, 0-9 and -".into())
        }
    };
    let work = match millis("work_ms", q.work_ms.as_deref(), Some(0)) {
        Ok(d) => d,
        Err(e) => return e.into_response(),
    };
    let wait = match millis("wait_ms", q.wait_ms.as_deref(), Some(0)) {
        Ok(d) => d,
        Err(e) => return e.into_response(),
    };
    busy_wait(work);
    if !wait.is_zero() {
        std::thread::sleep(wait);
    }
    if s.config.visits {
        if let Err(e) = s.store.record_visit(&page).await {
            return (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response();
        }
    }
    let html = format!(
        "<!doctype html>
<html lang=\"en\">
<head>
<meta charset=\"utf-8\">
<title>{page} · loadlab</title>
<link rel=\"stylesheet\" href=\"/static/site.css\">
<script src=\"/static/app.js\"></script>
</head>
<body>
<h1>{page}</h1>
<img src=\"/static/logo.png\" alt=\"logo\">
<img src=\"/static/{page}.png\" alt=\"{page} picture\">
<nav><a href=\"/site/home\">home</a> <a href=\"/site/news\">news</a> <a href=\"/site/about\">about</a></nav>
<p>This is the page {page} of loadlab's reference site. Every page has the same stylesheet,
script and logo, and a picture of its own.</p>
</body>
</html>
"
    );
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

/// A fixed body for `{name}.css`, `{name}.js` or `{name}.png` (`name` as a page name, else
/// 404), cacheable for an hour. Nothing is read from disk.
pub async fn static_file(file: Result<Path<String>, PathRejection>) -> Response {
    let reason = "a static file is 1 to 32 of a-z, 0-9 and - followed by .css, .js or .png";
    let file = match file {
        Ok(Path(f)) => f,
        Err(_) => return not_found(format!("no such static file; {reason}")),
    };
    let (content_type, body): (&str, &'static [u8]) = match file.rsplit_once('.') {
        Some((name, "css")) if is_name(name) => ("text/css", SITE_CSS.as_bytes()),
        Some((name, "js")) if is_name(name) => ("text/javascript", APP_JS.as_bytes()),
        Some((name, "png")) if is_name(name) => ("image/png", IMAGE_PNG),
        _ => return not_found(format!("no static file {file:?}; {reason}")),
    };
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, CACHE_CONTROL),
        ],
        body,
    )
        .into_response()
}

/// What `POST /login` expects, for its 400s.
const LOGIN_BODY: &str = r#"{"user": "NAME", "password": "..."}"#;

/// Issues a random token (32 lowercase hex digits) for a JSON body `{"user": "NAME"}` (1 to
/// 128 bytes), with
/// any password or other fields, and answers `{"user": "NAME", "token": "..."}`. Tokens come
/// from fastrand: unpredictable enough for load tests, not for secrets.
pub async fn login(State(s): State<Shared>, body: Bytes) -> Response {
    let value: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return bad_request(format!("the body must be JSON like {LOGIN_BODY}: {e}")),
    };
    if !value.is_object() {
        return bad_request(format!("the body must be a JSON object like {LOGIN_BODY}"));
    }
    let user = match value.get("user") {
        Some(serde_json::Value::String(u)) => u.clone(),
        Some(_) => return bad_request("\"user\" must be a string".into()),
        None => return bad_request(format!("missing \"user\"; send {LOGIN_BODY}")),
    };
    if user.is_empty() || user.len() > 128 {
        return bad_request("the user must have 1 to 128 characters".into());
    }
    let token = {
        let mut tokens = s.tokens.lock().unwrap_or_else(|e| e.into_inner());
        // The map only exists for load tests: rather than grow without bound or track ages,
        // forget every token once a million are held (their holders then get 401s).
        if tokens.len() >= MAX_TOKENS {
            tokens.clear();
        }
        let mut token = new_token();
        while tokens.contains_key(&token) {
            token = new_token();
        }
        tokens.insert(token.clone(), user.clone());
        token
    };
    Json(serde_json::json!({ "user": user, "token": token })).into_response()
}

/// 128 random bits as 32 lowercase hex digits.
fn new_token() -> String {
    format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..))
}

/// `{"user": "NAME"}` for `Authorization: Bearer TOKEN` when this process issued TOKEN;
/// otherwise 401 with the reason.
pub async fn account(State(s): State<Shared>, headers: HeaderMap) -> Response {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return unauthorized("missing Authorization header; log in with POST /login");
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    let Some(token) = token else {
        return unauthorized("the Authorization header must be Bearer TOKEN");
    };
    let user = {
        let tokens = s.tokens.lock().unwrap_or_else(|e| e.into_inner());
        tokens.get(token).cloned()
    };
    match user {
        Some(user) => Json(serde_json::json!({ "user": user })).into_response(),
        None => unauthorized("unknown token; log in with POST /login"),
    }
}

/// The visits application's API: the views of a page counted so far, as JSON.
pub async fn visits(State(s): State<Shared>, Path(page): Path<String>) -> Response {
    if !is_name(&page) {
        return not_found(format!(
            "no page {page:?}; a page name is 1 to 32 of a-z, 0-9 and -"
        ));
    }
    match s.store.visits(&page, s.config.shards.max(1)).await {
        Ok(n) => Json(serde_json::json!({ "page": page, "visits": n })).into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_lowercase_digits_and_dashes() {
        assert!(is_name("home"));
        assert!(is_name("page-2"));
        assert!(is_name(&"a".repeat(32)));
        assert!(!is_name(""));
        assert!(!is_name(&"a".repeat(33)));
        assert!(!is_name("Home"));
        assert!(!is_name("a.b"));
        assert!(!is_name("a_b"));
    }

    #[test]
    fn tokens_are_32_lowercase_hex_digits() {
        let t = new_token();
        assert_eq!(t.len(), 32);
        assert!(t
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    }

    #[test]
    fn the_image_is_a_png() {
        assert!(IMAGE_PNG.starts_with(b"\x89PNG\r\n\x1a\n"));
    }
}
