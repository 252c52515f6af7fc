//! Parsing git-style and unified patches into a structured [`Patch`].
//!
//! A delegation's work comes back as a patch text; before the consumer applies it (see
//! [`crate::apply`]) or lists what it touches, the text is parsed here into a [`Patch`]: one
//! [`FilePatch`] per file, each with its paths, modes, blob ids and either text [`Hunk`]s or a
//! [`BinaryPatch`].
//!
//! Accepted inputs:
//!
//! * `git diff` / `git diff --binary` / `git format-patch` output and this crate's own patch
//!   writer: `diff --git` headers, `old mode`/`new mode`, `new file mode`/`deleted file mode`,
//!   `rename from`/`rename to`, `copy from`/`copy to`, `similarity index`, `index` lines,
//!   C-quoted names (`"a/\303\244.txt"`), names followed by a TAB, `\ No newline at end of file`
//!   markers, `GIT binary patch` blocks with `literal` and `delta` hunks (base85 + zlib) and
//!   `Binary files … differ` lines (parsed, but such a file cannot be applied).
//! * Traditional multi-file `diff -u` / `diff -ruN` output (`---`/`+++` headers, optional
//!   timestamps after a TAB, `/dev/null` or the epoch timestamp for created and deleted files).
//!
//! Paths are stripped of a leading component (`-p1`, as `git apply` does by default; see
//! [`parse_patch_strip`]; every slash counts, as in git, so `b//etc/x` stays absolute) and must
//! then be valid [`RelPath`]s: a name with `..` or a `.` component, an absolute name, one ending
//! with `/` or an empty one makes the whole parse fail with [`Error::Containment`], so a hostile
//! name can never reach the apply engine. Anything else that is malformed (a truncated hunk or
//! input that ends inside a hunk line or a `\ No newline at end of file` line, bad base85,
//! a hunk header outside a file, input with no patch at all) fails with [`Error::PatchParse`]
//! and the 1-based line number. Text outside file patches (a commit message, `Only in …`
//! lines, a mail signature) is skipped, as `git apply` does.
//!
//! Where `git apply` refuses a malformed or doubtful git patch, so does the parser (see
//! `fuzz/DIFFERENCES.md`): a cut patch (a hunk line, hunk header or binary hunk the input
//! ends inside; a header line without its newline is not read, as in git), a hunk without
//! any change, a CR in binary data, a `diff --git` line without an extended header line
//! after it or with `//` in its names, `/dev/null` without `new file mode`/`deleted file
//! mode`, a creation or deletion with `old mode`/`new mode` lines. Of `old mode`, `deleted
//! file mode` and the `index` line's mode the last one gives the old mode, as in git.
//!
//! The parser never panics on any input, and limits what a hostile binary hunk can make it
//! allocate to the data actually present.
//!
//! The parser is one pass over the input's lines; its readers share the cursor and the error
//! positions (`Parser`) and are split by what they read: file names and timestamps
//! (`names`), the `diff --git` section and its extended header (`git`), text hunks
//! (`hunks`), `GIT binary patch` blocks (`binary`), traditional `---`/`+++` sections
//! (`traditional`). What a parsed patch is lives in [`crate::patch::model`].
//!
//! ```
//! use patchbox::patch::parse::parse_patch;
//! let text = b"diff --git a/hello.txt b/hello.txt\n\
//! index 3b18e51..a042389 100644\n\
//! --- a/hello.txt\n\
//! +++ b/hello.txt\n\
//! @@ -1 +1 @@\n\
//! -hello world\n\
//! +hello there\n";
//! let patch = parse_patch(text).unwrap();
//! assert_eq!(patch.files.len(), 1);
//! assert_eq!(patch.files[0].path().unwrap().as_bytes(), b"hello.txt");
//! assert_eq!(patch.files[0].hunks[0].old_start, 1);
//! ```
//!
//! [`FilePatch`]: crate::patch::model::FilePatch
//! [`Hunk`]: crate::patch::model::Hunk
//! [`BinaryPatch`]: crate::patch::model::BinaryPatch
//! [`RelPath`]: crate::fs::relpath::RelPath

use crate::error::{Error, Result};
use crate::patch::model::Patch;

mod binary;
mod git;
mod hunks;
mod names;
mod traditional;

/// Parses `input` with `-p1` path stripping (the `a/` and `b/` prefixes), like `git apply`.
///
/// Empty input (or only blank lines) is an empty patch; other input without any file patch is
/// an [`Error::PatchParse`].
///
/// ```
/// use patchbox::patch::parse::parse_patch;
/// let err = parse_patch(b"hello\nthis is not a patch\n").unwrap_err();
/// assert_eq!(err.kind(), "patch_parse");
/// let err = parse_patch(b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n").unwrap_err();
/// assert!(err.to_string().contains("line 4"), "{err}");
/// ```
pub fn parse_patch(input: &[u8]) -> Result<Patch> {
    parse_patch_strip(input, 1)
}

/// Parses `input`, removing `strip` leading components from each path (`-p<strip>`).
///
/// `strip` applies to `diff --git` names and `---`/`+++` names; `rename`/`copy` lines carry
/// names without the `a/`/`b/` prefix and lose `strip - 1` components, as in `git apply`.
///
/// ```
/// use patchbox::patch::parse::parse_patch_strip;
/// let text = b"--- file.txt\t2024-01-01 00:00:00\n+++ file.txt\t2024-01-02 00:00:00\n@@ -1 +1 @@\n-a\n+b\n";
/// let p = parse_patch_strip(text, 0).unwrap();
/// assert_eq!(p.files[0].path().unwrap().to_string(), "file.txt");
/// ```
pub fn parse_patch_strip(input: &[u8], strip: usize) -> Result<Patch> {
    Parser::new(input, strip).run()
}

/// Splits `data` into lines, each keeping its `\n` (so `\r\n` stays part of the line); a final
/// piece without `\n` is a line too. Only `\n` ends a line, as in git.
pub(crate) fn split_lines(data: &[u8]) -> Vec<&[u8]> {
    // memchr scans a word or vector at a time: a multi-megabyte file splits in a few ms.
    let mut out = Vec::with_capacity(memchr::memchr_iter(b'\n', data).count() + 1);
    let mut start = 0;
    for i in memchr::memchr_iter(b'\n', data) {
        out.push(&data[start..=i]);
        start = i + 1;
    }
    if start < data.len() {
        out.push(&data[start..]);
    }
    out
}

/// Removes one trailing `\n` and then one trailing `\r`.
fn trim_eol(l: &[u8]) -> &[u8] {
    let l = l.strip_suffix(b"\n").unwrap_or(l);
    l.strip_suffix(b"\r").unwrap_or(l)
}

/// The parser's state: the input's lines (each with its newline) and the `-p` count.
struct Parser<'a> {
    lines: Vec<&'a [u8]>,
    strip: usize,
}

impl<'a> Parser<'a> {
    fn new(input: &'a [u8], strip: usize) -> Self {
        Parser {
            lines: split_lines(input),
            strip,
        }
    }

    /// A parse error at the 0-based line `line_idx`.
    fn err(line_idx: usize, reason: impl Into<String>) -> Error {
        Error::PatchParse {
            line: line_idx + 1,
            reason: reason.into(),
        }
    }

    fn run(self) -> Result<Patch> {
        let mut files = Vec::new();
        let mut i = 0;
        let n = self.lines.len();
        while i < n {
            let l = self.lines[i];
            if l.starts_with(b"diff --git ") {
                let (fp, next) = self.git_section(i)?;
                files.push(fp);
                i = next;
            } else if l.starts_with(b"--- ") && i + 1 < n && self.lines[i + 1].starts_with(b"+++ ")
            {
                let (fp, next) = self.traditional_section(i)?;
                files.push(fp);
                i = next;
            } else if l.starts_with(b"@@ -") {
                return Err(Self::err(i, "hunk header outside a file patch"));
            } else if l.starts_with(b"GIT binary patch") {
                return Err(Self::err(i, "binary patch outside a file patch"));
            } else if l.starts_with(b"Binary files ") && trim_eol(l).ends_with(b" differ") {
                files.push(self.traditional_binary(i)?);
                i += 1;
            } else {
                i += 1;
            }
        }
        if files.is_empty() {
            if let Some(first) = self.lines.iter().position(|l| !trim_eol(l).is_empty()) {
                return Err(Self::err(
                    first,
                    "no patch found (expected 'diff --git' or '---'/'+++' file headers)",
                ));
            }
        }
        Ok(Patch { files })
    }
}
