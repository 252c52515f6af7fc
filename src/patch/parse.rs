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
//! (One file of about a thousand lines, on purpose: the parser is one pass over the input's
//! lines, and its git-header, hunk, binary and traditional-diff readers share the cursor and
//! the error positions; split apart they would pass that state around and read worse. What a
//! parsed patch is lives in [`crate::patch::model`].)
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

use std::io::Read;
use std::os::unix::ffi::OsStrExt;

use crate::error::{Error, Result};
use crate::fs::relpath::RelPath;
use crate::git::base85;
use crate::git::quote::unquote_c_style;
use crate::patch::model::{
    BinaryHunk, BinaryKind, BinaryPatch, FilePatch, Hunk, HunkLine, LineKind, Patch,
    MAX_BINARY_SIZE, MODE_FILE,
};

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

/// Removes everything up to the `n`-th slash, like git's `-p<n>`: every slash counts, so
/// `b//etc/passwd` keeps its second slash and stays absolute (git refuses it as an invalid
/// path; it never becomes `etc/passwd`).
fn strip_components(name: &[u8], n: usize) -> Option<&[u8]> {
    let mut s = name;
    for _ in 0..n {
        let idx = s.iter().position(|&c| c == b'/')?;
        s = &s[idx + 1..];
    }
    Some(s)
}

/// Removes `n` leading components from a `diff --git` line's name as git's
/// `skip_tree_prefix` does: like [`strip_components`], but a name whose stripping slash is
/// its first character (`/abs` with `-p1`) or a leading `/` with `-p0` has no prefix to
/// skip and gives no name.
fn skip_tree_prefix(name: &[u8], n: usize) -> Option<&[u8]> {
    if n == 0 {
        return (name.first() != Some(&b'/')).then_some(name);
    }
    let i = name
        .iter()
        .enumerate()
        .filter(|(_, &c)| c == b'/')
        .nth(n - 1)
        .map(|(i, _)| i)?;
    (i != 0).then(|| &name[i + 1..])
}

/// The `\ No newline at end of file` marker as git and GNU diff write it in English.
const NO_NEWLINE_MARKER: &[u8] = b"\\ No newline at end of file";

/// The lines git's `parse_git_diff_header` recognizes after `diff --git` (apply.c's optable,
/// without `@@ -`, which ends a header that then has no line of its own).
const GIT_HEADER_LINES: &[&[u8]] = &[
    b"--- ",
    b"+++ ",
    b"old mode ",
    b"new mode ",
    b"deleted file mode ",
    b"new file mode ",
    b"copy from ",
    b"copy to ",
    b"rename old ",
    b"rename new ",
    b"rename from ",
    b"rename to ",
    b"similarity index ",
    b"dissimilarity index ",
    b"index ",
];

/// A file name as read from a header: `None` is `/dev/null`.
type HeaderName = Option<Vec<u8>>;

struct Parser<'a> {
    lines: Vec<&'a [u8]>,
    strip: usize,
}

/// Git extended header state for one `diff --git` section.
#[derive(Default)]
struct GitHeader {
    old_mode: Option<u32>,
    new_mode: Option<u32>,
    new_file_mode: Option<u32>,
    deleted_file_mode: Option<u32>,
    new_file: bool,
    deleted_file: bool,
    rename_from: Option<Vec<u8>>,
    rename_to: Option<Vec<u8>>,
    copy_from: Option<Vec<u8>>,
    copy_to: Option<Vec<u8>>,
    similarity: Option<u32>,
    old_oid: Option<String>,
    new_oid: Option<String>,
    index_mode: Option<u32>,
    /// The old mode as git ends up with it: `old mode`, `deleted file mode` and the `index`
    /// line's mode all set it, the last one read wins (apply.c's `gitdiff_oldmode`).
    last_old_mode: Option<u32>,
    /// Whether an `old mode` or `new mode` line was read (see the creation/deletion check).
    mode_lines: bool,
}

impl<'a> Parser<'a> {
    fn new(input: &'a [u8], strip: usize) -> Self {
        Parser {
            lines: split_lines(input),
            strip,
        }
    }

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

    /// Strips `n` components and validates the result as a [`RelPath`].
    fn path_from(&self, raw: &[u8], n: usize, line_idx: usize) -> Result<RelPath> {
        if raw.contains(&0) {
            return Err(Self::err(line_idx, "file name contains a NUL byte"));
        }
        let stripped = strip_components(raw, n).ok_or_else(|| {
            Self::err(
                line_idx,
                format!(
                    "file name {:?} has fewer than {n} leading components to strip",
                    String::from_utf8_lossy(raw)
                ),
            )
        })?;
        // What git's verify_path refuses beyond '..' and absolute names (RelPath's rules):
        // a '.' component and a name ending with '/' (a directory).
        let refuse = |reason| Error::Containment {
            path: std::path::PathBuf::from(std::ffi::OsStr::from_bytes(stripped)),
            base: std::path::PathBuf::from("."),
            reason,
        };
        if stripped.split(|&c| c == b'/').any(|c| c == b".") {
            return Err(refuse("path has a '.' component"));
        }
        if stripped.len() > 1 && stripped.ends_with(b"/") {
            return Err(refuse("path ends with '/'"));
        }
        match RelPath::from_bytes(stripped) {
            Ok(p) => Ok(p),
            Err(Error::Containment {
                reason: "path is empty",
                ..
            }) => Err(Self::err(line_idx, "empty file name")),
            Err(e) => Err(e),
        }
    }

    /// Reads a name from a `---`/`+++`/`rename from` value: C-quoted, or up to a TAB (or the
    /// end of the line). `/dev/null` gives `None`. `traditional` also strips a trailing
    /// timestamp written without a TAB.
    fn header_name(
        value: &[u8],
        line_idx: usize,
        traditional: bool,
    ) -> Result<(HeaderName, &[u8])> {
        if value.first() == Some(&b'"') {
            let (name, used) = unquote_c_style(value)
                .ok_or_else(|| Self::err(line_idx, "bad quoted file name"))?;
            return Ok((Some(name), &value[used..]));
        }
        let (name, rest) = match value.iter().position(|&c| c == b'\t') {
            Some(t) => (&value[..t], &value[t + 1..]),
            None if traditional => match timestamp_suffix(value) {
                Some(k) => (&value[..k], &value[k..]),
                None => (value, &value[value.len()..]),
            },
            None => (value, &value[value.len()..]),
        };
        if name == b"/dev/null" {
            Ok((None, rest))
        } else if name.is_empty() {
            Err(Self::err(line_idx, "missing file name"))
        } else {
            Ok((Some(name.to_vec()), rest))
        }
    }

    fn parse_mode(v: &[u8], line_idx: usize) -> Result<u32> {
        let s = std::str::from_utf8(v)
            .ok()
            .map(str::trim)
            .ok_or_else(|| Self::err(line_idx, "bad file mode"))?;
        let m = u32::from_str_radix(s, 8).map_err(|_| Self::err(line_idx, "bad file mode"))?;
        match m & 0o170000 {
            0o100000 | 0o120000 | 0o160000 => Ok(m),
            _ => Err(Self::err(
                line_idx,
                format!("unsupported file mode {s} (only files, symlinks and submodules)"),
            )),
        }
    }

    /// Names from the `diff --git` line, stripped, when they can be told apart.
    ///
    /// As in git (`git_header_name`), the two names must be the same after stripping, quoted
    /// or not; otherwise the line gives no name (a rename's names come from its `rename`
    /// lines, other sections' from `---`/`+++`). `rest` keeps a CR before the newline: git
    /// reads it as part of an unquoted second name (so a CRLF-converted line names nothing),
    /// and ignores it after a quoted one.
    fn git_line_names(&self, rest: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
        // git reads the line as a C string: a NUL ends it before its newline, and a line
        // without a newline names nothing (git_header_name).
        if rest.contains(&0) {
            return None;
        }
        let strip = |n: &[u8]| skip_tree_prefix(n, self.strip).map(<[u8]>::to_vec);
        let same = |a: Vec<u8>, b: Vec<u8>| (a == b && !a.is_empty()).then_some((a, b));
        if rest.first() == Some(&b'"') {
            let (a, used) = unquote_c_style(rest)?;
            let r = rest[used..].strip_prefix(b" ")?;
            let b = if r.first() == Some(&b'"') {
                let (b, used2) = unquote_c_style(r)?;
                if !matches!(&r[used2..], b"" | b"\r") {
                    return None;
                }
                b
            } else {
                r.to_vec()
            };
            return same(strip(&a)?, strip(&b)?);
        }
        // An unquoted first name: git takes the first `"` on the line, wherever it is, as
        // the start of a quoted second name (so a `"` inside the first name leaves the line
        // without names: "lacks filename information").
        if let Some(dq) = rest.iter().position(|&c| c == b'"') {
            let q = dq.checked_sub(1).filter(|&q| rest[q] == b' ')?;
            let (b, used) = unquote_c_style(&rest[q + 1..])?;
            if q + 1 + used != rest.len() {
                return None;
            }
            return same(strip(&rest[..q])?, strip(&b)?);
        }
        // Unquoted: both names are the same after stripping (git's rule for headers without
        // rename information); try each space as the separator.
        for (sp, _) in rest.iter().enumerate().filter(|(_, &c)| c == b' ') {
            let a = strip(&rest[..sp]);
            let b = strip(&rest[sp + 1..]);
            if let (Some(a), Some(b)) = (a, b) {
                if a == b && !a.is_empty() {
                    return Some((a, b));
                }
            }
        }
        None
    }

    fn git_section(&self, start: usize) -> Result<(FilePatch, usize)> {
        // git reads a `diff --git` line as a header only when an extended header line (or
        // `---`) follows it; otherwise it skips the line and reads what follows (a hunk, a
        // binary patch) as garbage or as part of the next header, with odd results. Refused.
        let header_follows = self.lines.get(start + 1).is_some_and(|l| {
            l.ends_with(b"\n") && GIT_HEADER_LINES.iter().any(|p| l.starts_with(p))
        });
        if !header_follows {
            return Err(Self::err(
                start,
                "'diff --git' line not followed by a complete extended header line (git skips it as garbage)",
            ));
        }
        let raw = &self.lines[start][b"diff --git ".len()..];
        let rest = raw.strip_suffix(b"\n").unwrap_or(raw);
        let line_names = self.git_line_names(rest);
        // A `diff --git` name with an empty component (`d//b.txt`): git does not squash the
        // slashes there (git_header_name), and its verify_path refuses the name whenever it
        // is used; refused here whether or not `---`/`+++` lines name the file too.
        if let Some((a, b)) = &line_names {
            if let Some(bad) = [a, b]
                .into_iter()
                .find(|n| n.windows(2).any(|w| w == b"//"))
            {
                return Err(Error::Containment {
                    path: std::path::PathBuf::from(std::ffi::OsStr::from_bytes(bad)),
                    base: std::path::PathBuf::from("."),
                    reason: "invalid path: the name has an empty component ('//')",
                });
            }
        }
        let mut h = GitHeader::default();
        let mut i = start + 1;
        let n = self.lines.len();
        let mut minus: Option<(HeaderName, usize)> = None;
        let mut plus: Option<(HeaderName, usize)> = None;
        let mut hunks = Vec::new();
        let mut binary = None;
        let rename_strip = self.strip.saturating_sub(1);
        while i < n {
            let l = trim_eol(self.lines[i]);
            // git stops reading a header at a line without its newline (the input's last
            // line, so a cut patch): that line is not part of the header (apply.c,
            // parse_git_diff_header). A section left without any change is then an error.
            if !self.lines[i].ends_with(b"\n") {
                break;
            }
            if let Some(v) = l.strip_prefix(b"old mode ") {
                h.old_mode = Some(Self::parse_mode(v, i)?);
                h.last_old_mode = h.old_mode;
                h.mode_lines = true;
            } else if let Some(v) = l.strip_prefix(b"new mode ") {
                h.new_mode = Some(Self::parse_mode(v, i)?);
                h.mode_lines = true;
            } else if let Some(v) = l.strip_prefix(b"deleted file mode ") {
                h.deleted_file = true;
                h.deleted_file_mode = Some(Self::parse_mode(v, i)?);
                h.last_old_mode = h.deleted_file_mode;
            } else if let Some(v) = l.strip_prefix(b"new file mode ") {
                h.new_file = true;
                h.new_file_mode = Some(Self::parse_mode(v, i)?);
            } else if let Some(v) = l
                .strip_prefix(b"rename from ")
                .or_else(|| l.strip_prefix(b"rename old "))
            {
                h.rename_from = Some(self.plain_name(v, i)?);
            } else if let Some(v) = l
                .strip_prefix(b"rename to ")
                .or_else(|| l.strip_prefix(b"rename new "))
            {
                h.rename_to = Some(self.plain_name(v, i)?);
            } else if let Some(v) = l.strip_prefix(b"copy from ") {
                h.copy_from = Some(self.plain_name(v, i)?);
            } else if let Some(v) = l.strip_prefix(b"copy to ") {
                h.copy_to = Some(self.plain_name(v, i)?);
            } else if let Some(v) = l.strip_prefix(b"similarity index ") {
                h.similarity = Some(Self::percent(v, i)?);
            } else if let Some(v) = l.strip_prefix(b"dissimilarity index ") {
                Self::percent(v, i)?;
            } else if let Some(v) = l.strip_prefix(b"index ") {
                Self::index_line(v, i, &mut h)?;
            } else if let Some(v) = l.strip_prefix(b"--- ") {
                if i + 1 >= n || !self.lines[i + 1].starts_with(b"+++ ") {
                    return Err(Self::err(i + 1, "expected a '+++' line after '---'"));
                }
                let (name, _) = Self::header_name(v, i, false)?;
                minus = Some((name, i));
                let pv = &trim_eol(self.lines[i + 1])[4..];
                let (name, _) = Self::header_name(pv, i + 1, false)?;
                plus = Some((name, i + 1));
                i += 2;
                if i >= n || !self.lines[i].starts_with(b"@@ -") {
                    return Err(Self::err(
                        i.min(n),
                        "expected a hunk ('@@ -') after the file header",
                    ));
                }
                let (hs, next) = self.hunks(i)?;
                hunks = hs;
                i = next;
                break;
            } else if l.starts_with(b"+++ ") {
                // git reads a '+++' line without '---' as the new name alone, and then
                // lacks the old one (unless the file is new): refuse it as git does.
                return Err(Self::err(
                    i,
                    "git diff header lacks filename information ('+++' line without '---')",
                ));
            } else if matches!(self.lines[i], b"GIT binary patch\n" | b"GIT binary patch") {
                // Exactly (no CR): git does not see a binary patch in `GIT binary patch\r`
                // and calls the section garbage.
                let (b, next) = self.binary(i + 1)?;
                binary = Some(b);
                i = next;
                break;
            } else if l.starts_with(b"Binary files ") && l.ends_with(b" differ") {
                binary = Some(BinaryPatch::NoData);
                i += 1;
                break;
            } else {
                break;
            }
            i += 1;
        }

        // Resolve names.
        let is_rename = h.rename_from.is_some() || h.rename_to.is_some();
        let is_copy = h.copy_from.is_some() || h.copy_to.is_some();
        if is_rename && is_copy {
            return Err(Self::err(start, "file header is both a rename and a copy"));
        }
        if (h.new_file || h.deleted_file) && (is_rename || is_copy) {
            return Err(Self::err(
                start,
                "file header is both a rename/copy and a creation/deletion",
            ));
        }
        if h.new_file && h.deleted_file {
            return Err(Self::err(
                start,
                "file header both creates and deletes the file",
            ));
        }
        let minus_name = match &minus {
            Some((Some(nm), li)) => Some(Some(self.path_from(nm, self.strip, *li)?)),
            Some((None, _)) => Some(None),
            None => None,
        };
        let plus_name = match &plus {
            Some((Some(nm), li)) => Some(Some(self.path_from(nm, self.strip, *li)?)),
            Some((None, _)) => Some(None),
            None => None,
        };
        let line_name = match &line_names {
            Some((a, b)) => Some((self.path_from(a, 0, start)?, self.path_from(b, 0, start)?)),
            None => None,
        };

        let (old_path, new_path) = if is_rename || is_copy {
            let (from, to) = if is_rename {
                (&h.rename_from, &h.rename_to)
            } else {
                (&h.copy_from, &h.copy_to)
            };
            let (Some(from), Some(to)) = (from, to) else {
                return Err(Self::err(
                    start,
                    "rename or copy without both 'from' and 'to'",
                ));
            };
            let from = self.path_from(from, rename_strip, start)?;
            let to = self.path_from(to, rename_strip, start)?;
            if let Some(Some(m)) = &minus_name {
                if *m != from {
                    return Err(Self::err(start, "inconsistent old file name"));
                }
            }
            if let Some(Some(p)) = &plus_name {
                if *p != to {
                    return Err(Self::err(start, "inconsistent new file name"));
                }
            }
            if matches!(minus_name, Some(None)) || matches!(plus_name, Some(None)) {
                return Err(Self::err(start, "rename or copy with /dev/null"));
            }
            (Some(from), Some(to))
        } else {
            // In a git diff only `new file mode`/`deleted file mode` say that a file is
            // created or deleted; git reads a `/dev/null` name without them as a file named
            // `dev/null` (and writes one, or refuses). Refused rather than guessed.
            if matches!(minus_name, Some(None)) && !h.new_file {
                return Err(Self::err(
                    start,
                    "'--- /dev/null' without 'new file mode' in a git diff",
                ));
            }
            if matches!(plus_name, Some(None)) && !h.deleted_file {
                return Err(Self::err(
                    start,
                    "'+++ /dev/null' without 'deleted file mode' in a git diff",
                ));
            }
            // A creation's or deletion's name is the `diff --git` line's (git's def_name), and
            // git checks the `---`/`+++` name against it: a line whose names cannot be read
            // leaves nothing to check against (git: "inconsistent new filename").
            let named_by_dashes = (h.new_file && matches!(plus_name, Some(Some(_))))
                || (h.deleted_file && matches!(minus_name, Some(Some(_))));
            if named_by_dashes && line_name.is_none() {
                return Err(Self::err(
                    start,
                    "inconsistent file name: a new or deleted file whose 'diff --git' line names no file",
                ));
            }
            let creation = h.new_file || matches!(minus_name, Some(None));
            let deletion = h.deleted_file || matches!(plus_name, Some(None));
            if creation && deletion {
                return Err(Self::err(start, "file is both created and deleted"));
            }
            if h.new_file && matches!(minus_name, Some(Some(_))) {
                return Err(Self::err(start, "new file but '---' is not /dev/null"));
            }
            if h.deleted_file && matches!(plus_name, Some(Some(_))) {
                return Err(Self::err(start, "deleted file but '+++' is not /dev/null"));
            }
            let old = match (&minus_name, &line_name) {
                (Some(Some(m)), Some((a, _))) if m != a => {
                    return Err(Self::err(start, "inconsistent old file name"))
                }
                (Some(Some(m)), _) => Some(m.clone()),
                (_, Some((a, _))) => Some(a.clone()),
                (_, None) => None,
            };
            let new = match (&plus_name, &line_name) {
                (Some(Some(p)), Some((_, b))) if p != b => {
                    return Err(Self::err(start, "inconsistent new file name"))
                }
                (Some(Some(p)), _) => Some(p.clone()),
                (_, Some((_, b))) => Some(b.clone()),
                (_, None) => None,
            };
            let name = new.clone().or(old.clone()).ok_or_else(|| {
                Self::err(
                    start,
                    "git diff header lacks filename information (the 'diff --git' line's names differ and no '---'/'+++' lines settle them)",
                )
            })?;
            match (creation, deletion) {
                (true, _) => (None, Some(new.unwrap_or(name))),
                (_, true) => (Some(old.unwrap_or(name)), None),
                _ => {
                    let old = old.unwrap_or_else(|| name.clone());
                    let new = new.unwrap_or(name);
                    if old != new {
                        return Err(Self::err(
                            start,
                            "old and new names differ without 'rename' or 'copy'",
                        ));
                    }
                    (Some(old), Some(new))
                }
            }
        };

        // Modes.
        // A creation or deletion with `old mode`/`new mode` lines says two things about the
        // modes (git's own diffs never mix them; git 2.39 lets a later `new mode 160000`
        // turn a new file into a submodule): refused rather than guessed.
        if (h.new_file || h.deleted_file) && h.mode_lines {
            return Err(Self::err(
                start,
                "inconsistent header lines: a new or deleted file with 'old mode'/'new mode' lines",
            ));
        }
        let (old_mode, new_mode) = if old_path.is_none() {
            (
                None,
                Some(h.new_file_mode.or(h.index_mode).unwrap_or(MODE_FILE)),
            )
        } else if new_path.is_none() {
            (h.last_old_mode, None)
        } else {
            (h.last_old_mode, h.new_mode.or(h.index_mode).or(h.old_mode))
        };

        // Sanity of contents against creation/deletion.
        if old_path.is_none() && hunks.iter().any(|hk| hk.old_len != 0) {
            return Err(Self::err(start, "new file patch depends on old contents"));
        }
        if new_path.is_none() && hunks.iter().any(|hk| hk.new_len != 0) {
            return Err(Self::err(start, "deleted file patch still has contents"));
        }
        let changes_something = !hunks.is_empty()
            || binary.is_some()
            || is_rename
            || is_copy
            || old_path.is_none()
            || new_path.is_none()
            // A mode change only when the modes differ (git's `metadata_changes`): an old
            // mode given by the `index` line counts, a lone `new mode` does not.
            || h
                .last_old_mode
                .zip(h.new_mode)
                .is_some_and(|(o, n)| o != n);
        if !changes_something {
            return Err(Self::err(start, "file header without any change"));
        }

        let fp = FilePatch {
            old_path,
            new_path,
            old_mode,
            new_mode,
            new_mode_line: new_mode.is_some() && h.new_mode.is_some(),
            old_oid: h.old_oid,
            new_oid: h.new_oid,
            is_rename,
            is_copy,
            similarity: h.similarity,
            is_git: true,
            hunks,
            binary,
            line: start + 1,
        };
        Ok((fp, i))
    }

    /// A name on a `rename from`/`copy to` line: quoted, or the rest of the line.
    fn plain_name(&self, v: &[u8], line_idx: usize) -> Result<Vec<u8>> {
        if v.first() == Some(&b'"') {
            let (name, used) =
                unquote_c_style(v).ok_or_else(|| Self::err(line_idx, "bad quoted file name"))?;
            if !v[used..].is_empty() {
                return Err(Self::err(line_idx, "text after the quoted file name"));
            }
            Ok(name)
        } else if v.is_empty() {
            Err(Self::err(line_idx, "missing file name"))
        } else {
            Ok(v.to_vec())
        }
    }

    fn percent(v: &[u8], line_idx: usize) -> Result<u32> {
        let s = std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.trim().strip_suffix('%'))
            .and_then(|s| s.parse::<u32>().ok())
            .filter(|&p| p <= 100);
        s.ok_or_else(|| Self::err(line_idx, "bad similarity percentage"))
    }

    fn index_line(v: &[u8], line_idx: usize, h: &mut GitHeader) -> Result<()> {
        let bad = || Self::err(line_idx, "bad 'index' line");
        let s = std::str::from_utf8(v).map_err(|_| bad())?;
        let mut parts = s.split(' ');
        let ids = parts.next().ok_or_else(bad)?;
        let (a, b) = ids.split_once("..").ok_or_else(bad)?;
        let ok =
            |x: &str| x.len() >= 4 && x.len() <= 64 && x.bytes().all(|c| c.is_ascii_hexdigit());
        if !ok(a) || !ok(b) {
            return Err(bad());
        }
        h.old_oid = Some(a.to_ascii_lowercase());
        h.new_oid = Some(b.to_ascii_lowercase());
        if let Some(m) = parts.next() {
            h.index_mode = Some(Self::parse_mode(m.as_bytes(), line_idx)?);
            h.last_old_mode = h.index_mode;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(())
    }

    /// Parses consecutive hunks starting at `i` (which must be a `@@ -` line).
    fn hunks(&self, mut i: usize) -> Result<(Vec<Hunk>, usize)> {
        let n = self.lines.len();
        let mut out = Vec::new();
        while i < n && self.lines[i].starts_with(b"@@ -") {
            let header_idx = i;
            if !self.lines[i].ends_with(b"\n") {
                return Err(Self::err(
                    i,
                    "the input ends inside a hunk header (truncated patch)",
                ));
            }
            let (old_start, old_len, new_start, new_len, section) =
                parse_hunk_header(trim_eol(self.lines[i]))
                    .ok_or_else(|| Self::err(i, "bad hunk header"))?;
            i += 1;
            let mut lines: Vec<HunkLine> = Vec::new();
            let (mut old_rem, mut new_rem) = (old_len, new_len);
            while old_rem > 0 || new_rem > 0 {
                if i >= n {
                    return Err(Self::err(
                        n,
                        format!(
                            "hunk at line {} is truncated ({} old and {} new lines missing)",
                            header_idx + 1,
                            old_rem,
                            new_rem
                        ),
                    ));
                }
                let l = self.lines[i];
                // Only the input's last line can lack its newline: a hunk line cut off there
                // is a truncated patch (git: "corrupt patch"), not a line to complete.
                if !l.ends_with(b"\n") && l.first() != Some(&b'\\') {
                    return Err(Self::err(
                        i,
                        format!(
                            "the input ends inside a line of the hunk at line {} (truncated patch)",
                            header_idx + 1
                        ),
                    ));
                }
                let text = |l: &[u8]| l.to_vec();
                match l.first() {
                    Some(b' ') | Some(b'\n') if old_rem > 0 && new_rem > 0 => {
                        let t = if l[0] == b'\n' {
                            b"\n".to_vec()
                        } else {
                            text(&l[1..])
                        };
                        lines.push(HunkLine {
                            kind: LineKind::Context,
                            text: t,
                        });
                        old_rem -= 1;
                        new_rem -= 1;
                    }
                    Some(b'-') if old_rem > 0 => {
                        lines.push(HunkLine {
                            kind: LineKind::Delete,
                            text: text(&l[1..]),
                        });
                        old_rem -= 1;
                    }
                    Some(b'+') if new_rem > 0 => {
                        lines.push(HunkLine {
                            kind: LineKind::Insert,
                            text: text(&l[1..]),
                        });
                        new_rem -= 1;
                    }
                    Some(b'\\') => {
                        self.no_newline(&mut lines, i)?;
                    }
                    Some(b' ') | Some(b'\n') | Some(b'-') | Some(b'+') => {
                        return Err(Self::err(
                            i,
                            format!(
                                "hunk at line {} has more lines than its header says",
                                header_idx + 1
                            ),
                        ))
                    }
                    _ => {
                        return Err(Self::err(
                            i,
                            format!(
                            "unexpected line in hunk at line {} ({} old and {} new lines missing)",
                            header_idx + 1,
                            old_rem,
                            new_rem
                        ),
                        ))
                    }
                }
                i += 1;
            }
            if i < n && self.lines[i].starts_with(b"\\") {
                self.no_newline(&mut lines, i)?;
                i += 1;
            }
            // git: a hunk that neither removes nor adds a line is a corrupt patch
            // (parse_fragment), e.g. `@@ -0,0 +0,0 @@` left by a cut.
            if lines.iter().all(|l| l.kind == LineKind::Context) {
                return Err(Self::err(
                    header_idx,
                    "corrupt patch: hunk without any removed or added line",
                ));
            }
            out.push(Hunk {
                old_start,
                old_len,
                new_start,
                new_len,
                section,
                lines,
                line: header_idx + 1,
            });
        }
        Ok((out, i))
    }

    /// Takes the `\\ No newline at end of file` line at `i` off the last hunk line.
    ///
    /// Like git, any `\\ ` line of 12 bytes or more is the marker (diff tools translate it);
    /// unlike git, which leaves a shorter one in place as junk (keeping the newline), a
    /// shorter one or one the input ends inside is an error: the patch was cut off.
    fn no_newline(&self, lines: &mut [HunkLine], i: usize) -> Result<()> {
        let l = self.lines.get(i).copied().unwrap_or_default();
        if !l.ends_with(b"\n")
            && l != NO_NEWLINE_MARKER
            && (NO_NEWLINE_MARKER.starts_with(l) || l.len() < 12)
        {
            return Err(Self::err(
                i,
                "the input ends inside a '\\ No newline at end of file' line (truncated patch)",
            ));
        }
        if !l.starts_with(b"\\ ") || l.len() < 12 {
            return Err(Self::err(
                i,
                "malformed '\\ No newline at end of file' line (cut off?)",
            ));
        }
        match lines.last_mut() {
            Some(last) if last.text.ends_with(b"\n") => {
                last.text.pop();
                Ok(())
            }
            _ => Err(Self::err(
                i,
                "'\\ No newline' marker without a line before it",
            )),
        }
    }

    /// Parses the blocks after `GIT binary patch`, starting at `i`.
    fn binary(&self, mut i: usize) -> Result<(BinaryPatch, usize)> {
        let forward = self.binary_hunk(&mut i)?.ok_or_else(|| {
            Self::err(
                i,
                "expected 'literal <size>' or 'delta <size>' after 'GIT binary patch'",
            )
        })?;
        let reverse = self.binary_hunk(&mut i)?;
        Ok((BinaryPatch::Data { forward, reverse }, i))
    }

    fn binary_hunk(&self, i: &mut usize) -> Result<Option<BinaryHunk>> {
        let n = self.lines.len();
        if *i >= n {
            return Ok(None);
        }
        let l = trim_eol(self.lines[*i]);
        let (kind, size) = if let Some(v) = l.strip_prefix(b"literal ") {
            (BinaryKind::Literal, v)
        } else if let Some(v) = l.strip_prefix(b"delta ") {
            (BinaryKind::Delta, v)
        } else {
            return Ok(None);
        };
        let header_idx = *i;
        let size: u64 = std::str::from_utf8(size)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Self::err(header_idx, "bad binary hunk size"))?;
        if size > MAX_BINARY_SIZE {
            return Err(Self::err(header_idx, "binary hunk too large"));
        }
        *i += 1;
        let mut deflated = Vec::new();
        loop {
            // A binary hunk ends with a blank line; input ending before it, or inside a line,
            // is a cut patch (git: "corrupt binary patch"), even if the data inflates.
            if *i >= n || !self.lines[*i].ends_with(b"\n") {
                return Err(Self::err(
                    (*i).min(n),
                    format!(
                        "corrupt binary patch: the input ends inside the binary hunk at line {} (truncated patch)",
                        header_idx + 1
                    ),
                ));
            }
            // Only the newline is taken off: a CR before it (a CRLF-converted patch) makes
            // the data line or the closing blank line corrupt, as in git (parse_binary_hunk);
            // git then stops reading the patch and applies only what came before.
            let raw = self.lines[*i];
            let l = &raw[..raw.len() - 1];
            if l.is_empty() {
                *i += 1;
                break;
            }
            base85::decode_line(l, &mut deflated)
                .map_err(|why| Self::err(*i, format!("corrupt binary patch: {why}")))?;
            *i += 1;
        }
        let mut data = Vec::new();
        let mut dec = flate2::read::ZlibDecoder::new(&deflated[..]).take(size + 1);
        dec.read_to_end(&mut data).map_err(|e| {
            Self::err(
                header_idx,
                format!("corrupt binary patch: cannot inflate: {e}"),
            )
        })?;
        if data.len() as u64 != size {
            return Err(Self::err(
                header_idx,
                format!(
                    "corrupt binary patch: inflates to {} bytes, header says {size}",
                    data.len()
                ),
            ));
        }
        Ok(Some(BinaryHunk { kind, data }))
    }

    fn traditional_section(&self, start: usize) -> Result<(FilePatch, usize)> {
        let minus_v = &trim_eol(self.lines[start])[4..];
        let plus_v = &trim_eol(self.lines[start + 1])[4..];
        let (minus, minus_rest) = Self::header_name(minus_v, start, true)?;
        // git takes a C-quoted second name as it is (find_name_traditional returns the name
        // find_name_gnu reads); only an unquoted one yields to a shorter first name.
        let plus_quoted = plus_v.first() == Some(&b'"');
        let (plus, plus_rest) = Self::header_name(plus_v, start + 1, true)?;
        let i = start + 2;
        if i >= self.lines.len() || !self.lines[i].starts_with(b"@@ -") {
            return Err(Self::err(
                i.min(self.lines.len()),
                "expected a hunk ('@@ -') after the '---'/'+++' header",
            ));
        }
        let (hunks, next) = self.hunks(i)?;
        let old_gone = minus.is_none()
            || (is_epoch(minus_rest) && hunks.iter().all(|h| h.old_start == 0 && h.old_len == 0));
        let new_gone = plus.is_none()
            || (is_epoch(plus_rest) && hunks.iter().all(|h| h.new_start == 0 && h.new_len == 0));
        if old_gone && new_gone {
            return Err(Self::err(start, "both file names are /dev/null"));
        }
        let strip = |nm: &[u8]| strip_components(nm, self.strip).map(<[u8]>::to_vec);
        let m = minus.as_deref().and_then(strip);
        let p = plus.as_deref().and_then(strip);
        // git's rule: prefer the second name unless the first is a prefix of it.
        let chosen: Vec<u8> = match (old_gone, new_gone, m, p) {
            (true, _, _, Some(p)) => p,
            (_, true, Some(m), _) => m,
            (_, _, Some(m), Some(p)) => {
                if !plus_quoted && m.len() < p.len() && p.starts_with(&m) {
                    m
                } else {
                    p
                }
            }
            (_, _, Some(m), None) => m,
            (_, _, None, Some(p)) => p,
            (_, _, None, None) => {
                return Err(Self::err(
                    start,
                    "file names have too few components to strip",
                ))
            }
        };
        let path = self.path_from(&chosen, 0, start)?;
        if old_gone && hunks.iter().any(|h| h.old_len != 0) {
            return Err(Self::err(start, "new file patch depends on old contents"));
        }
        if new_gone && hunks.iter().any(|h| h.new_len != 0) {
            return Err(Self::err(start, "deleted file patch still has contents"));
        }
        let fp = FilePatch::traditional(path, old_gone, new_gone, hunks, None, start + 1);
        Ok((fp, next))
    }

    /// `Binary files A and B differ` outside a git header (from `diff -r`).
    fn traditional_binary(&self, i: usize) -> Result<FilePatch> {
        let l = trim_eol(self.lines[i]);
        let body = l
            .strip_prefix(b"Binary files ")
            .and_then(|r| r.strip_suffix(b" differ"))
            .ok_or_else(|| Self::err(i, "cannot read the names in 'Binary files … differ'"))?;
        let sep = body
            .windows(5)
            .position(|w| w == b" and ")
            .ok_or_else(|| Self::err(i, "cannot read the names in 'Binary files … differ'"))?;
        let (a, b) = (&body[..sep], &body[sep + 5..]);
        let old_gone = a == b"/dev/null";
        let new_gone = b == b"/dev/null";
        let name = if new_gone { a } else { b };
        let path = self.path_from(name, self.strip, i)?;
        Ok(FilePatch::traditional(
            path,
            old_gone,
            new_gone,
            Vec::new(),
            Some(BinaryPatch::NoData),
            i + 1,
        ))
    }
}

impl FilePatch {
    /// A file patch from a non-git diff: no modes, ids or renames.
    fn traditional(
        path: RelPath,
        old_gone: bool,
        new_gone: bool,
        hunks: Vec<Hunk>,
        binary: Option<BinaryPatch>,
        line: usize,
    ) -> FilePatch {
        FilePatch {
            old_path: (!old_gone).then(|| path.clone()),
            new_path: (!new_gone).then_some(path),
            old_mode: None,
            new_mode: None,
            new_mode_line: false,
            old_oid: None,
            new_oid: None,
            is_rename: false,
            is_copy: false,
            similarity: None,
            is_git: false,
            hunks,
            binary,
            line,
        }
    }
}

/// `@@ -a[,b] +c[,d] @@[ section]`
fn parse_hunk_header(l: &[u8]) -> Option<(usize, usize, usize, usize, Vec<u8>)> {
    let rest = l.strip_prefix(b"@@ -")?;
    let (old, rest) = split_range(rest)?;
    let rest = rest.strip_prefix(b" +")?;
    let (new, rest) = split_range(rest)?;
    let rest = rest.strip_prefix(b" @@")?;
    let section = rest.strip_prefix(b" ").unwrap_or(rest).to_vec();
    Some((old.0, old.1, new.0, new.1, section))
}

fn split_range(s: &[u8]) -> Option<((usize, usize), &[u8])> {
    fn num(s: &[u8]) -> Option<(usize, &[u8])> {
        let end = s
            .iter()
            .position(|c| !c.is_ascii_digit())
            .unwrap_or(s.len());
        if end == 0 || end > 12 {
            return None;
        }
        let v = std::str::from_utf8(&s[..end]).ok()?.parse().ok()?;
        Some((v, &s[end..]))
    }
    let (start, rest) = num(s)?;
    if let Some(r) = rest.strip_prefix(b",") {
        let (len, rest) = num(r)?;
        Some(((start, len), rest))
    } else {
        Some(((start, 1), rest))
    }
}

/// Whether a traditional header's timestamp is the epoch (used by `diff -N` for absent
/// files), in any time zone: `1970-01-01 00:00:00 +0000`, `1970-01-01 01:00:00.000 +0100`,
/// `1969-12-31 19:00:00 -0500`, as git checks it.
fn is_epoch(rest: &[u8]) -> bool {
    let s = String::from_utf8_lossy(rest);
    let s = s.trim();
    let mut parts = s.split_whitespace();
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    let zone = parts.next().unwrap_or("+0000");
    let day_minutes = match date {
        "1970-01-01" => 0i64,
        "1969-12-31" => -1440,
        _ => return false,
    };
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    if !frac.bytes().all(|c| c == b'0') {
        return false;
    }
    let f: Vec<i64> = hms.split(':').filter_map(|x| x.parse().ok()).collect();
    let [h, m, sec] = f[..] else {
        return false;
    };
    if sec != 0 {
        return false;
    }
    let z = zone.as_bytes();
    if z.len() != 5 || !(z[0] == b'+' || z[0] == b'-') {
        return false;
    }
    let Ok(zv) = zone[1..].parse::<i64>() else {
        return false;
    };
    let zone_minutes = (zv / 100 * 60 + zv % 100) * if z[0] == b'-' { -1 } else { 1 };
    day_minutes + h * 60 + m == zone_minutes
}

/// Finds a ` YYYY-MM-DD HH:MM:SS…` timestamp at the end of an unquoted traditional header value
/// written without a TAB; returns the index where the name ends.
fn timestamp_suffix(v: &[u8]) -> Option<usize> {
    // Look for " dddd-dd-dd dd:dd:dd" and require it to run to the end of the line with only
    // fraction/zone characters after it.
    let pat_ok = |w: &[u8]| {
        w.len() == 20
            && w[0] == b' '
            && w[1..5].iter().all(u8::is_ascii_digit)
            && w[5] == b'-'
            && w[6..8].iter().all(u8::is_ascii_digit)
            && w[8] == b'-'
            && w[9..11].iter().all(u8::is_ascii_digit)
            && w[11] == b' '
            && w[12..14].iter().all(u8::is_ascii_digit)
            && w[14] == b':'
            && w[15..17].iter().all(u8::is_ascii_digit)
            && w[17] == b':'
            && w[18..20].iter().all(u8::is_ascii_digit)
    };
    if v.len() < 21 {
        return None;
    }
    (0..=v.len() - 20).rev().find(|&k| {
        k > 0
            && pat_ok(&v[k..k + 20])
            && v[k + 20..]
                .iter()
                .all(|c| c.is_ascii_digit() || b" .+-".contains(c))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip() {
        assert_eq!(strip_components(b"a/b/c", 1), Some(&b"b/c"[..]));
        // This used to give "b": git counts every slash, so "a//b" loses "a/" and stays
        // absolute ("/b", refused as an invalid path), and "-p2" gives "b".
        assert_eq!(strip_components(b"a//b", 1), Some(&b"/b"[..]));
        assert_eq!(strip_components(b"a//b", 2), Some(&b"b"[..]));
        assert_eq!(strip_components(b"/abs/x", 1), Some(&b"abs/x"[..]));
        assert_eq!(strip_components(b"abc", 1), None);
        assert_eq!(strip_components(b"abc", 0), Some(&b"abc"[..]));
        // git's skip_tree_prefix for the `diff --git` line: a leading '/' is no prefix.
        assert_eq!(skip_tree_prefix(b"a/b/c", 1), Some(&b"b/c"[..]));
        assert_eq!(skip_tree_prefix(b"/abs", 1), None);
        assert_eq!(skip_tree_prefix(b"a//b", 2), Some(&b"b"[..]));
        assert_eq!(skip_tree_prefix(b"abc", 1), None);
        assert_eq!(skip_tree_prefix(b"/abs", 0), None);
        assert_eq!(skip_tree_prefix(b"abc", 0), Some(&b"abc"[..]));
    }

    #[test]
    fn timestamps() {
        assert_eq!(
            timestamp_suffix(b"foo bar 2024-01-02 03:04:05.123456789 +0100"),
            Some(7)
        );
        assert_eq!(timestamp_suffix(b"foo"), None);
        assert!(is_epoch(b"1970-01-01 00:00:00.000000000 +0000"));
        assert!(is_epoch(b"1970-01-01 01:00:00.000000000 +0100"));
        assert!(is_epoch(b"1969-12-31 19:00:00 -0500"));
        assert!(is_epoch(b"1970-01-01 05:30:00 +0530"));
        assert!(is_epoch(b"1970-01-01 00:00:00"));
        assert!(!is_epoch(b"1970-01-01 01:00:00.000000000 +0000"));
        assert!(!is_epoch(b"1970-01-01 00:00:01 +0000"));
        assert!(!is_epoch(b"2024-01-01 00:00:00 +0000"));
        assert!(!is_epoch(b"garbage"));
    }

    #[test]
    fn hunk_header() {
        assert_eq!(
            parse_hunk_header(b"@@ -1,2 +3 @@ fn x"),
            Some((1, 2, 3, 1, b"fn x".to_vec()))
        );
        assert_eq!(parse_hunk_header(b"@@ -1,2 +3 @"), None);
        assert_eq!(parse_hunk_header(b"@@ -a +3 @@"), None);
    }
}
