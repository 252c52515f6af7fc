//! What each kind of file patch expects at its paths, and how a second application of it is
//! recognised.
//!
//! A creation expects nothing there (or exactly what it creates: already applied); a
//! deletion expects exactly what it deletes (or nothing: already applied); a modification
//! expects its source, and a rename or copy also a free target. The invariant kept: a
//! mismatch is a conflict or a refusal unless there is evidence that the patch's result is
//! already in place: blob ids on `index` lines, the pre-image, or a later file patch of the
//! same patch that recreates the path. The one case taken without evidence is a pure rename
//! whose source is gone and whose target exists (the detail says its contents could not be
//! verified).

use std::sync::Arc;

use super::rules::{oid_matches, perm_for, usable_oid};
use super::state::{conflict, How, Res, VState};
use super::Planner;
use crate::error::Result;
use crate::fs::relpath::RelPath;
use crate::git::oid::blob_id;
use crate::patch::model::{mode_is_symlink, BinaryKind, BinaryPatch, FilePatch};
use crate::patch::parse::split_lines;
use crate::patch::place::apply_hunks;

impl Planner<'_> {
    /// What a creation patch creates.
    fn creation_state(&self, fp: &FilePatch, new: &RelPath) -> std::result::Result<VState, Res> {
        let content = match &fp.binary {
            Some(BinaryPatch::Data { forward, .. }) => {
                forward.apply(&[]).map_err(|e| Res::Refuse(e.to_string()))?
            }
            _ => {
                apply_hunks(&[], &fp.hunks, false, false)
                    .map_err(|_| Res::Refuse("malformed creation patch".into()))?
                    .out
            }
        };
        if let Some(false) = oid_matches(&fp.new_oid, &content) {
            return Err(Res::Refuse(
                "contents do not match the blob id on the 'index' line".into(),
            ));
        }
        let perm = perm_for(None, None, fp.new_mode, false);
        self.state_for(new, fp.new_mode, content, perm)
            .map_err(Res::Refuse)
    }

    pub(super) fn create(&mut self, fp: &FilePatch, new: &RelPath) -> Result<Res> {
        let want = match self.creation_state(fp, new) {
            Ok(v) => v,
            Err(res) => return Ok(res),
        };
        let cur = self.current(new)?;
        Ok(match &cur {
            VState::Absent | VState::Dir => Res::Done(want, How::Applied(String::new())),
            VState::Other => {
                Res::Refuse("a special file (fifo, socket, device) is in the way".into())
            }
            _ if cur.same_as(&want) => Res::Done(
                cur.clone(),
                How::Already("file already exists as created".into()),
            ),
            _ => conflict("file already exists with different contents"),
        })
    }

    /// Checks that `cur` is what a deletion expects to remove.
    pub(super) fn delete(&mut self, fp: &FilePatch, old: &RelPath) -> Result<Res> {
        let cur = self.current(old)?;
        let (data, is_link) = match &cur {
            VState::Absent => {
                return Ok(Res::Done(
                    VState::Absent,
                    How::Already("already deleted".into()),
                ))
            }
            VState::Dir => {
                return Ok(self
                    .replaced_later(old, &cur)
                    .unwrap_or_else(|| conflict("a directory is where the file to delete was")))
            }
            VState::Other => return Ok(Res::Refuse("not a regular file or symlink".into())),
            VState::File { data, .. } => (Arc::clone(data), false),
            VState::Symlink(t) => (Arc::new(t.clone()), true),
        };
        if let Some(m) = fp.old_mode {
            if mode_is_symlink(m) != is_link {
                return Ok(self
                    .replaced_later(old, &cur)
                    .unwrap_or_else(|| conflict("file type changed locally (file vs symlink)")));
            }
        }
        let ok = match &fp.binary {
            Some(BinaryPatch::Data { forward, reverse }) => oid_matches(&fp.old_oid, &data)
                .unwrap_or_else(|| {
                    reverse
                        .as_ref()
                        .is_some_and(|r| r.kind == BinaryKind::Literal && r.data == *data)
                        || forward.apply(&data).is_ok_and(|r| r.is_empty())
                }),
            _ if !fp.hunks.is_empty() => {
                let lines = split_lines(&data);
                apply_hunks(&lines, &fp.hunks, false, false).is_ok_and(|p| p.out.is_empty())
            }
            // No hunk and no binary data: the patch carries no contents, so it removes only
            // an empty file or link. git checks what the deletion leaves, not the `index`
            // line ("removal patch leaves file contents", apply.c `apply_data`), and so does
            // GNU patch: a deletion cut off after its header never removes a file with
            // contents, whatever blob id it names.
            _ if !data.is_empty() => {
                return Ok(self.replaced_later(old, &cur).unwrap_or_else(|| {
                    Res::Refuse(format!(
                        "{old}: removal patch leaves file contents (the deletion carries no \
                         hunk for the file's {} byte(s); git refuses it too)",
                        data.len()
                    ))
                }))
            }
            _ => true,
        };
        if ok {
            Ok(Res::Done(VState::Absent, How::Applied(String::new())))
        } else {
            Ok(self.replaced_later(old, &cur).unwrap_or_else(|| {
                conflict("the file to delete has local changes; not deleting it")
            }))
        }
    }

    /// For a deletion that does not match: whether a later file patch of the same patch
    /// recreates the path (a type change is a deletion plus a creation) and the project
    /// already holds what it creates. Then the deletion is already applied too.
    fn replaced_later(&self, path: &RelPath, cur: &VState) -> Option<Res> {
        let here = self.reports.len();
        for fp in self.patch.files.iter().skip(here + 1) {
            match (&fp.old_path, &fp.new_path) {
                (None, Some(n)) if n == path => {
                    if let Ok(want) = self.creation_state(fp, n) {
                        if cur.same_as(&want) {
                            return Some(Res::Done(
                                cur.clone(),
                                How::Already("already replaced by what the patch creates".into()),
                            ));
                        }
                    }
                }
                (_, Some(n)) if *cur == VState::Dir && n.as_path().starts_with(path.as_path()) => {
                    return Some(Res::Done(
                        VState::Dir,
                        How::Already("already replaced by a directory the patch creates".into()),
                    ));
                }
                _ => {}
            }
        }
        None
    }

    /// The blob id of `old` before the patch, from any file patch reading it (a 100% copy or
    /// rename has no `index` line of its own, but a modification or a partial copy of the
    /// same source does).
    fn source_oid_hint(&self, old: &RelPath) -> Option<String> {
        self.patch
            .files
            .iter()
            .filter(|f| f.old_path.as_ref() == Some(old))
            .find_map(|f| usable_oid(&f.old_oid).map(str::to_string))
    }

    /// For a pure copy whose source is gone: a pure rename of the same source in this patch
    /// whose target holds the same contents as `dst` (both came from the same original).
    fn sibling_rename_agrees(&mut self, old: &RelPath, dst: &VState) -> Result<bool> {
        let patch = self.patch;
        for f in &patch.files {
            if f.is_rename
                && f.hunks.is_empty()
                && f.binary.is_none()
                && f.old_path.as_ref() == Some(old)
            {
                if let Some(n) = &f.new_path {
                    if self.current(n)?.same_as(dst) {
                        return Ok(true);
                    }
                }
            }
        }
        Ok(false)
    }

    /// For a pure rename or copy (no content change): does `dst` hold the source's original
    /// contents? `None` when there is no evidence either way.
    fn pure_copy_evidence(&self, fp: &FilePatch, old: &RelPath, dst: &VState) -> Option<bool> {
        let data = match dst {
            VState::File { data, .. } => data,
            VState::Symlink(t) => t,
            _ => return Some(false),
        };
        if let Some(b) = oid_matches(&fp.new_oid, data) {
            return Some(b);
        }
        if let Some(h) = self.source_oid_hint(old) {
            return Some(blob_id(data).starts_with_hex(&h));
        }
        if let (Some(pre), _) = self.preimage(fp, old) {
            return Some(pre == *data);
        }
        None
    }

    /// A modification, rename or copy. `source_gone`: the source is known not to exist (it
    /// would be below a symlink).
    pub(super) fn modify(
        &mut self,
        fp: &FilePatch,
        old: &RelPath,
        new: &RelPath,
        source_gone: bool,
    ) -> Result<Res> {
        let copying = fp.is_rename || fp.is_copy;
        let moving = old != new;
        // Renames and copies read the original tree (like git), others the state earlier
        // file patches left.
        let src = if source_gone {
            VState::Absent
        } else if copying {
            VState::of(self.original(old)?)
        } else {
            self.current(old)?
        };
        // A directory where a file is to be renamed or copied from: as good as no source
        // (e.g. applied before, when the patch replaced the source by a directory).
        let src = if moving && src == VState::Dir {
            VState::Absent
        } else {
            src
        };
        let pure = fp.hunks.is_empty() && fp.binary.is_none();
        if moving {
            let dst = self.current(new)?;
            let already = |d: &str| Ok(Res::Done(dst.clone(), How::Already(d.to_string())));
            if !src.exists() {
                if dst.exists() {
                    // Perhaps already applied: the destination holds the result.
                    if pure {
                        match self.pure_copy_evidence(fp, old, &dst) {
                            Some(true) => return already("target already holds the contents"),
                            None if fp.is_rename => {
                                return already(
                                    "source gone and target present (a pure rename: contents not verifiable)",
                                )
                            }
                            None if self.sibling_rename_agrees(old, &dst)? => {
                                return already("target holds the same contents as the renamed source")
                            }
                            _ => {}
                        }
                    } else if let Res::Done(v, How::Already(d)) = self.resolve(fp, &dst, old)? {
                        return Ok(Res::Done(v, How::Already(d)));
                    }
                }
                return Ok(conflict(format!(
                    "{old} (the rename/copy source) does not exist"
                )));
            }
            if dst.exists() && dst != VState::Dir {
                if fp.is_copy {
                    if let Res::Done(v, _) = self.resolve(fp, &src, old)? {
                        if v.same_as(&dst) {
                            return already("copy already exists");
                        }
                    }
                    if pure && self.pure_copy_evidence(fp, old, &dst) == Some(true) {
                        return already("copy already exists");
                    }
                    if !pure {
                        if let Res::Done(v, How::Already(d)) = self.resolve(fp, &dst, old)? {
                            return Ok(Res::Done(v, How::Already(d)));
                        }
                    }
                }
                return Ok(conflict(format!(
                    "{new} (the rename/copy target) already exists"
                )));
            }
        }
        self.resolve(fp, &src, old)
    }
}
