//! Text from records made safe for a terminal. Keys, header values, error messages and
//! response bodies come from outside: an ESC sequence in them could recolour, move the cursor
//! or retitle the terminal of whoever inspects the DLQ. JSON output needs none of this
//! (serde_json writes every control character as `\uXXXX`).

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every control character written out: `\t`, `\n`, `\r`, `\x1b` (C0 and DEL),
/// `\u{9b}` (C1), and the Unicode bidirectional controls (`\u{202e}`), which reorder what
/// follows them. Tabs and line breaks are escaped too: a table cell stays on its line and
/// keeps its width. A backslash is left as it is, so ordinary text reads unchanged.
pub fn escape_control(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) < 0x80 && needs_escape(c) => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_written_out() {
        assert_eq!(
            escape_control("ep\u{1b}[31mred\u{7}\u{7f}"),
            "ep\\x1b[31mred\\x07\\x7f"
        );
        assert_eq!(escape_control("a\tb\nc\rd"), "a\\tb\\nc\\rd");
        assert_eq!(
            escape_control("\u{9b}2J \u{202e}txt"),
            "\\u{9b}2J \\u{202e}txt"
        );
        assert!(matches!(
            escape_control("plain text, é and \\x1b"),
            Cow::Borrowed("plain text, é and \\x1b")
        ));
    }
}
