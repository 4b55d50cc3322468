//! The templates of a script's config, rendered when the file is read, as Artillery renders its
//! config before the run: the process's environment (`{{ $processEnvironment.NAME }}`,
//! `{{ $env.NAME }}`), the `-e` environment's name (`{{ $environment }}`), the config file's
//! folder (`{{ $dirname }}`), the script's path (`{{ $scenarioFile }}`) and the variables of
//! `-v`. Other placeholders are left for the users' templates.
//!
//! The lowering of one script sets them with [`within`] around itself, on its own thread: the
//! places that read a config value (phases, durations, the target, payload paths) are many
//! and deep in the lowering, and each needs the same few values.

use std::cell::RefCell;
use std::collections::BTreeMap;

/// What a script's config templates read besides the environment.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The variables of `-v`, by name.
    pub variables: BTreeMap<String, serde_json::Value>,
    /// The environment chosen with `-e`.
    pub environment: Option<String>,
    /// The folder of the file the config came from.
    pub dirname: String,
    /// The script's path.
    pub scenario_file: String,
    /// True when the script is only checked (`validate`): an unset environment variable is a
    /// warning, and its placeholder renders as the value the caller gives.
    pub checking: bool,
}

thread_local! {
    static CONTEXT: RefCell<Option<Context>> = const { RefCell::new(None) };
    static WARNINGS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with `context` as the config's templates' values, and returns what it returned
/// with the warnings rendering gave (environment variables that checking found unset).
pub fn within<T>(context: Context, f: impl FnOnce() -> T) -> (T, Vec<String>) {
    let before = CONTEXT.with(|c| c.replace(Some(context)));
    let warned = WARNINGS.with(|w| w.take());
    let out = f();
    let warnings = WARNINGS.with(|w| w.replace(warned));
    CONTEXT.with(|c| *c.borrow_mut() = before);
    (out, warnings)
}

/// `text` with the config's placeholders rendered; the error names an environment variable
/// that is not set. Under `validate` (see [`Context::checking`]) an unset one is a warning and
/// renders as `checked_as` when given.
pub fn render(text: &str, checked_as: Option<&str>) -> Result<String, String> {
    CONTEXT.with(|c| {
        let context = c.borrow();
        let context = context.as_ref();
        let mut out = String::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            let Some(close) = rest[open..].find("}}").map(|c| open + c) else {
                break;
            };
            // Triple braces, Mustache's unescaped form, are the same placeholder.
            let triple = rest[open + 2..].starts_with('{') && rest[close + 2..].starts_with('}');
            let inner = rest[open + 2..close].trim_start_matches('{').trim();
            let end = close + if triple { 3 } else { 2 };
            out.push_str(&rest[..open]);
            match value(inner, context, checked_as)? {
                Some(v) => out.push_str(&v),
                None => out.push_str(&rest[open..end]),
            }
            rest = &rest[end..];
        }
        out.push_str(rest);
        Ok(out)
    })
}

/// `text` rendered as Artillery renders a value of `config.variables`: an unset environment
/// variable is JavaScript's `undefined`, the text `undefined` within other text; `None` when the
/// value is that one placeholder alone (the variable is then undefined).
pub fn render_value(text: &str) -> Option<String> {
    let trimmed = text.trim();
    let alone =
        trimmed.starts_with("{{") && trimmed.ends_with("}}") && trimmed.matches("{{").count() == 1;
    match render(text, None) {
        Ok(out) => Some(out),
        Err(_) if alone => None,
        Err(_) => Some(render_each(text, |_| "undefined".into())),
    }
}

/// `text` with the config's placeholders rendered for a request's template: one that reads an
/// unset environment variable is left as written, for the request's template to render as an
/// undefined variable.
pub fn render_request(text: &str) -> String {
    render(text, None).unwrap_or_else(|_| render_each(text, str::to_string))
}

/// `text` with each placeholder rendered alone, or as `unset` says when it reads an unset
/// environment variable.
fn render_each(text: &str, unset: impl Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open..].find("}}").map(|c| open + c) else {
            break;
        };
        let piece = &rest[open..close + 2];
        out.push_str(&rest[..open]);
        out.push_str(&render(piece, None).unwrap_or_else(|_| unset(piece)));
        rest = &rest[close + 2..];
    }
    out.push_str(rest);
    out
}

/// The value of one placeholder of the config, `None` when it is no config value (a users'
/// template).
fn value(
    inner: &str,
    context: Option<&Context>,
    checked_as: Option<&str>,
) -> Result<Option<String>, String> {
    if let Some(name) = inner
        .strip_prefix("$processEnvironment.")
        .or_else(|| inner.strip_prefix("$env."))
    {
        return match std::env::var(name) {
            Ok(v) => Ok(Some(v)),
            Err(_) => {
                let unset = format!(
                    "{inner} reads the environment variable {name}, which is not set; set it or \
                     write the value"
                );
                match (context.is_some_and(|c| c.checking), checked_as) {
                    (true, Some(placeholder)) => {
                        WARNINGS.with(|w| {
                            w.borrow_mut()
                                .push(format!("{unset} before it runs; checked as {placeholder}"))
                        });
                        Ok(Some(placeholder.to_string()))
                    }
                    _ => Err(unset),
                }
            }
        };
    }
    let Some(context) = context else {
        return Ok(None);
    };
    Ok(match inner {
        // Artillery renders an unset one as JavaScript's `undefined`.
        "$environment" => Some(
            context
                .environment
                .clone()
                .unwrap_or_else(|| "undefined".into()),
        ),
        "$dirname" => Some(context.dirname.clone()),
        "$scenarioFile" => Some(context.scenario_file.clone()),
        name => context.variables.get(name).map(|v| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configs_values_render_and_the_users_templates_stay() {
        let context = Context {
            variables: BTreeMap::from([
                ("host".to_string(), serde_json::json!("127.0.0.1")),
                ("port".to_string(), serde_json::json!(8080)),
            ]),
            environment: Some("ci".into()),
            dirname: "/scripts".into(),
            scenario_file: "/scripts/s.yml".into(),
            checking: false,
        };
        let path = std::env::var("PATH").unwrap_or_default();
        let (out, warnings) = within(context, || {
            (
                render("http://{{ host }}:{{{ port }}}/{{ id }}", None),
                render("{{ $dirname }}/names-{{ $environment }}.csv", None),
                render("{{ $env.PATH }}", None),
                render("{{ $env.LOADLAB_TEST_UNSET_CFG_3E }}", Some("1")),
            )
        });
        assert_eq!(out.0.unwrap(), "http://127.0.0.1:8080/{{ id }}");
        assert_eq!(out.1.unwrap(), "/scripts/names-ci.csv");
        assert_eq!(out.2.unwrap(), path);
        assert!(out.3.unwrap_err().contains("LOADLAB_TEST_UNSET_CFG_3E"));
        assert!(warnings.is_empty());
        // Checked only: a warning, and the value given.
        let checking = Context {
            checking: true,
            ..Context::default()
        };
        let (out, warnings) = within(checking, || {
            render("{{ $env.LOADLAB_TEST_UNSET_CFG_3E }}", Some("1"))
        });
        assert_eq!(out.unwrap(), "1");
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].ends_with("checked as 1"), "{warnings:?}");
        // A variable's value: an unset environment variable is undefined, as in Artillery.
        assert_eq!(render_value("{{ $env.LOADLAB_TEST_UNSET_CFG_3E }}"), None);
        assert_eq!(
            render_value("/{{ $env.LOADLAB_TEST_UNSET_CFG_3E }}/{{ id }}").as_deref(),
            Some("/undefined/{{ id }}")
        );
        // Outside a script's lowering, only the environment renders.
        assert_eq!(
            render("{{ $environment }}/{{ host }}", None).unwrap(),
            "{{ $environment }}/{{ host }}"
        );
    }
}
