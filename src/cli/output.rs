//! How the API commands print: `-o table` (the default, for people: comfy-table tables without
//! borders, as kubectl prints them), `-o json` and `-o yaml` (the API's documents, for
//! scripts; YAML through serde-saphyr, which the project already reads YAML with). Colour
//! (statuses: green done, red failed, yellow running) only when standard output is a terminal
//! and `NO_COLOR` is unset or empty. Everything goes through [`Out::print`], which treats a
//! closed pipe (`stoker node list | head -1`) as the reader being done, not as an error.

use std::io::{IsTerminal, Write};

use comfy_table::{Cell, Color, ContentArrangement, Table};
use serde_json::Value;

/// What `-o` asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A table (or lines) for people
    #[default]
    Table,
    /// The API's JSON document
    Json,
    /// The API's document as YAML
    Yaml,
}

/// `-o/--output`.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// Output format: a table for people, or the API's document as JSON or YAML
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// Whether to colour: only on a terminal, and never when `NO_COLOR` is set to anything but
/// the empty string (<https://no-color.org>).
pub fn colour_wanted(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

/// How a status reads: good, bad, under way, or nothing to say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Good,
    Bad,
    Busy,
    Quiet,
    Plain,
}

/// The tone of a status word of the API (a node's, an environment's, a deployment's, a run's).
pub fn tone(status: &str) -> Tone {
    match status {
        "ok" | "done" | "ready" | "operational" | "dry_run" | "true" => Tone::Good,
        "failed" | "error" | "aborted" | "false" => Tone::Bad,
        "running" | "deploying" | "provisioning" | "preparing" | "chaining" | "removing" => {
            Tone::Busy
        }
        "pending" | "skipped" | "discover" | "new" => Tone::Quiet,
        _ => Tone::Plain,
    }
}

/// Where and how this command prints.
#[derive(Debug, Clone, Copy)]
pub struct Out {
    pub format: Format,
    pub colour: bool,
    /// Standard output is a terminal (tables wrap to its width; `--follow` draws bars).
    pub terminal: bool,
}

impl Out {
    /// For `format`, colouring by what standard output is and `NO_COLOR`.
    pub fn new(format: Format) -> Out {
        let terminal = std::io::stdout().is_terminal();
        Out {
            format,
            colour: colour_wanted(terminal, std::env::var_os("NO_COLOR").as_deref()),
            terminal,
        }
    }

    pub fn of(args: &OutputArgs) -> Out {
        Out::new(args.format)
    }

    /// JSON or YAML rather than a table.
    pub fn structured(&self) -> bool {
        self.format != Format::Table
    }

    /// Write `text` to standard output; a reader that went away ends the output quietly.
    pub fn print(&self, text: &str) -> anyhow::Result<()> {
        let mut stdout = std::io::stdout().lock();
        match stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
        {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            other => Ok(other?),
        }
    }

    /// `text` and a newline.
    pub fn line(&self, text: &str) -> anyhow::Result<()> {
        self.print(&format!("{text}\n"))
    }

    /// `v` as `-o` asks: JSON (pretty) or YAML. A table format prints JSON too (commands
    /// print their tables themselves and call this only for documents).
    pub fn document(&self, v: &Value) -> anyhow::Result<()> {
        let text = match self.format {
            Format::Yaml => yaml(v)?,
            _ => format!("{}\n", serde_json::to_string_pretty(v)?),
        };
        self.print(&text)
    }

    /// A table with these column headers, kubectl's way: no borders, two spaces between
    /// columns; wrapped to the terminal's width on a terminal.
    pub fn table(&self, header: &[&str]) -> Table {
        let mut t = Table::new();
        t.load_style(comfy_table::presets::NOTHING);
        if !self.terminal {
            t.force_no_tty();
        } else if t.width().is_some_and(|w| w >= 40) {
            // Wrapped to the terminal's width; a terminal that does not say how wide it is
            // (a serial console, a bare pseudo-terminal: 0 columns) gets the table unwrapped.
            t.set_content_arrangement(ContentArrangement::Dynamic);
        }
        if self.colour {
            t.enforce_styling();
        }
        t.set_header(header.iter().map(Cell::new).collect::<Vec<_>>());
        for col in t.column_iter_mut() {
            col.set_padding((0, 2));
        }
        t
    }

    /// Print a table made by [`Out::table`].
    pub fn print_table(&self, t: &Table) -> anyhow::Result<()> {
        self.print(&format!("{}\n", t.trim_fmt()))
    }

    /// A cell holding a status word, coloured by its [`tone`].
    pub fn status(&self, status: &str) -> Cell {
        let cell = Cell::new(status);
        if !self.colour {
            return cell;
        }
        match tone(status) {
            Tone::Good => cell.fg(Color::Green),
            Tone::Bad => cell.fg(Color::Red),
            Tone::Busy => cell.fg(Color::Yellow),
            Tone::Quiet => cell.fg(Color::DarkGrey),
            Tone::Plain => cell,
        }
    }

    /// `text` in the colour of `status`'s tone, for lines outside tables.
    pub fn paint(&self, text: &str, status: &str) -> String {
        paint(self.colour, text, tone(status))
    }
}

/// `text` in the colour of `tone` (ANSI), or as it is when `colour` is off.
pub fn paint(colour: bool, text: &str, tone: Tone) -> String {
    let code = match tone {
        Tone::Good => "32",
        Tone::Bad => "31",
        Tone::Busy => "33",
        Tone::Quiet => "90",
        Tone::Plain => return text.to_string(),
    };
    if colour {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

/// A JSON document as YAML.
pub fn yaml(v: &Value) -> anyhow::Result<String> {
    Ok(serde_saphyr::to_string(v)?)
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS` (UTC, as every time the CLI prints), `-` for none.
pub fn time(ts: Option<i64>) -> String {
    ts.map_or_else(
        || "-".to_string(),
        |t| crate::model::utc(t).trim_end_matches(" UTC").to_string(),
    )
}

/// A duration in seconds, short: `45s`, `3m05s`, `2h07m`.
pub fn duration(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s / 60 % 60),
    }
}

/// How long from `start` to `end` (or to now while it goes on), `-` before it started.
pub fn took(start: Option<i64>, end: Option<i64>) -> String {
    match (start, end) {
        (Some(s), Some(e)) => duration(e - s),
        (Some(s), None) => format!("{}…", duration(crate::clock::now() - s)),
        _ => "-".to_string(),
    }
}

/// A size in bytes, binary and short: `512 B`, `3.5 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut size = n as f64;
    let mut unit = 0;
    while size >= 1024.0 && unit + 1 < UNITS.len() {
        size /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{size:.1} {}", UNITS[unit])
    }
}

/// `Key:  value` lines, the values aligned, for one object's details.
pub fn fields(rows: &[(&str, String)]) -> String {
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 3;
    rows.iter()
        .map(|(k, v)| format!("{:<width$}{v}\n", format!("{k}:")))
        .collect()
}

/// A JSON value in a table cell: strings bare, null as `-`, the rest as JSON.
pub fn cell_text(v: &Value) -> String {
    match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        Value::Array(items) if items.is_empty() => "-".to_string(),
        Value::Array(items) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    }
}

/// The last `n` lines of `text`, each indented by `indent`.
pub fn tail(text: &str, n: usize, indent: &str) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let skip = lines.len().saturating_sub(n);
    lines[skip..]
        .iter()
        .map(|l| format!("{indent}{l}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        use std::ffi::OsStr;
        assert!(colour_wanted(true, None));
        assert!(colour_wanted(true, Some(OsStr::new(""))), "empty is unset");
        assert!(!colour_wanted(true, Some(OsStr::new("1"))));
        assert!(!colour_wanted(false, None));
    }

    #[test]
    fn yaml_reads_back_as_the_same_document() {
        // Strings that YAML would read as something else must come back as strings.
        let v = json!({"a": "yes", "b": "1", "c": "null", "d": [1, 2.5, true, null],
                       "e": {"f": "multi\nline", "g": ""}, "h": "key: value", "i": "~"});
        let text = yaml(&v).unwrap();
        let back: Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(back, v, "{text}");
    }

    #[test]
    fn tables_have_no_borders_and_colour_only_when_asked() {
        let plain = Out {
            format: Format::Table,
            colour: false,
            terminal: false,
        };
        let mut t = plain.table(&["ID", "STATUS"]);
        t.add_row(vec![Cell::new("1"), plain.status("error")]);
        let text = t.trim_fmt();
        assert_eq!(text, "ID  STATUS\n1   error", "{text:?}");
        let coloured = Out {
            colour: true,
            ..plain
        };
        let mut t = coloured.table(&["ID", "STATUS"]);
        t.add_row(vec![Cell::new("1"), coloured.status("error")]);
        assert!(t.trim_fmt().contains("\x1b["), "{}", t.trim_fmt());
        assert_eq!(coloured.paint("x", "done"), "\x1b[32mx\x1b[0m");
        assert_eq!(plain.paint("x", "done"), "x");
    }

    #[test]
    fn durations_and_tails_are_short() {
        assert_eq!(duration(5), "5s");
        assert_eq!(duration(185), "3m05s");
        assert_eq!(duration(7620), "2h07m");
        assert_eq!(time(None), "-");
        assert_eq!(time(Some(0)), "1970-01-01 00:00:00");
        assert_eq!(tail("a\nb\nc\n", 2, "  "), "  b\n  c\n");
        assert_eq!(cell_text(&json!(["a", "b"])), "a,b");
        assert_eq!(cell_text(&Value::Null), "-");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(274_877_906_944), "256.0 GiB");
        assert_eq!(
            fields(&[("ID", "1".into()), ("Name", "a".into())]),
            "ID:    1\nName:  a\n"
        );
    }
}
