//! Colour as git uses it: `--color=auto|always|never` (auto: only when stdout is a terminal,
//! `NO_COLOR` is unset or empty and `TERM` is not `dumb`), and a patch coloured as
//! `git diff` colours it (meta lines bold, hunk headers cyan, deletions red, insertions
//! green).

use std::io::IsTerminal;

/// When to colour, as git's `--color` takes it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorWhen {
    /// On a terminal, unless `NO_COLOR` is set.
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

impl ColorWhen {
    /// Whether to colour this process's stdout.
    pub fn enabled(self) -> bool {
        match self {
            ColorWhen::Always => true,
            ColorWhen::Never => false,
            ColorWhen::Auto => {
                std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
                    && std::io::stdout().is_terminal()
            }
        }
    }
}

/// ANSI reset.
pub const RESET: &str = "\x1b[m";
/// Bold (meta lines).
pub const BOLD: &str = "\x1b[1m";
/// Cyan (hunk headers).
pub const CYAN: &str = "\x1b[36m";
/// Red (deletions).
pub const RED: &str = "\x1b[31m";
/// Green (insertions).
pub const GREEN: &str = "\x1b[32m";
/// Yellow (the header line of a pending patch, as git's commit line).
pub const YELLOW: &str = "\x1b[33m";

/// `patch` coloured line by line as `git diff --color` colours it.
pub fn color_patch(patch: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(patch.len() + patch.len() / 4);
    let mut in_hunk = false;
    for line in patch.split_inclusive(|b| *b == b'\n') {
        let (body, nl) = match line.strip_suffix(b"\n") {
            Some(b) => (b, &b"\n"[..]),
            None => (line, &b""[..]),
        };
        let color = if body.starts_with(b"diff ") {
            in_hunk = false;
            Some(BOLD)
        } else if body.starts_with(b"@@") {
            in_hunk = true;
            Some(CYAN)
        } else if !in_hunk {
            Some(BOLD)
        } else if body.starts_with(b"+") {
            Some(GREEN)
        } else if body.starts_with(b"-") {
            Some(RED)
        } else {
            None
        };
        match color {
            Some(c) if !body.is_empty() => {
                out.extend_from_slice(c.as_bytes());
                out.extend_from_slice(body);
                out.extend_from_slice(RESET.as_bytes());
            }
            _ => out.extend_from_slice(body),
        }
        out.extend_from_slice(nl);
    }
    out
}

/// `s` in colour `c` when `on`.
pub fn paint(s: &str, c: &str, on: bool) -> String {
    if on {
        format!("{c}{s}{RESET}")
    } else {
        s.to_string()
    }
}
