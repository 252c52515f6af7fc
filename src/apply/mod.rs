//! Applying a delegation's patch to the user's project: atomically, with drift handling,
//! containment checks and undo.
//!
//! A delegated sub-agent's work comes back as a git-style patch. Once the user consents, the
//! consumer applies it to the user's project with [`apply_patch`]. By then the user may have
//! kept editing, and the patch may be broken or hostile, so this module is built around four
//! promises:
//!
//! 1. **All or nothing.** Every file patch is resolved in memory first (the *plan*). Only if
//!    every file can be applied is anything written, and then through a transaction: new
//!    contents are staged in a private directory inside the project (same file system), the
//!    files they replace are moved aside into it (a rename keeps their bytes, modes and
//!    mtimes), the staged files are renamed into place, and any failure on the way rolls the
//!    journal back so the project ends as it was (directory mtimes included). `check` mode
//!    stops after the plan.
//! 2. **Drift is handled, never guessed past.** Each text file is tried in this order: its
//!    contents already equal the patch's result (by the `index` line blob id, or the patched
//!    pre-image) → *already applied*; exact context at the stated lines or at an offset (the
//!    nearest match, like `git apply`/`patch`) → *applied*; the patch reverses cleanly →
//!    *already applied*; a 3-way merge of the pre-image (from [`ApplyOptions::preimages`],
//!    checked against the `index` line when it has one), the project file and the patched
//!    pre-image → *merged* if the edits do not overlap, *conflict* (with the hunks involved)
//!    if they do. A conflict refuses the whole patch unless [`ApplyOptions::conflict_markers`]
//!    asks for conflict markers to be written. Binary files and symlinks are applied only onto
//!    exactly the contents the patch expects. Applying a patch a second time changes nothing
//!    and reports *already applied* (creations find the file, deletions find it gone, renames
//!    find the target; in a series of patches of the same file, linked by their `index`
//!    lines, the earlier ones are recognised once the last one is applied).
//! 3. **Nothing outside the project.** Paths are [`RelPath`]s (no `..`, not absolute) by
//!    construction of the parser; on top of that any component named `.git` is refused, and
//!    so is any path whose parent chain contains a symlink, in the project or created by the
//!    same patch (a symlink in the project that the same patch deletes or renames away counts
//!    as a directory to create: git's "symlink becomes a directory"). The only way to name a
//!    file for writing is a [`ProjectPath`], which only [`path_in_project`] builds, and every
//!    write helper reaches the parent directory one component at a time from the project root
//!    with `O_NOFOLLOW`, so a symlink swapped in after the check still cannot redirect a
//!    write. (Each directory is opened once per phase and its descriptor reused; the write
//!    phase opens everything afresh instead of trusting what planning opened.) A symlink at
//!    the path itself is replaced,
//!    never written through. New symlinks must point inside the project unless
//!    [`ApplyOptions::allow_outside_symlinks`] is set.
//! 4. **Undoable.** With [`ApplyOptions::undo_dir`] the apply records the original contents,
//!    modes and mtimes of everything it replaced and the list of what it created;
//!    [`undo_apply`] restores them (atomically too), refusing if the files changed since,
//!    unless forced. The record keeps an original by a hard link when it can (same
//!    filesystem, no other link to the file: the apply puts a new file in its place and never
//!    writes the old one), else by a copy; it is written on a second thread while the new
//!    contents are staged, and is on disk before anything in the project is replaced.
//!
//! Durability costs two filesystem syncs per apply, not one per file: after staging (so a
//! crash never leaves a torn file in place of an original) and after the renames.
//!
//! Conflicts and refusals are not `Err`s: they are reported per file in the [`ApplyReport`]
//! (whose [`Outcome`] says whether anything was written). `Err` means the patch could not be
//! read at all ([`Error::PatchParse`], [`Error::Containment`] for a path with `..` or an
//! absolute path), or an I/O error (after which the project has been rolled back).
//!
//! Limits: text is matched and merged line by line with exact context (no fuzz, no
//! whitespace leniency); submodule changes and `Binary files … differ` without data are
//! refused; the staging directory sits in the project root, so a subdirectory on another
//! file system (a mount point inside the project) makes the write phase fail and roll back;
//! concurrent writers are detected (every path is re-checked right before the write phase)
//! but not locked out.
//!
//! ```
//! use patchbox::apply::{apply_patch, ApplyOptions, FileStatus, Outcome};
//! let project = tempfile::tempdir().unwrap();
//! std::fs::write(project.path().join("greeting.txt"), "hello\nworld\n").unwrap();
//! let patch = "diff --git a/greeting.txt b/greeting.txt
//! --- a/greeting.txt
//! +++ b/greeting.txt
//! @@ -1,2 +1,2 @@
//!  hello
//! -world
//! +there
//! ";
//! let patch = patch.as_bytes();
//! let report = apply_patch(project.path(), patch, &ApplyOptions::default()).unwrap();
//! assert_eq!(report.outcome, Outcome::Applied);
//! assert_eq!(report.files[0].status, FileStatus::Applied);
//! assert_eq!(std::fs::read_to_string(project.path().join("greeting.txt")).unwrap(), "hello\nthere\n");
//! // Applying it again changes nothing.
//! let again = apply_patch(project.path(), patch, &ApplyOptions::default()).unwrap();
//! assert_eq!(again.outcome, Outcome::AlreadyApplied);
//! ```
//!
//! [`ProjectPath`]: crate::fs::project::ProjectPath
//! [`path_in_project`]: crate::fs::project::path_in_project

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fs::project::{self, Data, Entry, ProjectPath};
use crate::fs::relpath::RelPath;
use crate::patch::merge3::{merge3, Conflict3};
use crate::patch::parse::{
    git_blob_id, mode_is_executable, mode_is_gitlink, mode_is_symlink, parse_patch_strip,
    split_lines, BinaryKind, BinaryPatch, FilePatch, Patch,
};
use crate::patch::place::{apply_hunks, find_hunk, hunks_fit, sides, Placed};

mod report;
mod txn;
mod undo;

pub use report::{
    ApplyOptions, ApplyReport, FileReport, FileStatus, HunkConflict, Outcome, UndoReport,
};
use txn::Target;

// ------------------------------------------------------------------------------------------
// Entry points
// ------------------------------------------------------------------------------------------

/// Parses `patch` (with [`ApplyOptions::strip`]) and applies it to `project_dir`.
///
/// Returns the per-file report; see the [module docs](self) for the order in which drift is
/// handled. Errors: [`Error::PatchParse`] or [`Error::Containment`] for unreadable or unsafe
/// patch text (nothing written), [`Error::NotADirectory`] for a bad project, [`Error::Io`] or
/// [`Error::ApplyFailed`] if writing failed (the project has been rolled back).
///
/// ```
/// use patchbox::apply::{apply_patch, ApplyOptions, Outcome};
/// let project = tempfile::tempdir().unwrap();
/// let patch = b"diff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hi\n";
/// let checked = apply_patch(project.path(), patch, &ApplyOptions { check: true, ..Default::default() }).unwrap();
/// assert_eq!(checked.outcome, Outcome::Applied);
/// assert!(!project.path().join("new.txt").exists());
/// apply_patch(project.path(), patch, &ApplyOptions::default()).unwrap();
/// assert_eq!(std::fs::read(project.path().join("new.txt")).unwrap(), b"hi\n");
/// ```
pub fn apply_patch(
    project_dir: impl AsRef<Path>,
    patch: &[u8],
    opts: &ApplyOptions,
) -> Result<ApplyReport> {
    let parsed = parse_patch_strip(patch, opts.strip)?;
    apply_parsed(project_dir, &parsed, opts)
}

/// Applies an already parsed [`Patch`]; see [`apply_patch`].
///
/// ```
/// use patchbox::apply::{apply_parsed, ApplyOptions};
/// use patchbox::patch::parse::parse_patch;
/// let project = tempfile::tempdir().unwrap();
/// let patch = parse_patch(b"diff --git a/x b/x\nnew file mode 100644\nindex 0000000..e69de29\n").unwrap();
/// let touched: Vec<String> = patch.paths().iter().map(|p| p.to_string()).collect();
/// assert_eq!(touched, ["x"]);
/// let report = apply_parsed(project.path(), &patch, &ApplyOptions::default()).unwrap();
/// assert!(report.wrote());
/// assert!(project.path().join("x").exists());
/// ```
pub fn apply_parsed(
    project_dir: impl AsRef<Path>,
    patch: &Patch,
    opts: &ApplyOptions,
) -> Result<ApplyReport> {
    let root = project_root(project_dir.as_ref())?;
    let planning = project::DirScope::enter(&root)?;
    let mut planner = Planner::new(root.clone(), opts, patch);
    planner.plan()?;
    let outcome = planner.outcome();
    let mut report = ApplyReport {
        files: std::mem::take(&mut planner.reports),
        outcome,
        check_only: opts.check,
        undo_dir: None,
        warnings: Vec::new(),
    };
    if opts.check || !matches!(outcome, Outcome::Applied | Outcome::AppliedWithConflicts) {
        return Ok(report);
    }
    let ops = planner.ops()?;
    if ops.is_empty() {
        report.outcome = Outcome::AlreadyApplied;
        return Ok(report);
    }
    let tx_ops: Vec<txn::TxOp> = ops
        .iter()
        .map(|op| -> Result<txn::TxOp> {
            Ok(txn::TxOp {
                path: project::check_with(&root, &op.rel, &|_| false, &|a| {
                    planner.gone_symlinks.contains(a)
                })?,
                expect: op.before.stamp(),
                before_is_dir: matches!(op.before, project::Entry::Dir { .. }),
                after: op.after.clone(),
            })
        })
        .collect::<Result<_>>()?;
    drop(planning);
    // The undo record is written on another thread while the new contents are staged; both
    // are on disk before the first original is touched.
    let record = opts
        .undo_dir
        .as_deref()
        .map(|undo| || undo::write_record(undo, &root, &ops));
    let result = txn::commit(
        &root,
        &tx_ops,
        &txn::Prune::EmptiedParents,
        &BTreeMap::new(),
        opts.fail_after_steps,
        record,
    );
    match result {
        Ok(log) => {
            if let Some(undo) = &opts.undo_dir {
                if let Err(e) = undo::append_dirs(undo, &log) {
                    report
                        .warnings
                        .push(format!("undo record is missing directory changes: {e}"));
                }
                report.undo_dir = Some(undo.clone());
            }
            report.warnings.extend(log.warnings);
            Ok(report)
        }
        Err(e) => {
            if let Some(undo) = &opts.undo_dir {
                let _ = std::fs::remove_dir_all(undo);
            }
            Err(e)
        }
    }
}

/// Restores the project to its state before the apply recorded in `undo_dir`.
///
/// Every path the apply changed must still hold what the apply wrote; otherwise the undo is
/// refused with [`Error::ApplyFailed`] naming the changed files, unless `force` is set (the
/// changes are then overwritten and listed in [`UndoReport::overwritten`]). The restore is
/// atomic like an apply. Undoing the same record twice is harmless: the second call reports
/// [`UndoReport::already_undone`].
///
/// ```
/// use patchbox::apply::{apply_patch, undo_apply, ApplyOptions};
/// let project = tempfile::tempdir().unwrap();
/// let records = tempfile::tempdir().unwrap();
/// std::fs::write(project.path().join("a.txt"), "one\n").unwrap();
/// let patch = b"--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n";
/// let undo = records.path().join("undo-1");
/// let opts = ApplyOptions { undo_dir: Some(undo.clone()), ..Default::default() };
/// apply_patch(project.path(), patch, &opts).unwrap();
/// assert_eq!(std::fs::read(project.path().join("a.txt")).unwrap(), b"two\n");
/// let r = undo_apply(project.path(), &undo, false).unwrap();
/// assert_eq!(r.restored.len(), 1);
/// assert_eq!(std::fs::read(project.path().join("a.txt")).unwrap(), b"one\n");
/// assert!(undo_apply(project.path(), &undo, false).unwrap().already_undone);
/// ```
pub fn undo_apply(
    project_dir: impl AsRef<Path>,
    undo_dir: impl AsRef<Path>,
    force: bool,
) -> Result<UndoReport> {
    undo::undo(project_dir.as_ref(), undo_dir.as_ref(), force)
}

fn project_root(dir: &Path) -> Result<PathBuf> {
    let root = std::fs::canonicalize(dir).map_err(|e| Error::io("resolve project", dir, e))?;
    let md = std::fs::metadata(&root).map_err(|e| Error::io("inspect project", &root, e))?;
    if !md.is_dir() {
        return Err(Error::NotADirectory { path: root });
    }
    Ok(root)
}

// ------------------------------------------------------------------------------------------
// Planning: resolve every file patch in memory
// ------------------------------------------------------------------------------------------

/// The planned state of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
enum VState {
    Absent,
    File { data: Data, perm: u32 },
    Symlink(Vec<u8>),
    Dir,
    Other,
}

impl VState {
    fn of(e: &Entry) -> VState {
        match e {
            Entry::Absent => VState::Absent,
            Entry::File { data, perm, .. } => VState::File {
                data: data.clone(),
                perm: *perm,
            },
            Entry::Symlink { target, .. } => VState::Symlink(target.clone()),
            Entry::Dir { .. } => VState::Dir,
            Entry::Other { .. } => VState::Other,
        }
    }

    fn exists(&self) -> bool {
        !matches!(self, VState::Absent)
    }

    /// Same type, contents and execute bit.
    fn same_as(&self, other: &VState) -> bool {
        match (self, other) {
            (VState::File { data: a, perm: p }, VState::File { data: b, perm: q }) => {
                a == b && (p & 0o111 != 0) == (q & 0o111 != 0)
            }
            _ => self == other,
        }
    }
}

/// One planned change: what is there now, what it becomes.
struct PlanOp {
    rel: RelPath,
    before: Entry,
    after: Target,
}

/// How a file's new contents were obtained.
enum How {
    Applied(String),
    Merged(String),
    Already(String),
}

/// Resolution of one file's contents.
enum Res {
    Done(VState, How),
    Conflict {
        detail: String,
        conflicts: Vec<HunkConflict>,
        /// The contents with conflict markers, when they can be written.
        marked: Option<VState>,
    },
    Refuse(String),
}

fn conflict(detail: impl Into<String>) -> Res {
    Res::Conflict {
        detail: detail.into(),
        conflicts: Vec::new(),
        marked: None,
    }
}

/// A blob id from an `index` line that can be compared with our SHA-1 ids.
fn usable_oid(o: &Option<String>) -> Option<&str> {
    o.as_deref()
        .filter(|o| o.len() >= 4 && o.len() <= 40 && o.bytes().any(|c| c != b'0'))
}

fn oid_matches(o: &Option<String>, data: &[u8]) -> Option<bool> {
    usable_oid(o).map(|o| git_blob_id(data).starts_with(o))
}

/// Whether a symlink at `link` with `target` would point outside the project (lexically).
fn symlink_escapes(link: &RelPath, target: &[u8]) -> bool {
    if target.starts_with(b"/") {
        return true;
    }
    let mut depth = link.as_path().components().count().saturating_sub(1);
    for c in target.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                if depth == 0 {
                    return true;
                }
                depth -= 1;
            }
            _ => depth += 1,
        }
    }
    false
}

fn perm_for(cur: Option<u32>, old_mode: Option<u32>, new_mode: Option<u32>) -> u32 {
    let want_exec = new_mode.map(mode_is_executable);
    match cur {
        None => {
            if want_exec == Some(true) {
                0o755
            } else {
                0o644
            }
        }
        Some(p) => {
            let changes = match (old_mode, new_mode) {
                (Some(o), Some(n)) => mode_is_executable(o) != mode_is_executable(n),
                _ => false,
            };
            match want_exec {
                Some(true) if changes => p | ((p & 0o444) >> 2),
                Some(false) if changes => p & !0o111,
                _ => p,
            }
        }
    }
}

fn offsets_note(offsets: &[isize]) -> String {
    let notes: Vec<String> = offsets
        .iter()
        .enumerate()
        .filter(|(_, &o)| o != 0)
        .map(|(k, o)| format!("hunk #{} at offset {o:+}", k + 1))
        .collect();
    notes.join(", ")
}

struct Planner<'a> {
    root: PathBuf,
    opts: &'a ApplyOptions,
    patch: &'a Patch,
    disk: BTreeMap<RelPath, Entry>,
    overlay: BTreeMap<RelPath, VState>,
    owner: BTreeMap<RelPath, usize>,
    new_symlinks: BTreeSet<RelPath>,
    /// Paths the patch removes: where one is a symlink in the project, it may become a
    /// directory (see [`project::check_with`]).
    gone_symlinks: BTreeSet<RelPath>,
    reports: Vec<FileReport>,
    /// Reports whose conflict could not be written with markers.
    unmarkable: BTreeSet<usize>,
}

impl<'a> Planner<'a> {
    fn new(root: PathBuf, opts: &'a ApplyOptions, patch: &'a Patch) -> Self {
        Planner {
            root,
            opts,
            patch,
            disk: BTreeMap::new(),
            overlay: BTreeMap::new(),
            owner: BTreeMap::new(),
            new_symlinks: BTreeSet::new(),
            gone_symlinks: BTreeSet::new(),
            reports: Vec::new(),
            unmarkable: BTreeSet::new(),
        }
    }

    /// The chokepoint for a path the patch writes.
    fn checked(&self, rel: &RelPath) -> Result<ProjectPath> {
        let (syms, gone) = (&self.new_symlinks, &self.gone_symlinks);
        project::check_with(&self.root, rel, &|a| syms.contains(a), &|a| {
            gone.contains(a)
        })
    }

    /// The chokepoint for a path the patch only reads or removes (a deletion, the source of a
    /// rename or copy): symlinks the patch creates later do not matter for it.
    fn checked_source(&self, rel: &RelPath) -> Result<ProjectPath> {
        let gone = &self.gone_symlinks;
        project::check_with(&self.root, rel, &|_| false, &|a| gone.contains(a))
    }

    /// The project's entry before the patch (cached).
    fn original(&mut self, rel: &RelPath) -> Result<&Entry> {
        if !self.disk.contains_key(rel) {
            // Below a symlink the patch deletes there is nothing yet (and nothing to read).
            let mut below_gone = false;
            let mut a = rel.parent();
            while let Some(anc) = a {
                if self.gone_symlinks.contains(&anc)
                    && matches!(self.original(&anc)?, Entry::Symlink { .. })
                {
                    below_gone = true;
                }
                a = anc.parent();
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

    fn plan(&mut self) -> Result<()> {
        let patch = self.patch;
        for fp in &patch.files {
            if let (Some(p), Some(m)) = (&fp.new_path, fp.new_mode) {
                if mode_is_symlink(m) {
                    self.new_symlinks.insert(p.clone());
                }
            }
            // Paths the patch removes (deleted, or renamed away): if one is a symlink in the
            // project, paths below it are a directory the patch creates.
            if let Some(p) = &fp.old_path {
                if fp.new_path.is_none() || (fp.is_rename && fp.new_path.as_ref() != Some(p)) {
                    self.gone_symlinks.insert(p.clone());
                }
            }
        }
        for fp in &patch.files {
            let idx = self.reports.len();
            let report = self.file(fp, idx)?;
            self.reports.push(report);
        }
        self.validate()
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
        if fp.binary == Some(BinaryPatch::NoData) {
            return Ok(Self::report(
                fp,
                FileStatus::Refused,
                "binary change without data (make the patch with 'git diff --binary')",
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
                VState::File { data, .. } => git_blob_id(&data).starts_with(ln),
                VState::Symlink(t) => git_blob_id(&t).starts_with(ln),
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
        let patch = self.patch;
        let mut a = rel.parent();
        while let Some(anc) = a {
            if patch
                .files
                .iter()
                .any(|f| f.new_path.as_ref() == Some(&anc))
            {
                let pp = project::check_with(&self.root, &anc, &|_| false, &|_| false);
                if let Ok(pp) = pp {
                    if matches!(project::read(&pp)?, Entry::Symlink { .. }) {
                        return Ok(true);
                    }
                }
            }
            a = anc.parent();
        }
        Ok(false)
    }

    /// Whether applying `fp` removes its old path (a rename whose source still exists).
    fn moves_away(&mut self, fp: &FilePatch) -> Result<bool> {
        match (&fp.old_path, &fp.new_path) {
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
        let perm = perm_for(None, None, fp.new_mode);
        self.state_for(new, fp.new_mode, content, perm)
            .map_err(Res::Refuse)
    }

    fn create(&mut self, fp: &FilePatch, new: &RelPath) -> Result<Res> {
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
    fn delete(&mut self, fp: &FilePatch, old: &RelPath) -> Result<Res> {
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
            _ => oid_matches(&fp.old_oid, &data).unwrap_or(data.is_empty()),
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
            return Some(git_blob_id(data).starts_with(&h));
        }
        if let (Some(pre), _) = self.preimage(fp, old) {
            return Some(pre == *data);
        }
        None
    }

    /// A modification, rename or copy. `source_gone`: the source is known not to exist (it
    /// would be below a symlink).
    fn modify(
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

    /// Resolves the new state of a file whose current state is `cur`; `pre_rel` names the
    /// pre-image.
    fn resolve(&mut self, fp: &FilePatch, cur: &VState, pre_rel: &RelPath) -> Result<Res> {
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
            Some(crate::patch::parse::MODE_SYMLINK)
        } else {
            None
        });
        let perm = perm_for(perm, fp.old_mode, fp.new_mode);
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
    fn preimage(&self, fp: &FilePatch, rel: &RelPath) -> (Option<Vec<u8>>, Option<String>) {
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
        // The common case, decided without hashing the file or reading a pre-image: every
        // hunk fits exactly where its header says, and the reverse does not. Then the file
        // cannot already be the patch's result (that result takes the reverse exactly), so
        // the checks for an already applied patch below cannot succeed.
        if !hunks_fit(&cur, &fp.hunks, true, false) {
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
        if hunks_fit(&cur, &fp.hunks, true, true) {
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
                conflicts.push(HunkConflict {
                    hunk: k + 1,
                    header: h.header(),
                    reason: "its context is not in the project file".into(),
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

    /// Whole-patch checks once every file is resolved: parents must be directories, and a
    /// directory can only be replaced by a file if the patch empties it.
    fn validate(&mut self) -> Result<()> {
        let finals: Vec<(RelPath, VState)> = self
            .overlay
            .iter()
            .filter(|(_, v)| matches!(v, VState::File { .. } | VState::Symlink(_)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (path, _) in finals {
            let mut problem = None;
            let mut anc = path.parent();
            while let Some(a) = anc {
                let st = self.current(&a)?;
                if matches!(st, VState::File { .. } | VState::Symlink(_) | VState::Other) {
                    problem = Some(format!("{a} is not a directory"));
                }
                anc = a.parent();
            }
            if problem.is_none() && matches!(self.original(&path)?, Entry::Dir { .. }) {
                let pp = self.checked(&path)?;
                let leaves = project::list_leaves(&pp)?;
                let kept: Vec<&RelPath> = leaves
                    .iter()
                    .filter(|l| self.overlay.get(*l) != Some(&VState::Absent))
                    .collect();
                if !kept.is_empty() {
                    problem = Some(format!(
                        "the directory {path} is in the way (it holds {} file(s) the patch does not delete)",
                        kept.len()
                    ));
                }
            }
            if let Some(why) = problem {
                if let Some(&idx) = self.owner.get(&path) {
                    if let Some(r) = self.reports.get_mut(idx) {
                        r.status = FileStatus::Conflict;
                        r.detail = why;
                        r.markers_written = false;
                        self.unmarkable.insert(idx);
                    }
                }
            }
        }
        Ok(())
    }

    fn outcome(&self) -> Outcome {
        let refused = self.reports.iter().any(|r| r.status == FileStatus::Refused);
        let conflicts = self
            .reports
            .iter()
            .any(|r| r.status == FileStatus::Conflict);
        if refused || (conflicts && (!self.opts.conflict_markers || !self.unmarkable.is_empty())) {
            Outcome::Refused
        } else if conflicts {
            Outcome::AppliedWithConflicts
        } else if self
            .reports
            .iter()
            .all(|r| r.status == FileStatus::AlreadyApplied)
        {
            Outcome::AlreadyApplied
        } else {
            Outcome::Applied
        }
    }

    /// The changes to write: every planned path whose final state differs from the project.
    fn ops(&mut self) -> Result<Vec<PlanOp>> {
        let planned: Vec<(RelPath, VState)> = self
            .overlay
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut ops = Vec::new();
        for (rel, fin) in planned {
            let before = self.original(&rel)?.clone();
            let before_state = VState::of(&before);
            if before_state == fin {
                continue;
            }
            let after = match fin {
                VState::Absent => {
                    // Only files and symlinks are removed; directories go when emptied.
                    if !matches!(before_state, VState::File { .. } | VState::Symlink(_)) {
                        continue;
                    }
                    Target::Absent
                }
                VState::File { data, perm } => Target::File {
                    data,
                    perm,
                    mtime: None,
                },
                VState::Symlink(t) => Target::Symlink {
                    target: t,
                    mtime: None,
                },
                VState::Dir | VState::Other => continue,
            };
            ops.push(PlanOp { rel, before, after });
        }
        Ok(ops)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        let r = RelPath::new("a/b/link").unwrap();
        assert!(!symlink_escapes(&r, b"../x"));
        assert!(!symlink_escapes(&r, b"../../x"));
        assert!(symlink_escapes(&r, b"../../../x"));
        assert!(symlink_escapes(&r, b"/etc/passwd"));
        assert!(!symlink_escapes(&r, b"c/../../d"));
    }

    #[test]
    fn perms() {
        assert_eq!(perm_for(Some(0o644), Some(0o100644), Some(0o100755)), 0o755);
        assert_eq!(perm_for(Some(0o755), Some(0o100755), Some(0o100644)), 0o644);
        assert_eq!(perm_for(Some(0o600), Some(0o100644), Some(0o100644)), 0o600);
        assert_eq!(perm_for(None, None, Some(0o100755)), 0o755);
    }
}
