//! A file's new contents, resolved from what is there now.
//!
//! Binary data is applied only onto the contents the patch was made against (its `index`
//! blob id, the literal data of its reverse side, or a delta whose result must then match
//! the `index` line); anything else conflicts, binary files are not merged. Text is tried
//! in order: every hunk at its stated line; the result already there (by blob id, or equal
//! to the patched pre-image); every hunk at the nearest offset; the patch reversing exactly
//! at its stated lines (already applied: the file is the patch's result there, never a
//! look-alike at an offset); a 3-way merge of the pre-image, the project file and the patched
//! pre-image; else a conflict naming the hunks whose context is gone. The invariant kept:
//! drift is handled, never guessed past. Each success is an exact placement, a clean
//! reverse or a merge whose edits do not overlap, and conflict markers come only from the
//! merge (keeping the project file's permissions).

use std::sync::Arc;

use super::rules::{offsets_note, oid_matches, perm_for, usable_oid};
use super::state::{conflict, How, Res, VState};
use super::Planner;
use crate::apply::report::HunkConflict;
use crate::error::Result;
use crate::fs::project::{self, Entry};
use crate::fs::relpath::RelPath;
use crate::patch::merge3::{merge3, Conflict3};
use crate::patch::model::{mode_is_symlink, BinaryKind, BinaryPatch, FilePatch};
use crate::patch::parse::split_lines;
use crate::patch::place::{apply_hunks, find_hunk, hunks_fit, sides, Placed};

impl Planner<'_> {
    /// Resolves the new state of a file whose current state is `cur`; `pre_rel` names the
    /// pre-image.
    pub(super) fn resolve(
        &mut self,
        fp: &FilePatch,
        cur: &VState,
        pre_rel: &RelPath,
    ) -> Result<Res> {
        let (data, perm, is_link) = match cur {
            VState::Absent => return Ok(conflict("file does not exist")),
            VState::Dir => return Ok(conflict("a directory is where the file should be")),
            VState::Other => return Ok(Res::Refuse("not a regular file or symlink".into())),
            VState::File { data, perm } => (Arc::clone(data), Some(*perm), false),
            VState::Symlink(t) => (Arc::new(t.clone()), None, true),
        };
        if let Some(m) = fp.old_mode {
            if mode_is_symlink(m) != is_link {
                return Ok(conflict("file type changed locally (file vs symlink)"));
            }
        }
        // Without an old mode, the new one must keep the type of what is there (git takes
        // the old mode from the file and refuses the type change).
        if let (None, Some(m)) = (fp.old_mode, fp.new_mode) {
            if mode_is_symlink(m) != is_link {
                return Ok(Res::Refuse(format!(
                    "new mode {m:o} would change the {} into a {}: a change of file type must be a deletion and a creation (git refuses it too)",
                    if is_link { "symlink" } else { "file" },
                    if is_link { "file" } else { "symlink" },
                )));
            }
        }
        let (content, how) = match &fp.binary {
            Some(BinaryPatch::Data { .. }) => match self.resolve_binary(fp, &data) {
                Ok(x) => x,
                Err(res) => return Ok(res),
            },
            _ if fp.hunks.is_empty() => (data.to_vec(), How::Applied(String::new())),
            _ => match self.resolve_text(fp, &data, !is_link, pre_rel)? {
                Ok(x) => x,
                // Conflict markers keep the project file's permissions.
                Err(Res::Conflict {
                    detail,
                    conflicts,
                    marked,
                }) => {
                    let keep = perm.unwrap_or(0o644);
                    return Ok(Res::Conflict {
                        detail,
                        conflicts,
                        marked: marked.map(|v| match v {
                            VState::File { data, .. } => VState::File { data, perm: keep },
                            v => v,
                        }),
                    });
                }
                Err(res) => return Ok(res),
            },
        };
        let new_mode = fp.new_mode.or(if is_link {
            Some(crate::patch::model::MODE_SYMLINK)
        } else {
            None
        });
        let perm = perm_for(perm, fp.old_mode, fp.new_mode, fp.new_mode_line);
        let target = fp.new_path.as_ref().unwrap_or(pre_rel);
        match self.state_for(target, new_mode, content, perm) {
            Ok(v) => Ok(Res::Done(v, how)),
            Err(why) => Ok(Res::Refuse(why)),
        }
    }

    fn resolve_binary(
        &self,
        fp: &FilePatch,
        data: &[u8],
    ) -> std::result::Result<(Vec<u8>, How), Res> {
        let Some(BinaryPatch::Data { forward, reverse }) = &fp.binary else {
            return Err(Res::Refuse("binary change without data".into()));
        };
        if oid_matches(&fp.new_oid, data) == Some(true)
            || (forward.kind == BinaryKind::Literal && forward.data == data)
        {
            return Ok((
                data.to_vec(),
                How::Already("binary contents already match".into()),
            ));
        }
        let old_ok = oid_matches(&fp.old_oid, data).unwrap_or_else(|| {
            reverse
                .as_ref()
                .is_some_and(|r| r.kind == BinaryKind::Literal && r.data == data)
                || (forward.kind == BinaryKind::Delta && usable_oid(&fp.new_oid).is_some())
        });
        if !old_ok {
            return Err(conflict(
                "binary file differs from the version the patch was made against (binary files cannot be merged)",
            ));
        }
        let result = forward
            .apply(data)
            .map_err(|e| conflict(format!("binary patch does not apply: {e}")))?;
        if oid_matches(&fp.new_oid, &result) == Some(false) {
            return Err(Res::Refuse(
                "binary patch produces contents that do not match its 'index' line".into(),
            ));
        }
        Ok((result, How::Applied(String::new())))
    }

    /// The pre-image for a file, if one is configured, present and consistent with the
    /// patch's `index` line. The string explains why one was not used.
    pub(super) fn preimage(
        &self,
        fp: &FilePatch,
        rel: &RelPath,
    ) -> (Option<Vec<u8>>, Option<String>) {
        let Some(dir) = &self.opts.preimages else {
            return (None, Some("no pre-image given".into()));
        };
        match project::read_in(dir, rel) {
            Ok(Entry::File { data, .. }) => {
                if oid_matches(&fp.old_oid, &data) == Some(false) {
                    (
                        None,
                        Some("the pre-image does not match the patch's 'index' line".into()),
                    )
                } else {
                    (Some(Arc::unwrap_or_clone(data)), None)
                }
            }
            Ok(_) => (None, Some("no pre-image for this file".into())),
            Err(e) => (None, Some(format!("pre-image unreadable: {e}"))),
        }
    }

    fn resolve_text(
        &self,
        fp: &FilePatch,
        data: &[u8],
        allow_merge: bool,
        pre_rel: &RelPath,
    ) -> Result<std::result::Result<(Vec<u8>, How), Res>> {
        let cur = split_lines(data);
        // Whether the file holds the patch's result: every hunk's new side exactly where its
        // header puts it (no offsets: a look-alike elsewhere in the file is not the patch's
        // doing), anchored like the forward side.
        let reverses = hunks_fit(&cur, &fp.hunks, true, false);
        // The common case, decided without hashing the file or reading a pre-image: every
        // hunk fits exactly where its header says, and the reverse does not. Then the file
        // cannot already be the patch's result (that result takes the reverse exactly), so
        // the checks for an already applied patch below cannot succeed.
        if !reverses {
            if let Ok(p) = apply_hunks(&cur, &fp.hunks, false, false) {
                return Ok(Ok((p.out, How::Applied(String::new()))));
            }
        }
        if oid_matches(&fp.new_oid, data) == Some(true) {
            return Ok(Ok((
                data.to_vec(),
                How::Already("contents already match the patch's result".into()),
            )));
        }
        let (pre, pre_note) = if allow_merge {
            self.preimage(fp, pre_rel)
        } else {
            (None, Some("symlinks are not merged".into()))
        };
        let pre_lines = pre.as_deref().map(split_lines);
        let theirs = pre_lines.as_ref().and_then(|pl| {
            apply_hunks(pl, &fp.hunks, false, false)
                .or_else(|_| apply_hunks(pl, &fp.hunks, false, true))
                .ok()
        });
        let pre_note = match (&pre, &theirs) {
            (Some(_), None) => Some("the patch does not apply to the pre-image".to_string()),
            _ => pre_note,
        };
        if let Some(t) = &theirs {
            if t.out == data {
                return Ok(Ok((
                    data.to_vec(),
                    How::Already("file already equals the patched pre-image".into()),
                )));
            }
        }
        if let Ok(p) = apply_hunks(&cur, &fp.hunks, false, true) {
            return Ok(Ok((p.out, How::Applied(offsets_note(&p.offsets)))));
        }
        if reverses {
            return Ok(Ok((
                data.to_vec(),
                How::Already(
                    "the patch's changes are already present (it reverses cleanly)".into(),
                ),
            )));
        }
        if let (Some(pl), Some(t)) = (&pre_lines, &theirs) {
            let tl = split_lines(&t.out);
            let m = merge3(pl, &cur, &tl, true);
            if m.conflicts.is_empty() {
                if m.out == data {
                    return Ok(Ok((
                        data.to_vec(),
                        How::Already("the patch's changes are already present".into()),
                    )));
                }
                return Ok(Ok((
                    m.out,
                    How::Merged("3-way merge with the pre-image".into()),
                )));
            }
            let conflicts = self.conflict_hunks(fp, t, &m.conflicts);
            let n = m.conflicts.len();
            return Ok(Err(Res::Conflict {
                detail: format!(
                    "{n} region(s) changed both locally and by the patch (3-way merge with the pre-image)"
                ),
                conflicts,
                marked: Some(VState::File {
                    data: Arc::new(m.out),
                    perm: 0,
                }),
            }));
        }
        // No usable pre-image: name the hunks whose context is gone.
        let mut conflicts = Vec::new();
        for (k, h) in fp.hunks.iter().enumerate() {
            let s = sides(h, false);
            if find_hunk(&cur, &s, 0, s.expected as isize, true).is_none() {
                let reason = match s.anchor() {
                    Some(why) => format!("{why}, and the project file does not have it there"),
                    None => "its context is not in the project file".into(),
                };
                conflicts.push(HunkConflict {
                    hunk: k + 1,
                    header: h.header(),
                    reason,
                });
            }
        }
        if conflicts.is_empty() {
            if let Err(k) = apply_hunks(&cur, &fp.hunks, false, true) {
                if let Some(h) = fp.hunks.get(k) {
                    conflicts.push(HunkConflict {
                        hunk: k + 1,
                        header: h.header(),
                        reason: "it does not fit after the previous hunk".into(),
                    });
                }
            }
        }
        Ok(Err(Res::Conflict {
            detail: format!(
                "the file changed locally and the patch does not apply ({})",
                pre_note.unwrap_or_else(|| "no pre-image".into())
            ),
            conflicts,
            marked: None,
        }))
    }

    fn conflict_hunks(
        &self,
        fp: &FilePatch,
        placed: &Placed,
        cs: &[Conflict3],
    ) -> Vec<HunkConflict> {
        let mut out = Vec::new();
        for c in cs {
            let mut hit = false;
            for (k, h) in fp.hunks.iter().enumerate() {
                let s = sides(h, false);
                let Some(&p) = placed.pos.get(k) else {
                    continue;
                };
                let lo = p + s.leading;
                let hi = (p + s.old.len()).saturating_sub(s.trailing).max(lo);
                if lo <= c.base.1 && c.base.0 <= hi {
                    hit = true;
                    if !out.iter().any(|x: &HunkConflict| x.hunk == k + 1) {
                        out.push(HunkConflict {
                            hunk: k + 1,
                            header: h.header(),
                            reason: format!(
                                "overlaps local changes at lines {}-{} of the project file",
                                c.ours.0 + 1,
                                c.ours.1.max(c.ours.0 + 1)
                            ),
                        });
                    }
                }
            }
            if !hit {
                out.push(HunkConflict {
                    hunk: 0,
                    header: String::new(),
                    reason: format!(
                        "pre-image lines {}-{} changed both locally and by the patch",
                        c.base.0 + 1,
                        c.base.1
                    ),
                });
            }
        }
        out.sort_by_key(|c| c.hunk);
        out
    }
}
