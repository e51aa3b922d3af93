//! The YAQL parser: precedence climbing over the operator table (kept as data in `OPERATORS`),
//! producing an arena AST in which every operator is already lowered to the function call
//! yaql makes of it (`a + b` → `#operator_+(a, b)`, `a = b` → `*equal(a, b)`, `x[i]` →
//! `#indexer(x, i)`...). Must not evaluate anything.

use std::sync::Arc;

use super::error::{ErrorKind, Result, YaqlError};
use super::lexer::{Lit, Tok, Token, tokenize};

pub type NodeId = u32;

/// How an operator is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Prefix,
    BinaryLeft,
    BinaryRight,
}

/// One row of the operator table. `level` 1 binds tightest.
#[derive(Debug, Clone, Copy)]
pub struct OpDef {
    pub symbol: &'static str,
    pub kind: OpKind,
    pub level: u8,
    /// The function the operator lowers to.
    pub function: &'static str,
}

/// yaql 3.x's operator table (non-legacy). Level 2 is the postfix indexer `x[...]`.
pub const OPERATORS: &[OpDef] = &[
    op(".", OpKind::BinaryLeft, 1, "#operator_."),
    op("?.", OpKind::BinaryLeft, 1, "#operator_?."),
    op("+", OpKind::Prefix, 3, "#unary_operator_+"),
    op("-", OpKind::Prefix, 3, "#unary_operator_-"),
    op("=~", OpKind::BinaryLeft, 4, "#operator_=~"),
    op("!~", OpKind::BinaryLeft, 4, "#operator_!~"),
    op("*", OpKind::BinaryLeft, 5, "#operator_*"),
    op("/", OpKind::BinaryLeft, 5, "#operator_/"),
    op("mod", OpKind::BinaryLeft, 5, "#operator_mod"),
    op("+", OpKind::BinaryLeft, 6, "#operator_+"),
    op("-", OpKind::BinaryLeft, 6, "#operator_-"),
    op(">", OpKind::BinaryLeft, 7, "#operator_>"),
    op("<", OpKind::BinaryLeft, 7, "#operator_<"),
    op(">=", OpKind::BinaryLeft, 7, "#operator_>="),
    op("<=", OpKind::BinaryLeft, 7, "#operator_<="),
    op("!=", OpKind::BinaryLeft, 7, "*not_equal"),
    op("=", OpKind::BinaryLeft, 7, "*equal"),
    op("in", OpKind::BinaryLeft, 7, "#operator_in"),
    op("not", OpKind::Prefix, 8, "#unary_operator_not"),
    op("and", OpKind::BinaryLeft, 9, "#operator_and"),
    op("or", OpKind::BinaryLeft, 10, "#operator_or"),
    op("->", OpKind::BinaryRight, 11, "#operator_->"),
];
const INDEXER_LEVEL: u8 = 2;
const LOOSEST: u8 = 11;
/// Deeper nesting than this is refused instead of risking the stack.
pub const MAX_NESTING: usize = 400;
/// Longer expressions are refused before they are tokenized: every token costs about a
/// hundred bytes, so a multi-megabyte expression (a plugin's YAML can hold one) would cost
/// hundreds of megabytes. Fuel's longest real expression is about 1,200 bytes.
pub const MAX_LENGTH: usize = 64 << 10;

const fn op(symbol: &'static str, kind: OpKind, level: u8, function: &'static str) -> OpDef {
    OpDef {
        symbol,
        kind,
        level,
        function,
    }
}

fn find_op(symbol: &str, prefix: bool) -> Option<&'static OpDef> {
    OPERATORS
        .iter()
        .find(|o| o.symbol == symbol && (o.kind == OpKind::Prefix) == prefix)
}

/// An argument of a call as written.
#[derive(Debug, Clone)]
pub enum Arg {
    /// A skipped positional argument (`f(1,,3)`).
    Skip,
    Expr(NodeId),
    /// `name => value` (`MappingRuleExpression`).
    Rule(NodeId, NodeId),
}

#[derive(Debug, Clone)]
pub enum Node {
    Const(Lit),
    /// A bare word: a string constant that may also name a keyword argument or attribute.
    Keyword(Arc<str>),
    /// `$name` with the name normalised (`$` is `1`).
    Var(Arc<str>),
    /// Parentheses.
    Wrap(NodeId),
    /// A function call. `receiver` is true for a written call `name(...)` (yaql's
    /// `uses_receiver`), false for operators and literals lowered to calls.
    Call {
        name: Arc<str>,
        args: Vec<Arg>,
        written: bool,
    },
}

/// A parsed expression: nodes in an arena with their character spans.
#[derive(Debug)]
pub struct Ast {
    pub text: String,
    pub nodes: Vec<Node>,
    pub spans: Vec<usize>,
    pub root: NodeId,
}

impl Ast {
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }
    pub fn pos(&self, id: NodeId) -> usize {
        self.spans[id as usize]
    }
}

struct Parser {
    toks: Vec<Token>,
    i: usize,
    nodes: Vec<Node>,
    spans: Vec<usize>,
    depth: usize,
    text: String,
}

pub fn parse(text: &str) -> Result<Ast> {
    if text.len() > MAX_LENGTH {
        return Err(YaqlError::at(
            ErrorKind::YaqlGrammarException,
            format!(
                "the expression is {} bytes long; expressions of up to {MAX_LENGTH} bytes are \
                 parsed",
                text.len()
            ),
            0,
        ));
    }
    let toks = tokenize(text)?;
    let mut p = Parser {
        toks,
        i: 0,
        nodes: Vec::new(),
        spans: Vec::new(),
        depth: 0,
        text: text.to_string(),
    };
    let root = p.expr(LOOSEST)?;
    if p.peek() != &Tok::Eof {
        return Err(p.unexpected());
    }
    Ok(Ast {
        text: text.to_string(),
        nodes: p.nodes,
        spans: p.spans,
        root,
    })
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.i].tok
    }

    fn bump(&mut self) -> Token {
        let t = self.toks[self.i].clone();
        if self.i + 1 < self.toks.len() {
            self.i += 1;
        }
        t
    }

    fn unexpected(&self) -> YaqlError {
        let t = &self.toks[self.i];
        if t.tok == Tok::Eof {
            YaqlError::at(
                ErrorKind::YaqlGrammarException,
                "Parse error: unexpected end of statement",
                t.pos,
            )
        } else {
            YaqlError::at(
                ErrorKind::YaqlGrammarException,
                format!(
                    "Parse error: unexpected '{}' at position {} of expression '{}'",
                    t.text, t.pos, self.text
                ),
                t.pos,
            )
        }
    }

    fn add(&mut self, node: Node, pos: usize) -> NodeId {
        self.nodes.push(node);
        self.spans.push(pos);
        (self.nodes.len() - 1) as NodeId
    }

    fn call(&mut self, name: &str, args: Vec<Arg>, pos: usize) -> NodeId {
        self.add(
            Node::Call {
                name: name.into(),
                args,
                written: false,
            },
            pos,
        )
    }

    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            let pos = self.toks[self.i].pos;
            return Err(YaqlError::at(
                ErrorKind::RecursionError,
                format!("expression nests deeper than {MAX_NESTING} levels"),
                pos,
            ));
        }
        Ok(())
    }

    /// Parse an expression whose binary operators all have `level <= max`.
    fn expr(&mut self, max: u8) -> Result<NodeId> {
        self.enter()?;
        let mut lhs = self.prefix()?;
        loop {
            let pos = self.toks[self.i].pos;
            match self.peek().clone() {
                Tok::LBracket if INDEXER_LEVEL <= max => {
                    self.bump();
                    let mut args = vec![Arg::Expr(lhs)];
                    args.extend(self.args(&Tok::RBracket)?);
                    lhs = self.call("#indexer", args, pos);
                }
                Tok::Op(sym) => {
                    let Some(def) = find_op(sym, false) else {
                        break;
                    };
                    if def.level > max {
                        break;
                    }
                    self.bump();
                    let rhs_max = if def.kind == OpKind::BinaryRight {
                        def.level
                    } else {
                        def.level - 1
                    };
                    let rhs = self.expr(rhs_max)?;
                    lhs = self.call(def.function, vec![Arg::Expr(lhs), Arg::Expr(rhs)], pos);
                }
                _ => break,
            }
        }
        self.depth -= 1;
        Ok(lhs)
    }

    fn prefix(&mut self) -> Result<NodeId> {
        if let Tok::Op(sym) = self.peek().clone()
            && let Some(def) = find_op(sym, true)
        {
            let pos = self.bump().pos;
            let operand = self.expr(def.level - 1)?;
            return Ok(self.call(def.function, vec![Arg::Expr(operand)], pos));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<NodeId> {
        let t = self.toks[self.i].clone();
        let pos = t.pos;
        match t.tok {
            Tok::Lit(lit) => {
                self.bump();
                Ok(self.add(Node::Const(lit), pos))
            }
            Tok::Keyword(w) => {
                self.bump();
                Ok(self.add(Node::Keyword(w), pos))
            }
            Tok::Dollar(name) => {
                self.bump();
                let name: Arc<str> = if name.is_empty() { "1".into() } else { name };
                Ok(self.add(Node::Var(name), pos))
            }
            Tok::LParen => {
                self.bump();
                self.enter()?;
                let inner = self.expr(LOOSEST)?;
                self.depth -= 1;
                if self.peek() != &Tok::RParen {
                    return Err(self.unexpected());
                }
                self.bump();
                Ok(self.add(Node::Wrap(inner), pos))
            }
            Tok::Func(name) => {
                self.bump();
                let args = self.args(&Tok::RParen)?;
                Ok(self.add(
                    Node::Call {
                        name,
                        args,
                        written: true,
                    },
                    pos,
                ))
            }
            Tok::LBracket => {
                self.bump();
                let args = self.args(&Tok::RBracket)?;
                Ok(self.call("#list", args, pos))
            }
            Tok::LBrace => {
                self.bump();
                let args = self.args(&Tok::RBrace)?;
                Ok(self.call("#map", args, pos))
            }
            _ => Err(self.unexpected()),
        }
    }

    /// Arguments up to and including `close`, following the reference grammar: positional
    /// arguments (possibly skipped) first, then `name => value` pairs; no trailing comma.
    fn args(&mut self, close: &Tok) -> Result<Vec<Arg>> {
        self.enter()?;
        let mut items: Vec<Arg> = Vec::new();
        if self.peek() == close {
            self.bump();
            self.depth -= 1;
            return Ok(items);
        }
        let mut named_seen = false;
        loop {
            // one item
            if self.peek() == &Tok::Comma || self.peek() == close {
                if named_seen {
                    return Err(self.unexpected());
                }
                items.push(Arg::Skip);
            } else {
                let v = self.expr(LOOSEST)?;
                if self.peek() == &Tok::Mapping {
                    self.bump();
                    let w = self.expr(LOOSEST)?;
                    // the positional part before the first pair must end with a value, or
                    // with exactly one skipped position after a value
                    if !named_seen {
                        let n = items.len();
                        let ok = n == 0
                            || matches!(items[n - 1], Arg::Expr(_))
                            || (n >= 2
                                && matches!(items[n - 1], Arg::Skip)
                                && matches!(items[n - 2], Arg::Expr(_)));
                        if !ok {
                            return Err(self.unexpected());
                        }
                    }
                    named_seen = true;
                    items.push(Arg::Rule(v, w));
                } else {
                    if named_seen {
                        return Err(self.unexpected());
                    }
                    items.push(Arg::Expr(v));
                }
            }
            if self.peek() == close {
                if matches!(items.last(), Some(Arg::Skip)) {
                    return Err(self.unexpected());
                }
                self.bump();
                break;
            }
            if self.peek() != &Tok::Comma {
                return Err(self.unexpected());
            }
            self.bump();
        }
        self.depth -= 1;
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(ast: &Ast, id: NodeId) -> String {
        match ast.node(id) {
            Node::Const(l) => format!("{l:?}"),
            Node::Keyword(k) => k.to_string(),
            Node::Var(v) => format!("${v}"),
            Node::Wrap(i) => format!("({})", show(ast, *i)),
            Node::Call { name, args, .. } => {
                let a: Vec<String> = args
                    .iter()
                    .map(|a| match a {
                        Arg::Skip => "_".into(),
                        Arg::Expr(e) => show(ast, *e),
                        Arg::Rule(k, v) => format!("{}=>{}", show(ast, *k), show(ast, *v)),
                    })
                    .collect();
                format!("{name}[{}]", a.join(","))
            }
        }
    }

    fn p(s: &str) -> String {
        let ast = parse(s).unwrap();
        show(&ast, ast.root)
    }

    #[test]
    fn precedence() {
        assert_eq!(p("not a = b"), "#unary_operator_not[*equal[a,b]]");
        assert_eq!(
            p("-2.abs()"),
            "#unary_operator_-[#operator_.[Int(2),abs[]]]"
        );
        assert_eq!(
            p("'x' + a =~ b"),
            "#operator_+[Str(\"x\"),#operator_=~[a,b]]"
        );
        assert_eq!(p("a -> b -> c"), "#operator_->[a,#operator_->[b,c]]");
        assert_eq!(
            p("$.a.b[0]"),
            "#indexer[#operator_.[#operator_.[$1,a],b],Int(0)]"
        );
        assert_eq!(
            p("a = not b = c"),
            "*equal[a,#unary_operator_not[*equal[b,c]]]"
        );
        assert_eq!(p("f(1,,3)"), "f[Int(1),_,Int(3)]");
        assert_eq!(p("f(1,, a => 2)"), "f[Int(1),_,a=>Int(2)]");
    }

    #[test]
    fn grammar_errors() {
        for bad in [
            "",
            "()",
            "1 +",
            "(1",
            "[1, 2",
            "f(1,)",
            "f(,)",
            "f (1)",
            "a => b",
            "$$",
            "1 == 1",
            "f(, a => 1)",
            "f(a => 1, 2)",
            ".5",
            "$.",
        ] {
            assert!(parse(bad).is_err(), "{bad} parsed");
        }
    }

    /// Expressions nested 10,000 deep (about as deep as [`MAX_LENGTH`] allows) in every shape the
    /// grammar nests: refused with a RecursionError at a position, never a stack overflow; at
    /// the deepest nesting the parser accepts, evaluation fits a 2 MiB thread stack (the size
    /// of the threads that plan) in a release build; and longer text is refused unread.
    #[test]
    fn deep_expressions_are_errors_not_crashes() {
        use crate::{Context, Engine, Limits};
        let long = format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000));
        let e = parse(&long).unwrap_err();
        assert_eq!(e.kind, ErrorKind::YaqlGrammarException, "{e}");
        assert!(e.message.contains("200001 bytes long"), "{e}");
        let n = 10_000;
        let refused = [
            format!("{}1{}", "(".repeat(n), ")".repeat(n)),
            format!("{}1", "-".repeat(n)),
            format!("{}1", "- ".repeat(n)),
            format!("{}true", "not ".repeat(n)),
            format!("{}1{}", "[".repeat(n), "]".repeat(n)),
            "[".repeat(n),
            format!("{}1{}", "{a=>".repeat(n), "}".repeat(n)),
            format!("{}1{}", "f(".repeat(n), ")".repeat(n)),
            format!("{}1", "$ -> ".repeat(n)),
        ];
        for text in &refused {
            let e = parse(text).unwrap_err();
            assert_eq!(e.kind, ErrorKind::RecursionError, "{e}");
            assert!(e.message.contains("nests deeper than 400 levels"), "{e}");
            assert!(e.position.is_some());
        }
        // Left-nested chains parse in a loop; evaluating them meets the interpreter's limit.
        let chains = [
            format!("1{}", " + 1".repeat(n)),
            format!("$.a{}", ".a".repeat(n)),
            format!("[1]{}", "[0]".repeat(n)),
            format!("true{}", " and 1".repeat(n)),
        ];
        let deepest = [
            format!("{}1{}", "(".repeat(199), ")".repeat(199)),
            format!("{}1", "-".repeat(199)),
            format!("{}1{}", "[".repeat(199), "]".repeat(199)),
            format!("{}1{}", "{a=>".repeat(199), "}".repeat(199)),
            format!("1{}", " + 1".repeat(398)),
        ];
        // Release builds (what the daemon runs) must fit in 2 MiB; debug frames are several
        // times bigger. `STACK_KIB` overrides, to measure.
        let stack_kib: usize = std::env::var("STACK_KIB")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(if cfg!(debug_assertions) {
                16 << 10
            } else {
                2 << 10
            });
        std::thread::Builder::new()
            .stack_size(stack_kib << 10)
            .spawn(move || {
                let engine = Engine::new(Limits::default());
                let ctx = Context::new(&serde_json::json!({"a": {"a": 1}}));
                for text in &chains {
                    let e = engine.eval(text, &ctx).unwrap_err();
                    assert_eq!(e.kind, ErrorKind::RecursionError, "{e}");
                }
                for text in &deepest {
                    let r = engine.eval(text, &ctx);
                    assert!(
                        r.is_ok()
                            || r.as_ref()
                                .is_err_and(|e| e.kind == ErrorKind::RecursionError),
                        "{}: {r:?}",
                        &text[..20]
                    );
                }
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
