//! A template rendered for each request: its variables looked up, its functions drawn
//! (`$randomNumber`, `$randomString`, fake data), as Artillery renders the text.

use std::fmt::Write;

use loadlab_run::template::{Part, Template};

/// Rendering a parsed [`Template`].
pub trait Render {
    /// Appends the rendered text to `out`; `lookup` gives a variable's value. A variable that
    /// is not set renders as Artillery renders it: nothing when it is the whole template, the
    /// text `undefined` within other text (JavaScript's string replacement of `undefined`).
    fn render<'a>(
        &self,
        lookup: impl Fn(&str) -> Option<&'a str>,
        rng: &mut fastrand::Rng,
        out: &mut String,
    );
}

impl Render for Template {
    fn render<'a>(
        &self,
        lookup: impl Fn(&str) -> Option<&'a str>,
        rng: &mut fastrand::Rng,
        out: &mut String,
    ) {
        render_with(self, &lookup, rng, out);
    }
}

/// [`Render::render`] with the lookup behind a reference, for the nested template of a
/// [`Part::Base64`].
fn render_with<'a>(
    template: &Template,
    lookup: &dyn Fn(&str) -> Option<&'a str>,
    rng: &mut fastrand::Rng,
    out: &mut String,
) {
    // Artillery gives up on the whole text at a function it does not have: `undefined`,
    // which renders as nothing here (a URL then fails its user, a JSON member is left out).
    if template.has_unknown_function() {
        return;
    }
    let parts = template.parts();
    let missing = if parts.len() == 1 { "" } else { "undefined" };
    for p in parts {
        match p {
            Part::Text(t) => out.push_str(t),
            Part::Var(v) => out.push_str(lookup(v).unwrap_or(missing)),
            Part::Unset(_) | Part::Unknown(_) => out.push_str(missing),
            Part::RandomNumber(a, b) => {
                let _ = write!(out, "{}", rng.i64(*a..=*b));
            }
            Part::RandomString(n) => {
                out.extend((0..*n).map(|_| rng.alphanumeric()));
            }
            Part::Fake(fake, _) => crate::fake::render(*fake, rng, out),
            Part::Base64(t) => {
                use base64::Engine as _;
                let mut plain = String::new();
                render_with(t, lookup, rng, &mut plain);
                base64::engine::general_purpose::STANDARD.encode_string(plain, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_run::template::is_function_call;

    fn render(t: &Template, vars: &[(&str, &str)]) -> String {
        let mut out = String::new();
        let mut rng = fastrand::Rng::with_seed(1);
        t.render(
            |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| *v),
            &mut rng,
            &mut out,
        );
        out
    }

    #[test]
    fn variables_are_replaced_and_text_kept() {
        let t = Template::parse("/users/{{ id }}/x?t={{token}}&z=1").unwrap();
        assert_eq!(t.variables().collect::<Vec<_>>(), vec!["id", "token"]);
        assert!(!t.is_literal());
        assert_eq!(
            render(&t, &[("id", "42"), ("token", "abc")]),
            "/users/42/x?t=abc&z=1"
        );
        // Unset within text, as Artillery's string replacement gives JavaScript's undefined;
        // unset as the whole value, nothing.
        assert_eq!(render(&t, &[("id", "42")]), "/users/42/x?t=undefined&z=1");
        let alone = Template::parse("{{ token }}").unwrap();
        assert_eq!(render(&alone, &[]), "");
        assert!(alone.is_undefined(|_| None));
        assert!(!alone.is_undefined(|_| Some("x")));
        assert!(!t.is_undefined(|_| None));
        assert!(Template::parse("/plain").unwrap().is_literal());
    }

    #[test]
    fn triple_braces_and_the_environment_render_as_artillery_renders_them() {
        let t = Template::parse("/u/{{{ id }}}/{{{id}}}").unwrap();
        assert_eq!(t.variables().collect::<Vec<_>>(), vec!["id", "id"]);
        assert_eq!(render(&t, &[("id", "7")]), "/u/7/7");
        let path = std::env::var("PATH").unwrap_or_default();
        let t = Template::parse("{{ $processEnvironment.PATH }}|{{ $env.PATH }}").unwrap();
        assert!(t.is_literal(), "read once, when the file is read");
        assert_eq!(render(&t, &[]), format!("{path}|{path}"));
        let t = Template::parse("a{{ $env.LOADLAB_TEST_SURELY_UNSET_1F4 }}b").unwrap();
        assert_eq!(render(&t, &[]), "aundefinedb");
        assert_eq!(t.to_string(), "a{{ $env.LOADLAB_TEST_SURELY_UNSET_1F4 }}b");
        let t = Template::parse("{{ $env.LOADLAB_TEST_SURELY_UNSET_1F4 }}").unwrap();
        assert_eq!(render(&t, &[]), "");
        assert!(t.is_undefined(|_| None));
        assert!(Template::parse("{{ $env. }}").is_err());
    }

    #[test]
    fn functions_stay_in_range() {
        let t = Template::parse("{{ $randomNumber(3, 5) }}-{{ $randomString(8) }}").unwrap();
        let mut rng = fastrand::Rng::with_seed(9);
        for _ in 0..200 {
            let mut out = String::new();
            t.render(|_| None, &mut rng, &mut out);
            let (n, s) = out.split_once('-').unwrap();
            assert!((3..=5).contains(&n.parse::<i64>().unwrap()), "{out}");
            assert_eq!(s.len(), 8);
            assert!(s.chars().all(|c| c.is_ascii_alphanumeric()));
        }
    }

    #[test]
    fn random_string_without_a_length_gives_ten_characters_as_artillery() {
        let t = Template::parse("{{ $randomString() }}").unwrap();
        let mut out = String::new();
        t.render(|_| None, &mut fastrand::Rng::with_seed(3), &mut out);
        assert_eq!(out.len(), 10);
    }

    #[test]
    fn basic_auth_encodes_the_users_variables_for_each_request() {
        let t = Template::basic_auth("{{ user }}", "open {{ word }}").unwrap();
        assert_eq!(t.variables().collect::<Vec<_>>(), ["user", "word"]);
        assert_eq!(
            render(&t, &[("user", "Aladdin"), ("word", "sesame")]),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
    }

    #[test]
    fn fake_data_functions_render_by_either_name() {
        let t =
            Template::parse("{{ $randEmail() }}|{{$personFirstName()}}|{{ $airlineAirport() }}")
                .unwrap();
        assert!(!t.is_literal());
        assert_eq!(
            t.to_string(),
            "{{ $randEmail() }}|{{ $personFirstName() }}|{{ $airlineAirport() }}"
        );
        let mut out = String::new();
        t.render(|_| None, &mut fastrand::Rng::with_seed(4), &mut out);
        let parts: Vec<&str> = out.split('|').collect();
        assert!(
            parts[0].contains('@') && !parts[1].is_empty() && !parts[2].is_empty(),
            "{out}"
        );
    }

    #[test]
    fn a_call_of_a_function_artillery_does_not_have_makes_the_whole_text_undefined() {
        let t = Template::parse("/email/{{ $randomEmail() }}?n={{ n }}").unwrap();
        assert!(t.is_undefined(|_| Some("1")));
        assert_eq!(render(&t, &[("n", "1")]), "");
        assert_eq!(t.variables().collect::<Vec<_>>(), ["$randomEmail()", "n"]);
        assert_eq!(t.to_string(), "/email/{{ $randomEmail() }}?n={{ n }}");
        assert!(Template::parse("{{ $pick(1, b_2) }}").is_ok());
        // Not Artillery's call shape (quotes in its arguments): refused as before.
        assert!(Template::parse("{{ $pick('a') }}").is_err());
        assert!(is_function_call("$pick(1, 2)"));
        assert!(!is_function_call("pick(1)"));
        assert!(!is_function_call("$pick"));
        // Known functions still render.
        let known = Template::parse("{{ $randomNumber(1, 1) }}").unwrap();
        assert_eq!(render(&known, &[]), "1");
    }
}
