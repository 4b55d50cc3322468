//! Request rendering for virtual users (sessions layer): a request step's path, query,
//! headers and body (a JSON document included) rendered from its templates and the user's
//! variables, ready to be encoded for the wire.

use std::collections::HashMap;

use loadlab_run::users::{FormField, FormValue, RequestStep};
use loadlab_run::RequestTemplate;
use loadlab_script::Render;

/// Renders request step `step` (of template `t`) with the user's `vars` into the request to
/// send; the error is a `formData` file that cannot be read, in words.
pub fn render(
    step: &RequestStep,
    t: &RequestTemplate,
    vars: &HashMap<String, String>,
    rng: &mut fastrand::Rng,
) -> Result<RequestTemplate, String> {
    let lookup = |k: &str| vars.get(k).map(String::as_str);
    if step.path.is_undefined(lookup) {
        // A URL that renders to JavaScript's undefined (a call of a function Artillery's
        // templates do not have): its HTTP client refuses it, failing the user.
        return Err("Invalid URL - undefined".into());
    }
    let mut raw = String::new();
    step.path.render(lookup, rng, &mut raw);
    if raw.starts_with("http://") || raw.starts_with("https://") {
        // A URL that is a template from its start rendered to another URL: loadlab sends it
        // to the target's host only, so the session stops rather than send it elsewhere.
        return Err(format!("url renders to {raw:?}, not a path on the target"));
    }
    if !raw.starts_with('/') {
        // Neither a path nor a URL: Artillery's HTTP client refuses it, failing the user.
        return Err(format!("Invalid URL - {raw}"));
    }
    let mut path = request_target(&raw);
    for (k, v) in &step.query {
        path.push(if path.contains('?') { '&' } else { '?' });
        let mut value = String::new();
        v.render(lookup, rng, &mut value);
        path.extend(url::form_urlencoded::byte_serialize(k.as_bytes()));
        path.push('=');
        path.extend(url::form_urlencoded::byte_serialize(value.as_bytes()));
    }
    let mut headers: Vec<(String, String)> = step
        .headers
        .iter()
        .map(|(k, v)| {
            let mut value = String::new();
            v.render(lookup, rng, &mut value);
            // A captured value must not be able to end the header line.
            value.retain(|c| c != '\r' && c != '\n');
            (k.clone(), value)
        })
        .collect();
    let body = match &step.json {
        _ if !step.form_data.is_empty() => {
            let (content_type, body) = multipart(&step.form_data, &lookup, rng)?;
            headers.retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
            headers.push(("Content-Type".into(), content_type));
            body
        }
        _ if !step.form.is_empty() => {
            let mut encoded = url::form_urlencoded::Serializer::new(String::new());
            for (k, t) in &step.form {
                let mut value = String::new();
                t.render(lookup, rng, &mut value);
                encoded.append_pair(k, &value);
            }
            encoded.finish().into_bytes()
        }
        Some(doc) => {
            let rendered = render_json(doc, &lookup, rng);
            serde_json::to_vec(&rendered).unwrap_or_default()
        }
        None => {
            let mut b = String::new();
            step.body.render(lookup, rng, &mut b);
            b.into_bytes()
        }
    };
    Ok(RequestTemplate {
        path,
        headers,
        body,
        ..t.clone()
    })
}

/// A multipart/form-data body of `fields` and its `Content-Type` (with the boundary); files
/// are read as the fields name them, once rendered.
fn multipart<'v>(
    fields: &[FormField],
    lookup: &impl Fn(&str) -> Option<&'v str>,
    rng: &mut fastrand::Rng,
) -> Result<(String, Vec<u8>), String> {
    let boundary = format!("loadlab-{:016x}{:016x}", rng.u64(..), rng.u64(..));
    let mut body = Vec::new();
    for f in fields {
        let name = f.name.replace(['"', '\r', '\n'], "_");
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        match &f.value {
            FormValue::Text(t) => {
                let mut value = String::new();
                t.render(lookup, rng, &mut value);
                let ct = f
                    .content_type
                    .as_ref()
                    .map_or_else(String::new, |c| format!("Content-Type: {c}\r\n"));
                body.extend_from_slice(
                    format!("Content-Disposition: form-data; name=\"{name}\"\r\n{ct}\r\n")
                        .as_bytes(),
                );
                body.extend_from_slice(value.as_bytes());
            }
            FormValue::File(t) => {
                let mut path = String::new();
                t.render(lookup, rng, &mut path);
                let bytes = std::fs::read(&path)
                    .map_err(|e| format!("formData {name}: cannot read {path}: {e}"))?;
                let file = std::path::Path::new(&path)
                    .file_name()
                    .map_or_else(String::new, |f| {
                        f.to_string_lossy().replace(['"', '\r', '\n'], "_")
                    });
                body.extend_from_slice(
                    format!(
                        "Content-Disposition: form-data; name=\"{name}\"; filename=\"{file}\"\r\nContent-Type: {}\r\n\r\n",
                        f.content_type.as_deref().unwrap_or("application/octet-stream")
                    )
                    .as_bytes(),
                );
                body.extend_from_slice(&bytes);
            }
        }
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    Ok((format!("multipart/form-data; boundary={boundary}"), body))
}

/// A rendered path made safe for the request line: bytes that may not appear there (spaces,
/// controls, non-ASCII) are percent-encoded.
fn request_target(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for b in raw.bytes() {
        if b <= b' ' || b >= 0x7f || b == b'"' {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(b as char);
        }
    }
    if !out.starts_with('/') {
        out.insert(0, '/');
    }
    out
}

/// A JSON document with every string rendered as a template.
pub(crate) fn render_json<'v>(
    doc: &serde_json::Value,
    lookup: &impl Fn(&str) -> Option<&'v str>,
    rng: &mut fastrand::Rng,
) -> serde_json::Value {
    rendered(doc, lookup, rng).unwrap_or_else(|| serde_json::Value::String(String::new()))
}

/// The object variable `name` holds, when it holds one whole (a list's element of
/// `config.variables`, an object captured or set by a function, each also read by its paths):
/// Artillery puts such a value into a JSON body as the object it is, not as its text.
fn whole_object<'v>(
    name: &str,
    lookup: &impl Fn(&str) -> Option<&'v str>,
) -> Option<serde_json::Value> {
    let text = lookup(name)?;
    if !text.starts_with('{') {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let read_by_paths = value
        .as_object()?
        .keys()
        .next()
        .is_some_and(|k| lookup(&format!("{name}.{k}")).is_some());
    read_by_paths.then_some(value)
}

/// `doc` rendered, each string parsed once; `None` for a string that is one placeholder of an
/// undefined variable, which an object's member then leaves out, as `JSON.stringify` leaves out
/// Artillery's `undefined` (elsewhere it renders as nothing).
fn rendered<'v>(
    doc: &serde_json::Value,
    lookup: &impl Fn(&str) -> Option<&'v str>,
    rng: &mut fastrand::Rng,
) -> Option<serde_json::Value> {
    use serde_json::Value;
    Some(match doc {
        Value::String(s) if s.contains("{{") => match loadlab_run::Template::parse(s) {
            Ok(t) if t.is_undefined(lookup) => return None,
            Ok(t) => {
                if let Some(object) = t.single_variable().and_then(|v| whole_object(v, lookup)) {
                    return Some(object);
                }
                let mut out = String::new();
                t.render(lookup, rng, &mut out);
                Value::String(out)
            }
            Err(_) => doc.clone(),
        },
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| rendered(v, lookup, rng).unwrap_or_else(|| Value::String(String::new())))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), rendered(v, lookup, rng)?)))
                .collect(),
        ),
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_variable_goes_into_a_json_body_as_the_object_it_is() {
        let item = serde_json::json!({"name": "ana", "tags": {"t": "one"}});
        let vars: HashMap<String, String> = loadlab_script::vars::loop_item_vars("item", &item)
            .into_iter()
            .collect();
        // Text that merely looks like an object stays text: nothing reads it by its paths.
        let mut vars = vars;
        vars.insert("raw".into(), r#"{"a":1}"#.into());
        let lookup = |k: &str| vars.get(k).map(String::as_str);
        let doc = serde_json::json!({"item": "{{ item }}", "n": "{{ item.name }}", "raw": "{{ raw }}", "in": "x {{ item }}"});
        let got = render_json(&doc, &lookup, &mut fastrand::Rng::with_seed(1));
        assert_eq!(got["item"], item);
        assert_eq!(got["n"], "ana");
        assert_eq!(got["raw"], r#"{"a":1}"#);
        assert_eq!(
            got["in"],
            format!("x {}", serde_json::to_string(&item).unwrap())
        );
    }
}
