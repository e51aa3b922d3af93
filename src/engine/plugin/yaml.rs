//! YAML (and JSON, which is YAML) into a tree whose every node remembers its file, line and
//! column, so the validator can point at the exact spot. Built on `saphyr-parser`'s event stream.
//!
//! Scalars resolve the way PyYAML (YAML 1.1) resolved them for Fuel: `yes`/`no`/`on`/`off` are
//! booleans, a float needs a dot (`1e3` stays a string), `10.0.0` is a string, `~` and empty are
//! null. Anchors and aliases are expanded; `<<` merge keys are honoured. A later duplicate key
//! wins, with a warning, as in PyYAML. Pure: it parses text it is given.
//!
//! Hostile input is bounded before it costs memory or stack: collections nest at most
//! [`MAX_DEPTH`] levels (an alias counts with the depth of what it expands to), and every node
//! a document produces is paid for from a [`Budget`] before it is built: each written node,
//! each node an alias expansion copies, and each anchored node (kept once more to expand
//! later). A "billion laughs" document stops at the alias that would overspend, with an error
//! at that alias's line. One budget may be shared by several files (a whole package).

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

/// Where a node starts: file (package-relative), 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pos {
    pub file: Arc<str>,
    pub line: u32,
    pub column: u32,
}

impl Pos {
    /// A position for a file as a whole (line 0: no line).
    pub fn file(file: &str) -> Pos {
        Pos {
            file: Arc::from(file),
            line: 0,
            column: 0,
        }
    }
}

/// A mapping key with its own position.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub text: String,
    pub pos: Pos,
}

/// A YAML value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Key, Node)>),
}

/// A value and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: Value,
    pub pos: Pos,
}

/// A parse failure with its position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{}:{}: {message}", pos.file, pos.line, pos.column)]
pub struct YamlError {
    pub pos: Pos,
    pub message: String,
}

impl Node {
    pub fn new(value: Value, pos: Pos) -> Node {
        Node { value, pos }
    }

    /// The value of `key` in a mapping (the last one, if written twice).
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Map(entries) => entries
                .iter()
                .rev()
                .find(|(k, _)| k.text == key)
                .map(|e| &e.1),
            _ => None,
        }
    }

    /// The key node of `key` in a mapping.
    pub fn key(&self, key: &str) -> Option<&Key> {
        match &self.value {
            Value::Map(entries) => entries
                .iter()
                .rev()
                .find(|(k, _)| k.text == key)
                .map(|e| &e.0),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self.value {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Seq(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&[(Key, Node)]> {
        match &self.value {
            Value::Map(entries) => Some(entries),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.value, Value::Null)
    }

    /// The JSON-schema name of the value's type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self.value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Int(_) => "integer",
            Value::Float(_) => "number",
            Value::Str(_) => "string",
            Value::Seq(_) => "array",
            Value::Map(_) => "object",
        }
    }

    /// Set (or replace) a key of a mapping; no effect on other values.
    pub fn insert(&mut self, key: &str, value: Node) {
        if let Value::Map(entries) = &mut self.value {
            let key_pos = value.pos.clone();
            entries.retain(|(k, _)| k.text != key);
            entries.push((
                Key {
                    text: key.to_string(),
                    pos: key_pos,
                },
                value,
            ));
        }
    }

    /// Remove a key of a mapping, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Node> {
        if let Value::Map(entries) = &mut self.value {
            let idx = entries.iter().rposition(|(k, _)| k.text == key)?;
            let (_, v) = entries.remove(idx);
            entries.retain(|(k, _)| k.text != key);
            return Some(v);
        }
        None
    }

    /// The same tree as JSON (positions dropped; NaN and infinities become null).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.value {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            Value::Str(s) => J::String(s.clone()),
            Value::Seq(items) => J::Array(items.iter().map(Node::to_json).collect()),
            Value::Map(entries) => {
                let mut map = serde_json::Map::new();
                for (k, v) in entries {
                    map.insert(k.text.clone(), v.to_json());
                }
                J::Object(map)
            }
        }
    }

    /// A tree from JSON, every node at `pos`.
    pub fn from_json(json: &serde_json::Value, pos: &Pos) -> Node {
        use serde_json::Value as J;
        let value = match json {
            J::Null => Value::Null,
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(0.0)),
            },
            J::String(s) => Value::Str(s.clone()),
            J::Array(items) => Value::Seq(items.iter().map(|j| Node::from_json(j, pos)).collect()),
            J::Object(map) => Value::Map(
                map.iter()
                    .map(|(k, v)| {
                        (
                            Key {
                                text: k.clone(),
                                pos: pos.clone(),
                            },
                            Node::from_json(v, pos),
                        )
                    })
                    .collect(),
            ),
        };
        Node::new(value, pos.clone())
    }
}

/// Collections (sequences and mappings) may nest this deep, aliases expanded. Every tree
/// walk over a document (conversion to JSON, validation, dropping it) recurses once per level,
/// and a document usually ends up stored as JSON, which `serde_json` reads back only up to 128
/// levels: 100 leaves room for the objects it is stored inside.
pub const MAX_DEPTH: usize = 100;

/// The nodes one document may produce when parsed on its own (see [`Budget`]). A node costs
/// about 100-150 bytes, so this bounds a document's tree near 30 MB; Fuel's largest real file
/// (Nailgun's `openstack.yaml`, 90 KB) produces about 20,000.
pub const MAX_NODES: u64 = 250_000;

/// The nodes that parsing may still produce: written nodes, nodes copied by alias expansion
/// or merge keys, and anchored nodes (kept a second time to be expanded). Shared by reference
/// (it counts down through a `Cell`), so one budget can bound every file of a package.
#[derive(Debug)]
pub struct Budget {
    total: u64,
    left: Cell<u64>,
}

impl Budget {
    pub fn new(nodes: u64) -> Budget {
        Budget {
            total: nodes,
            left: Cell::new(nodes),
        }
    }

    /// The nodes this budget started with.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The nodes produced so far.
    pub fn spent(&self) -> u64 {
        self.total - self.left.get()
    }

    /// Pay for `n` nodes, or say (without paying) that they do not fit.
    fn spend(&self, n: u64) -> bool {
        match self.left.get().checked_sub(n) {
            Some(rest) => {
                self.left.set(rest);
                true
            }
            None => false,
        }
    }
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::new(MAX_NODES)
    }
}

/// The result of parsing one file: its document (null when empty) and warnings.
#[derive(Debug, Clone)]
pub struct Parsed {
    pub root: Node,
    /// Non-fatal findings, such as duplicate keys: (position, message).
    pub warnings: Vec<(Pos, String)>,
}

/// Parse one YAML (or JSON) document within a budget of its own ([`MAX_NODES`]). A second
/// document in the same file is an error, as it was for PyYAML's `load`.
pub fn parse(file: &str, text: &str) -> Result<Parsed, YamlError> {
    parse_within(file, text, &Budget::default())
}

/// [`parse`], paying for every node from `budget` (which may be shared with other files).
pub fn parse_within(file: &str, text: &str, budget: &Budget) -> Result<Parsed, YamlError> {
    let file: Arc<str> = Arc::from(file);
    let mut builder = Builder {
        file: Arc::clone(&file),
        stack: Vec::new(),
        anchors: HashMap::new(),
        root: None,
        documents: 0,
        warnings: Vec::new(),
        budget,
    };
    let parser = Parser::new_from_str(text);
    for event in parser {
        let (event, span) = event.map_err(|e| YamlError {
            pos: Pos {
                file: Arc::clone(&file),
                line: u32::try_from(e.marker().line()).unwrap_or(u32::MAX),
                column: u32::try_from(e.marker().col() + 1).unwrap_or(u32::MAX),
            },
            message: match e.info() {
                // saphyr's scanner limit on `[`/`{` levels, which it may meet while reading
                // ahead, before the parser's events reach MAX_DEPTH.
                "recursion limit exceeded" => format!(
                    "flow collections nest too deep (more than {MAX_DEPTH} levels of lists and \
                     mappings are refused)"
                ),
                info => info.to_string(),
            },
        })?;
        builder.event(event, span)?;
    }
    Ok(Parsed {
        root: builder
            .root
            .unwrap_or_else(|| Node::new(Value::Null, Pos::file(&file))),
        warnings: builder.warnings,
    })
}

/// The size of a subtree: its nodes, and how many collection levels it holds (0 for a
/// scalar).
#[derive(Debug, Clone, Copy, Default)]
struct Size {
    nodes: u64,
    height: usize,
}

impl Size {
    const SCALAR: Size = Size {
        nodes: 1,
        height: 0,
    };
}

/// An open collection: the node being filled, its anchor id (0: none) and its size so far.
struct Open {
    node: Node,
    anchor: usize,
    size: Size,
    kind: OpenKind,
}

enum OpenKind {
    Seq,
    Map {
        pending_key: Option<Key>,
        merge_key: bool,
        /// Keys set explicitly (merge keys never override them).
        explicit: Vec<String>,
    },
}

struct Builder<'b> {
    file: Arc<str>,
    stack: Vec<Open>,
    anchors: HashMap<usize, (Node, Size)>,
    root: Option<Node>,
    documents: usize,
    warnings: Vec<(Pos, String)>,
    budget: &'b Budget,
}

impl Builder<'_> {
    fn pos(&self, span: &Span) -> Pos {
        Pos {
            file: Arc::clone(&self.file),
            line: u32::try_from(span.start.line()).unwrap_or(u32::MAX),
            column: u32::try_from(span.start.col() + 1).unwrap_or(u32::MAX),
        }
    }

    /// Pay for `nodes` nodes at `pos`, or refuse.
    fn spend(&self, nodes: u64, pos: &Pos, what: &str) -> Result<(), YamlError> {
        if self.budget.spend(nodes) {
            return Ok(());
        }
        Err(YamlError {
            pos: pos.clone(),
            message: format!(
                "{what} would make more than {} YAML nodes ({} already; aliases and merge keys \
                 count every node they copy); refusing to expand further",
                self.budget.total(),
                self.budget.spent()
            ),
        })
    }

    /// Refuse a collection that would end up deeper than [`MAX_DEPTH`].
    fn check_depth(&self, height: usize, pos: &Pos, what: &str) -> Result<(), YamlError> {
        if self.stack.len() + height > MAX_DEPTH {
            return Err(YamlError {
                pos: pos.clone(),
                message: format!(
                    "{what} nests deeper than {MAX_DEPTH} levels of lists and mappings"
                ),
            });
        }
        Ok(())
    }

    fn open(&mut self, node: Node, anchor: usize, kind: OpenKind) -> Result<(), YamlError> {
        self.check_depth(1, &node.pos, "this collection")?;
        self.spend(1, &node.pos, "this collection")?;
        self.stack.push(Open {
            node,
            anchor,
            size: Size {
                nodes: 1,
                height: 1,
            },
            kind,
        });
        Ok(())
    }

    /// Keep a copy of an anchored node to expand later (paid for: it is a second copy).
    fn anchor(&mut self, anchor: usize, node: &Node, size: Size) -> Result<(), YamlError> {
        if anchor > 0 {
            self.spend(size.nodes, &node.pos, "this anchor")?;
            self.anchors.insert(anchor, (node.clone(), size));
        }
        Ok(())
    }

    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), YamlError> {
        let pos = self.pos(&span);
        match event {
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(YamlError {
                        pos,
                        message: "a second YAML document in one file (only one is read)"
                            .to_string(),
                    });
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                self.spend(1, &pos, "this value")?;
                let tag = tag.map(|t| format!("{}{}", t.handle, t.suffix));
                let value = resolve_scalar(&text, style, tag.as_deref());
                let node = Node::new(value, pos);
                self.anchor(anchor, &node, Size::SCALAR)?;
                self.add(node, Size::SCALAR, style == ScalarStyle::Plain)?;
            }
            Event::Alias(id) => {
                let Some((_, size)) = self.anchors.get(&id) else {
                    return Err(YamlError {
                        pos,
                        message: "an alias names an unknown anchor".to_string(),
                    });
                };
                let size = *size;
                self.check_depth(size.height, &pos, "this alias, expanded,")?;
                self.spend(size.nodes, &pos, "this alias")?;
                let node = match self.anchors.get(&id) {
                    Some((n, _)) => n.clone(),
                    None => return Ok(()),
                };
                self.add(node, size, false)?;
            }
            Event::SequenceStart(anchor, _) => {
                self.open(
                    Node::new(Value::Seq(Vec::new()), pos),
                    anchor,
                    OpenKind::Seq,
                )?;
            }
            Event::MappingStart(anchor, _) => {
                self.open(
                    Node::new(Value::Map(Vec::new()), pos),
                    anchor,
                    OpenKind::Map {
                        pending_key: None,
                        merge_key: false,
                        explicit: Vec::new(),
                    },
                )?;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(open) = self.stack.pop() else {
                    return Ok(());
                };
                self.anchor(open.anchor, &open.node, open.size)?;
                self.add(open.node, open.size, false)?;
            }
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
        }
        Ok(())
    }

    fn add(&mut self, node: Node, size: Size, plain: bool) -> Result<(), YamlError> {
        let Some(top) = self.stack.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
        top.size.nodes += size.nodes;
        top.size.height = top.size.height.max(size.height + 1);
        match &mut top.kind {
            OpenKind::Seq => {
                if let Value::Seq(items) = &mut top.node.value {
                    items.push(node);
                }
            }
            OpenKind::Map {
                pending_key,
                merge_key,
                explicit,
            } => match pending_key.take() {
                None => {
                    let text = match &node.value {
                        Value::Str(s) => s.clone(),
                        Value::Null => "null".to_string(),
                        Value::Bool(b) => if *b { "True" } else { "False" }.to_string(),
                        Value::Int(i) => i.to_string(),
                        Value::Float(f) => f.to_string(),
                        Value::Seq(_) | Value::Map(_) => {
                            return Err(YamlError {
                                pos: node.pos,
                                message: "a mapping key must be a scalar".to_string(),
                            });
                        }
                    };
                    *merge_key = plain && text == "<<";
                    *pending_key = Some(Key {
                        text,
                        pos: node.pos,
                    });
                }
                Some(key) => {
                    let Value::Map(entries) = &mut top.node.value else {
                        return Ok(());
                    };
                    if *merge_key {
                        *merge_key = false;
                        let sources: Vec<Node> = match node.value {
                            Value::Seq(items) => items,
                            value => vec![Node::new(value, node.pos)],
                        };
                        for source in sources {
                            let Value::Map(src) = source.value else {
                                return Err(YamlError {
                                    pos: source.pos,
                                    message: "a merge key (<<) needs a mapping or a list of \
                                              mappings"
                                        .to_string(),
                                });
                            };
                            for (k, v) in src {
                                if !explicit.contains(&k.text)
                                    && !entries.iter().any(|(e, _)| e.text == k.text)
                                {
                                    entries.push((k, v));
                                }
                            }
                        }
                        return Ok(());
                    }
                    if let Some(idx) = entries.iter().position(|(k, _)| k.text == key.text) {
                        if explicit.contains(&key.text) {
                            self.warnings.push((
                                key.pos.clone(),
                                format!(
                                    "key {:?} is written twice in one mapping (lines {} and {}); \
                                     the later value wins",
                                    key.text, entries[idx].0.pos.line, key.pos.line
                                ),
                            ));
                        }
                        entries.remove(idx);
                    }
                    explicit.push(key.text.clone());
                    entries.push((key, node));
                }
            },
        }
        Ok(())
    }
}

fn is_digits(s: &str, radix: u32) -> bool {
    !s.is_empty() && s.chars().all(|c| c == '_' || c.is_digit(radix)) && !s.starts_with('_')
}

fn parse_int(text: &str) -> Option<i64> {
    let (neg, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let clean = |s: &str| s.replace('_', "");
    let magnitude = if let Some(hex) = body.strip_prefix("0x") {
        if !is_digits(hex, 16) {
            return None;
        }
        i64::from_str_radix(&clean(hex), 16).ok()?
    } else if let Some(bin) = body.strip_prefix("0b") {
        if !is_digits(bin, 2) {
            return None;
        }
        i64::from_str_radix(&clean(bin), 2).ok()?
    } else if body.len() > 1 && body.starts_with('0') {
        // YAML 1.1 octal, as PyYAML reads `0755`.
        if !is_digits(body, 8) {
            return None;
        }
        i64::from_str_radix(&clean(body), 8).ok()?
    } else {
        if !is_digits(body, 10) {
            return None;
        }
        clean(body).parse().ok()?
    };
    Some(if neg { -magnitude } else { magnitude })
}

fn parse_float(text: &str) -> Option<f64> {
    match text {
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return Some(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return Some(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Some(f64::NAN),
        _ => {}
    }
    // PyYAML: [-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+][0-9]+)?  (a dot is required)
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int, frac) = mantissa.split_once('.')?;
    let ok_int =
        int.is_empty() || (int.starts_with(|c: char| c.is_ascii_digit()) && is_digits(int, 10));
    let ok_frac = frac.chars().all(|c| c.is_ascii_digit() || c == '_');
    let ok_exp = match exp {
        None => true,
        Some(e) => {
            let digits = e.strip_prefix(['-', '+']);
            digits.is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
        }
    };
    if !(ok_int && ok_frac && ok_exp) || (int.is_empty() && frac.is_empty()) {
        return None;
    }
    text.replace('_', "").parse().ok()
}

fn resolve_scalar(text: &str, style: ScalarStyle, tag: Option<&str>) -> Value {
    match tag {
        Some("!!str" | "tag:yaml.org,2002:str") => return Value::Str(text.to_string()),
        Some("!!int" | "tag:yaml.org,2002:int") => {
            return parse_int(text).map_or_else(|| Value::Str(text.to_string()), Value::Int);
        }
        Some("!!float" | "tag:yaml.org,2002:float") => {
            return parse_float(text)
                .or_else(|| text.parse().ok())
                .map_or_else(|| Value::Str(text.to_string()), Value::Float);
        }
        _ => {}
    }
    if style != ScalarStyle::Plain {
        return Value::Str(text.to_string());
    }
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Value::Bool(true);
        }
        "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Value::Bool(false);
        }
        _ => {}
    }
    if let Some(i) = parse_int(text) {
        return Value::Int(i);
    }
    if let Some(f) = parse_float(text) {
        return Value::Float(f);
    }
    Value::Str(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> serde_json::Value {
        parse("t.yaml", text).unwrap().root.to_json()
    }

    #[test]
    fn scalars_resolve_as_pyyaml_did() {
        assert_eq!(
            json(
                "a: yes\nb: off\nc: 0755\nd: 1e3\ne: 1.5\nf: 10.0.0\ng: ~\nh: '3'\ni: 2.0.0\nj: -7\nk: .5\n"
            ),
            serde_json::json!({"a": true, "b": false, "c": 493, "d": "1e3", "e": 1.5,
                "f": "10.0.0", "g": null, "h": "3", "i": "2.0.0", "j": -7, "k": 0.5})
        );
        assert_eq!(json(""), serde_json::Value::Null);
        assert_eq!(json("---\n[]\n"), serde_json::json!([]));
    }

    #[test]
    fn anchors_folds_and_merges() {
        let text =
            "base: &b {x: 1, y: 2}\nuse: *b\nmerged:\n  <<: *b\n  y: 3\nfolded: >\n  one\n  two\n";
        assert_eq!(
            json(text),
            serde_json::json!({"base": {"x": 1, "y": 2}, "use": {"x": 1, "y": 2},
                "merged": {"x": 1, "y": 3}, "folded": "one two\n"})
        );
    }

    #[test]
    fn positions_and_errors() {
        let p = parse("m.yaml", "a: 1\nlist:\n  - x: [1, 2]\n").unwrap();
        let x = &p.root.get("list").unwrap().as_seq().unwrap()[0];
        assert_eq!((x.pos.line, x.pos.column), (3, 5));
        assert_eq!(p.root.key("list").unwrap().pos.line, 2);
        let err = parse("bad.yaml", "a: [1, 2\n").unwrap_err();
        assert_eq!(&*err.pos.file, "bad.yaml");
        assert!(err.line_is_set(), "{err}");
        let dup = parse("d.yaml", "a: 1\na: 2\n").unwrap();
        assert_eq!(dup.root.to_json(), serde_json::json!({"a": 2}));
        assert_eq!(dup.warnings.len(), 1);
    }

    /// The classic "billion laughs": nine levels of ten aliases each, 10^9 leaves from 1 KB.
    fn laughs() -> String {
        let mut text = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n".to_string();
        for i in 1..10 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        text
    }

    #[test]
    fn an_alias_bomb_stops_at_the_alias_that_overspends() {
        let text = laughs();
        assert!(text.len() < 1024);
        let budget = Budget::default();
        let err = parse_within("bomb.yaml", &text, &budget).unwrap_err();
        assert_eq!(&*err.pos.file, "bomb.yaml");
        // a4 (line 5) holds 10^5 leaves and fits, with everything before it, in 250,000 nodes;
        // the budget runs out at the first alias of a5.
        assert_eq!((err.pos.line, err.pos.column), (6, 10), "{err}");
        assert!(
            err.message
                .contains("this alias would make more than 250000 YAML nodes"),
            "{err}"
        );
        assert!(budget.spent() <= MAX_NODES, "{}", budget.spent());
        // A smaller budget stops it sooner, and a bigger document fits a bigger one.
        let small = Budget::new(5_000);
        let err = parse_within("bomb.yaml", &text, &small).unwrap_err();
        assert_eq!(err.pos.line, 4, "{err}");
        let four = text.lines().take(4).collect::<Vec<_>>().join("\n");
        let parsed = parse_within("ok.yaml", &four, &Budget::new(30_000)).unwrap();
        let a3 = parsed.root.get("a3").unwrap().to_json().to_string();
        assert_eq!(a3.matches("lol").count(), 10_000);
    }

    #[test]
    fn anchors_merge_keys_and_written_nodes_all_count() {
        let count = |text: &str| {
            let b = Budget::new(1_000);
            parse_within("t.yaml", text, &b).unwrap();
            b.spent()
        };
        // map + key + value
        assert_eq!(count("a: 1\n"), 3);
        // map, key, [seq, 2 items] + the anchor's copy (3) + key + alias (3)
        assert_eq!(count("a: &x [1, 2]\nb: *x\n"), 1 + 1 + 3 + 3 + 1 + 3);
        // A merge key pays for the mapping it copies.
        assert_eq!(
            count("a: &x {k: v}\nb: {<<: *x}\n"),
            1 + 1 + 3 + 3 + 1 + 1 + 1 + 3
        );
        // Written nodes alone can overspend too.
        let many: String = (0..2_000).map(|i| format!("- {i}\n")).collect();
        let err = parse_within("many.yaml", &many, &Budget::new(1_000)).unwrap_err();
        assert_eq!(err.pos.line, 1_000, "{err}");
        assert!(
            err.message.contains("this value would make more than 1000"),
            "{err}"
        );
    }

    #[test]
    fn nesting_is_bounded_in_every_style() {
        let block = format!("{}1\n", "- ".repeat(50_000));
        let flow = format!("{}1{}\n", "[".repeat(50_000), "]".repeat(50_000));
        let maps = format!("{}1{}\n", "{a: ".repeat(50_000), "}".repeat(50_000));
        for (name, text) in [("block", block), ("flow", flow), ("maps", maps)] {
            let err = parse("deep.yaml", &text).unwrap_err();
            assert_eq!(
                (&*err.pos.file, err.pos.line),
                ("deep.yaml", 1),
                "{name}: {err}"
            );
            // Flow collections may meet the scanner's own limit (255) first: it reads ahead.
            assert!(
                err.message.contains("nests deeper than 100 levels")
                    || err.message.contains("flow collections nest too deep"),
                "{name}: {err}"
            );
        }
        let ok = format!("{}1{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse("ok.yaml", &ok).is_ok());
        let over = format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        let err = parse("over.yaml", &over).unwrap_err();
        assert_eq!(err.pos.column, MAX_DEPTH as u32 + 1, "{err}");
    }

    #[test]
    fn an_alias_counts_with_the_depth_it_expands_to() {
        // 60 levels anchored, then used 60 levels down: 120 once expanded.
        let deep = |n: usize, inner: &str| format!("{}{inner}{}", "[".repeat(n), "]".repeat(n));
        let text = format!("a: &a {}\nb: {}\n", deep(60, "1"), deep(60, "*a"));
        let err = parse("alias.yaml", &text).unwrap_err();
        assert_eq!(err.pos.line, 2, "{err}");
        assert!(
            err.message.contains("this alias, expanded, nests deeper"),
            "{err}"
        );
        let text = format!("a: &a {}\nb: {}\n", deep(40, "1"), deep(40, "*a"));
        assert!(parse("alias.yaml", &text).is_ok());
    }

    impl YamlError {
        fn line_is_set(&self) -> bool {
            self.pos.line > 0
        }
    }
}
