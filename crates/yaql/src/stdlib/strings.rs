//! yaql's `strings` module with Python's string semantics: comparison by code point, `+`
//! and `concat`, `len`, case mapping (full Unicode), `split`/`rightSplit` (whitespace runs
//! without a separator), `join` (items through `str()`), `str`, `trim*`, `norm`, `isEmpty`,
//! `replace`, `*` repetition, `in` as substring, `substring`, `indexOf`/`lastIndexOf`
//! (Python `find`/`rfind` index arithmetic), `toCharArray`, `characters`, `isString`,
//! `startsWith`, `endsWith`, `hex`. Must not do I/O.

use crate::error::{ErrorKind, Result, err};
use crate::interp::{Call, Interp};
use crate::registry::{Def, Form, Registry, Ty, p};
use crate::value::{Value, py_str, py_str_limited};

/// yaql's `str()`: null/true/false spelled the JSON way, everything else Python's `str`.
pub fn yaql_str(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(true) => "true".into(),
        Value::Bool(false) => "false".into(),
        other => py_str(other),
    }
}

fn chars(s: &str) -> Vec<char> {
    s.chars().collect()
}

fn is_py_space(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\u{1c}'..='\u{1f}')
}

/// Python `str.split(sep, maxsplit)`.
pub fn py_split(s: &str, sep: Option<&str>, max: i64, right: bool) -> Result<Vec<String>> {
    match sep {
        Some("") => err(ErrorKind::ValueError, "empty separator"),
        Some(sep) => {
            let mut out: Vec<String>;
            if max < 0 {
                out = s.split(sep).map(str::to_string).collect();
            } else if right {
                out = s
                    .rsplitn(max as usize + 1, sep)
                    .map(str::to_string)
                    .collect();
                out.reverse();
            } else {
                out = s
                    .splitn(max as usize + 1, sep)
                    .map(str::to_string)
                    .collect();
            }
            Ok(out)
        }
        None => {
            let cs = chars(s);
            let mut out = Vec::new();
            if !right {
                let mut i = 0;
                let n = cs.len();
                let mut splits = 0;
                while i < n {
                    while i < n && is_py_space(cs[i]) {
                        i += 1;
                    }
                    if i >= n {
                        break;
                    }
                    if max >= 0 && splits >= max {
                        let rest: String = cs[i..].iter().collect();
                        out.push(rest.trim_end_matches(is_py_space).to_string());
                        break;
                    }
                    let start = i;
                    while i < n && !is_py_space(cs[i]) {
                        i += 1;
                    }
                    out.push(cs[start..i].iter().collect());
                    splits += 1;
                }
            } else {
                let mut i = cs.len();
                let mut splits = 0;
                while i > 0 {
                    while i > 0 && is_py_space(cs[i - 1]) {
                        i -= 1;
                    }
                    if i == 0 {
                        break;
                    }
                    if max >= 0 && splits >= max {
                        let rest: String = cs[..i].iter().collect();
                        out.push(rest.trim_start_matches(is_py_space).to_string());
                        break;
                    }
                    let end = i;
                    while i > 0 && !is_py_space(cs[i - 1]) {
                        i -= 1;
                    }
                    out.push(cs[i..end].iter().collect());
                    splits += 1;
                }
                out.reverse();
            }
            Ok(out)
        }
    }
}

fn strip<'a>(s: &'a str, chars: Option<&str>, left: bool, right: bool) -> &'a str {
    let f = |c: char| match chars {
        Some(set) => set.contains(c),
        None => is_py_space(c),
    };
    let mut r = s;
    if left {
        r = r.trim_start_matches(f);
    }
    if right {
        r = r.trim_end_matches(f);
    }
    r
}

/// Python `str.find`/`rfind` with optional start/end, in characters.
fn find(s: &str, sub: &str, start: Option<i64>, end: Option<i64>, right: bool) -> i64 {
    let cs = chars(s);
    let n = cs.len() as i64;
    let norm = |v: i64| -> i64 { if v < 0 { (v + n).max(0) } else { v.min(n) } };
    let st = norm(start.unwrap_or(0));
    let en = norm(end.unwrap_or(n));
    let sub: Vec<char> = chars(sub);
    let m = sub.len() as i64;
    if en - st < m {
        return -1;
    }
    let range: Box<dyn Iterator<Item = i64>> = if right {
        Box::new((st..=en - m).rev())
    } else {
        Box::new(st..=en - m)
    };
    for i in range {
        if cs[i as usize..(i + m) as usize] == sub[..] {
            return i;
        }
    }
    -1
}

fn py_slice(cs: &[char], start: i64, end: i64) -> String {
    let n = cs.len() as i64;
    let norm = |v: i64| -> i64 { if v < 0 { (v + n).max(0) } else { v.min(n) } };
    let (a, b) = (norm(start), norm(end));
    if a >= b {
        return String::new();
    }
    cs[a as usize..b as usize].iter().collect()
}

fn repeat(it: &Interp, s: &str, n: i64) -> Result<Value> {
    if n <= 0 {
        return Ok(Value::str(""));
    }
    it.check_quota((n as usize).saturating_mul(s.len()))?;
    Ok(Value::string(s.repeat(n as usize)))
}

pub fn register(r: &mut Registry) {
    let s2 = || vec![p("left", Ty::Str), p("right", Ty::Str)];
    r.add("#operator_>", Form::Function, s2(), |_, c| {
        Ok(Value::Bool(c.str(0) > c.str(1)))
    });
    r.add("#operator_<", Form::Function, s2(), |_, c| {
        Ok(Value::Bool(c.str(0) < c.str(1)))
    });
    r.add("#operator_>=", Form::Function, s2(), |_, c| {
        Ok(Value::Bool(c.str(0) >= c.str(1)))
    });
    r.add("#operator_<=", Form::Function, s2(), |_, c| {
        Ok(Value::Bool(c.str(0) <= c.str(1)))
    });
    for name in ["concat", "#operator_+"] {
        r.add(
            name,
            Form::Function,
            vec![p("args", Ty::Str).many()],
            |it, c| {
                let mut out = String::new();
                for v in c.many_vals(0) {
                    out.push_str(v.as_str().unwrap_or(""));
                }
                it.check_quota(out.len())?;
                Ok(Value::string(out))
            },
        );
    }
    r.add(
        "toUpper",
        Form::Method,
        vec![p("string", Ty::Str)],
        |_, c| Ok(Value::string(c.str(0).to_uppercase())),
    );
    r.add(
        "toLower",
        Form::Method,
        vec![p("string", Ty::Str)],
        |_, c| Ok(Value::string(c.str(0).to_lowercase())),
    );
    r.add("len", Form::Both, vec![p("string", Ty::Str)], |_, c| {
        Ok(Value::Int(c.str(0).chars().count() as i64))
    });
    for (name, right) in [("split", false), ("rightSplit", true)] {
        let imp: fn(&Interp, &mut Call) -> Result<Value> = if right {
            |_, c| split_imp(c, true)
        } else {
            |_, c| split_imp(c, false)
        };
        r.add(
            name,
            Form::Method,
            vec![
                p("string", Ty::Str),
                p("separator", Ty::Str).null().def(Def::Null),
                p("maxSplits", Ty::PyInt).def(Def::Int(-1)),
            ],
            imp,
        );
    }
    r.add(
        "join",
        Form::Method,
        vec![p("sequence", Ty::Iterable), p("separator", Ty::Str)],
        |it, c| join(it, c.val(0), c.str(1), c),
    );
    r.add(
        "join",
        Form::Method,
        vec![p("separator", Ty::Str), p("sequence", Ty::Iterable)],
        |it, c| join(it, c.val(1), c.str(0), c),
    );
    r.add("str", Form::Function, vec![p("value", Ty::Any)], |it, c| {
        let v = c.val(0);
        if matches!(
            v,
            Value::Tuple(_) | Value::List(_) | Value::Dict(_) | Value::Set(_)
        ) {
            return Ok(Value::string(py_str_limited(v, it.limits().memory_quota)?));
        }
        Ok(Value::string(yaql_str(v)))
    });
    for (name, l, rt) in [
        ("trim", true, true),
        ("trimLeft", true, false),
        ("trimRight", false, true),
    ] {
        let imp: fn(&Interp, &mut Call) -> Result<Value> = match (l, rt) {
            (true, true) => |_, c| Ok(Value::str(strip(c.str(0), c.val(1).as_str(), true, true))),
            (true, false) => |_, c| Ok(Value::str(strip(c.str(0), c.val(1).as_str(), true, false))),
            _ => |_, c| Ok(Value::str(strip(c.str(0), c.val(1).as_str(), false, true))),
        };
        r.add(
            name,
            Form::Method,
            vec![
                p("string", Ty::Str),
                p("chars", Ty::Str).null().def(Def::Null),
            ],
            imp,
        );
    }
    r.add(
        "norm",
        Form::Both,
        vec![
            p("string", Ty::Str).null(),
            p("chars", Ty::Str).null().def(Def::Null),
        ],
        |_, c| {
            let Value::Str(s) = c.val(0) else {
                return Ok(Value::Null);
            };
            let v = strip(s, c.val(1).as_str(), true, true);
            Ok(if v.is_empty() {
                Value::Null
            } else {
                Value::str(v)
            })
        },
    );
    r.add(
        "isEmpty",
        Form::Both,
        vec![
            p("string", Ty::Str).null(),
            p("trim", Ty::Bool).def(Def::Bool(true)),
            p("chars", Ty::Str).null().def(Def::Null),
        ],
        |_, c| {
            let Value::Str(s) = c.val(0) else {
                return Ok(Value::Bool(true));
            };
            let v: &str = if c.val(1).truthy() {
                strip(s, c.val(2).as_str(), true, true)
            } else {
                s
            };
            Ok(Value::Bool(v.is_empty()))
        },
    );
    r.add(
        "replace",
        Form::Method,
        vec![
            p("string", Ty::Str),
            p("old", Ty::Str),
            p("new", Ty::Str),
            p("count", Ty::PyInt).def(Def::Int(-1)),
        ],
        |it, c| {
            let out = py_replace(c.str(0), c.str(1), c.str(2), c.int(3));
            it.check_quota(out.len())?;
            Ok(Value::string(out))
        },
    );
    r.add(
        "replace",
        Form::Method,
        vec![
            p("string", Ty::Str),
            p("replacements", Ty::Mapping),
            p("count", Ty::PyInt).def(Def::Int(-1)),
        ],
        |it, c| {
            let mut s = c.str(0).to_string();
            if let Value::Dict(d) = c.val(1) {
                for (k, v) in &d.map {
                    let k = it.call_fn("str", vec![k.clone()], c.ctx)?;
                    let v = it.call_fn("str", vec![v.clone()], c.ctx)?;
                    s = py_replace(
                        &s,
                        k.as_str().unwrap_or(""),
                        v.as_str().unwrap_or(""),
                        c.int(2),
                    );
                    it.check_quota(s.len())?;
                }
            }
            Ok(Value::string(s))
        },
    );
    r.add(
        "#operator_*",
        Form::Function,
        vec![p("left", Ty::Str), p("right", Ty::PyInt)],
        |it, c| repeat(it, c.str(0), c.int(1)),
    );
    r.add(
        "#operator_*",
        Form::Function,
        vec![p("left", Ty::PyInt), p("right", Ty::Str)],
        |it, c| repeat(it, c.str(1), c.int(0)),
    );
    r.add("#operator_in", Form::Function, s2(), |_, c| {
        Ok(Value::Bool(c.str(1).contains(c.str(0))))
    });
    r.add(
        "substring",
        Form::Method,
        vec![
            p("string", Ty::Str),
            p("start", Ty::PyInt),
            p("length", Ty::PyInt).def(Def::Int(-1)),
        ],
        |_, c| {
            let cs = chars(c.str(0));
            let n = cs.len() as i64;
            let mut len = c.int(2);
            let mut start = c.int(1);
            if len < 0 {
                len = n;
            }
            if start < 0 {
                start += n;
            }
            Ok(Value::string(py_slice(
                &cs,
                start,
                start.saturating_add(len),
            )))
        },
    );
    r.add(
        "indexOf",
        Form::Method,
        vec![
            p("string", Ty::Str),
            p("sub", Ty::Str),
            p("start", Ty::PyInt).def(Def::Int(0)),
        ],
        |_, c| {
            Ok(Value::Int(find(
                c.str(0),
                c.str(1),
                Some(c.int(2)),
                None,
                false,
            )))
        },
    );
    r.add(
        "indexOf",
        Form::Method,
        vec![
            p("string", Ty::Str),
            p("sub", Ty::Str),
            p("start", Ty::PyInt),
            p("length", Ty::PyInt),
        ],
        |_, c| Ok(Value::Int(find_len(c, false))),
    );
    r.add(
        "lastIndexOf",
        Form::Method,
        vec![
            p("string", Ty::Str),
            p("sub", Ty::Str),
            p("start", Ty::PyInt).def(Def::Int(0)),
        ],
        |_, c| {
            Ok(Value::Int(find(
                c.str(0),
                c.str(1),
                Some(c.int(2)),
                None,
                true,
            )))
        },
    );
    r.add(
        "lastIndexOf",
        Form::Method,
        vec![
            p("string", Ty::Str),
            p("sub", Ty::Str),
            p("start", Ty::PyInt),
            p("length", Ty::PyInt),
        ],
        |_, c| Ok(Value::Int(find_len(c, true))),
    );
    r.add(
        "toCharArray",
        Form::Method,
        vec![p("string", Ty::Str)],
        |_, c| {
            Ok(Value::tuple(
                c.str(0)
                    .chars()
                    .map(|ch| Value::string(ch.to_string()))
                    .collect(),
            ))
        },
    );
    r.add(
        "characters",
        Form::Function,
        [
            "digits",
            "hexdigits",
            "asciiLowercase",
            "asciiUppercase",
            "asciiLetters",
            "letters",
            "octdigits",
            "punctuation",
            "printable",
            "lowercase",
            "uppercase",
            "whitespace",
        ]
        .into_iter()
        .map(|n| p(n, Ty::Bool).null().def(Def::Bool(false)))
        .collect(),
        |_, c| {
            const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
            const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
            const PUNCT: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
            const WS: &str = " \t\n\r\u{b}\u{c}";
            let sets: [String; 12] = [
                "0123456789".into(),
                "0123456789abcdefABCDEF".into(),
                LOWER.into(),
                UPPER.into(),
                format!("{LOWER}{UPPER}"),
                String::new(),
                "01234567".into(),
                PUNCT.into(),
                format!("0123456789{LOWER}{UPPER}{PUNCT}{WS}"),
                String::new(),
                String::new(),
                WS.into(),
            ];
            // `letters`, `lowercase`, `uppercase` do not exist in Python 3's string module
            for (i, missing) in [(5usize, "letters"), (9, "lowercase"), (10, "uppercase")] {
                if c.val(i).truthy() {
                    return err(
                        ErrorKind::AttributeError,
                        format!("module 'string' has no attribute '{missing}'"),
                    );
                }
            }
            let mut seen = indexmap::IndexSet::<char>::new();
            for (i, s) in sets.iter().enumerate() {
                if c.val(i).truthy() {
                    for ch in s.chars() {
                        seen.insert(ch);
                    }
                }
            }
            let mut v: Vec<char> = seen.into_iter().collect();
            v.sort_unstable();
            Ok(Value::tuple(
                v.into_iter()
                    .map(|ch| Value::string(ch.to_string()))
                    .collect(),
            ))
        },
    );
    r.add(
        "isString",
        Form::Function,
        vec![p("arg", Ty::Any)],
        |_, c| Ok(Value::Bool(matches!(c.val(0), Value::Str(_)))),
    );
    r.add(
        "startsWith",
        Form::Method,
        vec![p("string", Ty::Str), p("prefixes", Ty::Str).many()],
        |_, c| {
            let s = c.str(0);
            Ok(Value::Bool(
                c.many_vals(1)
                    .iter()
                    .any(|x| s.starts_with(x.as_str().unwrap_or(""))),
            ))
        },
    );
    r.add(
        "endsWith",
        Form::Method,
        vec![p("string", Ty::Str), p("suffixes", Ty::Str).many()],
        |_, c| {
            let s = c.str(0);
            Ok(Value::Bool(
                c.many_vals(1)
                    .iter()
                    .any(|x| s.ends_with(x.as_str().unwrap_or(""))),
            ))
        },
    );
    r.add(
        "hex",
        Form::Function,
        vec![p("num", Ty::Number).null()],
        |_, c| match c.val(0) {
            Value::Int(i) => Ok(Value::string(if *i < 0 {
                format!("-0x{:x}", i.unsigned_abs())
            } else {
                format!("0x{i:x}")
            })),
            Value::Bool(b) => Ok(Value::string(format!("0x{:x}", u8::from(*b)))),
            other => err(
                ErrorKind::TypeError,
                format!(
                    "'{}' object cannot be interpreted as an integer",
                    other.type_name()
                ),
            ),
        },
    );
}

fn find_len(c: &Call, right: bool) -> i64 {
    let n = c.str(0).chars().count() as i64;
    let mut start = c.int(2);
    let mut length = c.int(3);
    if start < 0 {
        start += n;
    }
    if length < 0 {
        length = n - start;
    }
    find(c.str(0), c.str(1), Some(start), Some(start + length), right)
}

fn split_imp(c: &Call, right: bool) -> Result<Value> {
    let parts = py_split(c.str(0), c.val(1).as_str(), c.int(2), right)?;
    Ok(Value::list(parts.into_iter().map(Value::string).collect()))
}

fn join(it: &Interp, seq: &Value, sep: &str, c: &Call) -> Result<Value> {
    let mut parts = Vec::new();
    let mut src = it.iter(seq)?;
    while let Some(v) = src.next() {
        let s = it.call_fn("str", vec![v?], c.ctx)?;
        parts.push(s.as_str().unwrap_or("").to_string());
    }
    let out = parts.join(sep);
    it.check_quota(out.len())?;
    Ok(Value::string(out))
}

/// Python `str.replace(old, new, count)`.
pub fn py_replace(s: &str, old: &str, new: &str, count: i64) -> String {
    if count < 0 {
        if old.is_empty() {
            let mut out = String::from(new);
            for ch in s.chars() {
                out.push(ch);
                out.push_str(new);
            }
            return out;
        }
        return s.replace(old, new);
    }
    if old.is_empty() {
        let mut out = String::new();
        let mut n = 0;
        for ch in s.chars() {
            if n < count {
                out.push_str(new);
                n += 1;
            }
            out.push(ch);
        }
        if n < count {
            out.push_str(new);
        }
        return out;
    }
    s.replacen(old, new, count as usize)
}
