//! Text with `{{ name }}` placeholders, as Artillery writes them: parsed once when the plan is
//! built (here), rendered for every request a virtual user sends (`loadlab-script`).
//!
//! Besides variables, two of Artillery's functions are understood: `{{ $randomNumber(a, b) }}`
//! (an integer from `a` to `b`, both included) and `{{ $randomString(n) }}` (`n` letters and
//! digits), the environment, `{{ $processEnvironment.NAME }}` or `{{ $env.NAME }}`, and the
//! fake-data functions of Artillery's built-in plugin (`{{ $internetEmail() }}`,
//! `{{ $randFirstName() }}`: [`crate::fake`]). Triple braces (`{{{ name }}}`) are the same
//! placeholders.

use serde::{Deserialize, Serialize};

use crate::fake::Fake;

/// Longest string `$randomString(n)` may produce.
const MAX_RANDOM_STRING: usize = 4096;

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Part {
    /// Text copied as is.
    Text(String),
    /// The value of a variable.
    Var(String),
    /// `$randomNumber(min, max)`: an integer from `min` to `max`, both included.
    RandomNumber(i64, i64),
    /// `$randomString(len)`: `len` letters and digits.
    RandomString(usize),
    /// A fake-data function, with its name as written (`$internetEmail()`).
    Fake(Fake, String),
    /// A template rendered, then base64-encoded (basic authentication of a user's variables).
    Base64(Template),
    /// An environment variable that was not set when the file was read (the placeholder as
    /// written): it renders as an undefined variable does.
    Unset(String),
    /// A call of a function Artillery's templates do not have (`$name(args)`, a processor's
    /// export among them), as written: Artillery 2.0.34 renders the whole text holding it as
    /// JavaScript's `undefined`, and so does loadlab.
    Unknown(String),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Template {
    parts: Vec<Part>,
}

impl std::fmt::Display for Template {
    /// The template as written, its placeholders in `{{ }}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for p in &self.parts {
            match p {
                Part::Text(t) => f.write_str(t)?,
                Part::Var(v) => write!(f, "{{{{ {v} }}}}")?,
                Part::RandomNumber(a, b) => write!(f, "{{{{ $randomNumber({a}, {b}) }}}}")?,
                Part::RandomString(n) => write!(f, "{{{{ $randomString({n}) }}}}")?,
                Part::Fake(_, name) => write!(f, "{{{{ ${name}() }}}}")?,
                Part::Base64(t) => write!(f, "base64({t})")?,
                Part::Unset(v) | Part::Unknown(v) => write!(f, "{{{{ {v} }}}}")?,
            }
        }
        Ok(())
    }
}

/// A template that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `{{` without its `}}`.
    #[error("{0:?} opens a placeholder with {{{{ but never closes it with }}}}")]
    Unclosed(String),
    /// An empty or malformed placeholder.
    #[error("{{{{ {0} }}}} is not a variable name or a known function ($randomNumber(a, b), $randomString(n), $randomString(), or a fake-data function such as $internetEmail())")]
    Bad(String),
}

impl Template {
    /// Parses `text`; `{{ name }}` is a variable, everything else is literal.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_string()));
            }
            let after = &rest[open + 2..];
            // Triple braces, Mustache's unescaped form, which Artillery renders as double ones
            // (it escapes nothing).
            if let Some(close) = after.strip_prefix('{').and_then(|a| a.find("}}}")) {
                parts.push(placeholder(after[1..1 + close].trim())?);
                rest = &after[1 + close + 3..];
                continue;
            }
            let close = after
                .find("}}")
                .ok_or_else(|| TemplateError::Unclosed(text.to_string()))?;
            parts.push(placeholder(after[..close].trim())?);
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        Ok(Template { parts })
    }

    /// A template of literal text only.
    pub fn literal(text: &str) -> Template {
        Template {
            parts: if text.is_empty() {
                Vec::new()
            } else {
                vec![Part::Text(text.to_string())]
            },
        }
    }

    /// True when rendering always gives the same text (no placeholder).
    pub fn is_literal(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Text(_)))
    }

    /// True when the template renders to nothing.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The template's pieces, in order.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// `Basic` authentication of `user` and `password`, templates both: `user:password`
    /// rendered, then base64-encoded, for each request.
    pub fn basic_auth(user: &str, password: &str) -> Result<Template, TemplateError> {
        let credentials = Template::parse(&format!("{user}:{password}"))?;
        Ok(Template {
            parts: vec![Part::Text("Basic ".into()), Part::Base64(credentials)],
        })
    }

    /// The variables the template reads, in order; a call of a function Artillery's templates
    /// do not have is one too, as written (`$pick(1, 2)`: see [`is_function_call`]).
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        let mut out = Vec::new();
        self.collect_variables(&mut out);
        out.into_iter()
    }

    fn collect_variables<'a>(&'a self, out: &mut Vec<&'a str>) {
        for p in &self.parts {
            match p {
                Part::Var(v) | Part::Unknown(v) => out.push(v),
                Part::Base64(t) => t.collect_variables(out),
                _ => {}
            }
        }
    }

    /// The text with every placeholder as `value`: a sample of the rendered text, to check the
    /// syntax of what it renders to (a JSONPath query, a number).
    pub fn sample_with(&self, value: &str) -> String {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.as_str(),
                _ => value,
            })
            .collect()
    }

    /// True when the template is one placeholder whose variable `lookup` does not give (or an
    /// unset environment variable): Artillery renders it as JavaScript's `undefined`, which a
    /// JSON body leaves out.
    pub fn is_undefined<'a>(&self, lookup: impl Fn(&str) -> Option<&'a str>) -> bool {
        if self.has_unknown_function() {
            return true;
        }
        match self.parts.as_slice() {
            [Part::Var(v)] => lookup(v).is_none(),
            [Part::Unset(_)] => true,
            _ => false,
        }
    }

    /// True when the template calls a function Artillery's templates do not have: the whole
    /// text is then undefined.
    pub fn has_unknown_function(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Unknown(_)))
    }

    /// The variable the template reads when it is that one placeholder and nothing else.
    pub fn single_variable(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [Part::Var(v)] => Some(v),
            _ => None,
        }
    }
}

/// True when `text` (what stands between `{{` and `}}`) is a call in the shape Artillery's
/// templates recognise as one (`$name(a, b)`: a name of letters, digits and `_`; arguments of
/// those, commas and spaces), whatever the function.
pub fn is_function_call(text: &str) -> bool {
    let Some((name, args)) = text
        .strip_prefix('$')
        .and_then(|t| t.strip_suffix(')'))
        .and_then(|t| t.split_once('('))
    else {
        return false;
    };
    let name = name.trim_end();
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && args
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ',' || c.is_whitespace())
}

/// Parses what stands between `{{` and `}}`.
fn placeholder(inner: &str) -> Result<Part, TemplateError> {
    let bad = || TemplateError::Bad(inner.to_string());
    // A loop's element (`$loopElement`, `$loopElement.url`) and count are variables the loop
    // sets; `$uuid` is each user's own id, as Artillery's.
    let loop_var = inner == "$loopCount"
        || inner == "$uuid"
        || inner
            .strip_prefix("$loopElement")
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'));
    if loop_var
        && inner
            .chars()
            .skip(1)
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return Ok(Part::Var(inner.to_string()));
    }
    // The process's environment, as Artillery's `$processEnvironment` (and `$env`) give it to
    // every template: read once, when the file is read; an unset one renders as an undefined
    // variable does.
    if let Some(name) = inner
        .strip_prefix("$processEnvironment.")
        .or_else(|| inner.strip_prefix("$env."))
    {
        if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == '=') {
            return Err(bad());
        }
        return Ok(match std::env::var(name) {
            Ok(value) => Part::Text(value),
            Err(_) => Part::Unset(inner.to_string()),
        });
    }
    if let Some(call) = inner.strip_prefix('$') {
        let (name, args) = call
            .strip_suffix(')')
            .and_then(|c| c.split_once('('))
            .ok_or_else(bad)?;
        let args: Vec<&str> = args.split(',').map(str::trim).collect();
        return match (name.trim(), args.as_slice()) {
            ("randomNumber", [a, b]) => {
                let (a, b) = (
                    a.parse::<i64>().map_err(|_| bad())?,
                    b.parse::<i64>().map_err(|_| bad())?,
                );
                if a > b {
                    return Err(bad());
                }
                Ok(Part::RandomNumber(a, b))
            }
            // Without a length, Artillery's default of 10.
            ("randomString", [""]) => Ok(Part::RandomString(10)),
            ("randomString", [n]) => match n.parse::<usize>() {
                Ok(n) if n <= MAX_RANDOM_STRING => Ok(Part::RandomString(n)),
                _ => Err(bad()),
            },
            // Options a fake-data function takes come from the plugin's config, not the call.
            (name, _) => match Fake::named(name) {
                Some(f) => Ok(Part::Fake(f, name.to_string())),
                // A call Artillery's template engine recognises (its function-call pattern)
                // of a function it does not have.
                None if is_function_call(inner) => Ok(Part::Unknown(inner.to_string())),
                None => Err(bad()),
            },
        };
    }
    let valid = !inner.is_empty()
        && inner
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if valid {
        Ok(Part::Var(inner.to_string()))
    } else {
        Err(bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loops_element_and_count_are_variables() {
        let t =
            Template::parse("{{ $loopElement.url }}-{{ $loopCount }}-{{ $loopElement }}").unwrap();
        let vars: Vec<&str> = t.variables().collect();
        assert_eq!(vars, ["$loopElement.url", "$loopCount", "$loopElement"]);
        assert!(Template::parse("{{ $loopElements }}").is_err());
    }

    #[test]
    fn malformed_placeholders_are_refused() {
        for bad in [
            "{{ }}",
            "{{ a b }}",
            // A call of an unknown function renders as undefined (as in Artillery); one
            // outside Artillery's call shape is no placeholder at all.
            "{{ $nope('1') }}",
            "{{ $randomNumber(5, 1) }}",
            "{{ $randomString(99999) }}",
        ] {
            assert!(
                matches!(Template::parse(bad), Err(TemplateError::Bad(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            Template::parse("/x/{{ id"),
            Err(TemplateError::Unclosed(_))
        ));
    }
}
