//! Conditions on a virtual user's variables, in the expression language Artillery's `ifTrue`
//! uses (filtrex): numbers, `"strings"`, variables (`$loopCount`, `user.id`), arithmetic
//! (`+ - * / % ^`), comparisons (`== != < <= > >=`), `and`, `or`, `not`, `x in (a, b)`,
//! `x not in (…)`, `c ? a : b`, and the functions abs, ceil, floor, log, max, min, round and
//! sqrt. Parsed when the plan is built (here), evaluated per request (`loadlab-script`).
//!
//! Written by hand: the language is small and no crate implements filtrex's rules.
//! Comparisons follow JavaScript's loose ones, as filtrex compiles to JavaScript: two values
//! that both read as numbers compare as numbers, others as text; a variable that is not set
//! compares false with everything.

use serde::{Deserialize, Serialize};

/// A parsed condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Expr {
    /// A number.
    Num(f64),
    /// A string.
    Str(String),
    /// A variable.
    Var(String),
    /// A unary operator: `-`, `not`.
    Unary(String, Box<Expr>),
    /// A binary operator.
    Binary(String, Box<Expr>, Box<Expr>),
    /// `x in (…)` (`negated` for `not in`).
    In {
        /// The value looked for.
        value: Box<Expr>,
        /// The list.
        list: Vec<Expr>,
        /// True for `not in`.
        negated: bool,
    },
    /// `c ? a : b`.
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A function call.
    Call(String, Vec<Expr>),
}

/// Why a condition does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} at character {at} of {text:?}")]
pub struct ConditionError {
    /// The condition.
    pub text: String,
    /// Where, counting from 1.
    pub at: usize,
    /// What is wrong.
    pub what: String,
}

/// The functions a condition may call.
pub const FUNCTIONS: [&str; 8] = ["abs", "ceil", "floor", "log", "max", "min", "round", "sqrt"];

impl Expr {
    /// Parses a condition.
    pub fn parse(text: &str) -> Result<Expr, ConditionError> {
        let tokens = tokens(text)?;
        let mut p = Parser {
            text,
            tokens,
            pos: 0,
        };
        let e = p.ternary()?;
        if p.pos < p.tokens.len() {
            return Err(p.error("unexpected text"));
        }
        Ok(e)
    }

    /// The variables the condition reads.
    pub fn variables(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Var(v) = e {
                out.push(v.as_str());
            }
        });
        out
    }

    fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Expr)) {
        f(self);
        match self {
            Expr::Unary(_, a) => a.walk(f),
            Expr::Binary(_, a, b) => {
                a.walk(f);
                b.walk(f);
            }
            Expr::In { value, list, .. } => {
                value.walk(f);
                list.iter().for_each(|e| e.walk(f));
            }
            Expr::If(c, a, b) => {
                c.walk(f);
                a.walk(f);
                b.walk(f);
            }
            Expr::Call(_, args) => args.iter().for_each(|e| e.walk(f)),
            Expr::Num(_) | Expr::Str(_) | Expr::Var(_) => {}
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Num(f64),
    Str(String),
    Ident(String),
    Op(&'static str),
}

/// The condition's tokens, each with its position (from 1).
fn tokens(text: &str) -> Result<Vec<(Token, usize)>, ConditionError> {
    const OPS: [&str; 17] = [
        "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "^", "(", ")", ",", "?", ":",
    ];
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let error = |at: usize, what: &str| ConditionError {
        text: text.to_string(),
        at: at + 1,
        what: what.to_string(),
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            let n = s.parse().map_err(|_| error(start, "a malformed number"))?;
            out.push((Token::Num(n), start + 1));
        } else if c == '"' || c == '\'' {
            // Double quotes make a string; single quotes, as in filtrex, a variable name.
            let start = i;
            i += 1;
            let mut s = String::new();
            loop {
                match chars.get(i) {
                    None => return Err(error(start, "a quote that is never closed")),
                    Some('\\') if chars.get(i + 1).is_some() => {
                        s.push(chars[i + 1]);
                        i += 2;
                    }
                    Some(q) if *q == c => {
                        i += 1;
                        break;
                    }
                    Some(other) => {
                        s.push(*other);
                        i += 1;
                    }
                }
            }
            let token = if c == '"' {
                Token::Str(s)
            } else {
                Token::Ident(s)
            };
            out.push((token, start + 1));
        } else if c.is_alphabetic() || c == '_' || c == '$' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || matches!(chars[i], '_' | '$' | '.'))
            {
                i += 1;
            }
            out.push((Token::Ident(chars[start..i].iter().collect()), start + 1));
        } else {
            let rest: String = chars[i..].iter().take(2).collect();
            let op = OPS
                .iter()
                .find(|op| rest.starts_with(**op))
                .ok_or_else(|| error(i, &format!("{c:?} is not an operator")))?;
            out.push((Token::Op(op), i + 1));
            i += op.len();
        }
    }
    Ok(out)
}

struct Parser<'t> {
    text: &'t str,
    tokens: Vec<(Token, usize)>,
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> ConditionError {
        ConditionError {
            text: self.text.to_string(),
            at: self
                .tokens
                .get(self.pos)
                .map_or(self.text.chars().count() + 1, |t| t.1),
            what: what.to_string(),
        }
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos).map(|t| &t.0)
    }

    fn is_op(&self, op: &str) -> bool {
        matches!(self.peek(), Some(Token::Op(o)) if *o == op)
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(self.peek(), Some(Token::Ident(w)) if w == word)
    }

    fn expect_op(&mut self, op: &str) -> Result<(), ConditionError> {
        if self.is_op(op) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected {op:?}")))
        }
    }

    fn ternary(&mut self) -> Result<Expr, ConditionError> {
        let c = self.or()?;
        if self.is_op("?") {
            self.pos += 1;
            let a = self.ternary()?;
            self.expect_op(":")?;
            let b = self.ternary()?;
            return Ok(Expr::If(Box::new(c), Box::new(a), Box::new(b)));
        }
        Ok(c)
    }

    fn or(&mut self) -> Result<Expr, ConditionError> {
        let mut e = self.and()?;
        while self.is_word("or") {
            self.pos += 1;
            e = Expr::Binary("or".into(), Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, ConditionError> {
        let mut e = self.not()?;
        while self.is_word("and") {
            self.pos += 1;
            e = Expr::Binary("and".into(), Box::new(e), Box::new(self.not()?));
        }
        Ok(e)
    }

    fn not(&mut self) -> Result<Expr, ConditionError> {
        if self.is_word("not") {
            self.pos += 1;
            return Ok(Expr::Unary("not".into(), Box::new(self.not()?)));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Expr, ConditionError> {
        let e = self.additive()?;
        for op in ["==", "!=", "<=", ">=", "<", ">"] {
            if self.is_op(op) {
                self.pos += 1;
                let b = self.additive()?;
                return Ok(Expr::Binary(op.into(), Box::new(e), Box::new(b)));
            }
        }
        let negated = self.is_word("not")
            && matches!(self.tokens.get(self.pos + 1), Some((Token::Ident(w), _)) if w == "in");
        if negated || self.is_word("in") {
            self.pos += if negated { 2 } else { 1 };
            self.expect_op("(")?;
            let mut list = vec![self.ternary()?];
            while self.is_op(",") {
                self.pos += 1;
                list.push(self.ternary()?);
            }
            self.expect_op(")")?;
            return Ok(Expr::In {
                value: Box::new(e),
                list,
                negated,
            });
        }
        Ok(e)
    }

    fn additive(&mut self) -> Result<Expr, ConditionError> {
        let mut e = self.multiplicative()?;
        while let Some(op) = ["+", "-"].into_iter().find(|op| self.is_op(op)) {
            self.pos += 1;
            e = Expr::Binary(op.into(), Box::new(e), Box::new(self.multiplicative()?));
        }
        Ok(e)
    }

    fn multiplicative(&mut self) -> Result<Expr, ConditionError> {
        let mut e = self.unary()?;
        while let Some(op) = ["*", "/", "%"].into_iter().find(|op| self.is_op(op)) {
            self.pos += 1;
            e = Expr::Binary(op.into(), Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, ConditionError> {
        if self.is_op("-") {
            self.pos += 1;
            return Ok(Expr::Unary("-".into(), Box::new(self.unary()?)));
        }
        self.power()
    }

    fn power(&mut self) -> Result<Expr, ConditionError> {
        let base = self.primary()?;
        if self.is_op("^") {
            self.pos += 1;
            let exp = self.unary()?;
            return Ok(Expr::Binary("^".into(), Box::new(base), Box::new(exp)));
        }
        Ok(base)
    }

    fn primary(&mut self) -> Result<Expr, ConditionError> {
        let Some((token, _)) = self.tokens.get(self.pos).cloned() else {
            return Err(self.error("the condition ends too early"));
        };
        self.pos += 1;
        match token {
            Token::Num(n) => Ok(Expr::Num(n)),
            Token::Str(s) => Ok(Expr::Str(s)),
            Token::Ident(name) if self.is_op("(") => {
                if !FUNCTIONS.contains(&name.as_str()) {
                    self.pos -= 1;
                    return Err(self.error(&format!(
                        "{name} is not a function of the language ({})",
                        FUNCTIONS.join(", ")
                    )));
                }
                self.pos += 1;
                let mut args = Vec::new();
                if !self.is_op(")") {
                    args.push(self.ternary()?);
                    while self.is_op(",") {
                        self.pos += 1;
                        args.push(self.ternary()?);
                    }
                }
                self.expect_op(")")?;
                Ok(Expr::Call(name, args))
            }
            Token::Ident(name) if matches!(name.as_str(), "and" | "or" | "not" | "in") => {
                self.pos -= 1;
                Err(self.error(&format!("{name} needs a value before it")))
            }
            Token::Ident(name) => Ok(Expr::Var(name)),
            Token::Op("(") => {
                let e = self.ternary()?;
                self.expect_op(")")?;
                Ok(e)
            }
            Token::Op(op) => {
                self.pos -= 1;
                Err(self.error(&format!("{op:?} where a value should be")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_that_does_not_parse_says_where() {
        for (text, at, what) in [
            ("status ==", 10, "ends too early"),
            ("status === 200", 10, "not an operator"),
            ("status == * 2", 11, "where a value should be"),
            ("(a > 1", 7, "expected \")\""),
            ("name == \"ana", 9, "never closed"),
            ("evil(1)", 1, "not a function"),
            ("a & b", 3, "not an operator"),
        ] {
            let e = Expr::parse(text).unwrap_err();
            assert_eq!(e.at, at, "{text}: {e}");
            assert!(e.what.contains(what), "{text}: {e}");
        }
    }
}
