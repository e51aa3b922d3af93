//! Python `re` patterns (the `regex:` of Fuel attributes) on `fancy-regex`, which has the
//! lookaround and backreferences Fuel's patterns use (`^(?!services$)[\w-]+$`). The few places
//! where Python's syntax differs are translated: `\Z` is the end of the text, `$` (outside a
//! class) also matches before a final newline, as in Python, and `(?P=name)` is a named
//! backreference. Pure.

/// A compiled pattern, or why it does not compile.
pub fn compile(pattern: &str) -> Result<fancy_regex::Regex, String> {
    fancy_regex::RegexBuilder::new(&translate(pattern))
        .delegate_size_limit(1 << 22)
        .backtrack_limit(100_000)
        .build()
        .map_err(|e| e.to_string())
}

fn translate(pat: &str) -> String {
    let cs: Vec<char> = pat.chars().collect();
    let mut out = String::with_capacity(pat.len() + 8);
    let mut in_class = false;
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        match c {
            '\\' => {
                match cs.get(i + 1) {
                    Some('Z') if !in_class => out.push_str(r"\z"),
                    Some(&n) => {
                        out.push('\\');
                        out.push(n);
                    }
                    None => out.push('\\'),
                }
                i += 2;
                continue;
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if cs.get(i + 1) == Some(&'^') {
                    out.push('^');
                    i += 1;
                }
                if cs.get(i + 1) == Some(&']') {
                    out.push_str(r"\]");
                    i += 1;
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '[' if in_class => out.push_str(r"\["),
            '$' if !in_class => out.push_str(r"(?=\n?\z)"),
            '(' if !in_class && cs[i..].starts_with(&['(', '?', 'P', '=']) => {
                let end = cs[i..]
                    .iter()
                    .position(|&c| c == ')')
                    .map_or(cs.len(), |p| i + p);
                let name: String = cs[i + 4..end].iter().collect();
                out.push_str(&format!(r"\k<{name}>"));
                i = end + 1;
                continue;
            }
            c => out.push(c),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(p: &str, s: &str) -> bool {
        compile(p).expect("compiles").is_match(s).expect("runs")
    }

    #[test]
    fn python_semantics() {
        // Lookahead, as the release's user name rule has it.
        let user = r"^(?!services$)(?!nova$)[\w-]+$";
        assert!(search(user, "admin"));
        assert!(!search(user, "services"));
        assert!(search(user, "servicesx"));
        // `$` matches before a final newline; `\Z` only at the very end.
        assert!(search("a$", "a\n"));
        assert!(!search(r"a\Z", "a\n"));
        assert!(!search("a$", "a\n\n"));
        assert!(search("[$]", "$"));
        assert!(search(r"(?P<x>a)(?P=x)", "aa"));
        assert!(compile("(").is_err());
    }
}
