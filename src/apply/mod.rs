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
//!    stops after the plan. The same holds across a crash (kill -9, power loss): a
//!    write-ahead journal in the staging directory, durable before the first original moves,
//!    lets [`recover_project`] — run first by every apply and undo, and by
//!    `patchbox recover` — complete the change or roll it back, so the project ends exactly
//!    before or exactly after it, with no staging directory left (the state machine is in
//!    `src/apply/journal.rs`). Applies and undos of one project are serialized by an
//!    exclusive `flock` on its root directory (nothing is written into the project for
//!    it); those through the [`store`] also hold the store's lock on the project from the
//!    choice of the undo record to its end, so its records sort in the order the applies
//!    landed.
//! 2. **Drift is handled, never guessed past.** Each text file is tried in this order: its
//!    contents already equal the patch's result (by the `index` line blob id, or the patched
//!    pre-image) → *already applied*; exact context at the stated lines or at an offset (the
//!    nearest match, like `git apply`/`patch`; hunks are anchored to the start or end of the
//!    file as git anchors them, so a hunk without context lines is never placed at a
//!    look-alike line) → *applied*; the patch reverses exactly at its stated lines →
//!    *already applied*; a 3-way merge of the pre-image (from [`ApplyOptions::preimages`],
//!    checked against the `index` line when it has one), the project file and the patched
//!    pre-image → *merged* if the edits do not overlap, *conflict* (with the hunks involved)
//!    if they do. A conflict refuses the whole patch unless [`ApplyOptions::conflict_markers`]
//!    asks for conflict markers to be written. Binary files and symlinks are applied only onto
//!    exactly the contents the patch expects. A deletion that carries no contents (no hunk,
//!    no binary data: a patch cut off after its `index` line, say) removes only an empty
//!    file; a file with contents is refused, as git refuses it ("removal patch leaves file
//!    contents"), whatever blob id the `index` line names. Applying a patch a second time
//!    changes nothing and reports *already applied* (creations find the file, deletions find
//!    it gone, renames find the target; in a series of patches of the same file, linked by
//!    their `index` lines, the earlier ones are recognised once the last one is applied).
//! 3. **Nothing outside the project.** Paths are [`RelPath`]s (no `..`, not absolute) by
//!    construction of the parser, which also refuses what git's `verify_path` refuses (`.`
//!    components, names ending with `/`, `b//abs` stripped to the absolute `/abs`); on top of
//!    that any component named `.git` or read as `.git` by NTFS or HFS+ (`.git.`, `.git `,
//!    `GIT~1`, `.g\u{200c}it`, …) is refused, and so are symlinks named `.gitmodules`, file
//!    patches that change a file's type (git writes those as a deletion and a creation),
//!    paths with a component the library reserves for its own files in a project (its
//!    staging directories, `.patchbox-txn-*`, on either side of a rename or copy too),
//!    and any path whose parent chain contains a symlink, in the project or created by the
//!    same patch (a symlink in the project that the same patch deletes or renames away counts
//!    as a directory to create: git's "symlink becomes a directory"). The only way to name a
//!    file for writing is a [`ProjectPath`], which only [`path_in_project`] builds, and every
//!    write helper reaches the parent directory one component at a time from the project root
//!    with `O_NOFOLLOW`, so a symlink swapped in after the check still cannot redirect a
//!    write. (Each directory is opened once per phase and its descriptor reused, at most
//!    256 kept open; the write phase opens everything afresh instead of trusting what
//!    planning opened.) Planning costs time proportional to the patch and the files it
//!    touches, whatever the depth of their paths. In the write phase the directories above
//!    the paths it writes are listed once each (the paths sorted, each compared with the
//!    one before, never every ancestor looked up in a set), and the journal and the undo
//!    record write such lists one path relative to the line before; what still grows with
//!    a directory's depth is the work on that directory itself (its path copied, and
//!    checked and walked by the chokepoint, for each one created). A symlink
//!    at the path itself is replaced, never written through. New symlinks must point
//!    inside the project unless [`ApplyOptions::allow_outside_symlinks`] is set.
//! 4. **Undoable.** With [`ApplyOptions::undo_dir`] the apply records the original contents,
//!    modes and mtimes of everything it replaced and the list of what it created;
//!    [`undo_apply`] restores them (atomically too), refusing if the files changed since,
//!    unless forced. The record keeps an original by a hard link when it can (same
//!    filesystem, no other link to the file: the apply puts a new file in its place and never
//!    writes the old one), else by a copy; it is written on a second thread while the new
//!    contents are staged, and is on disk before anything in the project is replaced. Undo
//!    restores the mtimes of the directories too. An apply that fails removes only what it
//!    wrote to the undo directory (the directory itself only if it created it). The
//!    [`store`] keeps records under a sandbox root (list, undo the last, drop, prune).
//!
//! Durability costs two filesystem syncs per apply, not one per file: after the journal's
//! intent (which makes the staged files durable with it, so a crash never leaves a torn file
//! in place of an original; their writeback is started as each is staged) and after the
//! renames (which also covers the undo record's `applied` marker when the record is on the
//! project's filesystem; elsewhere the marker and its directory get an `fsync`). Each new
//! file's blob id is computed once, by the undo record's writer, for the record and the
//! journal alike. (One `syncfs` was measured against `fsync` of the 100 staged files and
//! their directory on this project's Linux-tree benchmark: the `fsync`s, one device flush
//! each, took 3–13× longer, from one thread or four.) The plan layer's `commit_all` leaves
//! the second sync of each of its applies to one sync per filesystem at its end (a
//! crate-internal `Deferred` apply: its change in place, its journal at INTENT, its
//! project still locked).
//!
//! A patch can also be checked now and written later without planning it again
//! ([`check_patch`], [`CheckedApply`]): the plan is reused only while every path it read
//! still carries the same stat data.
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
//! [`RelPath`]: crate::fs::RelPath
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fs::project;
use crate::patch::model::Patch;
use crate::patch::parse::parse_patch_strip;

mod change;
mod fault;
mod finish;
mod journal;
mod path_order;
mod place;
mod recover;
mod report;
mod resolver;
mod stage;
pub mod store;
mod txn;
mod undo;
mod undo_dir;

pub(crate) use finish::{Defer, IntentHook, SharedSync};
use journal::project_root;
pub use report::{
    ApplyOptions, ApplyReport, FileReport, FileStatus, HunkConflict, Outcome, RecoveredTxn,
    RecoveryAction, RecoveryReport, UndoReport,
};
use resolver::Planner;

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
    if let Some(pre) = &opts.preimages {
        check_preimages(pre)?;
    }
    if opts.check {
        return Ok(plan_checked(&root, patch, opts)?.0);
    }
    // A write holds the project lock from before the recovery to the end of the write phase:
    // what is planned is what recovery left, and no other apply runs meanwhile.
    let _lock = journal::ProjectLock::acquire(&root)?;
    let recovery = recover::recover_locked(&root)?;
    Ok(write_planned(&root, patch, opts, recovery, Defer::No)?.0)
}

/// Plans and writes `patch` (the project locked and recovered; `recovery` goes into the
/// report). With `defer`, the write phase's last sync and cleanup are left to the caller
/// (see [`write_plan`]).
fn write_planned(
    root: &Path,
    patch: &Patch,
    opts: &ApplyOptions,
    recovery: RecoveryReport,
    defer: Defer,
) -> Result<(ApplyReport, Option<finish::Unfinished>)> {
    if let Some(undo) = &opts.undo_dir {
        undo::check_usable(undo)?;
    }
    let (mut report, plan) = plan(root, patch, opts)?;
    report.recovery = recovery;
    match plan {
        Some(plan) => write_plan(root, report, plan, opts, defer),
        None => Ok((report, None)),
    }
}

/// Check mode: the plan, and a warning when an interrupted apply or undo is pending (check
/// mode neither waits for the lock nor recovers).
fn plan_checked(
    root: &Path,
    patch: &Patch,
    opts: &ApplyOptions,
) -> Result<(ApplyReport, Option<Plan>)> {
    let pending = recover::pending(root)?;
    let (mut report, plan) = plan(root, patch, opts)?;
    if !pending.is_empty() {
        report.warnings.push(format!(
            "an interrupted apply or undo is pending in {} ({}); the next apply, undo or \
             `patchbox recover` completes or rolls it back",
            root.display(),
            pending.join(", ")
        ));
    }
    Ok((report, plan))
}

/// What the write phase needs of a plan, and what proves the plan still holds.
struct Plan {
    ops: Vec<resolver::PlanOp>,
    gone_symlinks: crate::fs::relpath::RelPathSet,
    /// Every project path the planner read, with its stamp then (`None`: nothing there).
    read: Vec<(crate::fs::RelPath, Option<project::Stamp>)>,
}

/// Plans `patch` (nothing written). The report, and the plan when the outcome is to write
/// something.
fn plan(root: &Path, patch: &Patch, opts: &ApplyOptions) -> Result<(ApplyReport, Option<Plan>)> {
    let _planning = project::DirScope::enter(root)?;
    let mut planner = Planner::new(root.to_path_buf(), opts, patch);
    planner.plan()?;
    let outcome = planner.outcome();
    let mut report = ApplyReport {
        files: std::mem::take(&mut planner.reports),
        outcome,
        check_only: opts.check,
        undo_dir: None,
        warnings: Vec::new(),
        recovery: RecoveryReport::default(),
    };
    if !matches!(outcome, Outcome::Applied | Outcome::AppliedWithConflicts) {
        return Ok((report, None));
    }
    // Computed in check mode too: file patches that cancel out (a deletion and a rename
    // putting the file back) change nothing, and check mode must predict that outcome.
    let ops = planner.ops()?;
    if ops.is_empty() {
        report.outcome = Outcome::AlreadyApplied;
        return Ok((report, None));
    }
    let read = planner.read_stamps();
    Ok((
        report,
        Some(Plan {
            ops,
            gone_symlinks: std::mem::take(&mut planner.gone_symlinks),
            read,
        }),
    ))
}

/// Whether every path `plan` read still carries the stamp it had: then planning again would
/// read the same entries and give the same plan.
fn still_holds(root: &Path, plan: &Plan) -> Result<bool> {
    let _scope = project::DirScope::enter(root)?;
    for (rel, then) in &plan.read {
        let now = match project::check_sets(root, rel, None, Some(&plan.gone_symlinks))
            .and_then(|p| project::stamp(&p))
        {
            Ok(s) => s,
            // Below a symlink (the planner found nothing there either, or a link appeared).
            Err(Error::Containment { .. }) => None,
            Err(e) => return Err(e),
        };
        if now != *then {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The write phase for `plan` (the project locked): the undo record on a second thread while
/// the new contents are staged, then the transaction. With `defer` it returns once the
/// change is in place, before the last sync: the caller finishes the returned transaction
/// while still holding the project lock.
fn write_plan(
    root: &Path,
    mut report: ApplyReport,
    plan: Plan,
    opts: &ApplyOptions,
    defer: Defer,
) -> Result<(ApplyReport, Option<finish::Unfinished>)> {
    report.check_only = false;
    let ops = plan.ops;
    let tx_ops: Vec<txn::TxOp> = {
        let _scope = project::DirScope::enter(root)?;
        ops.iter()
            .map(|op| -> Result<txn::TxOp> {
                Ok(txn::TxOp {
                    path: project::check_sets(root, &op.rel, None, Some(&plan.gone_symlinks))?,
                    expect: op.before.stamp(),
                    before_is_dir: matches!(op.before, project::Entry::Dir { .. }),
                    after: op.after.clone(),
                })
            })
            .collect::<Result<_>>()?
    };
    // The undo record is written on another thread while the new contents are staged; both
    // are on disk before the first original is touched. Only a directory the library
    // creates is removed if the apply does not happen.
    let finish = finish::Finish {
        marker: opts.undo_dir.as_ref().map(|u| u.join("applied")),
        finals: Vec::new(),
        record: opts.undo_dir.as_ref().map(|u| {
            let created = std::fs::symlink_metadata(u).is_err();
            (u.clone(), created)
        }),
        defer,
    };
    let record = opts
        .undo_dir
        .as_deref()
        .map(|undo| |dirs: &journal::Dirs| undo::write_record(undo, root, &ops, dirs));
    let log = txn::commit(
        root,
        &tx_ops,
        &change::Prune::EmptiedParents,
        &BTreeMap::new(),
        fault::Fault::from_options(opts),
        record,
        &finish,
    )?;
    report.undo_dir = opts.undo_dir.clone();
    report.warnings.extend(log.warnings);
    Ok((report, log.unfinished))
}

/// A patch checked against a project by [`check_patch`], kept so that
/// [`CheckedApply::apply`] can write it later without planning it again: what the plan
/// layer's `commit_all` does, checking every sandbox of a plan before writing any.
///
/// The kept plan is written only while it is provably what planning again would give:
/// every path of the project it read (the files patched, and every other path it looked at)
/// must still carry the stat data it had (device, inode, mode, size, mtime and ctime, to
/// the nanosecond), no interrupted apply may have been recovered since, and the options
/// that shape a plan (strip, pre-images, conflict markers, outside symlinks) must be the
/// same. Otherwise the patch is planned again, exactly as [`apply_parsed`] would. The
/// pre-images are read at check time and must not change until the write (the plan
/// layer's are immutable snapshots). The write phase then re-checks every path it
/// writes right before writing, as always.
///
/// ```
/// use patchbox::apply::{check_patch, ApplyOptions, Outcome};
/// let project = tempfile::tempdir().unwrap();
/// std::fs::write(project.path().join("a.txt"), "one\n").unwrap();
/// let patch = b"--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n";
/// let checked = check_patch(project.path(), patch, &ApplyOptions::default()).unwrap();
/// assert_eq!(checked.report().outcome, Outcome::Applied);
/// assert_eq!(std::fs::read(project.path().join("a.txt")).unwrap(), b"one\n");
/// let written = checked.apply(&ApplyOptions::default()).unwrap();
/// assert!(written.wrote());
/// assert_eq!(std::fs::read(project.path().join("a.txt")).unwrap(), b"two\n");
/// ```
pub struct CheckedApply {
    root: PathBuf,
    patch: Patch,
    /// The options of the check.
    opts: ApplyOptions,
    report: ApplyReport,
    plan: Option<Plan>,
}

/// Parses `patch` and checks it against `project_dir` as [`apply_patch`] in check mode does
/// (nothing is written, whatever `opts.check` says), keeping the plan for
/// [`CheckedApply::apply`].
pub fn check_patch(
    project_dir: impl AsRef<Path>,
    patch: &[u8],
    opts: &ApplyOptions,
) -> Result<CheckedApply> {
    let patch = parse_patch_strip(patch, opts.strip)?;
    let root = project_root(project_dir.as_ref())?;
    if let Some(pre) = &opts.preimages {
        check_preimages(pre)?;
    }
    let opts = ApplyOptions {
        check: true,
        ..opts.clone()
    };
    let (report, plan) = plan_checked(&root, &patch, &opts)?;
    Ok(CheckedApply {
        root,
        patch,
        opts,
        report,
        plan,
    })
}

impl CheckedApply {
    /// The check's report (as [`apply_patch`] in check mode gives it).
    pub fn report(&self) -> &ApplyReport {
        &self.report
    }

    /// The project the patch was checked against (canonical).
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Writes the checked patch with `opts` (its `check` is ignored: this writes), reusing
    /// the checked plan when it still holds (see the [type docs](CheckedApply)) and planning
    /// again otherwise. Returns what [`apply_parsed`] returns.
    pub fn apply(self, opts: &ApplyOptions) -> Result<ApplyReport> {
        let (mut report, deferred) = self.apply_with(opts, Defer::No)?;
        if let Some(d) = deferred {
            report.warnings.extend(d.finish(false)?);
        }
        Ok(report)
    }

    /// [`CheckedApply::apply`] that, unless `defer` is [`Defer::No`], returns once the
    /// change is in place and leaves its last sync and cleanup to the caller
    /// ([`Deferred`]), still holding the project lock.
    pub(crate) fn apply_with(
        self,
        opts: &ApplyOptions,
        defer: Defer,
    ) -> Result<(ApplyReport, Option<Deferred>)> {
        let opts = ApplyOptions {
            check: false,
            ..opts.clone()
        };
        let same_opts = opts.strip == self.opts.strip
            && opts.preimages == self.opts.preimages
            && opts.conflict_markers == self.opts.conflict_markers
            && opts.allow_outside_symlinks == self.opts.allow_outside_symlinks;
        if let Some(pre) = &opts.preimages {
            check_preimages(pre)?;
        }
        let root = self.root;
        let lock = journal::ProjectLock::acquire(&root)?;
        let recovery = recover::recover_locked(&root)?;
        let (report, unfinished) = match self.plan {
            Some(plan) if same_opts && recovery.recovered.is_empty() => {
                if still_holds(&root, &plan)? {
                    if let Some(undo) = &opts.undo_dir {
                        undo::check_usable(undo)?;
                    }
                    let mut report = self.report;
                    report.recovery = recovery;
                    report.warnings.clear();
                    write_plan(&root, report, plan, &opts, defer)?
                } else {
                    write_planned(&root, &self.patch, &opts, recovery, defer)?
                }
            }
            // Nothing to write then: plan again (the project may have changed since).
            _ => write_planned(&root, &self.patch, &opts, recovery, defer)?,
        };
        Ok((report, unfinished.map(|txn| Deferred { txn, _lock: lock })))
    }
}

/// An apply whose change is in place but not yet durable, with the project lock it still
/// holds (from [`CheckedApply::apply_with`]): its journal is at INTENT, so a crash before
/// [`Deferred::finish`] is recovered by completing it. A batch of applies to projects on
/// one filesystem syncs it once, then finishes each with `synced`. Dropped unfinished, it
/// syncs and finishes.
pub(crate) struct Deferred {
    // Field order: the transaction finishes (on drop too) before the lock is released.
    txn: finish::Unfinished,
    _lock: journal::ProjectLock,
}

impl Deferred {
    /// The project root (canonical).
    pub(crate) fn root(&self) -> &Path {
        self.txn.root()
    }

    /// Makes the change durable (its filesystem synced unless `synced`: the caller synced it
    /// after this apply's last rename), marks it done and cleans up; returns the cleanup's
    /// warnings. A failed sync is an error; the change then stays in place, its journal at
    /// INTENT, for the next recovery to complete.
    pub(crate) fn finish(self, synced: bool) -> Result<Vec<String>> {
        self.txn.finish(synced)
    }

    /// Syncs the filesystem of each project of `batch` once, then finishes every apply of
    /// it. Returns the warnings, or the first error (every apply is finished or left at
    /// INTENT, never half done).
    ///
    /// The applies are of different projects, so once their filesystems are synced they
    /// complete (mark done, remove what was moved aside) on up to
    /// `available_parallelism` threads at once: the cleanup is a hundred `unlink`s per
    /// hundred files, the last step before `commit_all` returns.
    pub(crate) fn finish_all(batch: Vec<Deferred>) -> Result<Vec<String>> {
        use std::os::unix::fs::MetadataExt;
        let mut synced: Vec<u64> = Vec::new();
        let mut warnings = Vec::new();
        let mut first_err = None;
        let mut ready = Vec::with_capacity(batch.len());
        for d in batch {
            let dev = std::fs::metadata(d.root())
                .map_err(|e| Error::io("inspect", d.root(), e))
                .map(|m| m.dev());
            match dev {
                Ok(dev) if synced.contains(&dev) => ready.push(d),
                Ok(dev) => {
                    // The first of its filesystem: this sync covers every apply of it.
                    if crate::fs::project::sync_fs(d.root()).is_ok() {
                        synced.push(dev);
                        ready.push(d);
                    } else {
                        // Tried again by its own finish, which reports the error.
                        match d.finish(false) {
                            Ok(w) => warnings.extend(w),
                            Err(e) => {
                                first_err.get_or_insert(e);
                            }
                        }
                    }
                }
                // Dropped: it finishes on its own (a sync, then its cleanup).
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        // Each finish is taken by whichever worker is free (this thread is one); a panic
        // in one is that change's error, the others finish.
        let threads = crate::cores::count().min(ready.len());
        let queue = parking_lot::Mutex::new(ready.into_iter().enumerate().collect::<Vec<_>>());
        let mut done: Vec<(usize, Result<Vec<String>>)> = crate::cores::workers(threads, || {
            let mut out = Vec::new();
            loop {
                let Some((k, d)) = queue.lock().pop() else {
                    return out;
                };
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| d.finish(true)))
                    .unwrap_or_else(|_| {
                        Err(Error::ApplyFailed(
                            "finishing a change panicked; the next recovery completes it".into(),
                        ))
                    });
                out.push((k, r));
            }
        })
        .into_iter()
        .flatten()
        .collect();
        // Warnings and the first error in the order of the applies, whoever finished them.
        done.sort_unstable_by_key(|(k, _)| *k);
        let done = done.into_iter().map(|(_, r)| r);
        for r in done {
            match r {
                Ok(w) => warnings.extend(w),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(warnings), Err)
    }
}

/// Finishes or rolls back every apply or undo interrupted in `project_dir` (a crash, a
/// kill -9, a power loss), so the project is exactly as before or exactly as after each of
/// them, with no staging directory left. [`apply_patch`], [`apply_parsed`] (except in check
/// mode) and [`undo_apply`] call it first; call it yourself to tidy a project at startup.
///
/// A transaction whose intent was durable is completed (its undo record then works); one
/// that had not got that far, or whose completion is impossible because a path changed
/// since, is rolled back (its undo record removed). See the `journal` state machine in the
/// [module docs](self) and the crate's `apply/journal.rs`. Waits for the project lock if an
/// apply is running.
///
/// ```
/// use patchbox::apply::recover_project;
/// let project = tempfile::tempdir().unwrap();
/// std::fs::create_dir(project.path().join(".patchbox-txn-01J0000000000000000000000")).unwrap();
/// let r = recover_project(project.path()).unwrap();
/// assert_eq!(r.recovered.len(), 1);
/// assert_eq!(std::fs::read_dir(project.path()).unwrap().count(), 0);
/// ```
pub fn recover_project(project_dir: impl AsRef<Path>) -> Result<RecoveryReport> {
    let root = project_root(project_dir.as_ref())?;
    let _lock = journal::ProjectLock::acquire(&root)?;
    recover::recover_locked(&root)
}

/// A `preimages` directory must exist: a mistyped path must not silently disable merging.
fn check_preimages(dir: &Path) -> Result<()> {
    let md = std::fs::metadata(dir).map_err(|e| Error::io("open pre-image directory", dir, e))?;
    if !md.is_dir() {
        return Err(Error::io(
            "open pre-image directory",
            dir,
            std::io::Error::from_raw_os_error(libc::ENOTDIR),
        ));
    }
    Ok(())
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
