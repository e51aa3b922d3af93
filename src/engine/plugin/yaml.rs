//! YAML (and JSON, which is YAML) into a tree whose every node remembers its file, line and
//! column, so the validator can point at the exact spot. Built on `saphyr-parser`'s event stream.
//!
//! Scalars resolve the way PyYAML (YAML 1.1) resolved them for Fuel: `yes`/`no`/`on`/`off` are
//! booleans, a float needs a dot (`1e3` stays a string), `10.0.0` is a string, `~` and empty are
//! null. Anchors and aliases are expanded; `<<` merge keys are honoured. A later duplicate key
//! wins, with a warning, as in PyYAML. Pure: it parses text it is given.

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

/// The result of parsing one file: its document (null when empty) and warnings.
#[derive(Debug, Clone)]
pub struct Parsed {
    pub root: Node,
    /// Non-fatal findings, such as duplicate keys: (position, message).
    pub warnings: Vec<(Pos, String)>,
}

/// Parse one YAML (or JSON) document. A second document in the same file is an error, as it
/// was for PyYAML's `load`.
pub fn parse(file: &str, text: &str) -> Result<Parsed, YamlError> {
    let file: Arc<str> = Arc::from(file);
    let mut builder = Builder {
        file: Arc::clone(&file),
        stack: Vec::new(),
        anchors: HashMap::new(),
        root: None,
        documents: 0,
        warnings: Vec::new(),
    };
    let parser = Parser::new_from_str(text);
    for event in parser {
        let (event, span) = event.map_err(|e| YamlError {
            pos: Pos {
                file: Arc::clone(&file),
                line: u32::try_from(e.marker().line()).unwrap_or(u32::MAX),
                column: u32::try_from(e.marker().col() + 1).unwrap_or(u32::MAX),
            },
            message: e.info().to_string(),
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

enum Frame {
    Seq {
        node: Node,
        anchor: usize,
    },
    Map {
        node: Node,
        anchor: usize,
        pending_key: Option<Key>,
        merge_key: bool,
        /// Keys set explicitly (merge keys never override them).
        explicit: Vec<String>,
    },
}

struct Builder {
    file: Arc<str>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    root: Option<Node>,
    documents: usize,
    warnings: Vec<(Pos, String)>,
}

impl Builder {
    fn pos(&self, span: &Span) -> Pos {
        Pos {
            file: Arc::clone(&self.file),
            line: u32::try_from(span.start.line()).unwrap_or(u32::MAX),
            column: u32::try_from(span.start.col() + 1).unwrap_or(u32::MAX),
        }
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
                let tag = tag.map(|t| format!("{}{}", t.handle, t.suffix));
                let value = resolve_scalar(&text, style, tag.as_deref());
                let node = Node::new(value, pos);
                if anchor > 0 {
                    self.anchors.insert(anchor, node.clone());
                }
                self.add(node, style == ScalarStyle::Plain)?;
            }
            Event::Alias(id) => {
                let node = match self.anchors.get(&id) {
                    Some(n) => n.clone(),
                    None => {
                        return Err(YamlError {
                            pos,
                            message: "an alias names an unknown anchor".to_string(),
                        });
                    }
                };
                self.add(node, false)?;
            }
            Event::SequenceStart(anchor, _) => {
                self.stack.push(Frame::Seq {
                    node: Node::new(Value::Seq(Vec::new()), pos),
                    anchor,
                });
            }
            Event::MappingStart(anchor, _) => {
                self.stack.push(Frame::Map {
                    node: Node::new(Value::Map(Vec::new()), pos),
                    anchor,
                    pending_key: None,
                    merge_key: false,
                    explicit: Vec::new(),
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.stack.pop() {
                    Some(Frame::Seq { node, anchor }) | Some(Frame::Map { node, anchor, .. }) => {
                        (node, anchor)
                    }
                    None => return Ok(()),
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, node.clone());
                }
                self.add(node, false)?;
            }
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
        }
        Ok(())
    }

    fn add(&mut self, node: Node, plain: bool) -> Result<(), YamlError> {
        let Some(top) = self.stack.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
        match top {
            Frame::Seq { node: seq, .. } => {
                if let Value::Seq(items) = &mut seq.value {
                    items.push(node);
                }
            }
            Frame::Map {
                node: map,
                pending_key,
                merge_key,
                explicit,
                ..
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
                    let Value::Map(entries) = &mut map.value else {
                        return Ok(());
                    };
                    if *merge_key {
                        *merge_key = false;
                        let sources: Vec<&Node> = match &node.value {
                            Value::Seq(items) => items.iter().collect(),
                            _ => vec![&node],
                        };
                        for source in sources {
                            let Value::Map(src) = &source.value else {
                                return Err(YamlError {
                                    pos: source.pos.clone(),
                                    message: "a merge key (<<) needs a mapping or a list of \
                                              mappings"
                                        .to_string(),
                                });
                            };
                            for (k, v) in src {
                                if !explicit.contains(&k.text)
                                    && !entries.iter().any(|(e, _)| e.text == k.text)
                                {
                                    entries.push((k.clone(), v.clone()));
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

    impl YamlError {
        fn line_is_set(&self) -> bool {
            self.pos.line > 0
        }
    }
}
