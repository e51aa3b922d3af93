//! Conditions that read the whole cluster, evaluated once instead of once per node. Fuel's
//! conditions ask, on every node, about data every node shares: `$.uid in
//! added($.network_metadata.nodes.values()).uid` (is this node new?) walks every node's entry,
//! and `changedAny($.network_scheme, ..., $.network_metadata.nodes.values().where(...))`
//! compares lists of every node. Evaluated per node, each is O(n) work, O(n²) for the plan.
//!
//! Such a condition is rewritten once per task: each call of Nailgun's `changed` whose argument
//! reads only keys of the common part of the data, the arguments of `changedAny`/`changedAll`
//! that do (as one call of them, after the others: `(changedAny(a, c) or $shared)`), and each
//! `<$.path> in added(...)<.attr>*`, becomes a variable. Its value is computed once per
//! *class* of nodes (the deployment their old data comes from), then each node's evaluation
//! reads the variable: a boolean, or for `in` the added values as a set, so the membership
//! test is a hash lookup.
//!
//! Sound by construction, checked at run time:
//! - An argument is shared only if every `$` it reads at the data's root is `$.key` (or
//!   `$.get('key')`) with `key` absent from every node's own part and old part: the union of
//!   common and node data then has the common value there for every node. `$` inside
//!   `where`/`select`/`any`... lambdas is the element, not the root; inside `changed`, `new`,
//!   `old`, `added`... it is the root again. Any other use of `$`, any variable but
//!   `$common`, `->`, `let` or `def`, and the argument is not shared.
//! - `in` is rewritten only when its left side is `$.path` at the root (data, so hashable)
//!   and its right side is the whole `added(...)` chain (nothing binds tighter after it); the
//!   shared value is used only when every added value is a string (so a set of them answers
//!   exactly what scanning them would).
//! - A shared value whose evaluation fails, or a rewritten condition whose evaluation fails,
//!   falls back to the original text for that node: the plan says what the original says.
//!
//! Pure, and the same input gives the same rewrites and the same shared values.

use std::collections::BTreeSet;

/// What a shared sub-expression gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `changed(...)`: a boolean.
    Changed,
    /// The right side of `in`: the set of its (string) values.
    Members,
}

/// One sub-expression evaluated once per class of nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hoisted {
    /// The variable the rewritten text reads it from (without `$`).
    pub var: String,
    /// The text to evaluate.
    pub text: String,
    pub kind: Kind,
}

/// A condition rewritten to read shared values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    pub text: String,
    pub hoisted: Vec<Hoisted>,
}

/// Methods whose arguments are all lambdas over the items: `$` there is the item.
const ITEM_LAMBDAS: &[&str] = &[
    "where",
    "filter",
    "select",
    "map",
    "any",
    "all",
    "distinct",
    "selectMany",
    "orderBy",
    "orderByDescending",
    "thenBy",
    "thenByDescending",
    "groupBy",
    "takeWhile",
    "skipWhile",
    "indexWhere",
    "lastIndexWhere",
];

/// Nailgun's functions whose arguments are lambdas over the whole (new or old) data.
const DATA_LAMBDAS: &[&str] = &[
    "changed",
    "changedAny",
    "changedAll",
    "added",
    "deleted",
    "new",
    "old",
];

/// Prefix of the variables a rewrite binds.
const VAR: &str = "__stoker_shared_";

#[derive(Debug, Clone, PartialEq)]
enum T {
    /// `$name` (empty for `$`).
    Dollar(String),
    /// `name(`: a call; its group ends at the matching `)`.
    Func(String),
    Word(String),
    /// An operator symbol or word, `=>` included.
    Op(String),
    Str(String),
    Num,
    Open(char),
    Close(char),
    Comma,
}

#[derive(Debug, Clone)]
struct Tok {
    t: T,
    start: usize,
    end: usize,
}

/// The expression's tokens as YAQL's own lexer cuts them ([`crate::yaql::lexer`]), with byte
/// spans, or None for text it refuses. A string keeps its decoded value (compared with key
/// names only); `true`, `false`, `null` and keywords are words, any number is `Num`.
fn tokenize(text: &str) -> Option<Vec<Tok>> {
    use crate::yaql::lexer::{self, Lit, Tok as L};
    // char offset → byte offset, one past the end included
    let bytes: Vec<usize> = text
        .char_indices()
        .map(|(b, _)| b)
        .chain(std::iter::once(text.len()))
        .collect();
    lexer::tokenize(text)
        .ok()?
        .into_iter()
        .filter(|t| t.tok != L::Eof)
        .map(|tok| {
            let start = *bytes.get(tok.pos)?;
            let end = *bytes.get(tok.pos + tok.text.chars().count())?;
            let t = match tok.tok {
                L::Dollar(n) => T::Dollar(n.to_string()),
                L::Func(n) => T::Func(n.to_string()),
                L::Keyword(w) => T::Word(w.to_string()),
                L::Lit(Lit::Str(v)) => T::Str(v.to_string()),
                L::Lit(Lit::Int(_) | Lit::Float(_)) => T::Num,
                L::Lit(Lit::Null | Lit::Bool(_)) => T::Word(tok.text.to_string()),
                L::Op(o) => T::Op(o.to_string()),
                L::Mapping => T::Op("=>".to_string()),
                L::LParen => T::Open('('),
                L::LBracket => T::Open('['),
                L::LBrace => T::Open('{'),
                L::RParen => T::Close(')'),
                L::RBracket => T::Close(']'),
                L::RBrace => T::Close('}'),
                L::Comma => T::Comma,
                L::Eof => return None,
            };
            Some(Tok { t, start, end })
        })
        .collect()
}

/// The index of the token closing the group opened at `i` (a `Func` or an `Open`).
fn close_of(toks: &[Tok], i: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, tok) in toks.iter().enumerate().skip(i) {
        match tok.t {
            T::Func(_) | T::Open(_) => depth += 1,
            T::Close(_) => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

/// The argument ranges of the call opened at `i` and closed at `close`.
fn args_of(toks: &[Tok], i: usize, close: usize) -> Option<Vec<(usize, usize)>> {
    let mut out = Vec::new();
    let mut from = i + 1;
    let mut j = i + 1;
    while j < close {
        match toks[j].t {
            T::Func(_) | T::Open(_) => j = close_of(toks, j)? + 1,
            T::Comma => {
                out.push((from, j));
                from = j + 1;
                j += 1;
            }
            _ => j += 1,
        }
    }
    if from < close || !out.is_empty() {
        out.push((from, close));
    }
    Some(out)
}

fn is_method(toks: &[Tok], i: usize) -> bool {
    i > 0 && matches!(&toks[i - 1].t, T::Op(o) if o == "." || o == "?.")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// `$` is the data's root.
    Root,
    /// `$` is something else (a lambda's item).
    Item,
}

/// The scope of the group a call at `i` opens, from the scope around it.
fn inner_scope(toks: &[Tok], i: usize, name: &str, around: Scope) -> Scope {
    if is_method(toks, i) && ITEM_LAMBDAS.contains(&name) {
        Scope::Item
    } else if !is_method(toks, i) && DATA_LAMBDAS.contains(&name) {
        Scope::Root
    } else {
        around
    }
}

/// The keys `toks[from..to]` reads at the data's root, or None when it may read anything
/// else of a node's data (see the module docs).
fn root_keys(toks: &[Tok], from: usize, to: usize, scope: Scope) -> Option<BTreeSet<String>> {
    let mut keys = BTreeSet::new();
    let mut j = from;
    while j < to {
        match &toks[j].t {
            T::Func(name) => {
                if matches!(name.as_str(), "let" | "def") {
                    return None;
                }
                let close = close_of(toks, j)?;
                let inner = inner_scope(toks, j, name, scope);
                keys.extend(root_keys(toks, j + 1, close, inner)?);
                j = close + 1;
            }
            T::Open(_) => {
                let close = close_of(toks, j)?;
                keys.extend(root_keys(toks, j + 1, close, scope)?);
                j = close + 1;
            }
            T::Op(o) if o == "->" => return None,
            T::Dollar(name) if name == "common" => j += 1,
            T::Dollar(name) if !name.is_empty() => return None,
            T::Dollar(_) if scope == Scope::Item => j += 1,
            T::Dollar(_) => {
                let dot = matches!(toks.get(j + 1).map(|t| &t.t), Some(T::Op(o)) if o == ".");
                match (dot, toks.get(j + 2).map(|t| &t.t)) {
                    (true, Some(T::Word(k))) => {
                        keys.insert(k.clone());
                        j += 3;
                    }
                    (true, Some(T::Func(f))) if f == "get" => {
                        let Some(T::Str(k)) = toks.get(j + 3).map(|t| &t.t) else {
                            return None;
                        };
                        keys.insert(k.clone());
                        // The rest of `get(...)` (a default) is read at the root too.
                        j += 2;
                        let close = close_of(toks, j)?;
                        keys.extend(root_keys(toks, j + 1, close, scope)?);
                        j = close + 1;
                    }
                    _ => return None,
                }
            }
            _ => j += 1,
        }
    }
    Some(keys)
}

/// Whether the token after a right side of `in` ending before `j` binds looser than `in`
/// (so the right side is all of it).
fn ends_operand(toks: &[Tok], j: usize) -> bool {
    match toks.get(j).map(|t| &t.t) {
        None | Some(T::Close(_) | T::Comma) => true,
        Some(T::Op(o)) => matches!(
            o.as_str(),
            "and" | "or" | "->" | "=>" | "in" | "=" | "!=" | "<" | ">" | "<=" | ">="
        ),
        _ => false,
    }
}

/// The start of `$.a.b...` ending just before `in` at `i`, when that is the whole left
/// side (what precedes it binds looser than `in`).
fn path_before(toks: &[Tok], i: usize) -> Option<usize> {
    let mut j = i;
    while j >= 2
        && matches!(&toks[j - 1].t, T::Word(_))
        && matches!(&toks[j - 2].t, T::Op(o) if o == ".")
    {
        j -= 2;
    }
    if j == i {
        return None;
    }
    let dollar = j.checked_sub(1)?;
    if !matches!(&toks[dollar].t, T::Dollar(n) if n.is_empty()) {
        return None;
    }
    let before_ok = match dollar.checked_sub(1).map(|b| &toks[b].t) {
        None | Some(T::Func(_) | T::Open(_) | T::Comma) => true,
        Some(T::Op(o)) => matches!(o.as_str(), "and" | "or" | "not" | "=>"),
        _ => false,
    };
    before_ok.then_some(dollar)
}

/// Rewrite `text`, sharing what reads only keys outside `node_keys` (every key a node's own
/// part, new or old, has). None when nothing is shared.
pub fn rewrite(text: &str, node_keys: &BTreeSet<String>) -> Option<Rewritten> {
    let toks = tokenize(text)?;
    let mut r = Rewriter {
        text,
        toks: &toks,
        node_keys,
        edits: Vec::new(),
        hoisted: Vec::new(),
    };
    r.scan(0, toks.len(), Scope::Root)?;
    if r.hoisted.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end, with) in &r.edits {
        out.push_str(&text[at..*start]);
        out.push_str(with);
        at = *end;
    }
    out.push_str(&text[at..]);
    Some(Rewritten {
        text: out,
        hoisted: r.hoisted,
    })
}

struct Rewriter<'a> {
    text: &'a str,
    toks: &'a [Tok],
    node_keys: &'a BTreeSet<String>,
    /// (byte start, byte end, replacement), in order, not overlapping.
    edits: Vec<(usize, usize, String)>,
    hoisted: Vec<Hoisted>,
}

impl Rewriter<'_> {
    fn shared(&self, from: usize, to: usize) -> bool {
        from < to
            && root_keys(self.toks, from, to, Scope::Root)
                .is_some_and(|k| k.is_disjoint(self.node_keys))
    }

    fn span(&self, from: usize, to: usize) -> &str {
        &self.text[self.toks[from].start..self.toks[to - 1].end]
    }

    fn hoist(&mut self, text: String, kind: Kind) -> String {
        let var = format!("{VAR}{}", self.hoisted.len());
        let read = format!("${var}");
        self.hoisted.push(Hoisted { var, text, kind });
        read
    }

    fn scan(&mut self, from: usize, to: usize, scope: Scope) -> Option<()> {
        let toks = self.toks;
        let mut j = from;
        while j < to {
            match &toks[j].t {
                T::Op(o) if o == "in" && scope == Scope::Root => {
                    if let Some(end) = self.members(j) {
                        j = end;
                        continue;
                    }
                    j += 1;
                }
                T::Func(name) => {
                    let close = close_of(toks, j)?;
                    let method = is_method(toks, j);
                    let done = match name.as_str() {
                        "changed" if !method => self.changed(j, close)?,
                        "changedAny" if !method => self.changed_many(j, close, "or")?,
                        "changedAll" if !method => self.changed_many(j, close, "and")?,
                        _ => false,
                    };
                    if !done {
                        let inner = inner_scope(toks, j, name, scope);
                        self.scan(j + 1, close, inner)?;
                    }
                    j = close + 1;
                }
                T::Open(_) => {
                    let close = close_of(toks, j)?;
                    self.scan(j + 1, close, scope)?;
                    j = close + 1;
                }
                _ => j += 1,
            }
        }
        Some(())
    }

    /// `$.path in added(...)<.attr>*` with `in` at `i`: the right side becomes a shared set.
    /// Returns the token after it.
    fn members(&mut self, i: usize) -> Option<usize> {
        let toks = self.toks;
        path_before(toks, i)?;
        let call = i + 1;
        match toks.get(call).map(|t| &t.t) {
            Some(T::Func(f)) if f == "added" || f == "deleted" => {}
            _ => return None,
        }
        let close = close_of(toks, call)?;
        let mut end = close + 1;
        while matches!(toks.get(end).map(|t| &t.t), Some(T::Op(o)) if o == ".")
            && matches!(toks.get(end + 1).map(|t| &t.t), Some(T::Word(_)))
        {
            end += 2;
        }
        if !ends_operand(toks, end) || !self.shared(call + 1, close) {
            return None;
        }
        let text = self.span(call, end).to_string();
        let read = self.hoist(text, Kind::Members);
        self.edits.push((toks[call].start, toks[end - 1].end, read));
        Some(end)
    }

    /// `changed(x)` at `i`, closed at `close`: shared when `x` is.
    fn changed(&mut self, i: usize, close: usize) -> Option<bool> {
        let args = args_of(self.toks, i, close)?;
        let [(from, to)] = args[..] else {
            return Some(false);
        };
        if !self.shared(from, to) {
            return Some(false);
        }
        let text = self.span(i, close + 1).to_string();
        let read = self.hoist(text, Kind::Changed);
        self.edits
            .push((self.toks[i].start, self.toks[close].end, read));
        Some(true)
    }

    /// `changedAny(a, b, ...)` (`or`) or `changedAll` (`and`) at `i`: its shared arguments
    /// become one shared `changedAny`/`changedAll` of them, after the others:
    /// `(changedAny(a, c) or $shared)`. The same answer whenever the rewrite answers (the
    /// arguments left are evaluated in their order, and each is evaluated in the original
    /// too unless an earlier one decides; when one fails, the original decides).
    fn changed_many(&mut self, i: usize, close: usize, join: &str) -> Option<bool> {
        let args = args_of(self.toks, i, close)?;
        let (shared, own): (Vec<_>, Vec<_>) =
            args.iter().partition(|&&(from, to)| self.shared(from, to));
        if shared.is_empty() {
            return Some(false);
        }
        let name = match &self.toks[i].t {
            T::Func(name) => name.clone(),
            _ => return Some(false),
        };
        let list = |r: &Self, v: &[&(usize, usize)]| {
            v.iter()
                .map(|&&(from, to)| r.span(from, to))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let text = format!("{name}({})", list(self, &shared));
        let read = self.hoist(text, Kind::Changed);
        let with = if own.is_empty() {
            read
        } else {
            format!("({name}({}) {join} {read})", list(self, &own))
        };
        self.edits
            .push((self.toks[i].start, self.toks[close].end, with));
        Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> BTreeSet<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    fn node_keys() -> BTreeSet<String> {
        keys(&["uid", "roles", "node_roles", "network_scheme", "fqdn"])
    }

    #[test]
    fn is_this_node_new_reads_one_shared_set() {
        let r = rewrite(
            "$.uid in added($.network_metadata.nodes.values()).uid",
            &node_keys(),
        )
        .unwrap();
        assert_eq!(r.text, "$.uid in $__stoker_shared_0");
        assert_eq!(
            r.hoisted,
            [Hoisted {
                var: "__stoker_shared_0".into(),
                text: "added($.network_metadata.nodes.values()).uid".into(),
                kind: Kind::Members,
            }]
        );
        let r = rewrite(
            "($.uid in added($.network_metadata.nodes.values().uid)) or changed($.x)",
            &node_keys(),
        )
        .unwrap();
        assert_eq!(
            r.text,
            "($.uid in $__stoker_shared_0) or $__stoker_shared_1"
        );
    }

    #[test]
    fn changed_any_shares_the_arguments_that_read_common_keys() {
        let r = rewrite(
            "$.ceilometer.enabled and changedAny($.network_scheme, $.mongo, \
             $.network_metadata.nodes.values().where(('mongo' in $.node_roles)), \
             $.get('use_syslog'), $.roles)",
            &node_keys(),
        )
        .unwrap();
        assert_eq!(
            r.text,
            "$.ceilometer.enabled and (changedAny($.network_scheme, $.roles) or \
             $__stoker_shared_0)"
        );
        assert_eq!(
            r.hoisted[0].text,
            "changedAny($.mongo, $.network_metadata.nodes.values().where(('mongo' in \
             $.node_roles)), $.get('use_syslog'))"
        );
        let all = rewrite("changedAll($.a, $.uid)", &node_keys()).unwrap();
        assert_eq!(all.text, "(changedAll($.uid) and $__stoker_shared_0)");
        let every = rewrite("changedAny($.a, $.b)", &node_keys()).unwrap();
        assert_eq!(every.text, "$__stoker_shared_0");
        assert_eq!(every.hoisted[0].text, "changedAny($.a, $.b)");
    }

    #[test]
    fn what_may_read_a_node_is_not_shared() {
        for text in [
            // A node key, at the root or through get, or in a nested data lambda.
            "changed($.uid)",
            "changed($.get('fqdn'))",
            "changed($.network_metadata.nodes.get(concat('node-', $.uid)))",
            "changed($.nodes.where($.uid = new($.uid)))",
            // The whole data, a computed key, variables, context passing.
            "changed($)",
            "changed($.keys())",
            "changed($[$.k])",
            "changed($node.x)",
            "changed($.a -> $.b)",
            "changed(let(x => 1) -> $.a)",
            "$.uid in added($.x.where($.a).select($.uid)).uid + [1]",
            // The left side of `in` is not data at the root.
            "$.nodes.where($.uid in added($.network_metadata).uid)",
            "$.a + $.uid in added($.nodes).uid",
            "$.uid in added($.nodes).uid[0]",
            // Not yaql: left alone.
            "changed($.a",
            "changed('x)",
        ] {
            assert_eq!(rewrite(text, &node_keys()), None, "{text}");
        }
        // Item lambdas and common are fine.
        assert!(
            rewrite(
                "changed($.nodes.where($.uid = '1').select($.fqdn))",
                &node_keys()
            )
            .is_some()
        );
        assert!(rewrite("changed($common.x)", &node_keys()).is_some());
    }
}
