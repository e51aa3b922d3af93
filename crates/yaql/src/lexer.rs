//! The YAQL lexer: turns expression text into tokens with character spans, following the
//! reference's ply rules in their order (`$var`, number, `name(`, keyword, strings, then the
//! longest operator symbol). Must not build syntax trees (that is `parser`).

use std::rc::Rc;
use std::sync::Arc;

use super::error::{ErrorKind, Result, YaqlError};

/// A literal constant as the parser stores it (thread-safe; turned into a `Value` per run).
#[derive(Debug, Clone, PartialEq)]
pub enum Lit {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Arc<str>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Lit(Lit),
    /// A bare identifier that is not an operator word: a string constant.
    Keyword(Arc<str>),
    /// `$name` (the name without `$`).
    Dollar(Arc<str>),
    /// `name(`: a function call opening.
    Func(Arc<str>),
    /// An operator symbol or word (`+`, `.`, `and`, `->`...).
    Op(&'static str),
    /// `=>`
    Mapping,
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Eof,
}

#[derive(Debug, Clone)]
pub struct Token {
    pub tok: Tok,
    /// Character offset of the first character.
    pub pos: usize,
    /// Text of the token, for error messages.
    pub text: Rc<str>,
}

/// Operator symbols, longest first (the reference sorts its string rules by length).
const SYMBOLS: &[&str] = &[
    "?.", "=~", "!~", "->", "!=", ">=", "<=", ".", "*", "+", "-", "/", ">", "<", "=",
];
const WORD_OPS: &[&str] = &["and", "or", "not", "in", "mod"];

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn is_digit(c: char) -> bool {
    c.is_ascii_digit()
}

pub fn tokenize(text: &str) -> Result<Vec<Token>> {
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len();
    // The byte offset of each character (and of the end), so a token's text is a slice of
    // `text` rather than characters collected one by one.
    let offsets: Vec<usize> = text
        .char_indices()
        .map(|(b, _)| b)
        .chain(std::iter::once(text.len()))
        .collect();
    let slice = |from: usize, to: usize| &text[offsets[from]..offsets[to]];
    let mut out = Vec::with_capacity(n / 2 + 1);
    let mut i = 0;
    let word_before = |i: usize| i > 0 && is_word(chars[i - 1]);
    while i < n {
        let c = chars[i];
        if matches!(c, ' ' | '\t' | '\r' | '\n') {
            i += 1;
            continue;
        }
        let start = i;
        let push = |out: &mut Vec<Token>, tok: Tok, end: usize| {
            out.push(Token {
                tok,
                pos: start,
                text: slice(start, end).into(),
            })
        };
        // $name
        if c == '$' {
            let mut j = i + 1;
            while j < n && is_word(chars[j]) {
                j += 1;
            }
            push(&mut out, Tok::Dollar(slice(i + 1, j).into()), j);
            i = j;
            continue;
        }
        // number: \b\d+(\.?\d+)?\b
        if is_digit(c) && !word_before(i) {
            let mut j = i;
            while j < n && is_digit(chars[j]) {
                j += 1;
            }
            let int_end = j;
            let mut end = None;
            if j < n && chars[j] == '.' && j + 1 < n && is_digit(chars[j + 1]) {
                let mut k = j + 1;
                while k < n && is_digit(chars[k]) {
                    k += 1;
                }
                if k >= n || !is_word(chars[k]) {
                    end = Some((k, true));
                }
            }
            if end.is_none() && (int_end >= n || !is_word(chars[int_end])) {
                end = Some((int_end, false));
            }
            // The reference's regex backtracks (`\d+` shorter) but a shorter digit run is
            // never followed by a word boundary, so no other split exists.
            if let Some((k, is_float)) = end {
                let s = slice(i, k);
                let lit = if is_float {
                    Lit::Float(s.parse().unwrap_or(0.0))
                } else {
                    match s.parse::<i64>() {
                        Ok(v) => Lit::Int(v),
                        Err(_) => {
                            return Err(YaqlError::at(
                                ErrorKind::OverflowError,
                                format!("integer literal {s} is too large"),
                                start,
                            ));
                        }
                    }
                };
                push(&mut out, Tok::Lit(lit), k);
                i = k;
                continue;
            }
        }
        // identifier: function `name(` or keyword
        if (c.is_alphanumeric() && !c.is_numeric() || c == '_') && !word_before(i) {
            let mut j = i;
            while j < n && is_word(chars[j]) {
                j += 1;
            }
            let word = slice(i, j);
            if j < n && chars[j] == '(' {
                push(&mut out, Tok::Func(word.into()), j + 1);
                i = j + 1;
                continue;
            }
            if !word.starts_with("__") {
                let tok = match word {
                    "true" => Tok::Lit(Lit::Bool(true)),
                    "false" => Tok::Lit(Lit::Bool(false)),
                    "null" => Tok::Lit(Lit::Null),
                    w => match WORD_OPS.iter().find(|o| **o == w) {
                        Some(op) => Tok::Op(op),
                        None => Tok::Keyword(word.into()),
                    },
                };
                push(&mut out, tok, j);
                i = j;
                continue;
            }
        }
        // strings
        if c == '\'' || c == '"' || c == '`' {
            let mut j = i + 1;
            let mut closed = false;
            while j < n {
                if chars[j] == '\\' {
                    // `\\.`: any character but a newline
                    if j + 1 < n && chars[j + 1] != '\n' {
                        j += 2;
                        continue;
                    }
                    break;
                }
                if chars[j] == c {
                    closed = true;
                    break;
                }
                j += 1;
            }
            if closed {
                let body = slice(i + 1, j);
                let value = if c == '`' {
                    body.replace("\\`", "`")
                } else {
                    decode_escapes(body)
                        .map_err(|m| YaqlError::at(ErrorKind::ValueError, m, start))?
                };
                push(&mut out, Tok::Lit(Lit::Str(value.into())), j + 1);
                i = j + 1;
                continue;
            }
        }
        // operators and punctuation
        // (every symbol is ASCII: one character a byte)
        if let Some(sym) = SYMBOLS
            .iter()
            .find(|s| s.len() <= n - i && s.chars().zip(&chars[i..]).all(|(a, b)| a == *b))
        {
            let len = sym.len();
            // `=>` is checked before `=`
            if *sym == "=" && i + 1 < n && chars[i + 1] == '>' {
                push(&mut out, Tok::Mapping, i + 2);
                i += 2;
                continue;
            }
            push(&mut out, Tok::Op(sym), i + len);
            i += len;
            continue;
        }
        let tok = match c {
            '(' => Tok::LParen,
            ')' => Tok::RParen,
            '[' => Tok::LBracket,
            ']' => Tok::RBracket,
            '{' => Tok::LBrace,
            '}' => Tok::RBrace,
            ',' => Tok::Comma,
            _ => {
                return Err(YaqlError::at(
                    ErrorKind::YaqlLexicalException,
                    format!("Lexical error: illegal character '{c}' at position {start}"),
                    start,
                ));
            }
        };
        push(&mut out, tok, i + 1);
        i += 1;
    }
    out.push(Token {
        tok: Tok::Eof,
        pos: n,
        text: "".into(),
    });
    Ok(out)
}

/// Python-style escape decoding of quoted strings, as yaql's `decode_escapes`: only the
/// recognised sequences are decoded, any other backslash pair is kept verbatim.
fn decode_escapes(s: &str) -> std::result::Result<String, String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let n = chars.len();
    let hex = |from: usize, len: usize| -> std::result::Result<char, String> {
        let text: String = chars[from..from + len].iter().collect();
        let code = u32::from_str_radix(&text, 16)
            .map_err(|_| format!("truncated \\{} escape", chars[from - 1]))?;
        char::from_u32(code).ok_or_else(|| "illegal Unicode character".to_string())
    };
    while i < n {
        if chars[i] != '\\' || i + 1 >= n {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let c = chars[i + 1];
        match c {
            'U' if i + 10 <= n => {
                out.push(hex(i + 2, 8)?);
                i += 10;
            }
            'u' if i + 6 <= n => {
                out.push(hex(i + 2, 4)?);
                i += 6;
            }
            'x' if i + 4 <= n => {
                out.push(hex(i + 2, 2)?);
                i += 4;
            }
            '0'..='7' => {
                let mut j = i + 1;
                let mut code = 0u32;
                while j < n && j < i + 4 && ('0'..='7').contains(&chars[j]) {
                    code = code * 8 + chars[j].to_digit(8).unwrap_or(0);
                    j += 1;
                }
                out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                i = j;
            }
            // yaql's `\\N\{[^}]+\}`, decoded by Python's `unicode-escape` codec.
            'N' if i + 3 < n && chars[i + 2] == '{' && chars[i + 3] != '}' => {
                let Some(len) = chars[i + 3..].iter().position(|c| *c == '}') else {
                    out.push('\\');
                    i += 1;
                    continue;
                };
                let name: String = chars[i + 3..i + 3 + len].iter().collect();
                let c = super::charname::lookup(&name)
                    .ok_or_else(|| format!("unknown Unicode character name {name:?}"))?;
                out.push(c);
                i += 4 + len;
            }
            '\\' | '\'' | '"' | 'a' | 'b' | 'f' | 'n' | 'r' | 't' | 'v' => {
                out.push(match c {
                    'a' => '\u{7}',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'v' => '\u{b}',
                    other => other,
                });
                i += 2;
            }
            _ => {
                out.push('\\');
                i += 1;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn numbers_words_and_functions() {
        assert_eq!(
            toks("len($) 1.5 007 x"),
            vec![
                Tok::Func("len".into()),
                Tok::Dollar("".into()),
                Tok::RParen,
                Tok::Lit(Lit::Float(1.5)),
                Tok::Lit(Lit::Int(7)),
                Tok::Keyword("x".into()),
                Tok::Eof
            ]
        );
        assert!(tokenize("1e3").is_err());
        assert!(tokenize("$.__x").is_err());
        assert!(tokenize("a # b").is_err());
    }

    #[test]
    fn escapes() {
        assert_eq!(decode_escapes(r"a\nb\d\x41\101\\").unwrap(), "a\nb\\dAA\\");
        assert_eq!(
            toks(r"'it\'s'"),
            vec![Tok::Lit(Lit::Str("it's".into())), Tok::Eof]
        );
        assert_eq!(
            toks(r"`a\`b\n`"),
            vec![Tok::Lit(Lit::Str("a`b\\n".into())), Tok::Eof]
        );
    }

    #[test]
    fn longest_symbol() {
        assert_eq!(
            toks("a => b -> c >= d"),
            vec![
                Tok::Keyword("a".into()),
                Tok::Mapping,
                Tok::Keyword("b".into()),
                Tok::Op("->"),
                Tok::Keyword("c".into()),
                Tok::Op(">="),
                Tok::Keyword("d".into()),
                Tok::Eof
            ]
        );
    }
}
