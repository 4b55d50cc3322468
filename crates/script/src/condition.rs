//! A parsed condition evaluated on a virtual user's variables, with JavaScript's loose
//! comparisons, as filtrex (Artillery's `ifTrue`) compiles them: two values that both read as
//! numbers compare as numbers, others as text; a variable that is not set compares false with
//! everything. Written by hand, as the parser is (`loadlab_run::condition`).

use loadlab_run::condition::Expr;

/// A value while evaluating.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A number.
    Num(f64),
    /// Text.
    Str(String),
    /// A variable that is not set.
    Undefined,
}

impl Value {
    /// JavaScript's truthiness: 0, NaN, "" and undefined are false.
    pub fn truthy(&self) -> bool {
        match self {
            Value::Num(n) => *n != 0.0 && !n.is_nan(),
            Value::Str(s) => !s.is_empty(),
            Value::Undefined => false,
        }
    }

    fn number(&self) -> f64 {
        match self {
            Value::Num(n) => *n,
            Value::Str(s) if s.trim().is_empty() => 0.0,
            Value::Str(s) => s.trim().parse().unwrap_or(f64::NAN),
            Value::Undefined => f64::NAN,
        }
    }

    fn from_bool(b: bool) -> Value {
        Value::Num(if b { 1.0 } else { 0.0 })
    }
}

/// Evaluating a parsed condition.
pub trait Eval {
    /// The condition's value with the variables `lookup` gives.
    fn eval<'v>(&self, lookup: &impl Fn(&str) -> Option<&'v str>) -> Value;
}

impl Eval for Expr {
    fn eval<'v>(&self, lookup: &impl Fn(&str) -> Option<&'v str>) -> Value {
        match self {
            Expr::Num(n) => Value::Num(*n),
            Expr::Str(s) => Value::Str(s.clone()),
            Expr::Var(v) => lookup(v).map_or(Value::Undefined, |s| Value::Str(s.to_string())),
            Expr::Unary(op, a) => {
                let a = a.eval(lookup);
                match op.as_str() {
                    "not" => Value::from_bool(!a.truthy()),
                    _ => Value::Num(-a.number()),
                }
            }
            Expr::Binary(op, a, b) => {
                let a = a.eval(lookup);
                match op.as_str() {
                    "and" => Value::from_bool(a.truthy() && b.eval(lookup).truthy()),
                    "or" => Value::from_bool(a.truthy() || b.eval(lookup).truthy()),
                    _ => binary(op, &a, &b.eval(lookup)),
                }
            }
            Expr::In {
                value,
                list,
                negated,
            } => {
                let v = value.eval(lookup);
                let found = list.iter().any(|e| loose_eq(&v, &e.eval(lookup)));
                Value::from_bool(found != *negated)
            }
            Expr::If(c, a, b) => {
                if c.eval(lookup).truthy() {
                    a.eval(lookup)
                } else {
                    b.eval(lookup)
                }
            }
            Expr::Call(f, args) => {
                let n: Vec<f64> = args.iter().map(|a| a.eval(lookup).number()).collect();
                let first = n.first().copied().unwrap_or(f64::NAN);
                Value::Num(match f.as_str() {
                    "abs" => first.abs(),
                    "ceil" => first.ceil(),
                    "floor" => first.floor(),
                    "log" => first.ln(),
                    "max" => n.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    "min" => n.iter().copied().fold(f64::INFINITY, f64::min),
                    "round" => first.round(),
                    _ => first.sqrt(),
                })
            }
        }
    }
}

/// The two values as JavaScript orders them: two texts of which one is not a number as text,
/// anything else as numbers; `None` when one is not set (or a number is NaN).
fn order(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::Undefined, _) | (_, Value::Undefined) => None,
        (Value::Str(x), Value::Str(y)) if textual(x, y) => Some(x.cmp(y)),
        _ => a.number().partial_cmp(&b.number()),
    }
}

/// True when two texts compare as text: one of them is not a number.
fn textual(x: &str, y: &str) -> bool {
    x.trim().parse::<f64>().is_err() || y.trim().parse::<f64>().is_err()
}

/// JavaScript's loose `==` between two of these values.
fn loose_eq(a: &Value, b: &Value) -> bool {
    order(a, b) == Some(std::cmp::Ordering::Equal)
}

fn binary(op: &str, a: &Value, b: &Value) -> Value {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let ord = order(a, b);
    match op {
        "==" => Value::from_bool(ord == Some(Equal)),
        "!=" => Value::from_bool(ord != Some(Equal)),
        "<" => Value::from_bool(ord == Some(Less)),
        "<=" => Value::from_bool(matches!(ord, Some(Less | Equal))),
        ">" => Value::from_bool(ord == Some(Greater)),
        ">=" => Value::from_bool(matches!(ord, Some(Greater | Equal))),
        "+" => match (a, b) {
            (Value::Str(x), Value::Str(y)) if textual(x, y) => Value::Str(format!("{x}{y}")),
            _ => Value::Num(a.number() + b.number()),
        },
        "-" => Value::Num(a.number() - b.number()),
        "*" => Value::Num(a.number() * b.number()),
        "/" => Value::Num(a.number() / b.number()),
        "%" => Value::Num(a.number() % b.number()),
        _ => Value::Num(a.number().powf(b.number())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(text: &str, vars: &[(&str, &str)]) -> Value {
        let e = Expr::parse(text).unwrap_or_else(|e| panic!("{e}"));
        e.eval(&|k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| *v))
    }

    #[test]
    fn comparisons_follow_javascripts_loose_rules() {
        let vars = [("status", "200"), ("name", "ana"), ("$loopCount", "3")];
        for (text, expected) in [
            ("status == 200", true),
            ("status != 200", false),
            ("status >= 300", false),
            ("name == \"ana\"", true),
            ("name != \"bob\"", true),
            ("$loopCount < 5 and status == 200", true),
            ("$loopCount > 5 or name == \"x\"", false),
            ("not ($loopCount > 5)", true),
            ("status in (200, 201)", true),
            ("status not in (200, 201)", false),
            ("missing == 1", false),
            ("missing", false),
            ("$loopCount % 2 == 1", true),
            ("2 ^ 3 == 8", true),
            ("-$loopCount + 4 == 1", true),
            ("max(1, $loopCount, 2) == 3 and round(2.6) == 3", true),
            ("name == 'name'", true),
            ("status == 200 ? 1 : 0", true),
        ] {
            assert_eq!(eval(text, &vars).truthy(), expected, "{text}");
        }
        assert_eq!(
            Expr::parse("a > 1 and b == \"x\"").unwrap().variables(),
            ["a", "b"]
        );
    }
}
