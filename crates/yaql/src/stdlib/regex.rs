//! yaql's `regex` module on `regex-automata`'s meta regex (the `regex` crate's engine). Python
//! `re` patterns are translated: `\Z` (end of text), `(?#...)`, `\N{NAME}` (a character by its
//! Unicode name, [`crate::charname`]), escapes, and `$`. Outside multi-line mode (the `multiLine` flag or an inline `(?m)`), Python's
//! `$` matches at the end of the text and also before a final `\n`; the `regex` crate has no
//! lookahead to say so, so `$` becomes `(?:(\n)?\z)`, a hidden group that takes that final
//! newline, and every span is cut back to where the hidden group starts: matches, groups, the
//! spans `search` publishes, and where `searchAll`, `split` and `replace` go on. This is exact
//! when nothing that can consume follows the `$` (the end of the pattern, `)`, another branch,
//! another `$` or `\Z`); a `$` followed by more pattern (`a$\n`, `$\s*`) could see that
//! newline in Python, and is refused. Searches are unanchored like `re.search`; successive
//! matches follow Python 3.7+ (an empty match may follow a non-empty one, e.g. `x*` in `axb`
//! matches at 0, 1, 2 and 3). Replacement templates use Python's syntax (`\1`, `\g<name>`).
//! Not supported (reported as `error`): lookaround, backreferences. Must not do I/O.
//!
//! Patterns are built as `regex-automata`'s meta regex without its fully compiled DFA
//! ([`build`]): a YAQL pattern is usually matched a few times against short strings, and the
//! full DFA (which `regex::Regex` builds for small patterns whenever the `dfa-build` feature is
//! on anywhere in the dependency tree) cost more to build than every match after it; the lazy
//! DFA and the other engines are kept.

use std::rc::Rc;
use std::sync::Arc;

use regex_automata::meta;
use regex_automata::util::syntax;
use regex_automata::{Input, PatternID};

use crate::error::{ErrorKind, Result, YaqlError, err};
use crate::interp::{Call, Ctx, Interp, Lambda, lazy};
use crate::registry::{Def, Form, Registry, Ty, p};
use crate::value::{Map, RegexObj, Value};

const IGNORECASE: u8 = 1;
const MULTILINE: u8 = 2;
const DOTALL: u8 = 4;

fn re_error(msg: impl Into<String>) -> YaqlError {
    YaqlError::new(ErrorKind::error, msg)
}

/// The spans of one match, by Python group index (0 = the whole match), in bytes.
type Spans = Vec<Option<(usize, usize)>>;

/// A Python pattern translated into the `regex` crate's syntax and compiled ([`build`]), with
/// what its translation added.
pub struct Compiled {
    re: meta::Regex,
    /// The `regex` group index of each Python group (index 0 = the whole match).
    groups: Vec<usize>,
    /// The `regex` indices of the hidden groups of `$` (see the module's text).
    markers: Vec<usize>,
    /// Python group names by Python index.
    pub names: Vec<Option<String>>,
}

impl Compiled {
    pub fn is_match(&self, s: &str) -> bool {
        self.re.is_match(s)
    }

    /// The first match starting at byte `at` or later, its spans cut back at a `$`'s newline.
    fn captures_at(&self, s: &str, at: usize) -> Option<Spans> {
        let mut caps = self.re.create_captures();
        self.re
            .search_captures(&Input::new(s).range(at..), &mut caps);
        if !caps.is_match() {
            return None;
        }
        let cut = self
            .markers
            .iter()
            .filter_map(|&m| caps.get_group(m))
            .map(|m| m.start)
            .min();
        Some(
            self.groups
                .iter()
                .map(|&g| {
                    caps.get_group(g).map(|m| match cut {
                        Some(c) => (m.start.min(c), m.end.min(c)),
                        None => (m.start, m.end),
                    })
                })
                .collect(),
        )
    }

    /// Successive matches as Python's `finditer`, `sub` and `split` find them: the next search
    /// starts where a match ended, one character further after an empty match.
    fn iter<'a>(&'a self, s: &'a str) -> impl Iterator<Item = Spans> + 'a {
        let mut at = Some(0usize);
        std::iter::from_fn(move || {
            let from = at?;
            let spans = self.captures_at(s, from)?;
            let (start, end) = spans[0]?;
            at = if start == end {
                // step over an empty match by one character
                s[end..].chars().next().map(|c| end + c.len_utf8())
            } else {
                Some(end)
            };
            Some(spans)
        })
    }
}

/// What translating a Python pattern made.
struct Translation {
    src: String,
    groups: Vec<usize>,
    markers: Vec<usize>,
}

/// Python's inline flags `(?aiLmsux)` / `(?flags-flags:`: whether they turn multi-line mode on
/// (`Some(true)`), off (`Some(false)`) or leave it (`None`).
fn inline_multiline(flags: &[char]) -> Option<bool> {
    let mut on = true;
    let mut out = None;
    for &f in flags {
        match f {
            '-' => on = false,
            'm' => out = Some(on),
            _ => {}
        }
    }
    out
}

/// Where the group open at `j` (inside it, at depth 0) is closed: the index of its `)`, or the
/// pattern's end. Escapes and classes are skipped.
fn group_end(cs: &[char], mut j: usize) -> usize {
    let mut depth = 0usize;
    let mut in_class = false;
    while j < cs.len() {
        match cs[j] {
            '\\' => j += 1,
            '[' if !in_class => {
                in_class = true;
                if cs.get(j + 1) == Some(&'^') {
                    j += 1;
                }
                if cs.get(j + 1) == Some(&']') {
                    j += 1;
                }
            }
            ']' if in_class => in_class = false,
            '(' if !in_class => depth += 1,
            ')' if !in_class => {
                if depth == 0 {
                    return j;
                }
                depth -= 1;
            }
            _ => {}
        }
        j += 1;
    }
    cs.len()
}

/// Whether only what matches nothing can follow the `$` ending at `j`: closing parentheses
/// (and their quantifiers), other branches, `$`, `\Z`, `\z` and comments.
fn nothing_after_dollar(cs: &[char], mut j: usize) -> bool {
    while j < cs.len() {
        match cs[j] {
            ')' => {
                j += 1;
                while j < cs.len() && matches!(cs[j], '*' | '+' | '?') {
                    j += 1;
                }
                if cs.get(j) == Some(&'{') {
                    while j < cs.len() && cs[j] != '}' {
                        j += 1;
                    }
                    j += 1;
                    if cs.get(j) == Some(&'?') {
                        j += 1;
                    }
                }
            }
            '|' => j = group_end(cs, j + 1),
            '$' => j += 1,
            '\\' if matches!(cs.get(j + 1), Some('Z' | 'z')) => j += 2,
            '(' if cs.get(j + 1) == Some(&'?') && cs.get(j + 2) == Some(&'#') => {
                while j < cs.len() && cs[j] != ')' {
                    j += 1;
                }
                j += 1;
            }
            _ => return false,
        }
    }
    true
}

/// `\N{NAME}` at `cs[i]` (the `N`): the character and the index after the `}`.
fn named_char(cs: &[char], i: usize) -> Result<(char, usize)> {
    if cs.get(i + 1) != Some(&'{') {
        return Err(re_error(format!("missing {{ at position {}", i + 1)));
    }
    let Some(len) = cs[i + 2..].iter().position(|c| *c == '}') else {
        return Err(re_error(format!(
            "missing }}, unterminated name at position {}",
            i + 2
        )));
    };
    if len == 0 {
        return Err(re_error(format!(
            "missing character name at position {}",
            i + 2
        )));
    }
    let name: String = cs[i + 2..i + 2 + len].iter().collect();
    let c = crate::charname::lookup(&name).ok_or_else(|| {
        re_error(format!(
            "undefined character name '{name}' at position {}",
            i - 1
        ))
    })?;
    Ok((c, i + 3 + len))
}

/// Translate a Python `re` pattern to the `regex` crate's syntax.
fn translate(pat: &str, flags: u8) -> Result<Translation> {
    let cs: Vec<char> = pat.chars().collect();
    let mut out = String::with_capacity(pat.len() + 8);
    let mut i = 0;
    let mut in_class = false;
    // Multi-line mode, per open group (an inline flag lasts to the end of its group).
    let mut multiline = vec![flags & MULTILINE != 0];
    let mut groups = vec![0usize];
    let mut markers = Vec::new();
    let mut count = 0usize;
    let on = |stack: &[bool]| stack.last().copied().unwrap_or(false);
    while i < cs.len() {
        let c = cs[i];
        match c {
            '\\' => {
                let Some(&n) = cs.get(i + 1) else {
                    return Err(re_error("bad escape (end of pattern)"));
                };
                if n == 'N' {
                    let (ch, next) = named_char(&cs, i + 1)?;
                    out.push_str(&format!("\\x{{{:X}}}", u32::from(ch)));
                    i = next;
                    continue;
                }
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
                if rest.starts_with('P') || rest.starts_with('<') {
                    // a named group
                    count += 1;
                    groups.push(count);
                    multiline.push(on(&multiline));
                } else {
                    // flags: `(?im)` for the rest of the group, `(?im:...)` for a group of
                    // their own; or `(?:...)`
                    let len = cs[i + 2..]
                        .iter()
                        .position(|c| *c == ')' || *c == ':')
                        .unwrap_or(0);
                    let letters = &cs[i + 2..i + 2 + len];
                    let set = inline_multiline(letters);
                    if cs.get(i + 2 + len) == Some(&')') {
                        if let (Some(m), Some(top)) = (set, multiline.last_mut()) {
                            *top = m;
                        }
                        let text: String = cs[i..i + 3 + len].iter().collect();
                        out.push_str(&text);
                        i += 3 + len;
                        continue;
                    }
                    multiline.push(set.unwrap_or(on(&multiline)));
                }
                out.push('(');
            }
            '(' if !in_class => {
                count += 1;
                groups.push(count);
                multiline.push(on(&multiline));
                out.push('(');
            }
            ')' if !in_class => {
                if multiline.len() > 1 {
                    multiline.pop();
                }
                out.push(')');
            }
            '$' if !in_class && !on(&multiline) => {
                if !nothing_after_dollar(&cs, i + 1) {
                    return Err(re_error(format!(
                        "a $ followed by more pattern (at position {i}) is not supported by \
                         stoker's regex engine: Python's $ also matches before a final newline, \
                         which what follows could match"
                    )));
                }
                count += 1;
                markers.push(count);
                out.push_str(r"(?:(\n)?\z)");
            }
            c => out.push(c),
        }
        i += 1;
    }
    Ok(Translation {
        src: out,
        groups,
        markers,
    })
}

/// `src` (already in the `regex` crate's syntax) as a meta regex configured as
/// `regex::RegexBuilder` configures it (leftmost-first, UTF-8, a 4 MiB NFA bound), without the
/// fully compiled DFA (see the module's text).
pub fn build(src: &str, syntax: syntax::Config) -> std::result::Result<meta::Regex, String> {
    meta::Builder::new()
        .configure(meta::Config::new().dfa(false).nfa_size_limit(Some(1 << 22)))
        .syntax(syntax)
        .build(src)
        .map_err(|e| e.to_string())
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
            let t = translate(pattern, flags)?;
            let re = build(
                &t.src,
                syntax::Config::new()
                    .case_insensitive(flags & IGNORECASE != 0)
                    .multi_line(flags & MULTILINE != 0)
                    .dot_matches_new_line(flags & DOTALL != 0),
            )
            .map_err(re_error)?;
            let all: Vec<Option<String>> = re
                .group_info()
                .pattern_names(PatternID::ZERO)
                .map(|n| n.map(str::to_string))
                .collect();
            let names = t
                .groups
                .iter()
                .map(|&g| all.get(g).cloned().flatten())
                .collect();
            let re = Arc::new(Compiled {
                re,
                groups: t.groups,
                markers: t.markers,
                names,
            });
            if let Ok(mut m) = it.0.regexes.map.lock() {
                if m.len() > 1000 {
                    m.clear();
                }
                m.insert(key, re.clone());
            }
            re
        }
    };
    Ok(Rc::new(RegexObj {
        pattern: pattern.to_string(),
        flags,
        re,
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

fn publish(ctx: &Rc<Ctx>, s: &str, spans: &Spans, re: &RegexObj) -> Result<()> {
    for (i, span) in spans.iter().enumerate() {
        let mut d = Map::default();
        match span {
            Some((start, end)) => {
                d.insert(Value::str("value"), Value::str(&s[*start..*end]));
                d.insert(Value::str("start"), Value::Int(char_pos(s, *start)));
                d.insert(Value::str("end"), Value::Int(char_pos(s, *end)));
            }
            None => {
                d.insert(Value::str("value"), Value::Null);
                d.insert(Value::str("start"), Value::Int(-1));
                d.insert(Value::str("end"), Value::Int(-1));
            }
        }
        ctx.set(&(i + 1).to_string(), Value::dict(d));
    }
    // yaql 3.2.0 unpacks the *values* of named groups into (key, value): it only works for
    // two-character matches, otherwise Python raises
    for (i, name) in re.re.names.iter().enumerate() {
        if name.is_some() {
            return match spans.get(i).copied().flatten() {
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

/// The text of group `g` of a match (empty when it did not take part).
fn group_text<'s>(s: &'s str, spans: &Spans, g: usize) -> Result<&'s str> {
    match spans.get(g) {
        None => Err(re_error(format!("invalid group reference {g}"))),
        Some(span) => Ok(span.map(|(a, b)| &s[a..b]).unwrap_or_default()),
    }
}

/// Expand a Python replacement template for one match of `re` in `s`.
fn expand(template: &str, s: &str, spans: &Spans, re: &RegexObj) -> Result<String> {
    let cs: Vec<char> = template.chars().collect();
    let mut out = String::new();
    let mut i = 0;
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
                    out.push_str(group_text(s, spans, g)?);
                } else {
                    let idx = re
                        .re
                        .names
                        .iter()
                        .position(|n| n.as_deref() == Some(name.as_str()))
                        .ok_or_else(|| re_error(format!("unknown group name '{name}'")))?;
                    out.push_str(group_text(s, spans, idx)?);
                }
            }
            '0'..='9' => {
                let mut num = n.to_digit(10).unwrap_or(0) as usize;
                if let Some(d) = cs.get(i).and_then(|c| c.to_digit(10)) {
                    num = num * 10 + d as usize;
                    i += 1;
                }
                out.push_str(group_text(s, spans, num)?);
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
    f: &mut dyn FnMut(&Spans) -> Result<String>,
) -> Result<Value> {
    let mut out = String::new();
    let mut last = 0;
    let mut n = 0i64;
    for spans in re.re.iter(s) {
        if count > 0 && n >= count {
            break;
        }
        let Some((start, end)) = spans[0] else {
            continue;
        };
        out.push_str(&s[last..start]);
        out.push_str(&f(&spans)?);
        last = end;
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
    for spans in re.re.iter(s) {
        if max > 0 && n >= max {
            break;
        }
        let Some((start, end)) = spans[0] else {
            continue;
        };
        out.push(Value::str(&s[last..start]));
        for g in &spans[1..] {
            out.push(g.map(|(a, b)| Value::str(&s[a..b])).unwrap_or(Value::Null));
        }
        last = end;
        n += 1;
        it.check_quota(out.len() * 8)?;
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
    let Some(spans) = re.re.captures_at(s, 0) else {
        return Ok(Value::Null);
    };
    match sel {
        None => Ok(spans[0]
            .map(|(a, b)| Value::str(&s[a..b]))
            .unwrap_or(Value::Null)),
        Some(l) => {
            let child = Ctx::child(ctx);
            publish(&child, s, &spans, re)?;
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
    // Where the next search starts; `None` once past the end.
    let mut at = Some(0usize);
    lazy(move || {
        let from = at?;
        let spans = re.re.captures_at(&s, from)?;
        let (start, end) = spans[0]?;
        at = if start == end {
            // step over an empty match by one character
            s[end..].chars().next().map(|c| end + c.len_utf8())
        } else {
            Some(end)
        };
        Some(match &sel {
            None => Ok(Value::str(&s[start..end])),
            Some(l) => {
                let child = Ctx::child(&ctx);
                publish(&child, &s, &spans, &re).and_then(|_| me.call_lambda_in(l, &child))
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
            let text = c.str(1);
            sub(it, &re, text, c.int(3), &mut |spans| {
                expand(&repl, text, spans, &re)
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
            let text = c.str(0);
            sub(it, &re, text, c.int(3), &mut |spans| {
                expand(&repl, text, spans, &re)
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
    sub(it, &re, &s, c.int(3), &mut |spans| {
        let child = Ctx::child(&ctx);
        publish(&child, &s, spans, &re)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn src(pat: &str) -> String {
        translate(pat, 0)
            .map(|t| t.src)
            .unwrap_or_else(|e| e.to_string())
    }

    #[test]
    fn dollar_becomes_a_hidden_group_that_takes_the_final_newline() {
        let t = translate(r"(a)$(?P<b>x)?|(c)", 0);
        assert!(t.is_err(), "x? follows the $");
        let t = translate(r"(a)(?P<b>x)?$|(c)", 0).unwrap();
        assert_eq!(t.src, r"(a)(?P<b>x)?(?:(\n)?\z)|(c)");
        // Python's groups 1, 2, 3 are the regex crate's 1, 2, 4; 3 is the $'s.
        assert_eq!((t.groups, t.markers), (vec![0, 1, 2, 4], vec![3]));
        // Multi-line mode keeps the regex crate's own `$`, which is Python's there.
        assert_eq!(translate("a$", MULTILINE).unwrap().src, "a$");
        assert_eq!(src("(?m)a$"), "(?m)a$");
        assert_eq!(src("(?m:a$)b$"), r"(?m:a$)b(?:(\n)?\z)");
        assert_eq!(
            translate("(?-m:a$)", MULTILINE).unwrap().src,
            r"(?-m:a(?:(\n)?\z))"
        );
        // Escaped or in a class, `$` is a dollar sign.
        assert_eq!(src(r"\$[$]"), r"\$[$]");
        // Only what matches nothing may follow it.
        for ok in [r"a$", r"(a$)+", r"a$|b", r"$$", r"a$\Z", r"a$(?#end)"] {
            assert!(translate(ok, 0).is_ok(), "{ok}");
        }
        for refused in [
            r"a$\n",
            r"$\s*",
            r"a$b",
            r"(a$)b",
            r"a$\b",
            r"a$()",
            r"(?:a$|b)c",
        ] {
            let e = src(refused);
            assert!(e.contains("a $ followed by more pattern"), "{refused}: {e}");
        }
    }

    #[test]
    fn named_characters() {
        assert_eq!(src(r"\N{EM DASH}"), r"\x{2014}");
        assert_eq!(src(r"[\N{em dash}-]"), r"[\x{2014}-]");
        for (pat, says) in [
            (r"\N{NO SUCH}", "undefined character name 'NO SUCH'"),
            (r"\N", "missing {"),
            (r"\Nx", "missing {"),
            (r"\N{EM DASH", "missing }, unterminated name"),
            (r"\N{}", "missing character name"),
        ] {
            let e = src(pat);
            assert!(e.contains(says), "{pat}: {e}");
        }
    }
}
