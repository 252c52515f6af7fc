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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fs::relpath::RelPath;
use crate::git::oid::blob_id_hex;
use crate::patch::parse::{
    mode_is_executable, mode_is_gitlink, mode_is_symlink, parse_patch_strip, split_lines,
    BinaryKind, BinaryPatch, FilePatch, Hunk, LineKind, Patch,
};

pub use contained::{path_in_project, ProjectPath};

// ------------------------------------------------------------------------------------------
// Options and report
// ------------------------------------------------------------------------------------------

/// How to apply a patch.
///
/// ```
/// use patchbox::apply::ApplyOptions;
/// let opts = ApplyOptions { check: true, ..ApplyOptions::default() };
/// assert_eq!(opts.strip, 1);
/// assert!(!opts.conflict_markers);
/// ```
#[derive(Clone, Debug)]
pub struct ApplyOptions {
    /// Only report what would happen; write nothing.
    pub check: bool,
    /// A directory holding the original versions of the files (same relative paths), e.g. a
    /// session's `base/`: enables 3-way merging when the project has drifted.
    pub preimages: Option<PathBuf>,
    /// Write conflicting text files with conflict markers (and apply the rest) instead of
    /// refusing the whole patch. Conflicts that cannot be expressed with markers (binary
    /// files, symlinks, creations over different files, deletions of changed files) still
    /// refuse the patch.
    pub conflict_markers: bool,
    /// Where to record what the apply replaced, for [`undo_apply`]. Must not exist yet or be
    /// an empty directory. Nothing is recorded when nothing is written.
    pub undo_dir: Option<PathBuf>,
    /// Leading path components to strip from patch names (`-p`); 1 for `a/` and `b/`.
    pub strip: usize,
    /// Allow the patch to create symlinks that point outside the project (absolute targets
    /// or too many `..`). Off by default: such a symlink is refused.
    pub allow_outside_symlinks: bool,
    /// Testing aid: make the write phase fail after this many file system steps, to exercise
    /// the rollback.
    #[doc(hidden)]
    pub fail_after_steps: Option<usize>,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            check: false,
            preimages: None,
            conflict_markers: false,
            undo_dir: None,
            strip: 1,
            allow_outside_symlinks: false,
            fail_after_steps: None,
        }
    }
}

/// What happened (or, in check mode, would happen) to one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileStatus {
    /// Applied with exact context (possibly at an offset).
    Applied,
    /// Applied by a 3-way merge with the pre-image: the project had non-overlapping edits.
    Merged,
    /// The project already has the patch's result for this file; nothing to do.
    AlreadyApplied,
    /// The patch's changes overlap local changes (see [`FileReport::conflicts`]).
    Conflict,
    /// Refused for safety or because the change is not supported (see the detail).
    Refused,
}

impl fmt::Display for FileStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileStatus::Applied => "applied",
            FileStatus::Merged => "merged",
            FileStatus::AlreadyApplied => "already applied",
            FileStatus::Conflict => "conflict",
            FileStatus::Refused => "refused",
        })
    }
}

/// One hunk that could not be applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HunkConflict {
    /// 1-based index of the hunk within its file patch.
    pub hunk: usize,
    /// The hunk header, `@@ -a,b +c,d @@`.
    pub header: String,
    /// Why it conflicts, with line numbers in the project file where known.
    pub reason: String,
}

/// The result for one file patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileReport {
    /// The file (its new path; the old one for a deletion).
    pub path: RelPath,
    /// The source path of a rename or copy.
    pub old_path: Option<RelPath>,
    /// What happened.
    pub status: FileStatus,
    /// Human-readable detail: offsets used, merge notes, the reason for a refusal.
    pub detail: String,
    /// For [`FileStatus::Conflict`]: the conflicting hunks.
    pub conflicts: Vec<HunkConflict>,
    /// True when the file was (or in check mode would be) written with conflict markers.
    pub markers_written: bool,
}

/// The overall result of an apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Every file was applied or already applied; something was written (in check mode:
    /// would be).
    Applied,
    /// Written, but some text files contain conflict markers
    /// ([`ApplyOptions::conflict_markers`]).
    AppliedWithConflicts,
    /// Every file already had the patch's result (or the patch was empty); nothing written.
    AlreadyApplied,
    /// Nothing was written: some file conflicts or was refused.
    Refused,
}

/// The result of [`apply_patch`]: one [`FileReport`] per file patch, in patch order.
///
/// Its `Display` is a human-readable summary, one line per file and a closing line.
///
/// ```
/// use patchbox::apply::{apply_patch, ApplyOptions, FileStatus, Outcome};
/// let project = tempfile::tempdir().unwrap();
/// std::fs::write(project.path().join("f.txt"), "a\nmine\nc\n").unwrap();
/// let patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+theirs\n c\n";
/// let report = apply_patch(project.path(), patch.as_bytes(), &ApplyOptions::default()).unwrap();
/// assert_eq!(report.outcome, Outcome::Refused);
/// assert!(!report.is_ok() && !report.wrote());
/// let f = &report.files[0];
/// assert_eq!(f.status, FileStatus::Conflict);
/// assert_eq!(f.conflicts[0].hunk, 1);
/// assert!(report.to_string().contains("nothing was written"));
/// assert_eq!(std::fs::read_to_string(project.path().join("f.txt")).unwrap(), "a\nmine\nc\n");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplyReport {
    /// Per file patch, in order.
    pub files: Vec<FileReport>,
    /// Overall outcome.
    pub outcome: Outcome,
    /// True when made with [`ApplyOptions::check`]: nothing was written.
    pub check_only: bool,
    /// The undo record written, if any.
    pub undo_dir: Option<PathBuf>,
    /// Non-fatal notes (e.g. a staging directory that could not be cleaned up).
    pub warnings: Vec<String>,
}

impl ApplyReport {
    /// True unless the patch was refused (conflicts without markers, or refused files).
    pub fn is_ok(&self) -> bool {
        self.outcome != Outcome::Refused
    }

    /// True when the project was modified by this call.
    pub fn wrote(&self) -> bool {
        !self.check_only
            && matches!(
                self.outcome,
                Outcome::Applied | Outcome::AppliedWithConflicts
            )
    }

    /// Number of files with the given status.
    pub fn count(&self, status: FileStatus) -> usize {
        self.files.iter().filter(|f| f.status == status).count()
    }
}

impl fmt::Display for ApplyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.files {
            let name = match &r.old_path {
                Some(o) if *o != r.path => format!("{o} => {}", r.path),
                _ => r.path.to_string(),
            };
            write!(f, "{:<16}{name}", r.status.to_string())?;
            if !r.detail.is_empty() {
                write!(f, ": {}", r.detail)?;
            }
            writeln!(f)?;
            for c in &r.conflicts {
                writeln!(f, "    hunk #{} {}: {}", c.hunk, c.header, c.reason)?;
            }
        }
        for w in &self.warnings {
            writeln!(f, "warning: {w}")?;
        }
        let n = |s| self.count(s);
        let verb = if self.check_only { "would be" } else { "was" };
        match self.outcome {
            Outcome::Applied => write!(
                f,
                "patch {verb} applied: {} applied, {} merged, {} already applied",
                n(FileStatus::Applied),
                n(FileStatus::Merged),
                n(FileStatus::AlreadyApplied)
            ),
            Outcome::AppliedWithConflicts => write!(
                f,
                "patch {verb} applied with conflict markers in {} file(s)",
                n(FileStatus::Conflict)
            ),
            Outcome::AlreadyApplied => write!(f, "patch already applied: nothing to do"),
            Outcome::Refused => write!(
                f,
                "patch refused, nothing {} written: {} conflict(s), {} refused",
                if self.check_only { "would be" } else { "was" },
                n(FileStatus::Conflict),
                n(FileStatus::Refused)
            ),
        }
    }
}

/// The result of [`undo_apply`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UndoReport {
    /// Paths restored to their state before the apply.
    pub restored: Vec<RelPath>,
    /// Paths that had changed since the apply and were overwritten anyway (`force`).
    pub overwritten: Vec<RelPath>,
    /// The record had already been used; nothing was done.
    pub already_undone: bool,
}

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
    let planning = contained::DirScope::enter(&root)?;
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
                path: contained::check_with(&root, &op.rel, &|_| false, &|a| {
                    planner.gone_symlinks.contains(a)
                })?,
                expect: op.before.stamp(),
                before_is_dir: matches!(op.before, contained::Entry::Dir { .. }),
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
// The chokepoint: project-contained paths and every file system call on them
// ------------------------------------------------------------------------------------------

mod contained {
    //! Every path the engine writes is a [`ProjectPath`], built only by [`check`] (exposed as
    //! [`path_in_project`]), and every write goes through a helper here that walks from the
    //! project root with `openat(O_NOFOLLOW | O_DIRECTORY)` per component.

    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::ffi::{CStr, CString};
    use std::io::{self, Read, Write};
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Component, Path, PathBuf};
    use std::rc::Rc;

    use crate::error::{Error, Result};
    use crate::fs::relpath::RelPath;

    /// A path inside the project that passed the containment checks of [`path_in_project`].
    ///
    /// It can only be built by [`path_in_project`]; every file system helper of the apply
    /// engine that writes takes one, so a write to an unchecked path does not compile.
    ///
    /// ```
    /// use patchbox::apply::path_in_project;
    /// use patchbox::RelPath;
    /// let project = tempfile::tempdir().unwrap();
    /// let p = path_in_project(project.path(), &RelPath::new("src/a.rs").unwrap()).unwrap();
    /// assert_eq!(p.rel().to_string(), "src/a.rs");
    /// assert_eq!(p.to_path_buf(), project.path().join("src/a.rs"));
    /// ```
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct ProjectPath {
        root: PathBuf,
        rel: RelPath,
    }

    impl ProjectPath {
        /// The path relative to the project root.
        pub fn rel(&self) -> &RelPath {
            &self.rel
        }

        /// The project root it was checked against.
        pub fn root(&self) -> &Path {
            &self.root
        }

        /// The full path (for messages; the engine never opens it in one piece).
        pub fn to_path_buf(&self) -> PathBuf {
            self.root.join(self.rel.as_path())
        }
    }

    /// Checks that `rel` may be written inside `project_dir` and returns it as a
    /// [`ProjectPath`].
    ///
    /// Refused with [`Error::Containment`]: any component named `.git` (in any letter case),
    /// and any path whose parent directories include a symlink (checked with `lstat` from the
    /// project root, never following links). The last component may itself be a symlink:
    /// the engine replaces such a link, it never writes through it. `..` and absolute paths
    /// cannot be [`RelPath`]s in the first place.
    ///
    /// ```
    /// use patchbox::apply::path_in_project;
    /// use patchbox::RelPath;
    /// let project = tempfile::tempdir().unwrap();
    /// let outside = tempfile::tempdir().unwrap();
    /// std::os::unix::fs::symlink(outside.path(), project.path().join("link")).unwrap();
    /// assert!(path_in_project(project.path(), &RelPath::new("src/lib.rs").unwrap()).is_ok());
    /// assert!(path_in_project(project.path(), &RelPath::new("link").unwrap()).is_ok());
    /// assert!(path_in_project(project.path(), &RelPath::new("link/x").unwrap()).is_err());
    /// assert!(path_in_project(project.path(), &RelPath::new(".git/config").unwrap()).is_err());
    /// ```
    pub fn path_in_project(project_dir: &Path, rel: &RelPath) -> Result<ProjectPath> {
        check(project_dir, rel, &|_| false)
    }

    fn refuse(root: &Path, rel: &RelPath, reason: &'static str) -> Error {
        Error::Containment {
            path: rel.as_path().to_path_buf(),
            base: root.to_path_buf(),
            reason,
        }
    }

    fn comps(rel: &RelPath) -> Vec<&[u8]> {
        rel.as_path()
            .components()
            .filter_map(|c| match c {
                Component::Normal(s) => Some(s.as_bytes()),
                _ => None,
            })
            .collect()
    }

    /// The chokepoint. `planned_symlink` tells which paths the patch being applied creates as
    /// symlinks: a path below one of them is refused too.
    pub(super) fn check(
        root: &Path,
        rel: &RelPath,
        planned_symlink: &dyn Fn(&RelPath) -> bool,
    ) -> Result<ProjectPath> {
        check_with(root, rel, planned_symlink, &|_| false)
    }

    /// [`check`], where a symlink in the project that the same patch deletes
    /// (`replaced_symlink`) counts as a directory still to be created, not as a symlink to go
    /// through. Safe because every write walks the path again with `O_NOFOLLOW`: if the link
    /// is still there at write time the write is refused.
    pub(super) fn check_with(
        root: &Path,
        rel: &RelPath,
        planned_symlink: &dyn Fn(&RelPath) -> bool,
        replaced_symlink: &dyn Fn(&RelPath) -> bool,
    ) -> Result<ProjectPath> {
        let cs = comps(rel);
        if cs.is_empty() {
            return Err(refuse(root, rel, "path is empty"));
        }
        if cs.iter().any(|c| c.eq_ignore_ascii_case(b".git")) {
            return Err(refuse(root, rel, "path has a '.git' component"));
        }
        let mut anc = PathBuf::new();
        for c in &cs[..cs.len() - 1] {
            anc.push(std::ffi::OsStr::from_bytes(c));
            if let Ok(a) = RelPath::new(&anc) {
                if planned_symlink(&a) {
                    return Err(refuse(
                        root,
                        rel,
                        "path goes through a symlink created by the same patch",
                    ));
                }
            }
        }
        let mut dir = root_fd(root)?;
        let mut here = root.to_path_buf();
        let mut anc = PathBuf::new();
        for c in &cs[..cs.len() - 1] {
            let name = cstring(c).map_err(|e| Error::io("inspect", &here, e))?;
            here.push(std::ffi::OsStr::from_bytes(c));
            anc.push(std::ffi::OsStr::from_bytes(c));
            // Reached before in this scope with the same checks: a directory.
            if let Some(fd) = cached(root, &anc) {
                dir = fd;
                continue;
            }
            match fstatat(dir.as_fd(), &name) {
                Err(e) if is_missing(&e) => break,
                Err(e) => return Err(Error::io("inspect", &here, e)),
                Ok(st) => match st.st_mode & libc::S_IFMT {
                    libc::S_IFLNK => {
                        if RelPath::new(&anc).is_ok_and(|a| replaced_symlink(&a)) {
                            break;
                        }
                        return Err(refuse(root, rel, "path goes through a symlink"));
                    }
                    libc::S_IFDIR => {
                        dir = match openat_dir(dir.as_fd(), &name) {
                            Ok(d) => Rc::new(d),
                            Err(e) if is_symlink_error(&e, dir.as_fd(), &name) => {
                                return Err(refuse(root, rel, "path goes through a symlink"))
                            }
                            Err(e) => return Err(Error::io("open directory", &here, e)),
                        };
                        remember(root, &anc, &dir);
                    }
                    // A file where a directory is needed: not a containment problem; the
                    // planner reports it.
                    _ => break,
                },
            }
        }
        Ok(ProjectPath {
            root: root.to_path_buf(),
            rel: rel.clone(),
        })
    }

    // ---- directory descriptors ----

    /// Directory descriptors opened during one phase of an apply (planning, or writing), by
    /// path below the root. Each was reached component by component with `O_NOFOLLOW`, so it
    /// names a directory that was inside the project when it was opened, and nothing done
    /// through it follows a symlink swapped in later. Removing or renaming a directory evicts
    /// it and everything below it.
    struct DirCache {
        root: PathBuf,
        root_fd: Rc<OwnedFd>,
        dirs: HashMap<PathBuf, Rc<OwnedFd>>,
    }

    thread_local! {
        static CACHE: RefCell<Option<DirCache>> = const { RefCell::new(None) };
    }

    /// While alive, this thread's helpers reuse directory descriptors below `root`: one
    /// `openat` per directory per phase, instead of one per component on every call. Each
    /// phase opens its own scope, so the write phase walks the project afresh.
    pub(crate) struct DirScope {
        prev: Option<DirCache>,
    }

    impl DirScope {
        pub(crate) fn enter(root: &Path) -> Result<DirScope> {
            let fd = open_root(root).map_err(|e| Error::io("open project", root, e))?;
            let cache = DirCache {
                root: root.to_path_buf(),
                root_fd: Rc::new(fd),
                dirs: HashMap::new(),
            };
            let prev = CACHE.with(|c| c.borrow_mut().replace(cache));
            Ok(DirScope { prev })
        }
    }

    impl Drop for DirScope {
        fn drop(&mut self) {
            let prev = self.prev.take();
            CACHE.with(|c| *c.borrow_mut() = prev);
        }
    }

    /// The cached descriptor of `key` below `root` (`""` is the root itself).
    fn cached(root: &Path, key: &Path) -> Option<Rc<OwnedFd>> {
        CACHE.with(|c| {
            let c = c.borrow();
            let d = c.as_ref().filter(|d| d.root == root)?;
            if key.as_os_str().is_empty() {
                Some(Rc::clone(&d.root_fd))
            } else {
                d.dirs.get(key).cloned()
            }
        })
    }

    fn remember(root: &Path, key: &Path, fd: &Rc<OwnedFd>) {
        CACHE.with(|c| {
            if let Some(d) = c.borrow_mut().as_mut().filter(|d| d.root == root) {
                d.dirs.insert(key.to_path_buf(), Rc::clone(fd));
            }
        });
    }

    /// Forgets `rel` and everything below it (it was removed or renamed).
    fn evict(root: &Path, rel: &RelPath) {
        CACHE.with(|c| {
            if let Some(d) = c.borrow_mut().as_mut().filter(|d| d.root == root) {
                // Every walk caches each directory it passes, so nothing below an uncached
                // path is cached: most calls (files) return here.
                let gone = rel.as_path();
                if d.dirs.contains_key(gone) {
                    d.dirs.retain(|k, _| !k.starts_with(gone));
                }
            }
        });
    }

    /// The root's descriptor: cached in a scope, else opened.
    fn root_fd(root: &Path) -> Result<Rc<OwnedFd>> {
        match cached(root, Path::new("")) {
            Some(fd) => Ok(fd),
            None => Ok(Rc::new(
                open_root(root).map_err(|e| Error::io("open directory", root, e))?,
            )),
        }
    }

    // ---- metadata ----

    /// Identity and change stamp of a directory entry, to detect changes between the check
    /// and the write.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) struct Stamp {
        pub dev: u64,
        pub ino: u64,
        pub mode: u32,
        pub size: i64,
        pub mtime: (i64, i64),
        pub ctime: (i64, i64),
    }

    #[allow(clippy::unnecessary_cast)]
    fn stamp_of(st: &libc::stat) -> Stamp {
        Stamp {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            mode: st.st_mode as u32,
            size: st.st_size as i64,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
        }
    }

    /// What is at a path, read without following a symlink at any component.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub(crate) enum Entry {
        Absent,
        File {
            data: super::Data,
            perm: u32,
            stamp: Stamp,
        },
        Symlink {
            target: Vec<u8>,
            stamp: Stamp,
        },
        Dir {
            stamp: Stamp,
        },
        Other {
            stamp: Stamp,
        },
    }

    impl Entry {
        pub(crate) fn stamp(&self) -> Option<Stamp> {
            match self {
                Entry::Absent => None,
                Entry::File { stamp, .. }
                | Entry::Symlink { stamp, .. }
                | Entry::Dir { stamp }
                | Entry::Other { stamp } => Some(*stamp),
            }
        }
    }

    // ---- raw syscalls ----

    fn cstring(b: &[u8]) -> io::Result<CString> {
        CString::new(b).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))
    }

    fn fd_result(fd: libc::c_int) -> io::Result<OwnedFd> {
        if fd < 0 {
            Err(io::Error::last_os_error())
        } else {
            // SAFETY: `fd` is a freshly opened descriptor that nothing else owns.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        }
    }

    fn rc(r: libc::c_int) -> io::Result<()> {
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    fn is_missing(e: &io::Error) -> bool {
        matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR))
    }

    fn is_symlink_error(e: &io::Error, dir: BorrowedFd<'_>, name: &CStr) -> bool {
        match e.raw_os_error() {
            Some(libc::ELOOP) => true,
            Some(libc::ENOTDIR) => {
                fstatat(dir, name).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK)
            }
            _ => false,
        }
    }

    fn open_root(root: &Path) -> io::Result<OwnedFd> {
        let c = cstring(root.as_os_str().as_bytes())?;
        // SAFETY: valid NUL-terminated path.
        fd_result(unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        })
    }

    fn openat_dir(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<OwnedFd> {
        // SAFETY: valid fd and NUL-terminated name.
        fd_result(unsafe {
            libc::openat(
                dir.as_raw_fd(),
                name.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        })
    }

    fn fstatat(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<libc::stat> {
        // SAFETY: zeroed stat is a valid out-parameter; fd and name are valid.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        rc(unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })?;
        Ok(st)
    }

    fn timespec(t: (i64, i64)) -> libc::timespec {
        // SAFETY: timespec is plain data; zeroed is valid.
        let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
        ts.tv_sec = t.0 as libc::time_t;
        ts.tv_nsec = t.1 as _;
        ts
    }

    /// The opened parent directory of a path and the last component's name, or `None` if a
    /// parent directory does not exist.
    fn parent_of(root: &Path, rel: &RelPath) -> Result<Option<(Rc<OwnedFd>, CString)>> {
        let cs = comps(rel);
        let Some((last, dirs)) = cs.split_last() else {
            return Err(refuse(root, rel, "path is empty"));
        };
        // Start below the deepest directory already open in this scope.
        let mut key = PathBuf::new();
        let mut keys = Vec::with_capacity(dirs.len());
        for c in dirs {
            key.push(std::ffi::OsStr::from_bytes(c));
            keys.push(key.clone());
        }
        let mut start = 0;
        let mut dir = None;
        for (i, k) in keys.iter().enumerate().rev() {
            if let Some(fd) = cached(root, k) {
                dir = Some(fd);
                start = i + 1;
                break;
            }
        }
        let mut dir = match dir {
            Some(d) => d,
            None => root_fd(root)?,
        };
        let mut here = root.to_path_buf();
        for (c, k) in dirs.iter().zip(&keys).skip(start) {
            here.push(std::ffi::OsStr::from_bytes(c));
            let name = cstring(c).map_err(|e| Error::io("open directory", &here, e))?;
            match openat_dir(dir.as_fd(), &name) {
                Ok(d) => {
                    dir = Rc::new(d);
                    remember(root, k, &dir);
                }
                // With O_DIRECTORY | O_NOFOLLOW a symlink gives ELOOP or ENOTDIR depending on
                // the system: look at what is there.
                Err(e) if is_symlink_error(&e, dir.as_fd(), &name) => {
                    return Err(refuse(root, rel, "path goes through a symlink"))
                }
                Err(e) if is_missing(&e) => return Ok(None),
                Err(e) => return Err(Error::io("open directory", &here, e)),
            }
        }
        let name = cstring(last).map_err(|e| Error::io("open", root.join(rel.as_path()), e))?;
        Ok(Some((dir, name)))
    }

    fn need_parent(p: &ProjectPath, op: &'static str) -> Result<(Rc<OwnedFd>, CString)> {
        parent_of(&p.root, &p.rel)?.ok_or_else(|| {
            Error::io(
                op,
                p.to_path_buf(),
                io::Error::new(io::ErrorKind::NotFound, "parent directory does not exist"),
            )
        })
    }

    // ---- reads ----

    /// The stamp of the entry at `p`, `None` if absent.
    pub(crate) fn stamp(p: &ProjectPath) -> Result<Option<Stamp>> {
        let Some((dir, name)) = parent_of(&p.root, &p.rel)? else {
            return Ok(None);
        };
        match fstatat(dir.as_fd(), &name) {
            Ok(st) => Ok(Some(stamp_of(&st))),
            Err(e) if is_missing(&e) => Ok(None),
            Err(e) => Err(Error::io("inspect", p.to_path_buf(), e)),
        }
    }

    /// Reads the entry at `p` in the project.
    pub(crate) fn read(p: &ProjectPath) -> Result<Entry> {
        read_in(&p.root, &p.rel)
    }

    /// Reads the entry at `rel` below `root` (the project, or a pre-image tree), never
    /// following a symlink.
    pub(crate) fn read_in(root: &Path, rel: &RelPath) -> Result<Entry> {
        let full = root.join(rel.as_path());
        let Some((dir, name)) = parent_of(root, rel)? else {
            return Ok(Entry::Absent);
        };
        let st = match fstatat(dir.as_fd(), &name) {
            Ok(st) => st,
            Err(e) if is_missing(&e) => return Ok(Entry::Absent),
            Err(e) => return Err(Error::io("inspect", &full, e)),
        };
        let stamp = stamp_of(&st);
        match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => {
                // SAFETY: valid fd and name.
                let fd = fd_result(unsafe {
                    libc::openat(
                        dir.as_raw_fd(),
                        name.as_ptr(),
                        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK,
                    )
                })
                .map_err(|e| Error::io("open", &full, e))?;
                let mut f = std::fs::File::from(fd);
                let mut data = Vec::new();
                f.read_to_end(&mut data)
                    .map_err(|e| Error::io("read", &full, e))?;
                Ok(Entry::File {
                    data: std::sync::Arc::new(data),
                    perm: stamp.mode & 0o7777,
                    stamp,
                })
            }
            libc::S_IFLNK => {
                let mut buf = vec![0u8; 256];
                loop {
                    // SAFETY: buf is valid for buf.len() bytes.
                    let n = unsafe {
                        libc::readlinkat(
                            dir.as_raw_fd(),
                            name.as_ptr(),
                            buf.as_mut_ptr().cast(),
                            buf.len(),
                        )
                    };
                    if n < 0 {
                        return Err(Error::io("read link", &full, io::Error::last_os_error()));
                    }
                    let n = n as usize;
                    if n < buf.len() {
                        buf.truncate(n);
                        return Ok(Entry::Symlink { target: buf, stamp });
                    }
                    if buf.len() >= 1 << 20 {
                        return Err(Error::io(
                            "read link",
                            &full,
                            io::Error::new(io::ErrorKind::InvalidData, "link target too long"),
                        ));
                    }
                    buf.resize(buf.len() * 4, 0);
                }
            }
            libc::S_IFDIR => Ok(Entry::Dir { stamp }),
            _ => Ok(Entry::Other { stamp }),
        }
    }

    /// Every non-directory entry below the directory `p` (recursively), as project paths.
    pub(crate) fn list_leaves(p: &ProjectPath) -> Result<Vec<RelPath>> {
        let mut out = Vec::new();
        let Some((dir, name)) = parent_of(&p.root, &p.rel)? else {
            return Ok(out);
        };
        let fd = openat_dir(dir.as_fd(), &name)
            .map_err(|e| Error::io("open directory", p.to_path_buf(), e))?;
        walk_leaves(fd, p.rel.clone(), &p.root, &mut out, 0)?;
        Ok(out)
    }

    fn walk_leaves(
        fd: OwnedFd,
        rel: RelPath,
        root: &Path,
        out: &mut Vec<RelPath>,
        depth: usize,
    ) -> Result<()> {
        let full = root.join(rel.as_path());
        if depth > 256 {
            return Err(Error::io(
                "list directory",
                &full,
                io::Error::new(io::ErrorKind::InvalidData, "directory tree too deep"),
            ));
        }
        let dupfd = fd
            .try_clone()
            .map_err(|e| Error::io("list directory", &full, e))?;
        // SAFETY: fdopendir takes ownership of the descriptor on success.
        let dirp = unsafe { libc::fdopendir(dupfd.into_raw_fd()) };
        if dirp.is_null() {
            return Err(Error::io(
                "list directory",
                &full,
                io::Error::last_os_error(),
            ));
        }
        let mut names = Vec::new();
        loop {
            // SAFETY: dirp is a valid DIR*; readdir returns NULL at the end.
            let ent = unsafe { libc::readdir(dirp) };
            if ent.is_null() {
                break;
            }
            // SAFETY: d_name is NUL-terminated within the dirent.
            let n = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) };
            let b = n.to_bytes();
            if b != b"." && b != b".." {
                names.push(n.to_owned());
            }
        }
        // SAFETY: dirp is valid and closed once.
        unsafe { libc::closedir(dirp) };
        for n in names {
            let child = rel.join(&RelPath::from_bytes(n.to_bytes()).map_err(|_| {
                Error::io(
                    "list directory",
                    &full,
                    io::Error::from(io::ErrorKind::InvalidData),
                )
            })?);
            let st = match fstatat(fd.as_fd(), &n) {
                Ok(st) => st,
                Err(e) if is_missing(&e) => continue,
                Err(e) => return Err(Error::io("inspect", root.join(child.as_path()), e)),
            };
            if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
                let sub = openat_dir(fd.as_fd(), &n)
                    .map_err(|e| Error::io("open directory", root.join(child.as_path()), e))?;
                walk_leaves(sub, child, root, out, depth + 1)?;
            } else {
                out.push(child);
            }
        }
        Ok(())
    }

    // ---- writes (all take a ProjectPath) ----

    /// Creates a new regular file (never replacing anything) with `data` and `perm`,
    /// optionally setting its mtime (not synced: see [`sync_fs`]).
    pub(crate) fn create_file(
        p: &ProjectPath,
        data: &[u8],
        perm: u32,
        mtime: Option<(i64, i64)>,
    ) -> Result<()> {
        let full = p.to_path_buf();
        let (dir, name) = need_parent(p, "create")?;
        // SAFETY: valid fd and name.
        let fd = fd_result(unsafe {
            libc::openat(
                dir.as_raw_fd(),
                name.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600 as libc::c_uint,
            )
        })
        .map_err(|e| Error::io("create", &full, e))?;
        let mut f = std::fs::File::from(fd);
        f.write_all(data)
            .map_err(|e| Error::io("write", &full, e))?;
        // SAFETY: valid fd.
        rc(unsafe { libc::fchmod(f.as_raw_fd(), (perm & 0o7777) as libc::mode_t) })
            .map_err(|e| Error::io("set mode", &full, e))?;
        if let Some(t) = mtime {
            let ts = [timespec((0, libc::UTIME_OMIT)), timespec(t)];
            // SAFETY: valid fd and two timespecs.
            rc(unsafe { libc::futimens(f.as_raw_fd(), ts.as_ptr()) })
                .map_err(|e| Error::io("set mtime", &full, e))?;
        }
        // Not synced one by one: the commit syncs the filesystem once after staging
        // (`sync_fs`), which costs one journal commit instead of one per file.
        Ok(())
    }

    /// Flushes the project's filesystem (`syncfs`): staged contents reach the disk before
    /// any of them replaces an original, so a crash leaves old or new files, never torn ones.
    /// Also used for the filesystem of an undo record kept elsewhere (`root` is then its
    /// directory).
    pub(crate) fn sync_fs(root: &Path) -> Result<()> {
        let fd = open_root(root).map_err(|e| Error::io("open directory", root, e))?;
        // SAFETY: valid fd.
        rc(unsafe { libc::syncfs(fd.as_raw_fd()) }).map_err(|e| Error::io("sync", root, e))
    }

    /// Creates a symlink at `p` pointing to `target`.
    pub(crate) fn create_symlink(p: &ProjectPath, target: &[u8]) -> Result<()> {
        let full = p.to_path_buf();
        let (dir, name) = need_parent(p, "create symlink")?;
        let t = cstring(target).map_err(|e| Error::io("create symlink", &full, e))?;
        // SAFETY: valid strings and fd.
        rc(unsafe { libc::symlinkat(t.as_ptr(), dir.as_raw_fd(), name.as_ptr()) })
            .map_err(|e| Error::io("create symlink", &full, e))
    }

    /// Renames `from` to `to`, failing if `to` exists. Symlinks are moved, not followed.
    pub(crate) fn rename_noreplace(from: &ProjectPath, to: &ProjectPath) -> Result<()> {
        let (fd1, n1) = need_parent(from, "rename")?;
        let (fd2, n2) = need_parent(to, "rename")?;
        evict(&from.root, &from.rel);
        evict(&to.root, &to.rel);
        let err = |e| Error::io("rename", to.to_path_buf(), e);
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            // SAFETY: valid fds and names.
            let r = unsafe {
                libc::renameat2(
                    fd1.as_raw_fd(),
                    n1.as_ptr(),
                    fd2.as_raw_fd(),
                    n2.as_ptr(),
                    libc::RENAME_NOREPLACE,
                )
            };
            match rc(r) {
                Ok(()) => return Ok(()),
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS)) => {}
                Err(e) => return Err(err(e)),
            }
        }
        // Fallback: check, then rename (a small window, but never through a symlink).
        match fstatat(fd2.as_fd(), &n2) {
            Ok(_) => return Err(err(io::Error::from_raw_os_error(libc::EEXIST))),
            Err(e) if is_missing(&e) => {}
            Err(e) => return Err(err(e)),
        }
        // SAFETY: valid fds and names.
        rc(unsafe { libc::renameat(fd1.as_raw_fd(), n1.as_ptr(), fd2.as_raw_fd(), n2.as_ptr()) })
            .map_err(err)
    }

    /// Removes the file or symlink at `p`.
    pub(crate) fn remove_file(p: &ProjectPath) -> Result<()> {
        let (dir, name) = need_parent(p, "remove")?;
        // SAFETY: valid fd and name.
        rc(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) })
            .map_err(|e| Error::io("remove", p.to_path_buf(), e))
    }

    /// Creates the directory `p`, with `perm` if given (else 0777 minus the umask).
    pub(crate) fn make_dir(p: &ProjectPath, perm: Option<u32>) -> Result<()> {
        let full = p.to_path_buf();
        let (dir, name) = need_parent(p, "create directory")?;
        // SAFETY: valid fd and name.
        rc(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o777) })
            .map_err(|e| Error::io("create directory", &full, e))?;
        if let Some(perm) = perm {
            let d = openat_dir(dir.as_fd(), &name)
                .map_err(|e| Error::io("open directory", &full, e))?;
            // SAFETY: valid fd.
            rc(unsafe { libc::fchmod(d.as_raw_fd(), (perm & 0o7777) as libc::mode_t) })
                .map_err(|e| Error::io("set mode", &full, e))?;
        }
        Ok(())
    }

    /// Removes the directory `p` if it is empty; `Ok(false)` if it is not.
    pub(crate) fn remove_dir_if_empty(p: &ProjectPath) -> Result<bool> {
        let (dir, name) = need_parent(p, "remove directory")?;
        // SAFETY: valid fd and name.
        match rc(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) }) {
            Ok(()) => {
                evict(&p.root, &p.rel);
                Ok(true)
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY) | Some(libc::EEXIST)) => {
                Ok(false)
            }
            Err(e) => Err(Error::io("remove directory", p.to_path_buf(), e)),
        }
    }

    /// Sets the mtime of the entry at `p` (not following a symlink).
    pub(crate) fn set_mtime(p: &ProjectPath, t: (i64, i64)) -> Result<()> {
        let (dir, name) = need_parent(p, "set mtime")?;
        let ts = [timespec((0, libc::UTIME_OMIT)), timespec(t)];
        // SAFETY: valid fd, name and timespecs.
        rc(unsafe {
            libc::utimensat(
                dir.as_raw_fd(),
                name.as_ptr(),
                ts.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })
        .map_err(|e| Error::io("set mtime", p.to_path_buf(), e))
    }

    /// Syncs the project root directory.
    pub(crate) fn sync_root(root: &Path) -> Result<()> {
        let fd = open_root(root).map_err(|e| Error::io("open directory", root, e))?;
        // SAFETY: valid fd.
        rc(unsafe { libc::fsync(fd.as_raw_fd()) }).map_err(|e| Error::io("sync", root, e))
    }

    /// Hard-links the regular file at `p` to `dest` (outside the project: an undo record),
    /// so the record keeps the original without copying it. Returns the file's stamp after
    /// linking (its ctime changed) and its link count, or `None` where the filesystem cannot
    /// link there (another filesystem, no hard links): the caller copies instead.
    pub(crate) fn link_out(p: &ProjectPath, dest: &Path) -> Result<Option<(Stamp, u64)>> {
        let (dir, name) = need_parent(p, "link")?;
        // A file with other links is left alone (its ctime too): the caller copies it.
        let st =
            fstatat(dir.as_fd(), &name).map_err(|e| Error::io("inspect", p.to_path_buf(), e))?;
        if st.st_nlink != 1 {
            return Ok(None);
        }
        let d = cstring(dest.as_os_str().as_bytes()).map_err(|e| Error::io("link", dest, e))?;
        // SAFETY: valid fds and NUL-terminated names; flags 0 never follows a symlink at
        // `name` (linkat links the entry itself).
        let r = unsafe {
            libc::linkat(
                dir.as_raw_fd(),
                name.as_ptr(),
                libc::AT_FDCWD,
                d.as_ptr(),
                0,
            )
        };
        if let Err(e) = rc(r) {
            return match e.raw_os_error() {
                Some(libc::EXDEV | libc::EPERM | libc::EMLINK | libc::ENOTSUP | libc::ENOSYS) => {
                    Ok(None)
                }
                _ => Err(Error::io("link", dest, e)),
            };
        }
        let st =
            fstatat(dir.as_fd(), &name).map_err(|e| Error::io("inspect", p.to_path_buf(), e))?;
        #[allow(clippy::unnecessary_cast)]
        Ok(Some((stamp_of(&st), st.st_nlink as u64)))
    }

    /// The project root's stamp.
    pub(crate) fn root_stamp(root: &Path) -> Result<Stamp> {
        let fd = open_root(root).map_err(|e| Error::io("open project", root, e))?;
        // SAFETY: zeroed stat is a valid out-parameter.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        rc(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })
            .map_err(|e| Error::io("inspect", root, e))?;
        Ok(stamp_of(&st))
    }

    /// Restores the project root's mtime (after a rollback).
    pub(crate) fn set_root_mtime(root: &Path, t: (i64, i64)) -> Result<()> {
        let fd = open_root(root).map_err(|e| Error::io("open project", root, e))?;
        let ts = [timespec((0, libc::UTIME_OMIT)), timespec(t)];
        // SAFETY: valid fd and timespecs.
        rc(unsafe { libc::futimens(fd.as_raw_fd(), ts.as_ptr()) })
            .map_err(|e| Error::io("set mtime", root, e))
    }
}

use contained::Entry;

// ------------------------------------------------------------------------------------------
// Text: placing hunks and 3-way merging
// ------------------------------------------------------------------------------------------

/// One side of a hunk as line slices.
struct Sides<'h> {
    old: Vec<&'h [u8]>,
    new: Vec<&'h [u8]>,
    leading: usize,
    trailing: usize,
    /// 0-based line index where the old side is expected.
    expected: usize,
    match_begin: bool,
    match_end: bool,
}

fn sides(h: &Hunk, reverse: bool) -> Sides<'_> {
    let (old_kind, new_kind) = if reverse {
        (LineKind::Insert, LineKind::Delete)
    } else {
        (LineKind::Delete, LineKind::Insert)
    };
    let old: Vec<&[u8]> = h
        .lines
        .iter()
        .filter(|l| l.kind == LineKind::Context || l.kind == old_kind)
        .map(|l| l.text.as_slice())
        .collect();
    let new: Vec<&[u8]> = h
        .lines
        .iter()
        .filter(|l| l.kind == LineKind::Context || l.kind == new_kind)
        .map(|l| l.text.as_slice())
        .collect();
    let leading = h
        .lines
        .iter()
        .take_while(|l| l.kind == LineKind::Context)
        .count();
    let trailing = if leading == h.lines.len() {
        0
    } else {
        h.lines
            .iter()
            .rev()
            .take_while(|l| l.kind == LineKind::Context)
            .count()
    };
    let (start, len) = if reverse {
        (h.new_start, h.new_len)
    } else {
        (h.old_start, h.old_len)
    };
    let expected = if len == 0 {
        start
    } else {
        start.saturating_sub(1)
    };
    Sides {
        old,
        new,
        leading,
        trailing,
        expected,
        // A hunk without leading context that starts at the top must stay there; one without
        // trailing context (but with leading context) must end at the end of the file.
        match_begin: leading == 0 && start <= 1,
        match_end: trailing == 0 && leading > 0,
    }
}

/// Where the old side of `s` matches in `cur`, at or after `from`: the expected line first,
/// then the nearest offsets in both directions when `allow_offset`.
fn find_hunk(
    cur: &[&[u8]],
    s: &Sides<'_>,
    from: usize,
    expected: isize,
    allow_offset: bool,
) -> Option<usize> {
    let m = s.old.len();
    if m > cur.len() {
        return None;
    }
    let max = cur.len() - m;
    if from > max {
        return None;
    }
    let matches = |p: usize| {
        (!s.match_begin || p == 0)
            && (!s.match_end || p == max)
            && cur.get(p..p + m).is_some_and(|w| w == s.old.as_slice())
    };
    if !allow_offset {
        let p = usize::try_from(expected).ok()?;
        return (p >= from && p <= max && matches(p)).then_some(p);
    }
    let e = usize::try_from(expected.max(0))
        .unwrap_or(0)
        .clamp(from, max);
    for d in 0..=(max - from) {
        let up = e.checked_add(d).filter(|&p| p <= max);
        let down = e.checked_sub(d).filter(|&p| p >= from && d > 0);
        if up.is_none() && down.is_none() {
            break;
        }
        if let Some(p) = up.filter(|&p| matches(p)) {
            return Some(p);
        }
        if let Some(p) = down.filter(|&p| matches(p)) {
            return Some(p);
        }
    }
    None
}

/// Where each hunk of `hunks` fits `cur`, in order (each after the previous): the start
/// line of its old side and its offset from where the header put it; `Err(k)` names the first
/// hunk (0-based) that does not fit.
fn place_hunks(
    cur: &[&[u8]],
    hunks: &[Hunk],
    reverse: bool,
    allow_offset: bool,
) -> std::result::Result<(Vec<usize>, Vec<isize>), usize> {
    let mut cursor = 0usize;
    let mut carry: isize = 0;
    let mut pos = Vec::with_capacity(hunks.len());
    let mut offsets = Vec::with_capacity(hunks.len());
    for (k, h) in hunks.iter().enumerate() {
        let s = sides(h, reverse);
        let p = find_hunk(cur, &s, cursor, s.expected as isize + carry, allow_offset).ok_or(k)?;
        cursor = p + s.old.len();
        carry = p as isize - s.expected as isize;
        pos.push(p);
        offsets.push(carry);
    }
    Ok((pos, offsets))
}

/// Whether every hunk of `hunks` fits `cur` (in order), without building the result.
fn hunks_fit(cur: &[&[u8]], hunks: &[Hunk], reverse: bool, allow_offset: bool) -> bool {
    place_hunks(cur, hunks, reverse, allow_offset).is_ok()
}

/// The result of placing every hunk.
struct Placed {
    out: Vec<u8>,
    /// Start line (0-based) of each hunk's old side in the input.
    pos: Vec<usize>,
    /// Offset of each hunk from where the header put it.
    offsets: Vec<isize>,
}

/// Applies `hunks` to `cur` in order (each after the previous); `Err(k)` names the first hunk
/// (0-based) that does not match.
fn apply_hunks(
    cur: &[&[u8]],
    hunks: &[Hunk],
    reverse: bool,
    allow_offset: bool,
) -> std::result::Result<Placed, usize> {
    let (pos, offsets) = place_hunks(cur, hunks, reverse, allow_offset)?;
    // Sized up front: a large file is built without reallocating (and copying) as it grows.
    let added: usize = hunks
        .iter()
        .flat_map(|h| h.lines.iter())
        .map(|l| l.text.len())
        .sum();
    let mut out = Vec::with_capacity(cur.iter().map(|l| l.len()).sum::<usize>() + added);
    let mut cursor = 0usize;
    for (h, &p) in hunks.iter().zip(&pos) {
        let s = sides(h, reverse);
        for l in &cur[cursor..p] {
            out.extend_from_slice(l);
        }
        for l in &s.new {
            out.extend_from_slice(l);
        }
        cursor = p + s.old.len();
    }
    for l in &cur[cursor..] {
        out.extend_from_slice(l);
    }
    Ok(Placed { out, pos, offsets })
}

/// A changed region between a base and one side: base lines `b0..b1` became side lines
/// `s0..s1`.
#[derive(Clone, Copy, Debug)]
struct Chunk {
    b0: usize,
    b1: usize,
    s0: usize,
    s1: usize,
}

fn chunks(base: &[&[u8]], side: &[&[u8]]) -> Vec<Chunk> {
    let ops = similar::capture_diff_slices(similar::Algorithm::Myers, base, side);
    let mut out: Vec<Chunk> = Vec::new();
    let mut open: Option<Chunk> = None;
    for op in ops {
        let (tag, o, n) = op.as_tag_tuple();
        if tag == similar::DiffTag::Equal {
            if let Some(c) = open.take() {
                out.push(c);
            }
            continue;
        }
        match &mut open {
            Some(c) => {
                c.b1 = o.end;
                c.s1 = n.end;
            }
            None => {
                open = Some(Chunk {
                    b0: o.start,
                    b1: o.end,
                    s0: n.start,
                    s1: n.end,
                })
            }
        }
    }
    if let Some(c) = open {
        out.push(c);
    }
    out
}

/// A region where both sides changed the base differently.
#[derive(Clone, Debug)]
struct Conflict3 {
    base: (usize, usize),
    ours: (usize, usize),
}

struct Merge3 {
    out: Vec<u8>,
    conflicts: Vec<Conflict3>,
}

fn push_lines(out: &mut Vec<u8>, lines: &[&[u8]]) {
    for l in lines {
        out.extend_from_slice(l);
    }
}

fn push_marked(out: &mut Vec<u8>, marker: &str, lines: &[&[u8]]) {
    if !out.is_empty() && !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    out.extend_from_slice(marker.as_bytes());
    out.push(b'\n');
    push_lines(out, lines);
}

fn slice_lines<'x>(v: &[&'x [u8]], a: isize, b: isize) -> Vec<&'x [u8]> {
    let (a, b) = (a.max(0) as usize, b.max(0) as usize);
    v.get(a..b).map(|s| s.to_vec()).unwrap_or_default()
}

/// Line-based 3-way merge of `ours` and `theirs` against `base`. Changes from both sides that
/// overlap or touch are conflicts unless identical. With `markers`, conflicts are written
/// diff3-style into the output; otherwise the output holds our side there.
fn merge3(base: &[&[u8]], ours: &[&[u8]], theirs: &[&[u8]], markers: bool) -> Merge3 {
    let co = chunks(base, ours);
    let ct = chunks(base, theirs);
    let mut all: Vec<(bool, Chunk)> = co
        .iter()
        .map(|c| (true, *c))
        .chain(ct.iter().map(|c| (false, *c)))
        .collect();
    all.sort_by_key(|(is_ours, c)| (c.b0, c.b1, !*is_ours));
    let mut out = Vec::new();
    let mut conflicts = Vec::new();
    let (mut prev, mut off_o, mut off_t) = (0usize, 0isize, 0isize);
    let mut i = 0;
    while i < all.len() {
        let lo = all[i].1.b0;
        let mut hi = all[i].1.b1;
        let mut j = i + 1;
        while j < all.len() && all[j].1.b0 <= hi {
            hi = hi.max(all[j].1.b1);
            j += 1;
        }
        let members = &all[i..j];
        push_lines(&mut out, base.get(prev..lo).unwrap_or(&[]));
        let delta = |want_ours: bool| -> (bool, isize) {
            let mut any = false;
            let mut d = 0isize;
            for (is_ours, c) in members {
                if *is_ours == want_ours {
                    any = true;
                    d += (c.s1 - c.s0) as isize - (c.b1 - c.b0) as isize;
                }
            }
            (any, d)
        };
        let (has_o, d_o) = delta(true);
        let (has_t, d_t) = delta(false);
        let (o_lo, o_hi) = (lo as isize + off_o, hi as isize + off_o + d_o);
        let (t_lo, t_hi) = (lo as isize + off_t, hi as isize + off_t + d_t);
        let o_lines = slice_lines(ours, o_lo, o_hi);
        let t_lines = slice_lines(theirs, t_lo, t_hi);
        if has_o && !has_t {
            push_lines(&mut out, &o_lines);
        } else if has_t && !has_o {
            push_lines(&mut out, &t_lines);
        } else if o_lines == t_lines {
            push_lines(&mut out, &o_lines);
        } else {
            conflicts.push(Conflict3 {
                base: (lo, hi),
                ours: (o_lo.max(0) as usize, o_hi.max(0) as usize),
            });
            if markers {
                push_marked(&mut out, "<<<<<<< project", &o_lines);
                push_marked(
                    &mut out,
                    "||||||| pre-image",
                    base.get(lo..hi).unwrap_or(&[]),
                );
                push_marked(&mut out, "=======", &t_lines);
                push_marked(&mut out, ">>>>>>> patch", &[]);
            } else {
                push_lines(&mut out, &o_lines);
            }
        }
        off_o += d_o;
        off_t += d_t;
        prev = hi;
        i = j;
    }
    push_lines(&mut out, base.get(prev..).unwrap_or(&[]));
    Merge3 { out, conflicts }
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

/// File contents, shared between the planner's views of a file and the write phase: a
/// large file is held once, not once per view.
pub(crate) type Data = Arc<Vec<u8>>;

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

/// What the write phase must make of one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Absent,
    File {
        data: Data,
        perm: u32,
        mtime: Option<(i64, i64)>,
    },
    Symlink {
        target: Vec<u8>,
        mtime: Option<(i64, i64)>,
    },
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
    usable_oid(o).map(|o| blob_id_hex(data).starts_with(o))
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
    /// directory (see [`contained::check_with`]).
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
        contained::check_with(&self.root, rel, &|a| syms.contains(a), &|a| {
            gone.contains(a)
        })
    }

    /// The chokepoint for a path the patch only reads or removes (a deletion, the source of a
    /// rename or copy): symlinks the patch creates later do not matter for it.
    fn checked_source(&self, rel: &RelPath) -> Result<ProjectPath> {
        let gone = &self.gone_symlinks;
        contained::check_with(&self.root, rel, &|_| false, &|a| gone.contains(a))
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
                contained::read(&self.checked_source(rel)?)?
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
                VState::File { data, .. } => blob_id_hex(&data).starts_with(ln),
                VState::Symlink(t) => blob_id_hex(&t).starts_with(ln),
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
                let pp = contained::check_with(&self.root, &anc, &|_| false, &|_| false);
                if let Ok(pp) = pp {
                    if matches!(contained::read(&pp)?, Entry::Symlink { .. }) {
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
            return Some(blob_id_hex(data).starts_with(&h));
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
        match contained::read_in(dir, rel) {
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
                let leaves = contained::list_leaves(&pp)?;
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

// ------------------------------------------------------------------------------------------
// The write phase: stage, verify, move aside, place; roll back on failure
// ------------------------------------------------------------------------------------------

mod txn {
    use super::contained::{self, ProjectPath, Stamp};
    use super::Target;
    use crate::error::{Error, Result};
    use crate::fs::relpath::RelPath;
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    /// One path to change.
    pub(crate) struct TxOp {
        pub path: ProjectPath,
        /// What must be there at write time (`None`: nothing).
        pub expect: Option<Stamp>,
        /// True when a directory is there now (it must be emptied by other ops).
        pub before_is_dir: bool,
        pub after: Target,
    }

    /// Which directories to remove once they are empty.
    pub(crate) enum Prune {
        /// Parents emptied by removals (what `git apply` does).
        EmptiedParents,
        /// Only these (undo: the directories the apply created).
        Only(BTreeSet<RelPath>),
    }

    /// What the write phase did to directories, for the undo record.
    #[derive(Default)]
    pub(crate) struct CommitLog {
        pub created_dirs: Vec<RelPath>,
        pub removed_dirs: Vec<(RelPath, u32, (i64, i64))>,
        pub warnings: Vec<String>,
    }

    enum Step {
        StageDir(ProjectPath),
        Staged(ProjectPath),
        Moved { from: ProjectPath, to: ProjectPath },
        RemovedDir { path: ProjectPath, perm: u32 },
        CreatedDir(ProjectPath),
        Placed(ProjectPath),
    }

    fn is_dir_mode(mode: u32) -> bool {
        mode & 0o170000 == 0o040000
    }

    fn depth(r: &RelPath) -> usize {
        r.as_path().components().count()
    }

    fn ancestors(r: &RelPath) -> Vec<RelPath> {
        let mut out = Vec::new();
        let mut a = r.parent();
        while let Some(p) = a {
            a = p.parent();
            out.push(p);
        }
        out.reverse();
        out
    }

    fn sub(stage: &RelPath, name: String) -> Result<RelPath> {
        Ok(stage.join(&RelPath::new(name)?))
    }

    /// For a write phase without an undo record. A record writer returns the stamp each op
    /// must find at write time (keeping an original by a hard link changes its ctime).
    pub(crate) const NO_RECORD: Option<fn() -> Stamps> = None;

    /// The stamp each op must find at write time.
    pub(crate) type Stamps = Result<Vec<Option<Stamp>>>;

    /// Records a completed write step (and injects test failures).
    type Tick<'t> = dyn FnMut(&mut Vec<Step>, Option<Step>) -> Result<()> + 't;

    /// Runs the write phase for `ops`. `record`, if any, runs on a second thread while the
    /// new contents are staged, and must succeed before anything in the project is replaced.
    /// On error the journal is rolled back and directory mtimes restored; the error says
    /// whether the rollback was complete.
    pub(crate) fn commit<F>(
        root: &Path,
        ops: &[TxOp],
        prune: &Prune,
        dir_restore: &BTreeMap<RelPath, (u32, (i64, i64))>,
        fail_after: Option<usize>,
        record: Option<F>,
    ) -> Result<CommitLog>
    where
        F: FnOnce() -> Stamps + Send,
    {
        let none = |_: &RelPath| false;
        // The write phase walks the project afresh: nothing opened while planning is reused.
        let _scope = contained::DirScope::enter(root)?;
        let stage_rel = RelPath::new(format!(".patchbox-txn-{}", ulid::Ulid::new()))?;
        let stage = contained::check(root, &stage_rel, &none)?;

        // Directory mtimes to restore if we roll back.
        let root_mtime = contained::root_stamp(root)?.mtime;
        let mut dirs: BTreeSet<RelPath> = BTreeSet::new();
        for op in ops {
            dirs.extend(ancestors(op.path.rel()));
            if op.before_is_dir {
                dirs.insert(op.path.rel().clone());
            }
        }
        let mut dir_mtimes = Vec::new();
        for d in &dirs {
            // Below a symlink that an op replaces by a directory there is nothing yet.
            let stamped =
                contained::check(root, d, &none).and_then(|p| Ok((contained::stamp(&p)?, p)));
            match stamped {
                Ok((Some(st), p)) if is_dir_mode(st.mode) => dir_mtimes.push((p, st.mtime)),
                Ok(_) | Err(Error::Containment { .. }) => {}
                Err(e) => return Err(e),
            }
        }

        let mut journal: Vec<Step> = Vec::new();
        let mut log = CommitLog::default();
        let result = run(
            root,
            ops,
            prune,
            dir_restore,
            fail_after,
            &stage,
            &stage_rel,
            &mut journal,
            &mut log,
            record,
        );
        match result {
            Ok(()) => {
                // Clean up the staging directory: only backups are left in it.
                for step in journal.iter().rev() {
                    if let Step::Moved { to, .. } = step {
                        if let Err(e) = contained::remove_file(to) {
                            log.warnings.push(format!("cannot remove backup: {e}"));
                        }
                    }
                }
                match contained::remove_dir_if_empty(&stage) {
                    Ok(true) => {}
                    Ok(false) => log.warnings.push(format!(
                        "staging directory {} is not empty; remove it by hand",
                        stage.to_path_buf().display()
                    )),
                    Err(e) => log
                        .warnings
                        .push(format!("cannot remove staging directory: {e}")),
                }
                let _ = contained::sync_root(root);
                Ok(log)
            }
            Err(e) => {
                let mut failures = Vec::new();
                for step in journal.iter().rev() {
                    let r = match step {
                        Step::Placed(p) => contained::remove_file(p),
                        Step::CreatedDir(p) => contained::remove_dir_if_empty(p).map(|_| ()),
                        Step::RemovedDir { path, perm } => contained::make_dir(path, Some(*perm)),
                        Step::Moved { from, to } => contained::rename_noreplace(to, from),
                        Step::Staged(p) => match contained::remove_file(p) {
                            Err(Error::Io { source, .. })
                                if source.kind() == std::io::ErrorKind::NotFound =>
                            {
                                Ok(())
                            }
                            r => r,
                        },
                        Step::StageDir(p) => match contained::remove_dir_if_empty(p) {
                            Ok(true) => Ok(()),
                            Ok(false) => Err(Error::ApplyFailed(format!(
                                "staging directory {} kept: it still holds backups",
                                p.to_path_buf().display()
                            ))),
                            Err(e) => Err(e),
                        },
                    };
                    if let Err(re) = r {
                        failures.push(re.to_string());
                    }
                }
                for (p, t) in &dir_mtimes {
                    if let Err(re) = contained::set_mtime(p, *t) {
                        failures.push(re.to_string());
                    }
                }
                if let Err(re) = contained::set_root_mtime(root, root_mtime) {
                    failures.push(re.to_string());
                }
                let _ = contained::sync_root(root);
                if failures.is_empty() {
                    Err(e)
                } else {
                    Err(Error::ApplyFailed(format!(
                        "{e}; ROLLBACK INCOMPLETE: {}",
                        failures.join("; ")
                    )))
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run<F>(
        root: &Path,
        ops: &[TxOp],
        prune: &Prune,
        dir_restore: &BTreeMap<RelPath, (u32, (i64, i64))>,
        fail_after: Option<usize>,
        stage: &ProjectPath,
        stage_rel: &RelPath,
        journal: &mut Vec<Step>,
        log: &mut CommitLog,
        record: Option<F>,
    ) -> Result<()>
    where
        F: FnOnce() -> Stamps + Send,
    {
        let mut steps = 0usize;
        // Records a completed step; the fault injection for tests fails after the n-th one.
        let mut tick = |journal: &mut Vec<Step>, s: Option<Step>| -> Result<()> {
            journal.extend(s);
            steps += 1;
            if fail_after.is_some_and(|n| steps >= n) {
                return Err(Error::ApplyFailed(format!(
                    "injected failure after {steps} steps"
                )));
            }
            Ok(())
        };

        // 1. Stage new contents (and write the undo record alongside).
        contained::make_dir(stage, Some(0o700))?;
        tick(journal, Some(Step::StageDir(stage.clone())))?;
        let mut staged: Vec<Option<ProjectPath>> = Vec::with_capacity(ops.len());
        let (staging, recorded) = std::thread::scope(|scope| {
            let recorder = record.map(|r| scope.spawn(r));
            let staging = stage_all(root, ops, stage_rel, journal, &mut staged, &mut tick);
            let recorded = recorder.map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::ApplyFailed(
                        "writing the undo record panicked".into(),
                    ))
                })
            });
            (staging, recorded)
        });
        staging?;
        let expect: Vec<Option<Stamp>> = match recorded {
            Some(stamps) => stamps?,
            None => ops.iter().map(|op| op.expect).collect(),
        };
        contained::sync_fs(root)?;

        // 2. Nothing changed since the check.
        for (op, expect) in ops.iter().zip(&expect) {
            let now = match contained::stamp(&op.path) {
                // Below a symlink that another op replaces by a directory: nothing there yet.
                // (Should the link survive, placing the file below refuses.)
                Err(Error::Containment { .. }) if expect.is_none() => None,
                r => r?,
            };
            if now != *expect {
                return Err(Error::ApplyFailed(format!(
                    "{} changed while the patch was being applied; nothing was changed",
                    op.path.rel()
                )));
            }
        }
        stage_rest(
            root,
            ops,
            prune,
            dir_restore,
            stage_rel,
            journal,
            log,
            &staged,
            &mut tick,
        )
    }

    /// Writes each op's new contents into the staging directory.
    fn stage_all(
        root: &Path,
        ops: &[TxOp],
        stage_rel: &RelPath,
        journal: &mut Vec<Step>,
        staged: &mut Vec<Option<ProjectPath>>,
        tick: &mut Tick<'_>,
    ) -> Result<()> {
        let none = |_: &RelPath| false;
        for (i, op) in ops.iter().enumerate() {
            let s = match &op.after {
                Target::Absent => None,
                Target::File { data, perm, mtime } => {
                    let p = contained::check(root, &sub(stage_rel, format!("s{i}"))?, &none)?;
                    // Journal first: a half-written staged file is removed on rollback.
                    journal.push(Step::Staged(p.clone()));
                    contained::create_file(&p, data, *perm, *mtime)?;
                    tick(journal, None)?;
                    Some(p)
                }
                Target::Symlink { target, mtime } => {
                    let p = contained::check(root, &sub(stage_rel, format!("s{i}"))?, &none)?;
                    journal.push(Step::Staged(p.clone()));
                    contained::create_symlink(&p, target)?;
                    if let Some(t) = mtime {
                        contained::set_mtime(&p, *t)?;
                    }
                    tick(journal, None)?;
                    Some(p)
                }
            };
            staged.push(s);
        }
        Ok(())
    }

    /// Steps 3 to 7: move originals aside, prune and create directories, place, sync.
    #[allow(clippy::too_many_arguments)]
    fn stage_rest(
        root: &Path,
        ops: &[TxOp],
        prune: &Prune,
        dir_restore: &BTreeMap<RelPath, (u32, (i64, i64))>,
        stage_rel: &RelPath,
        journal: &mut Vec<Step>,
        log: &mut CommitLog,
        staged: &[Option<ProjectPath>],
        tick: &mut Tick<'_>,
    ) -> Result<()> {
        let none = |_: &RelPath| false;
        // 3. Move what is replaced or deleted aside (deepest first).
        let mut order: Vec<usize> = (0..ops.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(depth(ops[i].path.rel())));
        let mut removed: Vec<RelPath> = Vec::new();
        for &i in &order {
            let op = &ops[i];
            if op.expect.is_some() && !op.before_is_dir {
                let b = contained::check(root, &sub(stage_rel, format!("b{i}"))?, &none)?;
                contained::rename_noreplace(&op.path, &b)?;
                tick(
                    journal,
                    Some(Step::Moved {
                        from: op.path.clone(),
                        to: b,
                    }),
                )?;
                removed.push(op.path.rel().clone());
            }
        }

        // 4. Remove directories that became empty (never an ancestor of something we place).
        let mut keep: BTreeSet<RelPath> = BTreeSet::new();
        for op in ops {
            if !matches!(op.after, Target::Absent) {
                keep.extend(ancestors(op.path.rel()));
            }
        }
        let mut candidates: BTreeSet<(usize, RelPath)> = BTreeSet::new();
        for r in &removed {
            if let Some(p) = r.parent() {
                candidates.insert((depth(&p), p));
            }
        }
        for op in ops {
            if op.before_is_dir {
                let r = op.path.rel().clone();
                candidates.insert((depth(&r), r));
            }
        }
        if let Prune::Only(set) = prune {
            for d in set {
                candidates.insert((depth(d), d.clone()));
            }
        }
        while let Some(last) = candidates.iter().next_back().cloned() {
            candidates.remove(&last);
            let (_, d) = last;
            if keep.contains(&d) {
                continue;
            }
            let forced = ops.iter().any(|o| o.before_is_dir && o.path.rel() == &d);
            let allowed = match prune {
                Prune::EmptiedParents => true,
                Prune::Only(set) => set.contains(&d),
            };
            if !allowed && !forced {
                continue;
            }
            let p = contained::check(root, &d, &none)?;
            let Some(st) = contained::stamp(&p)? else {
                continue;
            };
            if !is_dir_mode(st.mode) {
                continue;
            }
            if contained::remove_dir_if_empty(&p)? {
                log.removed_dirs
                    .push((d.clone(), st.mode & 0o7777, st.mtime));
                tick(
                    journal,
                    Some(Step::RemovedDir {
                        path: p,
                        perm: st.mode & 0o7777,
                    }),
                )?;
                if matches!(prune, Prune::EmptiedParents) {
                    if let Some(pp) = d.parent() {
                        candidates.insert((depth(&pp), pp));
                    }
                }
            }
        }

        // 5. Create missing parent directories (shallowest first).
        let mut created: Vec<ProjectPath> = Vec::new();
        for op in ops {
            if matches!(op.after, Target::Absent) {
                continue;
            }
            for a in ancestors(op.path.rel()) {
                let p = contained::check(root, &a, &none)?;
                match contained::stamp(&p)? {
                    None => {
                        let perm = dir_restore.get(&a).map(|(perm, _)| *perm);
                        contained::make_dir(&p, perm)?;
                        log.created_dirs.push(a.clone());
                        created.push(p.clone());
                        tick(journal, Some(Step::CreatedDir(p)))?;
                    }
                    Some(st) if is_dir_mode(st.mode) => {}
                    Some(_) => {
                        return Err(Error::ApplyFailed(format!("{a} is not a directory")));
                    }
                }
            }
        }

        // 6. Place the new contents.
        for (i, op) in ops.iter().enumerate() {
            if let Some(Some(s)) = staged.get(i) {
                // Re-check the target's parents right before writing.
                let target = contained::check(root, op.path.rel(), &none)?;
                contained::rename_noreplace(s, &target)?;
                tick(journal, Some(Step::Placed(target)))?;
            }
        }

        // 7. Restore recorded directory mtimes (undo) and sync.
        for p in &created {
            if let Some((_, t)) = dir_restore.get(p.rel()) {
                contained::set_mtime(p, *t)?;
            }
        }
        // One filesystem sync makes every rename and directory change durable: one journal
        // commit instead of one `fsync` per changed directory.
        contained::sync_fs(root)?;
        Ok(())
    }
}

// ------------------------------------------------------------------------------------------
// Undo records
// ------------------------------------------------------------------------------------------

mod undo {
    //! Layout of an undo directory:
    //!
    //! ```text
    //! record          text: header, then one line per changed path and directory
    //! blobs/<n>       original contents of replaced files
    //! undone          present once the record has been used
    //! ```
    //!
    //! Record lines (paths and link targets hex-encoded, so any bytes survive):
    //!
    //! ```text
    //! patchbox-undo 1
    //! project <hex path>
    //! entry <hex path> <before> <after>
    //!     before: absent | dir | link:<hex target>:<mtime s>:<mtime ns>
    //!             | file:<perm octal>:<mtime s>:<mtime ns>:<blob n>
    //!     after:  absent | link:<hex target> | file:<perm octal>:<sha1 of contents>
    //! mkdir <hex path>
    //! rmdir <hex path> <perm octal> <mtime s> <mtime ns>
    //! ```

    use super::contained::{self, Entry};
    use super::txn::{self, CommitLog, Prune, TxOp};
    use super::{PlanOp, Target, UndoReport};
    use crate::error::{Error, IoContext, Result};
    use crate::fs::relpath::RelPath;
    use crate::git::oid::{blob_id_hex, from_hex as unhex, to_hex as hex};
    use std::collections::{BTreeMap, BTreeSet};
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    const HEADER: &str = "patchbox-undo 1";

    fn bad(dir: &Path, why: &str) -> Error {
        Error::ApplyFailed(format!("undo record {}: {why}", dir.display()))
    }

    fn write_synced(path: &Path, data: &[u8]) -> Result<()> {
        let mut f = std::fs::File::create(path).ctx("create", path)?;
        f.write_all(data).ctx("write", path)?;
        f.sync_all().ctx("sync", path)
    }

    /// Writes the record for `ops` (before the write phase). Returns each op's stamp as the
    /// write phase must find it: a file kept by a hard link has a new ctime.
    pub(super) fn write_record(
        dir: &Path,
        root: &Path,
        ops: &[PlanOp],
    ) -> Result<Vec<Option<contained::Stamp>>> {
        if dir.exists() {
            let mut it =
                std::fs::read_dir(dir).map_err(|e| Error::io("read undo directory", dir, e))?;
            if it.next().is_some() {
                return Err(bad(dir, "directory exists and is not empty"));
            }
        }
        let blobs = dir.join("blobs");
        std::fs::create_dir_all(&blobs)
            .map_err(|e| Error::io("create undo directory", &blobs, e))?;
        let mut text = format!("{HEADER}\nproject {}\n", hex(root.as_os_str().as_bytes()));
        let mut stamps = Vec::with_capacity(ops.len());
        let mut copied = false;
        for (n, op) in ops.iter().enumerate() {
            stamps.push(op.before.stamp());
            let before = match &op.before {
                Entry::Absent => "absent".to_string(),
                Entry::Dir { .. } => "dir".to_string(),
                Entry::Other { .. } => return Err(bad(dir, "cannot record a special file")),
                Entry::Symlink { target, stamp } => {
                    format!("link:{}:{}:{}", hex(target), stamp.mtime.0, stamp.mtime.1)
                }
                Entry::File { data, perm, stamp } => {
                    let blob = blobs.join(n.to_string());
                    match keep_original(root, op, stamp, &blob)? {
                        Some(now) => stamps[n] = Some(now),
                        None => {
                            write_plain(&blob, data)?;
                            copied = true;
                        }
                    }
                    format!("file:{perm:o}:{}:{}:{n}", stamp.mtime.0, stamp.mtime.1)
                }
            };
            let after = match &op.after {
                Target::Absent => "absent".to_string(),
                Target::Symlink { target, .. } => format!("link:{}", hex(target)),
                Target::File { data, perm, .. } => format!("file:{perm:o}:{}", blob_id_hex(data)),
            };
            text.push_str(&format!(
                "entry {} {before} {after}\n",
                hex(op.rel.as_bytes())
            ));
        }
        let tmp = dir.join("record.tmp");
        write_plain(&tmp, text.as_bytes())?;
        let rec = dir.join("record");
        std::fs::rename(&tmp, &rec).map_err(|e| Error::io("rename", &rec, e))?;
        // The record must be durable before the project changes. On the project's own
        // filesystem the write phase's sync (after staging, before any original is touched)
        // covers it; elsewhere one sync of that filesystem does.
        let same_fs = std::fs::metadata(dir)
            .ok()
            .zip(std::fs::metadata(root).ok())
            .is_some_and(|(a, b)| a.dev() == b.dev());
        if !same_fs || copied {
            contained::sync_fs(dir)?;
        }
        Ok(stamps)
    }

    /// Keeps the original of a replaced file in the record by hard-linking it (no copy):
    /// the apply puts a new file in its place and never writes the old one. Only a file with
    /// no other links is shared that way (an edit through another link would change the
    /// record). Returns the file's stamp after linking, or `None` when it must be copied.
    fn keep_original(
        root: &Path,
        op: &PlanOp,
        before: &contained::Stamp,
        blob: &Path,
    ) -> Result<Option<contained::Stamp>> {
        let p = contained::check(root, &op.rel, &|_| false)?;
        let Some((now, links)) = contained::link_out(&p, blob)? else {
            return Ok(None);
        };
        let same = now.dev == before.dev
            && now.ino == before.ino
            && now.mode == before.mode
            && now.size == before.size
            && now.mtime == before.mtime;
        if !same || links != 2 {
            // Replaced, edited or linked elsewhere since it was read: the write phase would
            // refuse it anyway.
            std::fs::remove_file(blob).map_err(|e| Error::io("remove", blob, e))?;
            return Err(Error::ApplyFailed(format!(
                "{} changed while the patch was being applied; nothing was changed",
                op.rel
            )));
        }
        Ok(Some(now))
    }

    fn write_plain(path: &Path, data: &[u8]) -> Result<()> {
        std::fs::write(path, data).map_err(|e| Error::io("write", path, e))
    }

    /// Appends the directory changes made by the write phase.
    pub(super) fn append_dirs(dir: &Path, log: &CommitLog) -> Result<()> {
        let rec = dir.join("record");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&rec)
            .map_err(|e| Error::io("open", &rec, e))?;
        let mut text = String::new();
        for d in &log.created_dirs {
            text.push_str(&format!("mkdir {}\n", hex(d.as_bytes())));
        }
        for (d, perm, t) in &log.removed_dirs {
            text.push_str(&format!(
                "rmdir {} {perm:o} {} {}\n",
                hex(d.as_bytes()),
                t.0,
                t.1
            ));
        }
        f.write_all(text.as_bytes())
            .map_err(|e| Error::io("write", &rec, e))?;
        f.sync_all().map_err(|e| Error::io("sync", &rec, e))
    }

    enum Before {
        Absent,
        Dir,
        Link(Vec<u8>, (i64, i64)),
        File {
            perm: u32,
            mtime: (i64, i64),
            blob: usize,
        },
    }

    enum After {
        Absent,
        Link(Vec<u8>),
        File { perm: u32, sha1: String },
    }

    struct Record {
        project: Vec<u8>,
        entries: Vec<(RelPath, Before, After)>,
        mkdirs: BTreeSet<RelPath>,
        rmdirs: BTreeMap<RelPath, (u32, (i64, i64))>,
    }

    fn parse(dir: &Path, text: &str) -> Result<Record> {
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err(bad(dir, "not an undo record"));
        }
        let project = lines
            .next()
            .and_then(|l| l.strip_prefix("project "))
            .and_then(unhex)
            .ok_or_else(|| bad(dir, "missing project line"))?;
        let mut rec = Record {
            project,
            entries: Vec::new(),
            mkdirs: BTreeSet::new(),
            rmdirs: BTreeMap::new(),
        };
        let path = |s: &str| -> Result<RelPath> {
            let b = unhex(s).ok_or_else(|| bad(dir, "bad path"))?;
            RelPath::from_bytes(&b)
        };
        let num = |s: &str| s.parse::<i64>().map_err(|_| bad(dir, "bad number"));
        let perm = |s: &str| u32::from_str_radix(s, 8).map_err(|_| bad(dir, "bad mode"));
        for line in lines {
            let f: Vec<&str> = line.split(' ').collect();
            match f.as_slice() {
                ["entry", p, before, after] => {
                    let b: Vec<&str> = before.split(':').collect();
                    let before = match b.as_slice() {
                        ["absent"] => Before::Absent,
                        ["dir"] => Before::Dir,
                        ["link", t, s, ns] => Before::Link(
                            unhex(t).ok_or_else(|| bad(dir, "bad link"))?,
                            (num(s)?, num(ns)?),
                        ),
                        ["file", m, s, ns, blob] => Before::File {
                            perm: perm(m)?,
                            mtime: (num(s)?, num(ns)?),
                            blob: blob.parse().map_err(|_| bad(dir, "bad blob"))?,
                        },
                        _ => return Err(bad(dir, "bad entry")),
                    };
                    let a: Vec<&str> = after.split(':').collect();
                    let after = match a.as_slice() {
                        ["absent"] => After::Absent,
                        ["link", t] => After::Link(unhex(t).ok_or_else(|| bad(dir, "bad link"))?),
                        ["file", m, sha] => After::File {
                            perm: perm(m)?,
                            sha1: sha.to_string(),
                        },
                        _ => return Err(bad(dir, "bad entry")),
                    };
                    rec.entries.push((path(p)?, before, after));
                }
                ["mkdir", p] => {
                    rec.mkdirs.insert(path(p)?);
                }
                ["rmdir", p, m, s, ns] => {
                    rec.rmdirs.insert(path(p)?, (perm(m)?, (num(s)?, num(ns)?)));
                }
                [""] => {}
                _ => return Err(bad(dir, "unknown line")),
            }
        }
        Ok(rec)
    }

    fn matches_after(cur: &Entry, after: &After) -> bool {
        match (cur, after) {
            (Entry::Absent, After::Absent) => true,
            (Entry::Symlink { target, .. }, After::Link(t)) => target == t,
            (Entry::File { data, perm, .. }, After::File { perm: p, sha1 }) => {
                perm == p && blob_id_hex(data) == *sha1
            }
            _ => false,
        }
    }

    pub(super) fn undo(project_dir: &Path, dir: &Path, force: bool) -> Result<UndoReport> {
        let root = super::project_root(project_dir)?;
        let rec_path = dir.join("record");
        let text =
            std::fs::read(&rec_path).map_err(|e| Error::io("read undo record", &rec_path, e))?;
        let text = String::from_utf8(text).map_err(|_| bad(dir, "not text"))?;
        let rec = parse(dir, &text)?;
        if dir.join("undone").exists() {
            return Ok(UndoReport {
                already_undone: true,
                ..UndoReport::default()
            });
        }
        if rec.project != root.as_os_str().as_bytes() && !force {
            return Err(bad(dir, "it was made for another project directory"));
        }
        let none = |_: &RelPath| false;
        let planning = contained::DirScope::enter(&root)?;
        // Paths the undo removes: a symlink among them may have a directory restored in its
        // place (the apply turned a directory into a symlink).
        let removed: BTreeSet<RelPath> = rec
            .entries
            .iter()
            .filter(|(_, b, _)| matches!(b, Before::Absent | Before::Dir))
            .map(|(r, _, _)| r.clone())
            .collect();
        let gone = |a: &RelPath| removed.contains(a);
        let mut report = UndoReport::default();
        let mut ops = Vec::new();
        let mut changed = Vec::new();
        for (rel, before, after) in &rec.entries {
            let p = contained::check_with(&root, rel, &none, &gone)?;
            let below_removed_link = {
                let mut a = rel.parent();
                let mut hit = false;
                while let Some(anc) = a {
                    if removed.contains(&anc) {
                        let ap = contained::check(&root, &anc, &none)?;
                        hit |= matches!(contained::read(&ap)?, Entry::Symlink { .. });
                    }
                    a = anc.parent();
                }
                hit
            };
            let cur = if below_removed_link {
                Entry::Absent
            } else {
                contained::read(&p)?
            };
            // A directory the apply created where this path's old file or link was: it goes
            // once the restored entries below it are gone.
            let created_dir = matches!(cur, Entry::Dir { .. })
                && matches!(after, After::Absent)
                && rec.mkdirs.contains(rel);
            if !created_dir && !matches_after(&cur, after) {
                changed.push(rel.clone());
            }
            let target = match before {
                Before::Absent | Before::Dir => Target::Absent,
                Before::Link(t, mtime) => Target::Symlink {
                    target: t.clone(),
                    mtime: Some(*mtime),
                },
                Before::File { perm, mtime, blob } => {
                    let bp = dir.join("blobs").join(blob.to_string());
                    let data =
                        std::fs::read(&bp).map_err(|e| Error::io("read undo blob", &bp, e))?;
                    Target::File {
                        data: super::Arc::new(data),
                        perm: *perm,
                        mtime: Some(*mtime),
                    }
                }
            };
            if matches!(target, Target::Absent) && matches!(cur, Entry::Absent) {
                report.restored.push(rel.clone());
                continue;
            }
            if !created_dir && matches!(cur, Entry::Dir { .. } | Entry::Other { .. }) {
                return Err(Error::ApplyFailed(format!(
                    "cannot undo: {rel} is now a directory or special file"
                )));
            }
            ops.push(TxOp {
                path: p,
                expect: cur.stamp(),
                before_is_dir: created_dir,
                after: target,
            });
            report.restored.push(rel.clone());
        }
        if !changed.is_empty() {
            if !force {
                let names: Vec<String> = changed.iter().map(|p| p.to_string()).collect();
                return Err(Error::ApplyFailed(format!(
                    "cannot undo: changed since the apply: {} (use force to overwrite)",
                    names.join(", ")
                )));
            }
            report.overwritten = changed;
        }
        drop(planning);
        if !ops.is_empty() {
            txn::commit(
                &root,
                &ops,
                &Prune::Only(rec.mkdirs.clone()),
                &rec.rmdirs,
                None,
                txn::NO_RECORD,
            )?;
        }
        let marker = dir.join("undone");
        write_synced(&marker, b"")?;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ls(s: &str) -> Vec<&[u8]> {
        split_lines(s.as_bytes())
    }

    #[test]
    fn merge_non_overlapping() {
        let base = ls("a\nb\nc\nd\ne\nf\ng\n");
        let ours = ls("A\nb\nc\nd\ne\nf\ng\n");
        let theirs = ls("a\nb\nc\nd\ne\nf\nG\n");
        let m = merge3(&base, &ours, &theirs, false);
        assert!(m.conflicts.is_empty());
        assert_eq!(m.out, b"A\nb\nc\nd\ne\nf\nG\n");
    }

    #[test]
    fn merge_overlapping() {
        let base = ls("a\nb\nc\n");
        let ours = ls("a\nB1\nc\n");
        let theirs = ls("a\nB2\nc\n");
        let m = merge3(&base, &ours, &theirs, true);
        assert_eq!(m.conflicts.len(), 1);
        let s = String::from_utf8(m.out).unwrap();
        assert!(
            s.contains("<<<<<<< project\nB1\n||||||| pre-image\nb\n=======\nB2\n>>>>>>> patch\n"),
            "{s}"
        );
    }

    #[test]
    fn merge_same_change() {
        let base = ls("a\nb\nc\n");
        let both = ls("a\nX\nc\n");
        let m = merge3(&base, &both, &both, false);
        assert!(m.conflicts.is_empty());
        assert_eq!(m.out, b"a\nX\nc\n");
    }

    #[test]
    fn escapes() {
        let r = RelPath::new("a/b/link").unwrap();
        assert!(!symlink_escapes(&r, b"../x"));
        assert!(!symlink_escapes(&r, b"../../x"));
        assert!(symlink_escapes(&r, b"../../../x"));
        assert!(symlink_escapes(&r, b"/etc/passwd"));
        assert!(!symlink_escapes(&r, b"c/../../d"));
    }

    /// A parent directory swapped for a symlink after the check: every write helper walks
    /// the path again with `O_NOFOLLOW` and refuses.
    #[test]
    fn swapped_parent_is_refused_at_write_time() {
        let project = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = project.path();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("d/old"), b"old").unwrap();
        let x = path_in_project(root, &RelPath::new("d/x").unwrap()).unwrap();
        let old = path_in_project(root, &RelPath::new("d/old").unwrap()).unwrap();
        let top = path_in_project(root, &RelPath::new("top").unwrap()).unwrap();
        std::fs::rename(root.join("d"), root.join("d.real")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("d")).unwrap();
        std::fs::write(outside.path().join("old"), b"outside").unwrap();

        let is_containment = |r: Result<()>| matches!(r, Err(Error::Containment { .. }));
        assert!(is_containment(contained::create_file(
            &x, b"pwned", 0o644, None
        )));
        assert!(is_containment(contained::create_symlink(&x, b"/etc")));
        assert!(is_containment(contained::make_dir(&x, None)));
        assert!(is_containment(contained::remove_file(&old)));
        assert!(is_containment(contained::set_mtime(&old, (0, 0))));
        assert!(is_containment(contained::rename_noreplace(&old, &top)));
        std::fs::write(root.join("top"), b"top").unwrap();
        assert!(is_containment(contained::rename_noreplace(&top, &x)));
        assert!(matches!(
            contained::read(&old),
            Err(Error::Containment { .. })
        ));
        let names: Vec<_> = std::fs::read_dir(outside.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from("old")]);
        assert_eq!(
            std::fs::read(outside.path().join("old")).unwrap(),
            b"outside"
        );
        // The chokepoint itself now refuses the path too.
        assert!(path_in_project(root, &RelPath::new("d/x").unwrap()).is_err());
    }

    #[test]
    fn hunks_at_offsets_and_anchors() {
        let h = |old_start, old_len, lines: &[(LineKind, &str)]| Hunk {
            old_start,
            old_len,
            new_start: old_start,
            new_len: 0,
            section: Vec::new(),
            lines: lines
                .iter()
                .map(|(k, t)| crate::patch::parse::HunkLine {
                    kind: *k,
                    text: t.as_bytes().to_vec(),
                })
                .collect(),
            line: 1,
        };
        use LineKind::*;
        // Context "b", "c"; change "c" -> "C"; expected at line 2, found at line 4.
        let hunk = h(
            2,
            3,
            &[
                (Context, "b\n"),
                (Delete, "c\n"),
                (Insert, "C\n"),
                (Context, "d\n"),
            ],
        );
        let cur = ls("x\ny\na\nb\nc\nd\n");
        let p = apply_hunks(&cur, std::slice::from_ref(&hunk), false, true).unwrap();
        assert_eq!(p.out, b"x\ny\na\nb\nC\nd\n");
        assert_eq!(p.offsets, [2]);
        assert!(apply_hunks(&cur, std::slice::from_ref(&hunk), false, false).is_err());
        // No leading context at line 1: must match at the top.
        let top = h(1, 1, &[(Delete, "b\n"), (Insert, "B\n")]);
        assert!(apply_hunks(&ls("a\nb\n"), std::slice::from_ref(&top), false, true).is_err());
        // No trailing context: must match at the end.
        let end = h(1, 2, &[(Context, "a\n"), (Delete, "b\n")]);
        assert!(apply_hunks(&ls("a\nb\nc\n"), std::slice::from_ref(&end), false, true).is_err());
        assert_eq!(
            apply_hunks(&ls("z\na\nb\n"), std::slice::from_ref(&end), false, true)
                .unwrap()
                .out,
            b"z\na\n"
        );
    }

    #[test]
    fn perms() {
        assert_eq!(perm_for(Some(0o644), Some(0o100644), Some(0o100755)), 0o755);
        assert_eq!(perm_for(Some(0o755), Some(0o100755), Some(0o100644)), 0o644);
        assert_eq!(perm_for(Some(0o600), Some(0o100644), Some(0o100644)), 0o600);
        assert_eq!(perm_for(None, None, Some(0o100755)), 0o755);
    }
}
