//! Per-file summaries of a patch: what kind of change each file patch is and how many lines
//! it inserts and deletes — the numbers of `git diff --numstat` — and their rendering as
//! `git diff --stat` draws them.
//!
//! These are what a reviewer reads before the patch itself and what the JSON records of the
//! CLI and the C++ and Python faces carry (`files[]`), so their field names are stable.

use serde::Serialize;

use super::model::{FilePatch, LineKind, Patch};

/// The kind of change a file patch makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// The file is created.
    Added,
    /// The file is deleted.
    Deleted,
    /// The file's contents or mode change in place.
    Modified,
    /// The file moves (perhaps changing too).
    Renamed,
    /// The file is copied (perhaps changing too); the source stays.
    Copied,
}

impl ChangeKind {
    /// Its name in the JSON records and the CLI's text (`added`, `deleted`, …).
    pub fn name(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Deleted => "deleted",
            ChangeKind::Modified => "modified",
            ChangeKind::Renamed => "renamed",
            ChangeKind::Copied => "copied",
        }
    }
}

/// One file patch summarized.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FileStat {
    /// The file (its new path; the old one for a deletion), lossily as UTF-8.
    pub path: String,
    /// The source of a rename or copy.
    pub old_path: Option<String>,
    /// What kind of change.
    pub change: ChangeKind,
    /// Lines inserted (0 for a binary file).
    pub insertions: usize,
    /// Lines deleted (0 for a binary file).
    pub deletions: usize,
    /// Number of hunks (what `--hunks PATH:N` counts, from 1).
    pub hunks: usize,
    /// True for a binary change.
    pub binary: bool,
    /// The git mode before, when the patch says; in JSON as git writes it, an octal string
    /// (`"100644"`).
    #[serde(serialize_with = "octal")]
    pub old_mode: Option<u32>,
    /// The git mode after, when the patch says (octal in JSON).
    #[serde(serialize_with = "octal")]
    pub new_mode: Option<u32>,
}

/// A git mode as git writes it: six octal digits.
fn octal<S: serde::Serializer>(mode: &Option<u32>, s: S) -> Result<S::Ok, S::Error> {
    match mode {
        Some(m) => s.serialize_str(&format!("{m:06o}")),
        None => s.serialize_none(),
    }
}

impl FileStat {
    /// Summarizes one file patch.
    pub fn of(f: &FilePatch) -> FileStat {
        let count = |k: LineKind| {
            f.hunks
                .iter()
                .flat_map(|h| &h.lines)
                .filter(|l| l.kind == k)
                .count()
        };
        let change = if f.is_creation() {
            ChangeKind::Added
        } else if f.is_deletion() {
            ChangeKind::Deleted
        } else if f.is_rename {
            ChangeKind::Renamed
        } else if f.is_copy {
            ChangeKind::Copied
        } else {
            ChangeKind::Modified
        };
        let lossy = |p: &crate::fs::relpath::RelPath| p.as_path().to_string_lossy().into_owned();
        FileStat {
            path: f.path().map(lossy).unwrap_or_default(),
            old_path: match change {
                ChangeKind::Renamed | ChangeKind::Copied => f.old_path.as_ref().map(lossy),
                _ => None,
            },
            change,
            insertions: count(LineKind::Insert),
            deletions: count(LineKind::Delete),
            hunks: f.hunks.len(),
            binary: f.binary.is_some(),
            old_mode: f.old_mode,
            new_mode: f.new_mode,
        }
    }

    /// The name `--stat` shows: `old => new` for a rename or copy.
    pub fn display_name(&self) -> String {
        match &self.old_path {
            Some(o) => format!("{o} => {}", self.path),
            None => self.path.clone(),
        }
    }
}

/// Every file patch of `patch` summarized, in patch order.
pub fn file_stats(patch: &Patch) -> Vec<FileStat> {
    patch.files.iter().map(FileStat::of).collect()
}

/// `git diff --stat`'s drawing of `stats` in `width` columns (git uses the terminal's width,
/// 80 when it is not a terminal): one line per file, ` name | count +++--`, with git's
/// widths (the graph at most 3/8 of the width when the lines do not fit, the name
/// shortened to `...tail` when it cannot) and its scaling, then the summary line. With `color`, the
/// `+` are green and the `-` red (ANSI), as git colours them.
///
/// ```
/// use patchbox::patch::{parse::parse_patch, stat::{diffstat, file_stats}};
/// let p = parse_patch(b"--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n").unwrap();
/// assert_eq!(diffstat(&file_stats(&p), 80, false), " f | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n");
/// ```
pub fn diffstat(stats: &[FileStat], width: usize, color: bool) -> String {
    let names: Vec<String> = stats.iter().map(FileStat::display_name).collect();
    let max_len = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let total = |s: &FileStat| s.insertions + s.deletions;
    let max_change = stats.iter().map(total).max().unwrap_or(0);
    // git's show_stats: the widths of the number, the name and the graph.
    let mut number_width = max_change.to_string().len();
    if stats.iter().any(|s| s.binary) {
        number_width = number_width.max(3); // "Bin"
    }
    let width = width.max(16 + 6 + number_width);
    let mut graph_width = max_change;
    let mut name_width = max_len;
    if name_width + number_width + 6 + graph_width > width {
        let cap = (width * 3 / 8).saturating_sub(number_width + 6).max(6);
        graph_width = graph_width.min(cap);
        let room = width.saturating_sub(number_width + 6 + graph_width);
        if name_width > room {
            name_width = room;
        } else {
            graph_width = width - number_width - 6 - name_width;
        }
    }
    // git's scale_linear: every non-zero count gets at least one column.
    let scale = |n: usize| {
        if n == 0 || max_change == 0 {
            0
        } else {
            1 + n * (graph_width.saturating_sub(1)) / max_change
        }
    };
    let (green, red, reset) = if color {
        ("\x1b[32m", "\x1b[31m", "\x1b[m")
    } else {
        ("", "", "")
    };
    let mut out = String::new();
    for (s, name) in stats.iter().zip(&names) {
        let len = name.chars().count();
        // A name too long keeps its end behind "...", as git shortens it.
        let shown = if len > name_width {
            let keep = name_width.saturating_sub(3);
            let tail: String = name.chars().skip(len - keep).collect();
            format!("...{tail}")
        } else {
            name.clone()
        };
        let pad = name_width.saturating_sub(shown.chars().count());
        if s.binary {
            out.push_str(&format!(
                " {shown}{} | {:>number_width$}\n",
                " ".repeat(pad),
                "Bin"
            ));
            continue;
        }
        let (mut add, mut del) = (s.insertions, s.deletions);
        if graph_width <= max_change {
            let mut t = scale(add + del);
            if t < 2 && add > 0 && del > 0 {
                t = 2;
            }
            if add < del {
                add = scale(add);
                del = t - add;
            } else {
                del = scale(del);
                add = t - del;
            }
        }
        let mut line = format!(" {shown}{} | {:>number_width$}", " ".repeat(pad), total(s));
        if add + del > 0 {
            line.push(' ');
        }
        if add > 0 {
            line.push_str(&format!("{green}{}{reset}", "+".repeat(add)));
        }
        if del > 0 {
            line.push_str(&format!("{red}{}{reset}", "-".repeat(del)));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(&summary(stats));
    out.push('\n');
    out
}

/// `git diff --shortstat`'s line: ` N files changed, I insertions(+), D deletions(-)`.
pub fn summary(stats: &[FileStat]) -> String {
    let ins: usize = stats.iter().map(|s| s.insertions).sum();
    let del: usize = stats.iter().map(|s| s.deletions).sum();
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut s = format!(" {} changed", plural(stats.len(), "file", "files"));
    if ins > 0 || del == 0 {
        s.push_str(&format!(", {}(+)", plural(ins, "insertion", "insertions")));
    }
    if del > 0 || ins == 0 {
        s.push_str(&format!(", {}(-)", plural(del, "deletion", "deletions")));
    }
    s
}
