//! JSONPath queries as Artillery's users write them, in the standard form (RFC 9535) that
//! the query engine reads: Artillery's `jsonpath-plus` takes `$.items.0.name` (an index
//! written as a member) and `$.some-key` (a name with a dash), which the standard writes
//! `$.items[0].name` and `$['some-key']`.
//!
//! Written by hand: it rewrites the dot segments outside brackets only, a few lines that no
//! JSONPath crate offers (each parses one dialect).

/// `query` with its dot segments in the standard form: a segment of digits as an index, a
/// name the standard's shorthand does not take (a dash, a leading digit) in brackets. What is
/// inside brackets, wildcards, `..` and templates (`{{ }}`) are left as written.
pub fn standard(query: &str) -> String {
    let mut out = String::with_capacity(query.len() + 8);
    let mut chars = query.char_indices().peekable();
    let mut depth = 0usize;
    while let Some((i, c)) = chars.next() {
        match c {
            '[' => {
                depth += 1;
                out.push(c);
            }
            ']' => {
                depth = depth.saturating_sub(1);
                out.push(c);
            }
            '.' if depth == 0 && !query[i + 1..].starts_with('.') && !query[..i].ends_with('.') => {
                let rest = &query[i + 1..];
                let len = rest.find(['.', '[']).unwrap_or(rest.len());
                let segment = &rest[..len];
                if segment.is_empty()
                    || segment == "*"
                    || segment.contains("{{")
                    || shorthand(segment)
                {
                    out.push('.');
                    continue;
                }
                if segment.bytes().all(|b| b.is_ascii_digit()) {
                    out.push_str(&format!("[{segment}]"));
                } else {
                    out.push_str(&format!(
                        "['{}']",
                        segment.replace('\\', "\\\\").replace('\'', "\\'")
                    ));
                }
                for _ in 0..segment.chars().count() {
                    chars.next();
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// True when `name` is a member name the standard's shorthand (`.name`) takes: a letter, `_`
/// or a non-ASCII character first, then those or digits.
fn shorthand(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || !c.is_ascii())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii())
}

#[cfg(test)]
mod tests {
    use super::standard;

    #[test]
    fn artillerys_dialect_reads_as_the_standard() {
        assert_eq!(standard("$.result.0.name"), "$.result[0].name");
        assert_eq!(standard("$.items.12"), "$.items[12]");
        assert_eq!(standard("$.some-key.id"), "$['some-key'].id");
        assert_eq!(standard("$.a['b.c'].d"), "$.a['b.c'].d");
        assert_eq!(standard("$..name"), "$..name");
        assert_eq!(standard("$.items[*].id"), "$.items[*].id");
        assert_eq!(standard("$.items.*"), "$.items.*");
        assert_eq!(standard("$.{{ key }}.0"), "$.{{ key }}[0]");
        assert_eq!(
            standard("$[?(@.price < 10)].title"),
            "$[?(@.price < 10)].title"
        );
        for q in ["$.result.0.name", "$.some-key.id", "$.a.b"] {
            assert!(
                serde_json_path::JsonPath::parse(&standard(q)).is_ok(),
                "{q}"
            );
        }
    }
}
