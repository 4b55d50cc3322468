//! The variables a value sets for a virtual user: a loop's item (`$loopElement`,
//! `$loopElement.key`), an object taken from `config.variables`, and the value at a dotted path
//! of a JSON answer, as Artillery reads them.

/// The variables a loop item sets under the name `name` (`$loopElement` by default): `name`
/// (a string as is, other values as JSON) and, for an object, `name.KEY` for each of its
/// leaves (`$loopElement.a.b`).
pub fn loop_item_vars(name: &str, item: &serde_json::Value) -> Vec<(String, String)> {
    fn leaves(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
        let text = match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.push((prefix.to_string(), text));
        if let serde_json::Value::Object(m) = v {
            for (k, v) in m {
                leaves(&format!("{prefix}.{k}"), v, out);
            }
        }
    }
    let mut out = Vec::new();
    leaves(name, item, &mut out);
    out
}

/// The value at a dotted path (`a.b[0].c`, `a.b.0.c`) of a JSON document, as lodash's `get`
/// reads the paths Artillery's expect plugin takes.
pub fn json_at<'a>(doc: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    let mut at = doc;
    for segment in path.split(['.', '[', ']']).filter(|s| !s.is_empty()) {
        at = match at {
            serde_json::Value::Object(m) => m.get(segment)?,
            serde_json::Value::Array(a) => a.get(segment.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths_read_dotted_keys_and_list_indices_as_the_expect_plugin_does() {
        let doc = serde_json::json!({"user": {"name": "ann", "tags": ["a", "b"]}, "n": 0});
        assert_eq!(json_at(&doc, "user.name"), Some(&serde_json::json!("ann")));
        assert_eq!(json_at(&doc, "user.tags[1]"), Some(&serde_json::json!("b")));
        assert_eq!(json_at(&doc, "user.tags.0"), Some(&serde_json::json!("a")));
        assert_eq!(json_at(&doc, "n"), Some(&serde_json::json!(0)));
        assert_eq!(json_at(&doc, "user.age"), None);
        assert_eq!(json_at(&doc, "n.x"), None);
    }
}
