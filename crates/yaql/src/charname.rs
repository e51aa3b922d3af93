//! Unicode characters by name, as Python's `\N{...}` finds them (in string literals, through
//! the `unicode-escape` codec yaql's `decode_escapes` uses, and in `re` patterns, through
//! `unicodedata.lookup`): a character's name in any case (`EM DASH`, `em dash`), one of its
//! aliases (`LINE FEED`, `LF`, `BYTE ORDER MARK`), or an algorithmic name written exactly
//! (`CJK UNIFIED IDEOGRAPH-4E00`, `HANGUL SYLLABLE GA`, upper case only). Named sequences are
//! not characters and are refused, as Python refuses them. The table is `unicode_names2`'s
//! (compiled in, Unicode 17; Python 3.11 knows Unicode 14, so 3.11 refuses the newest names).
//! Its lookup is loose (UAX44-LM2: case, spaces, `_` and medial `-` ignored); Python's is not,
//! so a name is taken only as Python writes it: words of letters and digits joined by single
//! spaces or hyphens, and a character's own name matched letter for letter. An alias is
//! matched by the table's loose rule (`LINE-FEED` is taken where Python wants `LINE FEED`).
//! Pure.

/// Prefixes of the names Python computes rather than looks up; it matches them case-sensitively.
const ALGORITHMIC: [&str; 2] = ["CJK UNIFIED IDEOGRAPH-", "HANGUL SYLLABLE "];

/// The name without spaces and hyphens, upper case: what loose matching compares.
fn squeezed(name: &str) -> String {
    name.chars()
        .filter(|c| *c != ' ' && *c != '-')
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

/// The character Python's `\N{name}` stands for, if any.
pub fn lookup(name: &str) -> Option<char> {
    let words_ok = !name.is_empty()
        && !name.starts_with([' ', '-'])
        && !name.ends_with([' ', '-'])
        && !name.contains("  ")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == ' ' || c == '-');
    if !words_ok {
        return None;
    }
    let upper = name.to_ascii_uppercase();
    if ALGORITHMIC.iter().any(|p| upper.starts_with(p)) {
        // Python: exactly as written, in upper case (the hex digits too).
        if upper != name {
            return None;
        }
        return unicode_names2::character(name);
    }
    let c = unicode_names2::character(name)?;
    match unicode_names2::name(c) {
        Some(own) => {
            let own = own.to_string();
            if own == upper {
                Some(c)
            } else if squeezed(&own) == squeezed(name) {
                // The character's own name, loosely spelled: Python wants it letter for letter.
                None
            } else {
                // One of its aliases.
                Some(c)
            }
        }
        // Control characters have no name, only aliases (`NULL`, `LINE FEED`).
        None => Some(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_python_takes_them() {
        for (name, c) in [
            ("EM DASH", Some('—')),
            ("em dash", Some('—')),
            ("Latin Small Letter A With Acute", Some('á')),
            ("LINE FEED", Some('\n')),
            ("LF", Some('\n')),
            ("NULL", Some('\0')),
            ("BYTE ORDER MARK", Some('\u{feff}')),
            ("SPACE", Some(' ')),
            ("CJK UNIFIED IDEOGRAPH-4E00", Some('一')),
            ("HANGUL SYLLABLE GA", Some('가')),
            ("HYPHEN-MINUS", Some('-')),
            // Python refuses each of these.
            ("cjk unified ideograph-4e00", None),
            ("CJK UNIFIED IDEOGRAPH-4e00", None),
            ("hangul syllable ga", None),
            ("EM-DASH", None),
            ("EMDASH", None),
            ("EM_DASH", None),
            ("EM  DASH", None),
            (" EM DASH", None),
            ("HYPHEN MINUS", None),
            ("LATIN CAPITAL LETTER A WITH MACRON AND GRAVE", None),
            ("NO SUCH NAME", None),
            ("", None),
        ] {
            assert_eq!(lookup(name), c, "{name:?}");
        }
    }
}
