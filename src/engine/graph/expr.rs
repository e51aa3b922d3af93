//! Legacy "Nailgun Expressions": the string conditions of Fuel 8 task files
//! (`settings:additional_components.ironic.value == true`), as `nailgun/expression` parsed them.
//!
//! Tokens: integers `-?\d+`, strings in `'…'` or `"…"` (no escapes), `true`, `false`, `null`,
//! `and`, `or`, `not`, `in`, `==`, `!=`, parentheses, and model paths `model:a.b-c.d`.
//! Precedence, loosest first, all left-associative: `or`, `and`, `== !=`, `in` and `not`.
//! `and`/`or` short-circuit and return an operand (Python), `not` gives a bool, `in` is Python's
//! `in` (substring, list item or dict key), `==` Python equality (so `1 == true`).
//!
//! Paths are evaluated the LCM way: the models are `cluster` (the deployment data's `cluster`)
//! and `settings` (the whole deployment data), and settings paths are first rewritten the way
//! Nailgun flattened them: `settings:additional_components.X(.value)` → `settings:X.enabled`,
//! `settings:common.X(.value)` → `settings:X`, then a trailing `.value` is dropped. A missing
//! key gives null (non-strict mode). Pure.

use serde_json::Value as J;

/// A parse or evaluation failure, with the expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("in expression {expr:?}: {message}")]
pub struct ExprError {
    pub expr: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Int(i64),
    Str(String),
    True,
    False,
    Null,
    And,
    Or,
    Not,
    In,
    Eq,
    Ne,
    LParen,
    RParen,
    Path(String, String),
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Lit(J),
    Path { model: String, path: String },
    Not(Box<Expr>),
    Bin(Op, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Or,
    And,
    Eq,
    Ne,
    In,
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn lex(text: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        match c {
            '(' => {
                out.push(Tok::LParen);
                i += 1;
                continue;
            }
            ')' => {
                out.push(Tok::RParen);
                i += 1;
                continue;
            }
            '=' | '!' if chars.get(i + 1) == Some(&'=') => {
                out.push(if c == '=' { Tok::Eq } else { Tok::Ne });
                i += 2;
                continue;
            }
            '\'' | '"' => {
                let end = chars[i + 1..]
                    .iter()
                    .position(|&d| d == c)
                    .ok_or_else(|| format!("unterminated string at column {}", i + 1))?;
                out.push(Tok::Str(chars[i + 1..i + 1 + end].iter().collect()));
                i += end + 2;
                continue;
            }
            _ => {}
        }
        // A word: number, keyword or model path (`\w*?:[\w.\-]+`).
        let start = i;
        if c == '-' || c.is_ascii_digit() {
            let mut j = i + 1;
            while j < chars.len() && chars[j].is_ascii_digit() {
                j += 1;
            }
            let digits: String = chars[start..j].iter().collect();
            if (j > i + 1 || c != '-') && !chars.get(j).is_some_and(|&d| is_word(d) || d == ':') {
                let n = digits
                    .parse()
                    .map_err(|_| format!("number {digits} out of range"))?;
                out.push(Tok::Int(n));
                i = j;
                continue;
            }
        }
        let mut j = i;
        while j < chars.len() && is_word(chars[j]) {
            j += 1;
        }
        if chars.get(j) == Some(&':') {
            let model: String = chars[start..j].iter().collect();
            let mut k = j + 1;
            while k < chars.len() && (is_word(chars[k]) || chars[k] == '.' || chars[k] == '-') {
                k += 1;
            }
            if k == j + 1 {
                return Err(format!("empty model path at column {}", start + 1));
            }
            out.push(Tok::Path(model, chars[j + 1..k].iter().collect()));
            i = k;
            continue;
        }
        let word: String = chars[start..j].iter().collect();
        let tok = match word.as_str() {
            "true" => Tok::True,
            "false" => Tok::False,
            "null" => Tok::Null,
            "and" => Tok::And,
            "or" => Tok::Or,
            "not" => Tok::Not,
            "in" => Tok::In,
            "" => return Err(format!("unexpected {c:?} at column {}", i + 1)),
            other => return Err(format!("unknown word {other:?} at column {}", start + 1)),
        };
        out.push(tok);
        i = j;
    }
    Ok(out)
}

/// The most tokens an expression may have: Fuel's conditions have a few dozen; the text comes
/// from packages and uploads, and every walk of the tree (evaluation, the Settings form's
/// trees, their rendering and drop) recurses over it.
pub const MAX_TOKENS: usize = 512;

/// The deepest nesting of parentheses and `not`s an expression may have.
pub const MAX_DEPTH: usize = 32;

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    /// Parentheses and `not`s open around the current token.
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn binary(&mut self, level: u8) -> Result<Expr, String> {
        if level == 3 {
            return self.unary();
        }
        let mut left = self.binary(level + 1)?;
        loop {
            let op = match (level, self.peek()) {
                (0, Some(Tok::Or)) => Op::Or,
                (1, Some(Tok::And)) => Op::And,
                (2, Some(Tok::Eq)) => Op::Eq,
                (2, Some(Tok::Ne)) => Op::Ne,
                _ => return Ok(left),
            };
            self.pos += 1;
            let right = self.binary(level + 1)?;
            left = Expr::Bin(op, Box::new(left), Box::new(right));
        }
    }

    /// `in` and `not` share the tightest level and associate left, as in Nailgun's PLY
    /// grammar: `not a in b` is `(not a) in b`.
    fn unary(&mut self) -> Result<Expr, String> {
        let mut left = self.prefix()?;
        while self.peek() == Some(&Tok::In) {
            self.pos += 1;
            let right = self.prefix()?;
            left = Expr::Bin(Op::In, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn prefix(&mut self) -> Result<Expr, String> {
        if self.peek() == Some(&Tok::Not) {
            self.pos += 1;
            self.enter()?;
            let e = Expr::Not(Box::new(self.prefix()?));
            self.depth -= 1;
            return Ok(e);
        }
        self.atom()
    }

    /// One level deeper, within [`MAX_DEPTH`].
    fn enter(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH} levels"));
        }
        Ok(())
    }

    fn atom(&mut self) -> Result<Expr, String> {
        let tok = self
            .toks
            .get(self.pos)
            .cloned()
            .ok_or_else(|| "unexpected end of expression".to_string())?;
        self.pos += 1;
        Ok(match tok {
            Tok::Int(i) => Expr::Lit(J::from(i)),
            Tok::Str(s) => Expr::Lit(J::String(s)),
            Tok::True => Expr::Lit(J::Bool(true)),
            Tok::False => Expr::Lit(J::Bool(false)),
            Tok::Null => Expr::Lit(J::Null),
            Tok::Path(model, path) => Expr::Path { model, path },
            Tok::LParen => {
                self.enter()?;
                let e = self.binary(0)?;
                self.depth -= 1;
                if self.peek() != Some(&Tok::RParen) {
                    return Err("missing )".to_string());
                }
                self.pos += 1;
                e
            }
            other => return Err(format!("unexpected {other:?}")),
        })
    }
}

/// Parse an expression.
pub fn parse(text: &str) -> Result<Expr, ExprError> {
    let err = |message: String| ExprError {
        expr: text.to_string(),
        message,
    };
    let toks = lex(text).map_err(err)?;
    if toks.len() > MAX_TOKENS {
        return Err(err(format!(
            "{} tokens, more than the {MAX_TOKENS} a condition may have",
            toks.len()
        )));
    }
    let mut p = Parser {
        toks,
        pos: 0,
        depth: 0,
    };
    let e = p.binary(0).map_err(err)?;
    if p.pos != p.toks.len() {
        return Err(err(format!("unexpected {:?}", p.toks[p.pos])));
    }
    Ok(e)
}

/// Nailgun's rewrite of a settings path for flattened deployment data.
pub fn rewrite_settings_path(path: &str) -> String {
    let strip_value = |s: &str| s.strip_suffix(".value").unwrap_or(s).to_string();
    if let Some(rest) = path.strip_prefix("additional_components.") {
        return format!("{}.enabled", strip_value(rest));
    }
    if let Some(rest) = path.strip_prefix("common.") {
        return strip_value(rest);
    }
    strip_value(path)
}

fn walk<'a>(mut v: &'a J, path: &str) -> Option<&'a J> {
    for key in path.split('.') {
        v = v.as_object()?.get(key)?;
    }
    Some(v)
}

/// Python truthiness of JSON.
pub fn truthy(v: &J) -> bool {
    match v {
        J::Null => false,
        J::Bool(b) => *b,
        J::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        J::String(s) => !s.is_empty(),
        J::Array(a) => !a.is_empty(),
        J::Object(o) => !o.is_empty(),
    }
}

fn num(v: &J) -> Option<f64> {
    match v {
        J::Bool(b) => Some(f64::from(u8::from(*b))),
        J::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// Python `==` on JSON (bools are numbers).
pub fn py_eq(a: &J, b: &J) -> bool {
    match (num(a), num(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Looks a model path up: `(model, path)` → value (`None` when missing), or an error for an
/// unknown model.
pub type Lookup<'a> = dyn Fn(&str, &str) -> Result<Option<J>, String> + 'a;

/// The LCM models over one node's deployment data: `settings` (the data, paths rewritten)
/// and `cluster` (its `cluster` key).
pub fn lcm_lookup(data: &J) -> impl Fn(&str, &str) -> Result<Option<J>, String> + '_ {
    move |model, path| match model {
        "settings" => Ok(walk(data, &rewrite_settings_path(path)).cloned()),
        "cluster" => Ok(data.get("cluster").and_then(|c| walk(c, path)).cloned()),
        other => Err(unknown_model(other)),
    }
}

/// The message for a model other than `settings` and `cluster`.
pub fn unknown_model(model: &str) -> String {
    format!("unknown model {model:?}: task conditions may use `settings:` and `cluster:`")
}

/// Evaluate with `lookup` resolving model paths.
pub fn eval(e: &Expr, lookup: &Lookup<'_>, text: &str) -> Result<J, ExprError> {
    let fail = |message: String| ExprError {
        expr: text.to_string(),
        message,
    };
    Ok(match e {
        Expr::Lit(v) => v.clone(),
        Expr::Path { model, path } => lookup(model, path).map_err(fail)?.unwrap_or(J::Null),
        Expr::Not(x) => J::Bool(!truthy(&eval(x, lookup, text)?)),
        Expr::Bin(op, l, r) => {
            let lv = eval(l, lookup, text)?;
            match op {
                Op::Or if truthy(&lv) => lv,
                Op::Or => eval(r, lookup, text)?,
                Op::And if !truthy(&lv) => lv,
                Op::And => eval(r, lookup, text)?,
                Op::Eq => J::Bool(py_eq(&lv, &eval(r, lookup, text)?)),
                Op::Ne => J::Bool(!py_eq(&lv, &eval(r, lookup, text)?)),
                Op::In => {
                    let rv = eval(r, lookup, text)?;
                    J::Bool(match (&lv, &rv) {
                        (J::String(a), J::String(b)) => b.contains(a.as_str()),
                        (_, J::Array(items)) => items.iter().any(|i| py_eq(i, &lv)),
                        (J::String(k), J::Object(o)) => o.contains_key(k),
                        (_, J::Object(_)) => false,
                        _ => {
                            return Err(fail(format!(
                                "`in` needs a string, list or dict, not {rv}"
                            )));
                        }
                    })
                }
            }
        }
    })
}

/// Parse and evaluate to a truth value.
pub fn condition(text: &str, data: &J) -> Result<bool, ExprError> {
    Ok(truthy(&eval(&parse(text)?, &lcm_lookup(data), text)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn data() -> J {
        json!({
            "cluster": {"mode": "ha_compact", "id": 3},
            "ironic": {"enabled": true},
            "murano-cfapi": {"enabled": false},
            "use_vcenter": false,
            "public_ssl": {"horizon": true, "services": false, "cert_source": "self_signed"},
            "storage": {"objects_ceph": false, "images_vcenter": false, "volumes_ceph": true},
            "roles": ["controller", "compute"],
        })
    }

    #[test]
    fn every_stable_8_0_condition_shape() {
        let d = data();
        let cases = [
            ("settings:additional_components.ironic.value == true", true),
            (
                "settings:additional_components.murano-cfapi.value == true",
                false,
            ),
            ("settings:common.use_vcenter.value == true", false),
            (
                "(settings:public_ssl.horizon.value == true or settings:public_ssl.services.value == true) and settings:public_ssl.cert_source.value == 'self_signed'",
                true,
            ),
            (
                "(settings:public_ssl.horizon.value == true or settings:public_ssl.services.value == true) and settings:public_ssl.cert_source.value == 'user_uploaded'",
                false,
            ),
            (
                "settings:storage.objects_ceph.value == false and settings:storage.images_vcenter.value == false",
                true,
            ),
            (
                "settings:storage.objects_ceph.value == true or settings:storage.volumes_ceph.value == true",
                true,
            ),
            (
                "settings:neutron_advanced_configuration.neutron_l3_ha.value == true",
                false,
            ),
            ("cluster:mode == 'ha_compact'", true),
            ("cluster:mode != \"ha_compact\"", false),
            ("'controller' in settings:roles", true),
            // Nailgun's grammar: `(not 'mongo') in roles`, i.e. `false in roles`.
            ("not 'mongo' in settings:roles", false),
            ("not ('mongo' in settings:roles)", true),
            ("'ha' in cluster:mode", true),
            ("cluster:id == 3 and 1 == true", true),
            ("settings:nothing.here == null", true),
        ];
        for (text, want) in cases {
            assert_eq!(condition(text, &d), Ok(want), "{text}");
        }
    }

    #[test]
    fn operators_return_operands_and_bind_like_nailgun() {
        let d = data();
        let e = parse("cluster:mode or 'x'").unwrap();
        assert_eq!(eval(&e, &lcm_lookup(&d), "").unwrap(), json!("ha_compact"));
        let e = parse("null and 1").unwrap();
        assert_eq!(eval(&e, &lcm_lookup(&d), "").unwrap(), J::Null);
        // `==` binds tighter than `and`, `in` tighter than `==`.
        assert_eq!(condition("'a' in 'abc' == true", &d), Ok(true));
        assert_eq!(condition("-1 == -1", &d), Ok(true));
    }

    #[test]
    fn errors_name_the_expression() {
        let e = condition("nova:x == 1", &data()).unwrap_err();
        assert!(e.message.contains("unknown model \"nova\""), "{e}");
        assert!(parse("(true").is_err());
        assert!(parse("'open").is_err());
        assert!(parse("true true").is_err());
        assert!(parse("frobnicate").is_err());
    }

    /// A package's condition is bounded before anything recurses over it: 10,000 `not`s (or
    /// parentheses) would overflow a thread's stack in the evaluation and the Settings form's
    /// walks; so many tokens are refused whatever their shape.
    #[test]
    fn deep_or_long_conditions_are_refused_not_recursed_into() {
        let nots = format!("{}true", "not ".repeat(10_000));
        let e = parse(&nots).unwrap_err();
        assert!(e.message.contains("more than the 512"), "{e}");
        let deep = format!("{}true{}", "(".repeat(40), ")".repeat(40));
        assert!(parse(&deep).unwrap_err().message.contains("deeper than 32"));
        let nested_nots = format!("{}true", "not ".repeat(33));
        assert!(
            parse(&nested_nots)
                .unwrap_err()
                .message
                .contains("deeper than 32")
        );
        // Within the bounds all is as before.
        assert!(parse(&format!("{}true{}", "(".repeat(32), ")".repeat(32))).is_ok());
        let long = vec!["true"; 256].join(" and ");
        assert!(parse(&long).is_ok());
        assert!(parse(&format!("{long} and true")).is_err());
    }
}
