//! JSON text straight into YAQL values, in one pass over the bytes with no tree in between:
//! what [`Converter::convert_text`] and the `--jsonl` protocol read. Each object or array is
//! first looked up in the converter's sharing table (`share`): when the text from there on is
//! a sub-tree converted before, its value is handed out again and its text skipped, so a
//! document that repeats another's sub-trees costs a comparison of bytes for them, not a parse,
//! allocations and later the freeing of a copy. Otherwise it is read here and offered to the
//! table.
//!
//! The grammar is RFC 8259's, as `serde_json` reads it: objects and arrays nest at most
//! [`MAX_DEPTH`] deep, strings refuse control characters and lone surrogates, a number too
//! large for a float is an error, an integer beyond 64 bits becomes a float. Two differences,
//! both Python's `json` (the reference's reader): `-0` is the integer 0, and floats are rounded
//! correctly, as everywhere in stoker (`serde_json` is built with `float_roundtrip`; its
//! default reader may be off by a few units in the last place). Must not evaluate.
//!
//! [`Converter::convert_text`]: super::Converter::convert_text

use std::borrow::Cow;

use super::convert::Converter;
use super::map::Map;
use super::share;
use super::value::Value;

/// Objects and arrays nested deeper than this are refused (`serde_json`'s limit).
pub const MAX_DEPTH: u32 = 127;

/// Why a text is not JSON, and where (1-based, columns in bytes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} at line {line} column {column}")]
pub struct TextError {
    pub what: &'static str,
    pub line: usize,
    pub column: usize,
}

/// A failure while reading: what, and the byte offset.
pub(super) type Fail = (&'static str, usize);
pub(super) type R<T> = Result<T, Fail>;

/// A cursor over one JSON text.
pub(super) struct Reader<'t> {
    text: &'t str,
    pos: usize,
    /// Objects and arrays open around the cursor.
    depth: u32,
    /// The deepest nesting reached inside the container being read.
    deepest: u32,
}

/// Bytes that end the quick scan of a string: the quote, the backslash, control characters.
static STRING_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// Parse one whole JSON text with `conv`.
pub fn document(conv: &mut Converter, text: &str) -> Result<Value, TextError> {
    let mut r = Reader::new(text);
    let v = r.value(conv).and_then(|v| r.end().map(|()| v));
    v.map_err(|f| r.error(f))
}

impl<'t> Reader<'t> {
    pub(super) fn new(text: &'t str) -> Reader<'t> {
        Reader {
            text,
            pos: 0,
            depth: 0,
            deepest: 0,
        }
    }

    #[inline]
    fn bytes(&self) -> &'t [u8] {
        self.text.as_bytes()
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.pos).copied()
    }

    /// A failure at the cursor.
    pub(super) fn fail(&self, what: &'static str) -> Fail {
        (what, self.pos)
    }

    fn err<T>(&self, what: &'static str) -> R<T> {
        Err(self.fail(what))
    }

    /// The failure with its line and column.
    pub(super) fn error(&self, (what, at): Fail) -> TextError {
        let before = &self.bytes()[..at.min(self.text.len())];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = before.len()
            - before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1)
            + 1;
        TextError { what, line, column }
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// Nothing but white space is left.
    pub(super) fn end(&mut self) -> R<()> {
        self.ws();
        if self.pos == self.text.len() {
            Ok(())
        } else {
            self.err("trailing characters")
        }
    }

    /// One value.
    pub(super) fn value(&mut self, conv: &mut Converter) -> R<Value> {
        self.ws();
        match self.peek() {
            Some(b'{' | b'[') => self.container(conv),
            Some(b'"') => {
                let s = self.string()?;
                Ok(conv.str(&s))
            }
            Some(b't') => self.literal(b"true", Value::Bool(true)),
            Some(b'f') => self.literal(b"false", Value::Bool(false)),
            Some(b'n') => self.literal(b"null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => self.err("expected a value"),
            None => self.err("end of text where a value was expected"),
        }
    }

    /// A string value (white space before it skipped).
    pub(super) fn string_value(&mut self) -> R<Cow<'t, str>> {
        self.ws();
        if self.peek() != Some(b'"') {
            return self.err("expected a string");
        }
        self.string()
    }

    /// The members of an object, each key given to `each` with the reader at its value (which
    /// `each` must read).
    pub(super) fn fields(
        &mut self,
        conv: &mut Converter,
        mut each: impl FnMut(&mut Reader<'t>, &mut Converter, &str) -> R<()>,
    ) -> R<()> {
        self.ws();
        if self.peek() != Some(b'{') {
            return self.err("expected an object");
        }
        if self.depth >= MAX_DEPTH {
            return self.err("nested too deeply");
        }
        // The object is a level of nesting, as it is to `serde_json`.
        self.depth += 1;
        let r = self.each_field(conv, &mut each);
        self.depth -= 1;
        r
    }

    fn each_field(
        &mut self,
        conv: &mut Converter,
        each: &mut impl FnMut(&mut Reader<'t>, &mut Converter, &str) -> R<()>,
    ) -> R<()> {
        self.pos += 1;
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            let key = self.string_value()?;
            self.colon()?;
            each(self, conv, &key)?;
            if self.next_or_close(b'}')? {
                return Ok(());
            }
        }
    }

    fn colon(&mut self) -> R<()> {
        self.ws();
        if self.peek() != Some(b':') {
            return self.err("expected `:`");
        }
        self.pos += 1;
        Ok(())
    }

    /// After a member or an item: `,` (false) or the closing bracket (true).
    #[inline]
    fn next_or_close(&mut self, close: u8) -> R<bool> {
        self.ws();
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(false)
            }
            Some(c) if c == close => {
                self.pos += 1;
                Ok(true)
            }
            Some(_) => self.err("expected `,` or a closing bracket"),
            None => self.err("end of text inside an object or array"),
        }
    }

    fn literal(&mut self, word: &[u8], v: Value) -> R<Value> {
        if self.bytes()[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(v)
        } else {
            self.err("expected a value")
        }
    }

    /// An object or an array: shared if the table has its text, else read and offered.
    fn container(&mut self, conv: &mut Converter) -> R<Value> {
        if self.depth >= MAX_DEPTH {
            return self.err("nested too deeply");
        }
        let start = self.pos;
        let rest = &self.bytes()[start..];
        // Only the outer levels are shared (see `share::SHARE_DEPTH`).
        let key = if self.depth < share::SHARE_DEPTH {
            conv.share.key(rest)
        } else {
            None
        };
        if let Some(h) = key
            && let Some(found) = conv.share.find(h, rest)
            && self.depth + found.height <= MAX_DEPTH
        {
            self.pos += found.len;
            self.deepest = self.deepest.max(self.depth + found.height);
            return Ok(found.value);
        }
        let outer = self.deepest;
        self.depth += 1;
        self.deepest = self.depth;
        let v = if rest[0] == b'{' {
            self.object(conv)
        } else {
            self.array(conv)
        };
        self.depth -= 1;
        let height = self.deepest - self.depth;
        self.deepest = self.deepest.max(outer);
        let v = v?;
        if let Some(h) = key {
            conv.share
                .offer(h, &self.bytes()[start..self.pos], &v, height);
        }
        Ok(v)
    }

    fn array(&mut self, conv: &mut Converter) -> R<Value> {
        let base = conv.items.len();
        match self.items(conv) {
            Ok(()) => Ok(Value::Tuple(conv.items.drain(base..).collect())),
            Err(e) => {
                conv.items.truncate(base);
                Err(e)
            }
        }
    }

    fn items(&mut self, conv: &mut Converter) -> R<()> {
        self.pos += 1;
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            let v = self.value(conv)?;
            conv.items.push(v);
            if self.next_or_close(b']')? {
                return Ok(());
            }
        }
    }

    fn object(&mut self, conv: &mut Converter) -> R<Value> {
        let base = conv.entries.len();
        match self.members(conv) {
            Ok(()) => {
                let entries: Vec<(Value, Value)> = conv.entries.drain(base..).collect();
                Ok(Value::frozen_dict(Map::from_entries(entries)))
            }
            Err(e) => {
                conv.entries.truncate(base);
                Err(e)
            }
        }
    }

    fn members(&mut self, conv: &mut Converter) -> R<()> {
        self.pos += 1;
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            let k = self.string_value()?;
            let k = conv.str(&k);
            self.colon()?;
            let v = self.value(conv)?;
            conv.entries.push((k, v));
            if self.next_or_close(b'}')? {
                return Ok(());
            }
        }
    }

    /// A string; the cursor is at its opening quote.
    fn string(&mut self) -> R<Cow<'t, str>> {
        let b = self.bytes();
        let start = self.pos + 1;
        let mut i = start;
        while let Some(&c) = b.get(i) {
            if STRING_STOP[usize::from(c)] {
                break;
            }
            i += 1;
        }
        match b.get(i) {
            Some(b'"') => {
                self.pos = i + 1;
                self.slice(start, i).map(Cow::Borrowed)
            }
            Some(b'\\') => self.escaped(start, i).map(Cow::Owned),
            Some(_) => {
                self.pos = i;
                self.err("control character in a string")
            }
            None => {
                self.pos = i;
                self.err("end of text inside a string")
            }
        }
    }

    /// `text[a..b]`, both ends next to ASCII bytes the reader found.
    fn slice(&self, a: usize, b: usize) -> R<&'t str> {
        self.text
            .get(a..b)
            .ok_or(("a string split inside a character", a))
    }

    /// The rest of a string from `start` whose first escape is at `i`.
    fn escaped(&mut self, start: usize, mut i: usize) -> R<String> {
        let b = self.bytes();
        let mut out = String::with_capacity(i - start + 16);
        out.push_str(self.slice(start, i)?);
        loop {
            // b[i] is a backslash
            self.pos = i;
            let Some(&c) = b.get(i + 1) else {
                return self.err("end of text inside a string");
            };
            i += 2;
            match c {
                b'"' => out.push('"'),
                b'\\' => out.push('\\'),
                b'/' => out.push('/'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'u' => {
                    let n = self.hex4(i)?;
                    i += 4;
                    let code = match n {
                        0xD800..=0xDBFF => {
                            if b.get(i) != Some(&b'\\') || b.get(i + 1) != Some(&b'u') {
                                return self.err("a lone surrogate in a \\u escape");
                            }
                            let m = self.hex4(i + 2)?;
                            if !(0xDC00..=0xDFFF).contains(&m) {
                                return self.err("a lone surrogate in a \\u escape");
                            }
                            i += 6;
                            0x10000 + ((n - 0xD800) << 10) + (m - 0xDC00)
                        }
                        0xDC00..=0xDFFF => return self.err("a lone surrogate in a \\u escape"),
                        n => n,
                    };
                    match char::from_u32(code) {
                        Some(ch) => out.push(ch),
                        None => return self.err("an invalid \\u escape"),
                    }
                }
                _ => return self.err("an invalid escape"),
            }
            let run = i;
            while let Some(&c) = b.get(i) {
                if STRING_STOP[usize::from(c)] {
                    break;
                }
                i += 1;
            }
            out.push_str(self.slice(run, i)?);
            match b.get(i) {
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok(out);
                }
                Some(b'\\') => {}
                Some(_) => {
                    self.pos = i;
                    return self.err("control character in a string");
                }
                None => {
                    self.pos = i;
                    return self.err("end of text inside a string");
                }
            }
        }
    }

    fn hex4(&self, at: usize) -> R<u32> {
        let mut n = 0;
        for k in 0..4 {
            let d = match self.bytes().get(at + k) {
                Some(c @ b'0'..=b'9') => c - b'0',
                Some(c @ b'a'..=b'f') => c - b'a' + 10,
                Some(c @ b'A'..=b'F') => c - b'A' + 10,
                _ => return Err(("an invalid \\u escape", at + k)),
            };
            n = n * 16 + u32::from(d);
        }
        Ok(n)
    }

    fn number(&mut self) -> R<Value> {
        let b = self.bytes();
        let start = self.pos;
        let digits = |mut i: usize| {
            while let Some(b'0'..=b'9') = b.get(i) {
                i += 1;
            }
            i
        };
        let neg = b.get(start) == Some(&b'-');
        let int_start = start + usize::from(neg);
        let int_end = match b.get(int_start) {
            Some(b'0') => int_start + 1,
            Some(b'1'..=b'9') => digits(int_start + 1),
            _ => return Err(("an invalid number", int_start)),
        };
        if let Some(b'0'..=b'9') = b.get(int_end) {
            return Err(("an invalid number (a leading zero)", int_end));
        }
        let mut end = int_end;
        let mut float = false;
        if b.get(end) == Some(&b'.') {
            let d = digits(end + 1);
            if d == end + 1 {
                return Err(("an invalid number", d));
            }
            end = d;
            float = true;
        }
        if let Some(b'e' | b'E') = b.get(end) {
            let mut d = end + 1;
            if let Some(b'+' | b'-') = b.get(d) {
                d += 1;
            }
            let e = digits(d);
            if e == d {
                return Err(("an invalid number", e));
            }
            end = e;
            float = true;
        }
        self.pos = end;
        if !float {
            let mut n: u64 = 0;
            let fits = b[int_start..int_end].iter().all(|c| {
                match n
                    .checked_mul(10)
                    .and_then(|x| x.checked_add(u64::from(c - b'0')))
                {
                    Some(x) => {
                        n = x;
                        true
                    }
                    None => false,
                }
            });
            if fits {
                return Ok(match (neg, i64::try_from(n)) {
                    (false, Ok(i)) => Value::Int(i),
                    (false, Err(_)) => Value::Float(n as f64),
                    (true, Ok(i)) => Value::Int(-i),
                    (true, Err(_)) if n == 1 << 63 => Value::Int(i64::MIN),
                    (true, Err(_)) => Value::Float(-(n as f64)),
                });
            }
        }
        let f: f64 = self
            .slice(start, end)?
            .parse()
            .map_err(|_| ("an invalid number", start))?;
        if f.is_infinite() {
            return Err(("a number out of range", start));
        }
        Ok(Value::Float(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Value, TextError> {
        Converter::new().convert_text(text)
    }

    /// The same text through `serde_json` (the converter's serde path, which keeps order).
    fn serde(text: &str) -> Option<Value> {
        use serde::de::DeserializeSeed;
        let mut c = Converter::new();
        let mut de = serde_json::Deserializer::from_str(text);
        let v = c.seed().deserialize(&mut de).ok()?;
        de.end().ok()?;
        Some(v)
    }

    /// Equal as values and in every dict's key order.
    fn same(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Dict(x), Value::Dict(y)) => {
                x.map.len() == y.map.len()
                    && x.map
                        .iter()
                        .zip(y.map.iter())
                        .all(|((k, v), (l, w))| same(k, l) && same(v, w))
            }
            (Value::Tuple(x), Value::Tuple(y)) => {
                x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same(p, q))
            }
            (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
            (Value::Int(x), Value::Int(y)) => x == y,
            _ => a.type_name() == b.type_name() && a == b,
        }
    }

    #[test]
    fn like_serde_json() {
        for text in [
            r#"{"b": [1, 2.5, "x", null, true, false], "a": {"k": -3}, "b": "again"}"#,
            " [ ] ",
            "{}",
            r#""a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00""#,
            r#""héllo wörld""#,
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551615",
            "-9223372036854775808",
            "-9223372036854775809",
            "1.5e3",
            "1E-2",
            "0.1",
            "123456789.25",
            "[1, [2, [3, {\"x\": [4]}]]]",
            // errors
            "",
            "[1,]",
            "[1 2]",
            "{\"a\" 1}",
            "{\"a\": 1,}",
            "{1: 2}",
            "01",
            "1.",
            ".5",
            "1e",
            "-",
            "+1",
            "tru",
            "nulll",
            "\"a",
            "\"\\x\"",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "\"\\ud800\\u0041\"",
            "\"tab\there\"",
            "1e400",
            "-1e400",
            "[1] x",
            "{\"a\": [1}",
            "[",
            "{",
            "{\"a\"",
        ] {
            let ours = read(text).ok();
            let theirs = serde(text);
            match (&ours, &theirs) {
                (Some(a), Some(b)) => assert!(same(a, b), "{text}: {a:?} vs {b:?}"),
                (None, None) => {}
                _ => panic!("{text}: {ours:?} vs {theirs:?}"),
            }
        }
    }

    #[test]
    fn where_python_differs_from_serde_json_python_wins() {
        // -0 is an int in Python's json, and floats are correctly rounded
        assert!(same(&read("-0").unwrap(), &Value::Int(0)));
        assert!(same(&read("-0.0").unwrap(), &Value::Float(-0.0)));
        for text in [
            "2.2250738585072011e-308",
            "1.7976931348623157e308",
            "0.30000000000000004",
            "123456789012345678901234567890",
            "-123456789012345678901234567890",
            "4.9e-324",
            "1e-400",
        ] {
            let want: f64 = text.parse().unwrap();
            assert!(same(&read(text).unwrap(), &Value::Float(want)), "{text}");
        }
    }

    #[test]
    fn nesting_is_limited_like_serde_json() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        for n in [126, 127, 128, 129, 5000] {
            assert_eq!(read(&deep(n)).is_ok(), serde(&deep(n)).is_some(), "{n}");
        }
        assert!(read(&deep(127)).is_ok());
        let e = read(&deep(128)).unwrap_err();
        assert_eq!((e.what, e.line, e.column), ("nested too deeply", 1, 128));
    }

    #[test]
    fn a_shared_sub_tree_keeps_the_depth_limit() {
        // Converted at depth 1, then met again where it would go past the limit.
        let inner = format!(
            "{}{}{}",
            "[".repeat(100),
            "\"a long enough string to be worth sharing, really\"",
            "]".repeat(100)
        );
        let mut c = Converter::new();
        assert!(c.convert_text(&inner).is_ok());
        assert!(c.stats().stored > 0);
        let shallow = format!("[{inner}]");
        assert!(c.convert_text(&shallow).is_ok());
        let deep = format!("{}{inner}{}", "[".repeat(30), "]".repeat(30));
        assert_eq!(c.convert_text(&deep).is_ok(), serde(&deep).is_some());
        assert!(c.convert_text(&deep).is_err());
    }

    #[test]
    fn errors_say_where() {
        let e = read("{\"a\": 1,\n \"b\": tru}").unwrap_err();
        assert_eq!((e.line, e.column), (2, 7));
        assert_eq!(e.to_string(), "expected a value at line 2 column 7");
    }
    #[test]
    fn huge_and_odd_numbers() {
        let big = format!("1{}", "0".repeat(400));
        let long = format!("1{}", "0".repeat(300));
        let tiny = format!("0.{}1", "0".repeat(100_000));
        let many = format!("{}.5", "9".repeat(100_000));
        for text in [
            big.as_str(),
            long.as_str(),
            tiny.as_str(),
            many.as_str(),
            "1e0000000000000000000000000001",
            "1e-99999999999999999999999",
            "1e99999999999999999999999",
            "-1e-400",
            "NaN",
            "Infinity",
            "-Infinity",
            "0x10",
            "1_000",
            // serde_json's default reader gave ...753e-115 for this one (CI, 2026-11-28)
            "[{\"\":-1.9897712760027526e-115}]",
            "-1.9897712760027526e-115",
            "2.2250738585072011e-308",
            "9007199254740993",
            "9007199254740993.0",
        ] {
            let ours = read(text).ok();
            let theirs = serde(text);
            match (&ours, &theirs) {
                (Some(a), Some(b)) => assert!(
                    close(a, b),
                    "{}: {a:?} vs {b:?}",
                    &text[..20.min(text.len())]
                ),
                (None, None) => {}
                _ => panic!("{}: {ours:?} vs {theirs:?}", &text[..20.min(text.len())]),
            }
            if let Some(Value::Float(f)) = ours {
                assert_eq!(f.to_bits(), text.parse::<f64>().unwrap().to_bits());
            }
        }
    }

    /// Containers whose texts all begin with the same 32 bytes (one hash, as crafted
    /// collisions would have it): each still gets its own value, the table keeps few of them,
    /// and reading stays quick.
    #[test]
    fn crafted_collisions_give_the_right_values() {
        let prefix = format!("[\"{}\", ", "a".repeat(40));
        let mut c = Converter::new();
        let n = 2000;
        let doc = format!(
            "[{}]",
            (0..n)
                .map(|i| format!("{prefix}{i}, \"{}\"]", "b".repeat(i % 50)))
                .collect::<Vec<_>>()
                .join(",")
        );
        for _ in 0..3 {
            let v = c.convert_text(&doc).unwrap();
            let Value::Tuple(items) = &v else { panic!() };
            for (i, item) in items.iter().enumerate() {
                let Value::Tuple(x) = item else { panic!() };
                assert_eq!(x[1], Value::Int(i as i64));
            }
            assert!(same(&v, &serde(&doc).unwrap()));
        }
        // Held with the same hash: at most PER_HASH in each generation (plus the whole).
        assert!(
            c.stats().entries <= 2 * share::PER_HASH + 2,
            "{:?}",
            c.stats()
        );
    }

    /// A hostile document nested as deep as allowed, each level long: every byte is compared
    /// or copied a bounded number of times, so it reads in about the time of a flat one.
    #[test]
    fn deep_and_long_reads_in_linear_time() {
        let body = "x".repeat(1 << 20);
        let doc = format!("{}\"{body}\"{}", "[".repeat(126), "]".repeat(126));
        let mut c = Converter::new();
        for _ in 0..3 {
            assert!(c.convert_text(&doc).is_ok());
        }
        let stats = c.stats();
        // the table's text stays within its bound (two generations)
        assert!(stats.bytes <= 2 * share::Limits::default().bytes);
        // The work is counted, not timed: only the outer SHARE_DEPTH levels are offered to the
        // table or found in it, so each pass copies or compares each byte at most that often.
        let depth = u64::from(share::SHARE_DEPTH);
        assert!(stats.stored <= 3 * depth, "{stats:?}");
        assert!(stats.hit_bytes <= 3 * depth * doc.len() as u64, "{stats:?}");
    }

    #[test]
    fn memory_is_bounded_whatever_the_documents() {
        let limits = share::Limits {
            entries: 64,
            bytes: 16 << 10,
        };
        let mut c = Converter::with_sharing(limits);
        for i in 0..2000 {
            let doc = format!(
                "{{\"n\": {i}, \"big\": [\"{}\", {i}], \"same\": [\"{}\", 1]}}",
                "y".repeat(i % 3000),
                "z".repeat(100)
            );
            c.convert_text(&doc).unwrap();
            let s = c.stats();
            assert!(
                s.entries <= 2 * limits.entries && s.bytes <= 2 * limits.bytes,
                "{s:?}"
            );
        }
        // what every document repeats was found, not converted again
        assert!(c.stats().hits >= 1999, "{:?}", c.stats());
    }

    /// Equal as `same`, floats to the bit (both readers round correctly), but `-0` may be the
    /// int 0 here.
    fn close(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Dict(x), Value::Dict(y)) => {
                x.map.len() == y.map.len()
                    && x.map
                        .iter()
                        .zip(y.map.iter())
                        .all(|((k, v), (l, w))| same(k, l) && close(v, w))
            }
            (Value::Tuple(x), Value::Tuple(y)) => {
                x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| close(p, q))
            }
            (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
            (Value::Int(0), Value::Float(y)) => y.to_bits() == (-0.0f64).to_bits(),
            _ => same(a, b),
        }
    }

    mod random {
        use super::*;
        use proptest::prelude::*;

        fn ws() -> impl Strategy<Value = &'static str> {
            prop_oneof![4 => Just(""), 2 => Just(" "), 1 => Just("\n\t "), 1 => Just("\r\n")]
        }

        fn string() -> impl Strategy<Value = String> {
            let piece = prop_oneof![
                6 => "[a-z0-9 _.-]{0,10}",
                1 => Just("\\n".to_string()),
                1 => Just("\\\"".to_string()),
                1 => Just("\\\\".to_string()),
                1 => Just("\\/\\b\\f\\r\\t".to_string()),
                2 => any::<char>().prop_map(|c| c.to_string()),
                2 => (0u32..0x10000).prop_map(|n| format!("\\u{n:04x}")),
                1 => (0xD800u32..0xDC00, 0xDC00u32..0xE000)
                    .prop_map(|(h, l)| format!("\\u{h:04X}\\u{l:04x}")),
            ];
            prop::collection::vec(piece, 0..5).prop_map(|v| format!("\"{}\"", v.concat()))
        }

        fn number() -> impl Strategy<Value = String> {
            prop_oneof![
                any::<i64>().prop_map(|n| n.to_string()),
                any::<u64>().prop_map(|n| n.to_string()),
                any::<f64>().prop_map(|f| format!("{f:?}")),
                any::<f64>().prop_map(|f| format!("{f:e}")),
                "-?[1-9][0-9]{15,30}",
                "-?(0|[1-9][0-9]{0,5})(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?",
            ]
        }

        /// JSON text, with white space here and there.
        pub(super) fn json() -> impl Strategy<Value = String> {
            let leaf = prop_oneof![
                Just("null".to_string()),
                Just("true".to_string()),
                Just("false".to_string()),
                number(),
                string(),
            ];
            leaf.prop_recursive(6, 96, 8, |inner| {
                prop_oneof![
                    prop::collection::vec((ws(), inner.clone(), ws()), 0..8).prop_map(|v| {
                        let items: Vec<String> = v
                            .into_iter()
                            .map(|(a, x, b)| format!("{a}{x}{b}"))
                            .collect();
                        format!("[{}]", items.join(","))
                    }),
                    prop::collection::vec((string(), ws(), inner), 0..8).prop_map(|v| {
                        let members: Vec<String> = v
                            .into_iter()
                            .map(|(k, w, x)| format!("{w}{k}{w}:{w}{x}"))
                            .collect();
                        format!("{{{}}}", members.join(","))
                    }),
                ]
            })
        }

        /// Bytes that break or bend JSON where they land.
        fn splinter() -> impl Strategy<Value = &'static str> {
            prop_oneof![
                Just("["),
                Just("]"),
                Just("{"),
                Just("}"),
                Just("\""),
                Just(","),
                Just(":"),
                Just("\\"),
                Just(" "),
                Just("-"),
                Just("0"),
                Just("."),
                Just("e"),
                Just("\\u"),
                Just("\u{1}"),
                Just("é"),
                Just("1e999"),
                Just("\\ud800"),
                Just("nul"),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            #[test]
            fn reads_like_serde_json(text in json()) {
                let ours = read(&text);
                let theirs = serde(&text);
                match (&ours, &theirs) {
                    (Ok(a), Some(b)) => prop_assert!(close(a, b), "{text}: {a:?} vs {b:?}"),
                    (Err(_), None) => {}
                    _ => prop_assert!(false, "{text}: {ours:?} vs {theirs:?}"),
                }
            }

            #[test]
            fn broken_text_fails_like_serde_json(
                text in json(),
                at in any::<prop::sample::Index>(),
                cut in any::<bool>(),
                bit in splinter(),
            ) {
                let mut t = text.into_bytes();
                let i = at.index(t.len() + 1);
                if cut {
                    t.truncate(i);
                } else {
                    t.splice(i..i, bit.bytes());
                }
                let Ok(text) = String::from_utf8(t) else { return Ok(()) };
                let ours = read(&text);
                let theirs = serde(&text);
                match (&ours, &theirs) {
                    (Ok(a), Some(b)) => prop_assert!(close(a, b), "{text}: {a:?} vs {b:?}"),
                    (Err(_), None) => {}
                    _ => prop_assert!(false, "{text}: {ours:?} vs {theirs:?}"),
                }
            }

            /// Documents read one after another by one converter, sharing what they repeat
            /// (with a table small enough to rotate), give the values each gives alone.
            #[test]
            fn sharing_changes_no_value(
                docs in prop::collection::vec(json(), 1..5),
                small in any::<bool>(),
            ) {
                let limits = if small {
                    share::Limits { entries: 3, bytes: 400 }
                } else {
                    share::Limits::default()
                };
                let mut shared = Converter::with_sharing(limits);
                let mut texts = Vec::new();
                for d in &docs {
                    texts.push(d.clone());
                    texts.push(format!("{{\"a\": {d}, \"b\": [{d}, {d}], \"c\": [[{d}]]}}"));
                }
                texts.push(format!("[{}]", docs.join(", ")));
                for t in &texts {
                    let alone = Converter::with_sharing(share::Limits::OFF).convert_text(t);
                    let ours = shared.convert_text(t);
                    match (&ours, &alone) {
                        (Ok(a), Ok(b)) => prop_assert!(same(a, b), "{t}: {a:?} vs {b:?}"),
                        (Err(a), Err(b)) => prop_assert_eq!(a, b),
                        _ => prop_assert!(false, "{t}: {ours:?} vs {alone:?}"),
                    }
                }
            }
        }
    }
}
