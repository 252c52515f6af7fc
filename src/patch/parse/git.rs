//! A `diff --git` section: its extended header lines (modes, renames and copies,
//! similarity, `index` blob ids), then its hunks or its binary patch.
//!
//! Where `git apply` refuses a doubtful header, so does this reader: a `diff --git` line
//! without a complete header line after it, `//` in its names, `/dev/null` without `new file
//! mode`/`deleted file mode`, a creation or deletion with `old mode`/`new mode` lines. Of
//! `old mode`, `deleted file mode` and the `index` line's mode the last one read gives the
//! old mode ([`GitHeader::last_old_mode`]).

use std::os::unix::ffi::OsStrExt;

use super::names::HeaderName;
use super::{trim_eol, Parser};
use crate::error::{Error, Result};
use crate::patch::model::{BinaryPatch, FilePatch, MODE_FILE};

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

impl Parser<'_> {
    pub(super) fn git_section(&self, start: usize) -> Result<(FilePatch, usize)> {
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
}
