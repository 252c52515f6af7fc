//! The resolver: every file patch resolved in memory before anything is written (the
//! apply's plan of what to write; named apart from the plan sandboxes of `crate::plan`).
//!
//! The planner goes through the patch in order over a virtual view of the project: `disk`
//! caches what the project held before the patch (read through the project chokepoint),
//! `overlay` what earlier file patches of the same patch made of a path ([`VState`]). Each
//! file patch gets a [`FileReport`]; then `validate` checks what only the whole patch can
//! tell (parents must be directories, a directory is replaced only if the patch empties it),
//! `outcome` sums up, and `ops` lists what the write phase must change.
//!
//! The invariant kept: planning never writes. Every path a file patch names goes through
//! the chokepoint first (`checked` for what it writes, `checked_source` for what it only
//! reads or removes), so an unsafe path is a refused file, not a read outside the project;
//! and the caller asks for `ops` only when `outcome` says the whole patch may be written.
//!
//! What each kind of file patch expects at its paths (creation, deletion, modification,
//! rename, copy) is in `kinds`; how a file's new contents are obtained from what is there
//! (binary data, hunks with drift, the 3-way merge) is in `resolve`; a path's state and a
//! file's resolution are in `state`, git's small rules (usable blob ids, escaping symlinks,
//! permissions) in `rules`, and `validate`, `outcome` and `ops` in `whole`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use super::change::Target;
use super::report::{ApplyOptions, FileReport, FileStatus};
use crate::error::{Error, Result};
use crate::fs::dotgit::dotgitmodules_alias;
use crate::fs::project::{self, Entry, ProjectPath};
use crate::fs::relpath::{RelPath, RelPathSet};
use crate::git::oid::blob_id;
use crate::patch::model::{mode_is_gitlink, mode_is_symlink, BinaryPatch, FilePatch, Patch};
use rules::{full_oid, symlink_escapes, usable_oid};
use state::{conflict, How, Res, VState};

mod kinds;
mod resolve;
mod rules;
mod state;
mod whole;

/// What an earlier file patch of the same patch did to a path (git's `fn_table`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// Deleted or renamed away: later patches may only create it again.
    Gone,
    /// Written (created, modified, the target of a rename or copy): a later modification
    /// applies to that result; a later creation, rename or copy onto it is refused.
    Written,
}

/// One planned change: what is there now, what it becomes.
pub(super) struct PlanOp {
    pub(super) rel: RelPath,
    pub(super) before: Entry,
    pub(super) after: Target,
}

pub(super) struct Planner<'a> {
    root: PathBuf,
    opts: &'a ApplyOptions,
    patch: &'a Patch,
    disk: BTreeMap<RelPath, Entry>,
    overlay: BTreeMap<RelPath, VState>,
    owner: BTreeMap<RelPath, usize>,
    /// What earlier file patches did to each path, whatever their outcome.
    seen: BTreeMap<RelPath, Seen>,
    new_symlinks: RelPathSet,
    /// Every path the patch writes (for [`Self::below_patched_symlink`]).
    new_paths: RelPathSet,
    /// Paths the patch removes: where one is a symlink in the project, it may become a
    /// directory (see [`project::check_with`]).
    pub(super) gone_symlinks: RelPathSet,
    pub(super) reports: Vec<FileReport>,
    /// Reports whose conflict could not be written with markers.
    unmarkable: BTreeSet<usize>,
}

impl<'a> Planner<'a> {
    pub(super) fn new(root: PathBuf, opts: &'a ApplyOptions, patch: &'a Patch) -> Self {
        Planner {
            root,
            opts,
            patch,
            disk: BTreeMap::new(),
            overlay: BTreeMap::new(),
            owner: BTreeMap::new(),
            seen: BTreeMap::new(),
            new_symlinks: RelPathSet::new(),
            new_paths: RelPathSet::new(),
            gone_symlinks: RelPathSet::new(),
            reports: Vec::new(),
            unmarkable: BTreeSet::new(),
        }
    }

    /// The chokepoint for a path the patch writes.
    fn checked(&self, rel: &RelPath) -> Result<ProjectPath> {
        project::check_sets(
            &self.root,
            rel,
            Some(&self.new_symlinks),
            Some(&self.gone_symlinks),
        )
    }

    /// The chokepoint for a path the patch only reads or removes (a deletion, the source of a
    /// rename or copy): symlinks the patch creates later do not matter for it.
    fn checked_source(&self, rel: &RelPath) -> Result<ProjectPath> {
        project::check_sets(&self.root, rel, None, Some(&self.gone_symlinks))
    }

    /// The project's entry before the patch (cached).
    fn original(&mut self, rel: &RelPath) -> Result<&Entry> {
        if !self.disk.contains_key(rel) {
            // Below a symlink the patch deletes there is nothing yet (and nothing to read).
            // The ancestors the patch deletes are found in one walk down the set's tree.
            let mut below_gone = false;
            for d in self.gone_symlinks.ancestors_of(rel) {
                let Some(anc) = rel.ancestor(d) else { continue };
                if matches!(self.original(&anc)?, Entry::Symlink { .. }) {
                    below_gone = true;
                    break;
                }
            }
            let e = if below_gone {
                Entry::Absent
            } else {
                project::read(&self.checked_source(rel)?)?
            };
            self.disk.insert(rel.clone(), e);
        }
        // Just inserted if it was missing.
        self.disk
            .get(rel)
            .ok_or_else(|| Error::ApplyFailed("internal: entry cache".into()))
    }

    /// The entry as earlier file patches of this patch left it.
    fn current(&mut self, rel: &RelPath) -> Result<VState> {
        if let Some(v) = self.overlay.get(rel) {
            return Ok(v.clone());
        }
        Ok(VState::of(self.original(rel)?))
    }

    pub(super) fn plan(&mut self) -> Result<()> {
        let patch = self.patch;
        for fp in &patch.files {
            if let (Some(p), Some(m)) = (&fp.new_path, fp.new_mode) {
                if mode_is_symlink(m) {
                    self.new_symlinks.insert(p);
                }
            }
            if let Some(p) = &fp.new_path {
                self.new_paths.insert(p);
            }
            // Paths the patch removes (deleted, or renamed away): if one is a symlink in the
            // project, paths below it are a directory the patch creates.
            if let Some(p) = &fp.old_path {
                if fp.new_path.is_none() || (fp.is_rename && fp.new_path.as_ref() != Some(p)) {
                    self.gone_symlinks.insert(p);
                }
            }
        }
        for fp in &patch.files {
            let idx = self.reports.len();
            let report = match self.repeated(fp) {
                Some(why) => Self::report(fp, FileStatus::Refused, why),
                None => self.file(fp, idx)?,
            };
            self.reports.push(report);
            if let Some(n) = &fp.new_path {
                self.seen.insert(n.clone(), Seen::Written);
            }
            // A rename's source is gone even when the rename puts the file back under the
            // same name: git's add_to_fn_table marks the old name deleted after recording the
            // new one, so a later modification or deletion of it is refused there too.
            if let Some(o) = &fp.old_path {
                if fp.new_path.is_none() || fp.is_rename {
                    self.seen.insert(o.clone(), Seen::Gone);
                }
            }
        }
        self.validate()
    }

    /// git's rule for a path named by more than one file patch (`previous_patch`,
    /// `check_to_create` in its apply.c): a later modification or deletion applies to what
    /// the earlier one left, a deleted path may be created again, and nothing else. The
    /// reason to refuse `fp`, if any.
    ///
    /// Also a copy onto its own source (`copy from f`, `copy to f`, or `f//` names that
    /// normalize to it): git refuses it (`f: already exists in working directory`).
    fn repeated(&self, fp: &FilePatch) -> Option<String> {
        if let (true, Some(o)) = (fp.is_copy, &fp.old_path) {
            if fp.new_path.as_ref() == Some(o) {
                return Some(format!(
                    "copy of {o} onto itself: the copy target already exists (git refuses it too)"
                ));
            }
        }
        let moving = fp.is_rename || fp.is_copy;
        if let Some(o) = &fp.old_path {
            // Renames and copies read the original tree, as in git.
            if !moving && self.seen.get(o) == Some(&Seen::Gone) {
                return Some(format!(
                    "path {o} has been renamed/deleted by an earlier file patch of this patch"
                ));
            }
        }
        if let Some(n) = &fp.new_path {
            let writes_anew = fp.old_path.is_none() || (moving && fp.old_path.as_ref() != Some(n));
            if writes_anew && self.seen.get(n) == Some(&Seen::Written) {
                return Some(format!(
                    "{n} is already written by an earlier file patch of this patch (a repeated section?)"
                ));
            }
        }
        None
    }

    fn report(fp: &FilePatch, status: FileStatus, detail: impl Into<String>) -> FileReport {
        FileReport {
            path: fp.path().cloned().unwrap_or_else(unnamed_path),
            old_path: if fp.is_rename || fp.is_copy {
                fp.old_path.clone()
            } else {
                None
            },
            status,
            detail: detail.into(),
            conflicts: Vec::new(),
            markers_written: false,
        }
    }

    fn file(&mut self, fp: &FilePatch, idx: usize) -> Result<FileReport> {
        // The library's own names (staging directories) are never a patch's to read, write,
        // rename or copy, on either side.
        for p in [&fp.old_path, &fp.new_path].into_iter().flatten() {
            if let Some(c) = super::journal::reserved_component(p) {
                return Ok(Self::report(
                    fp,
                    FileStatus::Refused,
                    format!(
                        "{p}: '{}' is a name patchbox reserves for its own files in a project \
                         (its staging directories, .patchbox-txn-*)",
                        String::from_utf8_lossy(c)
                    ),
                ));
            }
        }
        // Safety first: every path the file patch names. The new path is written; the old
        // one only read or removed unless it is also the new one.
        let names = [
            (&fp.old_path, fp.old_path != fp.new_path),
            (&fp.new_path, false),
        ];
        let mut source_gone = false;
        for (p, source_only) in names {
            let Some(p) = p else { continue };
            let checked = if source_only {
                self.checked_source(p)
            } else {
                self.checked(p)
            };
            match checked {
                Ok(_) => {}
                // A deletion (or rename/copy source) below a symlink that this same patch puts
                // in place (applying it a second time): nothing can be there once the patch
                // is applied.
                Err(Error::Containment { .. })
                    if source_only && self.below_patched_symlink(p)? =>
                {
                    if fp.new_path.is_none() {
                        return Ok(Self::report(
                            fp,
                            FileStatus::AlreadyApplied,
                            "already gone: a parent is the symlink this patch creates",
                        ));
                    }
                    source_gone = true;
                }
                Err(Error::Containment { reason, .. }) => {
                    return Ok(Self::report(
                        fp,
                        FileStatus::Refused,
                        format!("{p}: {reason}"),
                    ))
                }
                Err(e) => return Err(e),
            }
        }
        if fp.old_mode.is_some_and(mode_is_gitlink) || fp.new_mode.is_some_and(mode_is_gitlink) {
            return Ok(Self::report(
                fp,
                FileStatus::Refused,
                "submodule changes are not supported",
            ));
        }
        // A type change (file <-> symlink) is a deletion and a creation in git's patches;
        // within one file patch git refuses it ("new mode ... does not match old mode").
        if let (Some(_), Some(_), Some(o), Some(n)) =
            (&fp.old_path, &fp.new_path, fp.old_mode, fp.new_mode)
        {
            if (o ^ n) & 0o170000 != 0 {
                return Ok(Self::report(
                    fp,
                    FileStatus::Refused,
                    format!(
                        "new mode {n:o} does not match old mode {o:o}: a change of file type must be a deletion and a creation (git refuses it too)"
                    ),
                ));
            }
        }
        // git refuses symlinks named .gitmodules (or an alias of it): git reads that file.
        if let (Some(p), Some(m)) = (&fp.new_path, fp.new_mode) {
            if mode_is_symlink(m) {
                let cs: Vec<&[u8]> = p.as_bytes().split(|&c| c == b'/').collect();
                let why = cs
                    .iter()
                    .enumerate()
                    .find_map(|(i, c)| dotgitmodules_alias(c, i + 1 == cs.len()));
                if let Some(why) = why {
                    return Ok(Self::report(
                        fp,
                        FileStatus::Refused,
                        format!("{p}: {why} is refused (git reads that file)"),
                    ));
                }
            }
        }
        if fp.binary == Some(BinaryPatch::NoData) {
            return Ok(Self::report(
                fp,
                FileStatus::Refused,
                "binary change without data (make the patch with 'git diff --binary')",
            ));
        }
        // git applies a binary patch only with the full blob ids of both sides (apply.c,
        // apply_binary): without them nothing ties the data to the file it changes (a forward
        // `literal 0` "deletes" any contents). Only a creation goes without (justified in
        // fuzz/DIFFERENCES.md: its literal is the whole file, checked by zlib and its size).
        if fp.old_path.is_some()
            && matches!(fp.binary, Some(BinaryPatch::Data { .. }))
            && !(full_oid(&fp.old_oid) && full_oid(&fp.new_oid))
        {
            let p = fp
                .old_path
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default();
            return Ok(Self::report(
                fp,
                FileStatus::Refused,
                format!(
                    "cannot apply binary patch to '{p}' without full index line (git refuses it too)"
                ),
            ));
        }
        let res = match (&fp.old_path, &fp.new_path) {
            (None, Some(new)) => self.create(fp, new)?,
            (Some(old), None) => self.delete(fp, old)?,
            (Some(old), Some(new)) => self.modify(fp, old, new, source_gone)?,
            (None, None) => Res::Refuse("file patch without a path".into()),
        };
        // A file patch followed, in the same input, by later patches of the same file (a
        // series): if the last of them is already applied, so is this one.
        let res = match res {
            Res::Conflict { .. } if self.superseded(fp)? => {
                let t = fp.new_path.as_ref().or(fp.old_path.as_ref());
                match t {
                    Some(t) => Res::Done(
                        self.current(t)?,
                        How::Already(
                            "superseded by a later patch of the same file, already applied".into(),
                        ),
                    ),
                    None => res,
                }
            }
            res => res,
        };
        // A modification of what an earlier file patch of this patch changed applies to that
        // result, as in git: finding its changes already there means the section is repeated
        // (git: patch failed), not that the patch was applied before.
        let res = match (res, &fp.old_path) {
            (Res::Done(_, How::Already(d)), Some(o))
                if !fp.is_rename && !fp.is_copy && self.owner.contains_key(o) =>
            {
                conflict(format!(
                    "does not apply to what an earlier file patch of {o} in this patch left ({d}: a repeated section?)"
                ))
            }
            (res, _) => res,
        };
        let mut report = Self::report(fp, FileStatus::Applied, "");
        match res {
            Res::Done(state, how) => {
                let (status, detail) = match how {
                    How::Applied(d) => (FileStatus::Applied, d),
                    How::Merged(d) => (FileStatus::Merged, d),
                    How::Already(d) => (FileStatus::AlreadyApplied, d),
                };
                let target = fp.new_path.as_ref().or(fp.old_path.as_ref());
                let already = status == FileStatus::AlreadyApplied;
                let moved = self.moves_away(fp)?;
                if let Some(t) = target {
                    let changed = !self.current(t)?.same_as(&state) || moved;
                    if changed {
                        self.vacate_source(fp, idx, moved);
                        self.overlay.insert(t.clone(), state);
                        self.owner.insert(t.clone(), idx);
                        report.status = if already { FileStatus::Applied } else { status };
                    } else {
                        report.status = FileStatus::AlreadyApplied;
                    }
                }
                report.detail = detail;
            }
            Res::Conflict {
                detail,
                conflicts,
                marked,
            } => {
                report.status = FileStatus::Conflict;
                report.detail = detail;
                report.conflicts = conflicts;
                match (marked, fp.new_path.as_ref()) {
                    (Some(state), Some(t)) if self.opts.conflict_markers => {
                        let moved = self.moves_away(fp)?;
                        self.vacate_source(fp, idx, moved);
                        self.overlay.insert(t.clone(), state);
                        self.owner.insert(t.clone(), idx);
                        report.markers_written = true;
                    }
                    _ => {
                        self.unmarkable.insert(idx);
                    }
                }
            }
            Res::Refuse(why) => {
                report.status = FileStatus::Refused;
                report.detail = why;
            }
        }
        Ok(report)
    }

    /// Whether later file patches continue `fp` (each one's old blob id is the previous one's
    /// new blob id) and the last of the chain is what the project holds now.
    fn superseded(&mut self, fp: &FilePatch) -> Result<bool> {
        let (Some(mut path), Some(mut want)) = (fp.new_path.clone(), usable_oid(&fp.new_oid))
        else {
            return Ok(false);
        };
        let same = |a: &str, b: &str| a.starts_with(b) || b.starts_with(a);
        let patch = self.patch;
        let here = self.reports.len();
        for later in patch.files.iter().skip(here + 1) {
            let (Some(o), Some(lo)) = (&later.old_path, usable_oid(&later.old_oid)) else {
                continue;
            };
            if *o != path || !same(lo, want) {
                continue;
            }
            let (Some(n), Some(ln)) = (&later.new_path, usable_oid(&later.new_oid)) else {
                return Ok(false);
            };
            let holds = match self.current(n)? {
                VState::File { data, .. } => blob_id(&data).starts_with_hex(ln),
                VState::Symlink(t) => blob_id(&t).starts_with_hex(ln),
                _ => false,
            };
            if holds {
                return Ok(true);
            }
            path = n.clone();
            want = ln;
        }
        Ok(false)
    }

    /// Whether an ancestor of `rel` is a symlink in the project at a path this patch writes
    /// (so the patch's result has no directory there).
    fn below_patched_symlink(&mut self, rel: &RelPath) -> Result<bool> {
        for d in self.new_paths.ancestors_of(rel) {
            let Some(anc) = rel.ancestor(d) else { continue };
            if let Ok(pp) = project::check_sets(&self.root, &anc, None, None) {
                if matches!(project::read(&pp)?, Entry::Symlink { .. }) {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// Whether applying `fp` removes its old path (a rename whose source still exists).
    fn moves_away(&mut self, fp: &FilePatch) -> Result<bool> {
        match (&fp.old_path, &fp.new_path) {
            // An earlier file patch of this patch wrote the source (modified or created it):
            // the rename reads the original tree (as in git), and git's write phases remove
            // the old paths first and then write every new one, so that earlier result stays
            // and the rename leaves a copy. Vacating the source would lose that result.
            (Some(old), Some(_)) if self.seen.get(old) == Some(&Seen::Written) => Ok(false),
            (Some(old), Some(new)) if fp.is_rename && old != new => match self.current(old) {
                Ok(v) => Ok(matches!(v, VState::File { .. } | VState::Symlink(_))),
                // Below a symlink: there is no source in the project to move away.
                Err(Error::Containment { .. }) => Ok(false),
                Err(e) => Err(e),
            },
            _ => Ok(false),
        }
    }

    fn vacate_source(&mut self, fp: &FilePatch, idx: usize, moved: bool) {
        if let (true, Some(old)) = (moved, &fp.old_path) {
            self.overlay.insert(old.clone(), VState::Absent);
            self.owner.insert(old.clone(), idx);
        }
    }

    /// Checks a new symlink target.
    fn symlink_ok(&self, link: &RelPath, target: &[u8]) -> Option<String> {
        if target.is_empty() || target.contains(&0) {
            return Some("symlink target is empty or contains a NUL byte".into());
        }
        if !self.opts.allow_outside_symlinks && symlink_escapes(link, target) {
            return Some(format!(
                "symlink target {:?} points outside the project",
                String::from_utf8_lossy(target)
            ));
        }
        None
    }

    fn state_for(
        &self,
        link: &RelPath,
        mode: Option<u32>,
        content: Vec<u8>,
        perm: u32,
    ) -> std::result::Result<VState, String> {
        if mode.is_some_and(mode_is_symlink) {
            if let Some(why) = self.symlink_ok(link, &content) {
                return Err(why);
            }
            Ok(VState::Symlink(content))
        } else {
            Ok(VState::File {
                data: Arc::new(content),
                perm,
            })
        }
    }
}

#[cold]
fn unnamed_path() -> RelPath {
    // A FilePatch without any path cannot come from the parser; name it for the report.
    match RelPath::new("unnamed") {
        Ok(p) => p,
        Err(_) => RelPath::new("x").unwrap_or_else(|_| std::process::abort()),
    }
}
