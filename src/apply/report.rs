//! What an apply is asked to do ([`ApplyOptions`]) and what it answers ([`ApplyReport`],
//! [`UndoReport`]).
//!
//! The invariant these types carry: a conflict or a refusal is data, reported per file in
//! patch order, never an `Err`; [`Outcome`] alone says whether anything was (or, in check
//! mode, would be) written, and [`Outcome::Refused`] always means nothing was. Their
//! `Display` impls are the human-readable summary the CLI and the C++ bridge show.

use std::fmt;
use std::path::PathBuf;

use crate::fs::relpath::RelPath;

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
    /// Where to record what the apply replaced, for [`undo_apply`](super::undo_apply). Must
    /// not exist yet or be an empty directory. Nothing is recorded when nothing is written.
    pub undo_dir: Option<PathBuf>,
    /// Leading path components to strip from patch names (`-p`); 1 for `a/` and `b/`.
    pub strip: usize,
    /// Allow the patch to create symlinks that point outside the project (absolute targets
    /// or too many `..`). Off by default: such a symlink is refused.
    pub allow_outside_symlinks: bool,
    /// Testing aid (feature `fault-injection`): make the write phase fail after this many
    /// file system steps, to exercise the rollback.
    #[cfg(feature = "fault-injection")]
    #[doc(hidden)]
    pub fail_after_steps: Option<usize>,
    /// Testing aid (feature `fault-injection`): make the write phase stop dead after this
    /// many steps, leaving what a kill -9 would leave (nothing rolled back), for
    /// [`recover_project`](super::recover_project).
    #[cfg(feature = "fault-injection")]
    #[doc(hidden)]
    pub crash_after_steps: Option<usize>,
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
            #[cfg(feature = "fault-injection")]
            fail_after_steps: None,
            #[cfg(feature = "fault-injection")]
            crash_after_steps: None,
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

/// The result of [`apply_patch`](super::apply_patch): one [`FileReport`] per file patch, in
/// patch order.
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
    /// Non-fatal notes (e.g. a staging directory that could not be cleaned up, an interrupted
    /// apply found in check mode).
    pub warnings: Vec<String>,
    /// What the recovery run before the apply found: interrupted applies or undos it rolled
    /// forward or back (empty almost always; always empty in check mode).
    pub recovery: RecoveryReport,
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
        if !self.recovery.is_empty() {
            writeln!(f, "{}", self.recovery)?;
        }
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

/// The result of [`undo_apply`](super::undo_apply).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UndoReport {
    /// Paths restored to their state before the apply.
    pub restored: Vec<RelPath>,
    /// Paths that had changed since the apply and were overwritten anyway (`force`).
    pub overwritten: Vec<RelPath>,
    /// The record had already been used; nothing was done.
    pub already_undone: bool,
    /// Non-fatal notes (e.g. a staging directory that could not be cleaned up).
    pub warnings: Vec<String>,
    /// What the recovery run before the undo found (see [`ApplyReport::recovery`]).
    pub recovery: RecoveryReport,
}

/// What recovery did to one interrupted transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryAction {
    /// It had not reached its intent (or was failing): the project is as before it.
    RolledBack,
    /// Its intent was durable: recovery completed it.
    RolledForward,
    /// It was complete; only its staging directory was left to remove.
    CleanedUp,
}

/// One interrupted transaction found in the project.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveredTxn {
    /// The staging directory's name in the project root (`.patchbox-txn-…`).
    pub name: String,
    /// What was done.
    pub action: RecoveryAction,
}

/// The result of [`recover_project`](super::recover_project).
///
/// ```
/// let project = tempfile::tempdir().unwrap();
/// let r = patchbox::apply::recover_project(project.path()).unwrap();
/// assert!(r.is_empty());
/// assert_eq!(r.to_string(), "nothing to recover");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The interrupted transactions, in the order they were recovered.
    pub recovered: Vec<RecoveredTxn>,
    /// Non-fatal notes (e.g. an undo record that could not be marked complete).
    pub warnings: Vec<String>,
}

impl RecoveryReport {
    /// True when there was nothing to recover.
    pub fn is_empty(&self) -> bool {
        self.recovered.is_empty() && self.warnings.is_empty()
    }
}

impl fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("nothing to recover");
        }
        let mut first = true;
        for r in &self.recovered {
            if !first {
                writeln!(f)?;
            }
            first = false;
            let what = match r.action {
                RecoveryAction::RolledBack => "rolled back (the project is as before it)",
                RecoveryAction::RolledForward => "completed (the project is as after it)",
                RecoveryAction::CleanedUp => "was complete; cleaned up",
            };
            write!(f, "interrupted apply/undo {}: {what}", r.name)?;
        }
        for w in &self.warnings {
            if !first {
                writeln!(f)?;
            }
            first = false;
            write!(f, "warning: {w}")?;
        }
        Ok(())
    }
}
