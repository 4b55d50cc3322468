//! The static resources a browser fetches on a page's first load (a leaf of the sessions
//! layer, used by `statics`): `img src`, `script src` and stylesheet `link href`, read from
//! the page's HTML.
//!
//! Written by hand rather than with an HTML5 parser: only three tag/attribute pairs matter, the
//! scan runs on every first visit of every virtual user, and a full parser (html5ever and its
//! tree) would cost more than the rest of a session's work.

/// The resource URLs `html` names, in order, each once; `data:` URLs are left out.
pub fn resource_urls(html: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    let bytes = html.as_bytes();
    let mut pos = 0;
    while let Some(lt) = html[pos..].find('<') {
        let start = pos + lt + 1;
        let name_end = bytes[start..]
            .iter()
            .position(|b| !b.is_ascii_alphanumeric())
            .map_or(bytes.len(), |n| start + n);
        let name = html[start..name_end].to_ascii_lowercase();
        let (attrs, end) = attributes(html, name_end);
        pos = end.max(start);
        let get = |key: &str| {
            attrs
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.as_str())
        };
        let url = match name.as_str() {
            "img" | "script" => get("src"),
            "link" => get("rel")
                .filter(|rel| {
                    rel.split_ascii_whitespace()
                        .any(|r| r.eq_ignore_ascii_case("stylesheet"))
                })
                .and_then(|_| get("href")),
            _ => None,
        };
        if let Some(url) = url.map(str::trim) {
            let data = url
                .as_bytes()
                .get(..5)
                .is_some_and(|b| b.eq_ignore_ascii_case(b"data:"));
            if !url.is_empty() && !data && seen.insert(url.to_string()) {
                out.push(url.to_string());
            }
        }
        if name == "script" {
            // A script's text is not markup: skip to its closing tag.
            pos = find_ascii_ci(&bytes[pos..], b"</script").map_or(html.len(), |n| pos + n + 1);
        }
    }
    out
}

/// Where `needle` (ASCII) first occurs in `hay`, ignoring ASCII case; no copy of `hay`.
fn find_ascii_ci(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

/// Reads the attributes of a tag from `from` (just after its name) to its `>`; returns them
/// and the position after the tag.
fn attributes(html: &str, from: usize) -> (Vec<(String, String)>, usize) {
    let b = html.as_bytes();
    let mut attrs = Vec::new();
    let mut i = from;
    loop {
        while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b'/') {
            i += 1;
        }
        if i >= b.len() || b[i] == b'>' {
            return (attrs, (i + 1).min(b.len()));
        }
        let key_start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && !matches!(b[i], b'=' | b'>' | b'/') {
            i += 1;
        }
        let key = html[key_start..i].to_string();
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if i < b.len() && b[i] == b'=' {
            i += 1;
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if i < b.len() && (b[i] == b'"' || b[i] == b'\'') {
                let quote = b[i];
                let start = i + 1;
                let end = b[start..]
                    .iter()
                    .position(|c| *c == quote)
                    .map_or(b.len(), |n| start + n);
                value = html[start..end].to_string();
                i = (end + 1).min(b.len());
            } else {
                let start = i;
                while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'>' {
                    i += 1;
                }
                value = html[start..i].to_string();
            }
        }
        if key.is_empty() {
            // A stray character where a name should be: step over it whole.
            if i < b.len() && i == key_start {
                i += html[i..].chars().next().map_or(1, char::len_utf8);
            }
        } else {
            attrs.push((key, decode_entities(&value)));
        }
    }
}

/// Decodes the entities that appear in URLs (`&amp;` and friends).
fn decode_entities(v: &str) -> String {
    if !v.contains('&') {
        return v.to_string();
    }
    v.replace("&amp;", "&")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_scripts_and_stylesheets_are_found_once_each() {
        let html = r#"<!doctype html><html><head>
            <link rel="stylesheet" href="/static/site.css">
            <link rel=icon href="/favicon.ico">
            <LINK REL='alternate stylesheet' HREF='/alt.css'/>
            <script src="/static/app.js"></script><script>var a = "<img src=x>";</script>
            </head><body><img alt="a > b" src="/static/logo.png"><img src="/static/logo.png">
            <img src="data:image/png;base64,AAAA"><img src=rel/pic.png?a=1&amp;b=2>
            <a href="/site/news">news</a></body></html>"#;
        assert_eq!(
            resource_urls(html),
            vec![
                "/static/site.css",
                "/alt.css",
                "/static/app.js",
                "/static/logo.png",
                "rel/pic.png?a=1&b=2"
            ]
        );
    }

    #[test]
    fn broken_html_gives_what_it_can_and_never_panics() {
        for html in [
            "<img src=\"/a.png",
            "<",
            "<img",
            "<img src=",
            "<<<>>>",
            "<img src='/ü.png'>",
            "ü<ü",
            "<img src=\"/café.png\">",
            "<img src=\"/caf\">",
            "<div =\"x\"é>",
            "<div =é>",
            "<a é=1 =\"\"ü>",
        ] {
            let _ = resource_urls(html);
        }
        assert_eq!(resource_urls("<img src=\"/a.png"), vec!["/a.png"]);
        assert_eq!(resource_urls("<img src=\"/café.png\">"), vec!["/café.png"]);
    }
}
