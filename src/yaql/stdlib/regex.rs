//! yaql's `regex` module on the `regex` crate: Python `re` patterns are translated (`\Z`,
//! `(?#...)`, `$` = end of text, escapes), searches are unanchored like `re.search`, and
//! replacement templates use Python's syntax (`\1`, `\g<name>`). Not supported (reported as
//! `error`): lookaround, backreferences, `$` matching before a final newline. Must not do I/O.

use std::rc::Rc;

use crate::yaql::error::{ErrorKind, Result, YaqlError, err};
use crate::yaql::interp::{Call, Ctx, Interp, Lambda, lazy};
use crate::yaql::registry::{Def, Form, Registry, Ty, p};
use crate::yaql::value::{Map, RegexObj, Value};

const IGNORECASE: u8 = 1;
const MULTILINE: u8 = 2;
const DOTALL: u8 = 4;

fn re_error(msg: impl Into<String>) -> YaqlError {
    YaqlError::new(ErrorKind::error, msg)
}

/// Translate a Python `re` pattern to the `regex` crate's syntax.
fn translate(pat: &str, flags: u8) -> Result<String> {
    let cs: Vec<char> = pat.chars().collect();
    let mut out = String::with_capacity(pat.len() + 8);
    let mut i = 0;
    let mut in_class = false;
    let multiline = flags & MULTILINE != 0;
    while i < cs.len() {
        let c = cs[i];
        match c {
            '\\' => {
                let Some(&n) = cs.get(i + 1) else {
                    return Err(re_error("bad escape (end of pattern)"));
                };
                i += 2;
                match n {
                    'Z' => out.push_str(if in_class { "Z" } else { r"\z" }),
                    '1'..='9' if !in_class => {
                        return Err(re_error(
                            "backreferences are not supported by stoker's regex engine",
                        ));
                    }
                    '0' => out.push_str(r"\x00"),
                    'd' | 'D' | 'w' | 'W' | 's' | 'S' | 'b' | 'B' | 'A' | 'n' | 't' | 'r' | 'f'
                    | 'v' | 'a' | 'x' | 'u' | 'U' => {
                        out.push('\\');
                        out.push(n);
                    }
                    n if n.is_ascii_alphanumeric() => {
                        return Err(re_error(format!("bad escape \\{n}")));
                    }
                    n => out.push_str(&regex::escape(&n.to_string())),
                }
                continue;
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                i += 1;
                if cs.get(i) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                if cs.get(i) == Some(&']') {
                    out.push_str(r"\]");
                    i += 1;
                }
                continue;
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '[' if in_class => out.push_str(r"\["),
            '(' if !in_class && cs.get(i + 1) == Some(&'?') => {
                let rest: String = cs[i + 2..].iter().take(3).collect();
                if rest.starts_with('=')
                    || rest.starts_with('!')
                    || rest.starts_with("<=")
                    || rest.starts_with("<!")
                {
                    return Err(re_error(
                        "lookaround is not supported by stoker's regex engine",
                    ));
                }
                if rest.starts_with("P=") {
                    return Err(re_error(
                        "backreferences are not supported by stoker's regex engine",
                    ));
                }
                if rest.starts_with('#') {
                    while i < cs.len() && cs[i] != ')' {
                        i += 1;
                    }
                    i += 1;
                    continue;
                }
                out.push('(');
            }
            '$' if !in_class && !multiline => out.push_str(r"\z"),
            c => out.push(c),
        }
        i += 1;
    }
    Ok(out)
}

pub fn compile(it: &Interp, pattern: &str, flags: u8) -> Result<Rc<RegexObj>> {
    let key = (pattern.to_string(), flags);
    let cached =
        it.0.regexes
            .map
            .lock()
            .ok()
            .and_then(|m| m.get(&key).cloned());
    let re = match cached {
        Some(re) => re,
        None => {
            let src = translate(pattern, flags)?;
            let re = regex::RegexBuilder::new(&src)
                .case_insensitive(flags & IGNORECASE != 0)
                .multi_line(flags & MULTILINE != 0)
                .dot_matches_new_line(flags & DOTALL != 0)
                .size_limit(1 << 22)
                .build()
                .map_err(|e| re_error(e.to_string()))?;
            let re = std::sync::Arc::new(re);
            if let Ok(mut m) = it.0.regexes.map.lock() {
                if m.len() > 1000 {
                    m.clear();
                }
                m.insert(key, re.clone());
            }
            re
        }
    };
    let group_names = re.capture_names().map(|n| n.map(str::to_string)).collect();
    Ok(Rc::new(RegexObj {
        pattern: pattern.to_string(),
        flags,
        re,
        group_names,
    }))
}

fn regex_of(it: &Interp, v: &Value) -> Result<Rc<RegexObj>> {
    match v {
        Value::Regex(r) => Ok(r.clone()),
        Value::Str(s) => compile(it, s, 0),
        _ => err(ErrorKind::TypeError, "expected a regex"),
    }
}

fn char_pos(s: &str, byte: usize) -> i64 {
    s[..byte].chars().count() as i64
}

fn publish(ctx: &Rc<Ctx>, s: &str, caps: &regex::Captures, re: &RegexObj) -> Result<()> {
    for i in 0..caps.len() {
        let rec = match caps.get(i) {
            Some(m) => {
                let mut d = Map::default();
                d.insert(Value::str("value"), Value::str(m.as_str()));
                d.insert(Value::str("start"), Value::Int(char_pos(s, m.start())));
                d.insert(Value::str("end"), Value::Int(char_pos(s, m.end())));
                Value::dict(d)
            }
            None => {
                let mut d = Map::default();
                d.insert(Value::str("value"), Value::Null);
                d.insert(Value::str("start"), Value::Int(-1));
                d.insert(Value::str("end"), Value::Int(-1));
                Value::dict(d)
            }
        };
        ctx.set(&(i + 1).to_string(), rec);
    }
    // yaql 3.2.0 unpacks the *values* of named groups into (key, value): it only works for
    // two-character matches, otherwise Python raises
    for (i, name) in re.group_names.iter().enumerate() {
        if name.is_some() {
            return match caps.get(i) {
                None => err(
                    ErrorKind::TypeError,
                    "cannot unpack non-iterable NoneType object",
                ),
                Some(_) => err(
                    ErrorKind::ValueError,
                    "too many values to unpack (expected 2)",
                ),
            };
        }
    }
    Ok(())
}

/// Expand a Python replacement template for one match.
fn expand(template: &str, caps: &regex::Captures, re: &RegexObj) -> Result<String> {
    let cs: Vec<char> = template.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    let group = |g: usize| -> Result<String> {
        if g >= caps.len() {
            return Err(re_error(format!("invalid group reference {g}")));
        }
        Ok(caps
            .get(g)
            .map(|m| m.as_str().to_string())
            .unwrap_or_default())
    };
    while i < cs.len() {
        let c = cs[i];
        if c != '\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let Some(&n) = cs.get(i + 1) else {
            return Err(re_error("bad escape (end of pattern)"));
        };
        i += 2;
        match n {
            'g' => {
                if cs.get(i) != Some(&'<') {
                    return Err(re_error("missing <"));
                }
                let end = cs[i..]
                    .iter()
                    .position(|c| *c == '>')
                    .ok_or_else(|| re_error("missing >"))?;
                let name: String = cs[i + 1..i + end].iter().collect();
                i += end + 1;
                if let Ok(g) = name.parse::<usize>() {
                    out.push_str(&group(g)?);
                } else {
                    let idx = re
                        .group_names
                        .iter()
                        .position(|n| n.as_deref() == Some(name.as_str()))
                        .ok_or_else(|| re_error(format!("unknown group name '{name}'")))?;
                    out.push_str(&group(idx)?);
                }
            }
            '0'..='9' => {
                let mut num = n.to_digit(10).unwrap_or(0) as usize;
                if let Some(d) = cs.get(i).and_then(|c| c.to_digit(10)) {
                    num = num * 10 + d as usize;
                    i += 1;
                }
                out.push_str(&group(num)?);
            }
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'f' => out.push('\u{c}'),
            'v' => out.push('\u{b}'),
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            '\\' => out.push('\\'),
            n if n.is_ascii_alphabetic() => return Err(re_error(format!("bad escape \\{n}"))),
            n => {
                out.push('\\');
                out.push(n);
            }
        }
    }
    Ok(out)
}

fn sub(
    it: &Interp,
    re: &RegexObj,
    s: &str,
    count: i64,
    f: &mut dyn FnMut(&regex::Captures) -> Result<String>,
) -> Result<Value> {
    let mut out = String::new();
    let mut last = 0;
    let mut n = 0i64;
    for caps in re.re.captures_iter(s) {
        if count > 0 && n >= count {
            break;
        }
        let Some(m) = caps.get(0) else { continue };
        out.push_str(&s[last..m.start()]);
        out.push_str(&f(&caps)?);
        last = m.end();
        n += 1;
        it.check_quota(out.len())?;
    }
    out.push_str(&s[last..]);
    Ok(Value::string(out))
}

fn split(it: &Interp, re: &Rc<RegexObj>, s: &str, max: i64) -> Result<Value> {
    let mut out = Vec::new();
    let mut last = 0;
    let mut n = 0i64;
    for caps in re.re.captures_iter(s) {
        if max > 0 && n >= max {
            break;
        }
        let Some(m) = caps.get(0) else { continue };
        out.push(Value::str(&s[last..m.start()]));
        for g in 1..caps.len() {
            out.push(
                caps.get(g)
                    .map(|m| Value::str(m.as_str()))
                    .unwrap_or(Value::Null),
            );
        }
        last = m.end();
        n += 1;
    }
    out.push(Value::str(&s[last..]));
    it.check_quota(out.len() * 8)?;
    Ok(Value::list(out))
}

fn search(
    it: &Interp,
    re: &RegexObj,
    s: &str,
    sel: Option<&Lambda>,
    ctx: &Rc<Ctx>,
) -> Result<Value> {
    let Some(caps) = re.re.captures(s) else {
        return Ok(Value::Null);
    };
    match sel {
        None => Ok(caps
            .get(0)
            .map(|m| Value::str(m.as_str()))
            .unwrap_or(Value::Null)),
        Some(l) => {
            let child = Ctx::child(ctx);
            publish(&child, s, &caps, re)?;
            it.call_lambda_in(l, &child)
        }
    }
}

fn search_all(
    it: &Interp,
    re: Rc<RegexObj>,
    s: Rc<str>,
    sel: Option<Lambda>,
    ctx: Rc<Ctx>,
) -> Value {
    let me = it.clone();
    let mut pos = 0usize;
    let mut done = false;
    lazy(move || {
        if done || pos > s.len() {
            return None;
        }
        let caps = re.re.captures_at(&s, pos)?;
        let m = caps.get(0)?;
        pos = if m.end() == m.start() {
            // step over an empty match by one character
            s[m.end()..]
                .chars()
                .next()
                .map(|c| m.end() + c.len_utf8())
                .unwrap_or_else(|| {
                    done = true;
                    m.end()
                })
        } else {
            m.end()
        };
        Some(match &sel {
            None => Ok(Value::str(m.as_str())),
            Some(l) => {
                let child = Ctx::child(&ctx);
                publish(&child, &s, &caps, &re).and_then(|_| me.call_lambda_in(l, &child))
            }
        })
    })
}

fn py_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "()[]{}?*+-|^$\\.&~# \t\n\r\u{b}\u{c}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

pub fn register(r: &mut Registry) {
    r.add(
        "regex",
        Form::Function,
        vec![
            p("pattern", Ty::Str),
            p("ignoreCase", Ty::Bool).null().def(Def::Bool(false)),
            p("multiLine", Ty::Bool).null().def(Def::Bool(false)),
            p("dotAll", Ty::Bool).null().def(Def::Bool(false)),
        ],
        |it, c| {
            let mut flags = 0;
            if c.val(1).truthy() {
                flags |= IGNORECASE;
            }
            if c.val(2).truthy() {
                flags |= MULTILINE;
            }
            if c.val(3).truthy() {
                flags |= DOTALL;
            }
            Ok(Value::Regex(compile(it, c.str(0), flags)?))
        },
    );
    r.add(
        "matches",
        Form::Method,
        vec![p("regexp", Ty::Regex), p("string", Ty::Str)],
        |it, c| Ok(Value::Bool(regex_of(it, c.val(0))?.re.is_match(c.str(1)))),
    );
    r.add(
        "matches",
        Form::Method,
        vec![p("string", Ty::Str), p("regexp", Ty::Str)],
        |it, c| Ok(Value::Bool(regex_of(it, c.val(1))?.re.is_match(c.str(0)))),
    );
    for (name, negate) in [("#operator_=~", false), ("#operator_!~", true)] {
        for ty in [Ty::Regex, Ty::Str] {
            let imp: fn(&Interp, &mut Call) -> Result<Value> = if negate {
                |it, c| Ok(Value::Bool(!regex_of(it, c.val(1))?.re.is_match(c.str(0))))
            } else {
                |it, c| Ok(Value::Bool(regex_of(it, c.val(1))?.re.is_match(c.str(0))))
            };
            r.add(
                name,
                Form::Function,
                vec![p("string", Ty::Str), p("regexp", ty)],
                imp,
            );
        }
    }
    r.add(
        "search",
        Form::Method,
        vec![
            p("regexp", Ty::Regex),
            p("string", Ty::Str),
            p("selector", Ty::LambdaCtx).def(Def::Null),
        ],
        |it, c| {
            let re = regex_of(it, c.val(0))?;
            search(it, &re, c.str(1), c.lambda(2), c.ctx)
        },
    );
    r.add(
        "searchAll",
        Form::Method,
        vec![
            p("regexp", Ty::Regex),
            p("string", Ty::Str),
            p("selector", Ty::LambdaCtx).def(Def::Null),
        ],
        |it, c| {
            let re = regex_of(it, c.val(0))?;
            let s: Rc<str> = Rc::from(c.str(1));
            Ok(search_all(it, re, s, c.lambda(2).cloned(), c.ctx.clone()))
        },
    );
    r.add(
        "split",
        Form::Method,
        vec![
            p("regexp", Ty::Regex),
            p("string", Ty::Str),
            p("maxSplit", Ty::PyInt).def(Def::Int(0)),
        ],
        |it, c| split(it, &regex_of(it, c.val(0))?, c.str(1), c.int(2)),
    );
    r.add(
        "split",
        Form::Method,
        vec![
            p("string", Ty::Str),
            p("regexp", Ty::Regex),
            p("maxSplit", Ty::PyInt).def(Def::Int(0)),
        ],
        |it, c| split(it, &regex_of(it, c.val(1))?, c.str(0), c.int(2)),
    );
    r.add(
        "replace",
        Form::Method,
        vec![
            p("regexp", Ty::Regex),
            p("string", Ty::Str),
            p("repl", Ty::Str),
            p("count", Ty::PyInt).def(Def::Int(0)),
        ],
        |it, c| {
            let re = regex_of(it, c.val(0))?;
            let repl = c.str(2).to_string();
            sub(it, &re, c.str(1), c.int(3), &mut |caps| {
                expand(&repl, caps, &re)
            })
        },
    );
    r.add(
        "replace",
        Form::Method,
        vec![
            p("string", Ty::Str),
            p("regexp", Ty::Regex),
            p("repl", Ty::Str),
            p("count", Ty::PyInt).def(Def::Int(0)),
        ],
        |it, c| {
            let re = regex_of(it, c.val(1))?;
            let repl = c.str(2).to_string();
            sub(it, &re, c.str(0), c.int(3), &mut |caps| {
                expand(&repl, caps, &re)
            })
        },
    );
    for swapped in [false, true] {
        let imp: fn(&Interp, &mut Call) -> Result<Value> = if swapped {
            |it, c| replace_by(it, c, 1, 0)
        } else {
            |it, c| replace_by(it, c, 0, 1)
        };
        let params = if swapped {
            vec![p("string", Ty::Str), p("regexp", Ty::Regex)]
        } else {
            vec![p("regexp", Ty::Regex), p("string", Ty::Str)]
        };
        let mut params = params;
        params.push(p("repl", Ty::LambdaCtx));
        params.push(p("count", Ty::PyInt).def(Def::Int(0)));
        r.add("replaceBy", Form::Method, params, imp);
    }
    r.add(
        "escapeRegex",
        Form::Function,
        vec![p("string", Ty::Str)],
        |_, c| Ok(Value::string(py_escape(c.str(0)))),
    );
    r.add(
        "isRegex",
        Form::Function,
        vec![p("value", Ty::Any)],
        |_, c| Ok(Value::Bool(matches!(c.val(0), Value::Regex(_)))),
    );
}

fn replace_by(it: &Interp, c: &mut Call, re_i: usize, s_i: usize) -> Result<Value> {
    let re = regex_of(it, c.val(re_i))?;
    let s = c.str(s_i).to_string();
    let Some(l) = c.lambda(2).cloned() else {
        return Ok(Value::Null);
    };
    let ctx = c.ctx.clone();
    sub(it, &re, &s, c.int(3), &mut |caps| {
        let child = Ctx::child(&ctx);
        publish(&child, &s, caps, &re)?;
        let v = it.call_lambda_in(&l, &child)?;
        match v {
            Value::Str(r) => Ok(r.to_string()),
            other => err(
                ErrorKind::TypeError,
                format!("expected str instance, {} found", other.type_name()),
            ),
        }
    })
}
