//! Traditional `diff -u` / `diff -ruN` sections: `---`/`+++` headers with optional
//! timestamps, and `Binary files A and B differ` lines.
//!
//! A created or deleted file is told by `/dev/null` or by the epoch timestamp `diff -N`
//! writes; of the two names git's rule picks the second unless the first is a prefix of it.

use super::names::{is_epoch, strip_components};
use super::{trim_eol, Parser};
use crate::error::Result;
use crate::fs::relpath::RelPath;
use crate::patch::model::{BinaryPatch, FilePatch, Hunk};

impl Parser<'_> {
    pub(super) fn traditional_section(&self, start: usize) -> Result<(FilePatch, usize)> {
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
    pub(super) fn traditional_binary(&self, i: usize) -> Result<FilePatch> {
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
