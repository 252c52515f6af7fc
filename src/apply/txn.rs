//! The write phase: stage, verify, move aside, place; roll back on failure.
//!
//! It owns every change an apply or an undo makes to the project, and keeps the all-or-
//! nothing promise: new contents are first staged in a private directory inside the project
//! (same file system) and synced; then every path must still carry the stamp it had when
//! planned (as the undo record writer left it); only then are the originals moved aside into
//! the staging directory (a rename keeps their bytes, modes and mtimes) and the staged files
//! renamed into place; a file replaced in place by a staged one is swapped with it in one
//! `RENAME_EXCHANGE` instead, the original ending at the staged name (two renames where
//! the filesystem cannot exchange). Each completed step goes into an in-memory journal, and any failure
//! undoes it in reverse and restores directory mtimes, so the project ends as it was; the
//! error says when that rollback was incomplete. Every path it touches is a
//! [`ProjectPath`], re-checked right before the write, and the filesystem is synced twice
//! per commit (after the intent, after placing), not once per file; a caller may take the
//! second sync and the cleanup over ([`Finish::defer`], [`Unfinished`]) to share one sync
//! among several commits.
//!
//! Against crashes, the same steps are described on disk by the write-ahead journal of
//! [`journal`](super::journal) (its module doc has the state machine); [`roll_forward`]
//! and [`finish_cleanup`] are the pieces recovery shares with a normal commit.

use super::change::{sorted_paths, Prune, Target};
use super::fault::Fault;
use super::journal::{staged_matches, Begin, DirInfo, Dirs, Intent, JAfter, JOp, STAGE_PREFIX};
use crate::error::{Error, IoContext, Result};
use crate::fs::project::{self, ProjectPath, Stamp};
use crate::fs::relpath::RelPath;
use crate::git::oid::blob_id_hex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One path to change.
pub(crate) struct TxOp {
    pub path: ProjectPath,
    /// What must be there at write time (`None`: nothing).
    pub expect: Option<Stamp>,
    /// True when a directory is there now (it must be emptied by other ops).
    pub before_is_dir: bool,
    pub after: Target,
}

/// What the write phase has to say besides success.
#[derive(Default)]
pub(crate) struct CommitLog {
    pub warnings: Vec<String>,
    /// With [`Finish::defer`]: the transaction, its change in place, waiting for its last
    /// sync and cleanup.
    pub unfinished: Option<Unfinished>,
}

/// A transaction whose change is in place (every original moved aside, every new entry
/// placed, the undo record's marker created) but not yet made durable: its journal is still
/// at INTENT, so a crash before [`Unfinished::finish`] is recovered by rolling forward,
/// which finds everything placed. A batch of applies (`commit_all`) keeps these and syncs
/// each filesystem once for all of them instead of once per apply. The caller holds the
/// project lock until `finish` is over. Dropped unfinished, it is finished (synced) then.
pub(crate) struct Unfinished {
    root: PathBuf,
    stage: ProjectPath,
    stage_rel: RelPath,
    finals: Vec<(Option<RelPath>, (i64, i64))>,
    finished: bool,
}

impl Unfinished {
    /// The project root.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Makes the change durable (one `syncfs` of the project's filesystem, skipped when
    /// `synced` says the caller did it after this transaction's last rename), then marks
    /// it done and removes its staging directory. Cleanup failures are returned as
    /// warnings; a failed sync is an error and leaves the journal at INTENT (the change
    /// stays in place; the next apply's or undo's recovery completes it).
    pub(crate) fn finish(mut self, synced: bool) -> Result<Vec<String>> {
        self.finished = true;
        if !synced {
            project::sync_fs(&self.root)?;
        }
        let _scope = project::DirScope::enter(&self.root)?;
        let mut warnings = Vec::new();
        complete(
            &self.root,
            &self.stage,
            &self.stage_rel,
            &self.finals,
            &mut warnings,
        );
        Ok(warnings)
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if !self.finished {
            let me = Unfinished {
                root: self.root.clone(),
                stage: self.stage.clone(),
                stage_rel: self.stage_rel.clone(),
                finals: std::mem::take(&mut self.finals),
                finished: true,
            };
            let _ = me.finish(false);
        }
    }
}

/// Renames the intent to `done` (from here on recovery only cleans up), then removes the
/// staging directory ([`finish_cleanup`]). Failures become warnings: the change is durable.
fn complete(
    root: &Path,
    stage: &ProjectPath,
    stage_rel: &RelPath,
    finals: &[(Option<RelPath>, (i64, i64))],
    warnings: &mut Vec<String>,
) {
    let done = in_stage(root, stage_rel, "intent")
        .and_then(|i| project::rename_noreplace(&i, &in_stage(root, stage_rel, "done")?));
    match done {
        Ok(()) => finish_cleanup(root, stage, stage_rel, finals, warnings),
        Err(e) => warnings.push(format!(
            "the change is complete but cannot be marked so ({e}); the next apply or \
             `patchbox recover` removes {}",
            stage.to_path_buf().display()
        )),
    }
}

/// What a commit does around the change itself (kept in the journal, so recovery does it
/// too).
#[derive(Clone, Debug, Default)]
pub(crate) struct Finish {
    /// A file to create (synced) once the change is in place: the undo record's `applied`
    /// marker for an apply, its `undone` marker for an undo.
    pub marker: Option<PathBuf>,
    /// Mtimes to set once the staging directory is gone (`None`: the root); undo restores
    /// the directories' mtimes this way.
    pub finals: Vec<(Option<RelPath>, (i64, i64))>,
    /// The undo record being written (and whether the library created its directory): it is
    /// removed if the change is rolled back.
    pub record: Option<(PathBuf, bool)>,
    /// Whether the last sync and the cleanup are left to the caller (the commit then
    /// returns once the change is in place, with [`CommitLog::unfinished`] to finish), and
    /// what makes the intent durable.
    pub defer: Defer,
}

/// How a write phase ends (crate-internal: `commit_all`'s batch, see `plan::batch`).
#[derive(Clone, Debug, Default)]
pub(crate) enum Defer {
    /// Synced and finished before the commit returns.
    #[default]
    No,
    /// Returns once the change is in place, its last sync and cleanup left to the caller
    /// ([`Unfinished`]).
    Yes,
    /// As `Yes`, and the intent is made durable by a sync shared with other applies
    /// ([`SharedSync`]) instead of one of its own.
    Shared(IntentHook),
}

impl Defer {
    /// Whether the last sync and the cleanup are the caller's.
    fn is_deferred(&self) -> bool {
        !matches!(self, Defer::No)
    }
}

/// A sync shared by the write phases of several applies (`commit_all`): each calls
/// [`SharedSync::intent_written`] where it would sync its filesystem to make its intent
/// durable, and goes on to move originals only when that returns `Ok` — by then one sync
/// of each filesystem involved has covered every member's intent. An `Err` rolls the
/// transaction back (nothing of the project was touched yet).
pub(crate) trait SharedSync: Send + Sync {
    /// The intent of the transaction on `root` is written; returns once it is durable and
    /// this transaction may move originals, or with the reason it must not.
    fn intent_written(&self, root: &Path) -> Result<()>;

    /// The caller's change is in place (or there was nothing to change): whoever waits for
    /// it may go on. Called at most once, after `intent_written` returned `Ok`.
    fn placed(&self) {}
}

/// A [`SharedSync`] handed down to a write phase.
#[derive(Clone)]
pub(crate) struct IntentHook(pub std::sync::Arc<dyn SharedSync>);

impl std::fmt::Debug for IntentHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IntentHook")
    }
}

enum Step {
    StageDir(ProjectPath),
    Staged(ProjectPath),
    Intent,
    Moved {
        from: ProjectPath,
        to: ProjectPath,
    },
    RemovedDir {
        path: ProjectPath,
        perm: u32,
    },
    /// The directory made of the first `depth` components of `path` (the parent it was
    /// created for: one path shared by all the directories created above it).
    CreatedDir {
        path: Arc<ProjectPath>,
        depth: usize,
    },
    Placed(ProjectPath),
    /// The staged entry and the original swapped places (`RENAME_EXCHANGE`): the original is
    /// now at `staged`.
    Exchanged {
        path: ProjectPath,
        staged: ProjectPath,
    },
}

/// `.patchbox-txn-<ulid>.<root mtime s>.<ns>`.
fn stage_name(root_mtime: (i64, i64)) -> String {
    format!(
        "{STAGE_PREFIX}{}.{}.{}",
        crate::id::next(),
        root_mtime.0,
        root_mtime.1
    )
}

/// The root's mtime from a staging directory's name.
pub(crate) fn root_mtime_from_name(name: &str) -> Option<(i64, i64)> {
    let mut it = name.rsplitn(3, '.');
    let ns = it.next()?.parse().ok()?;
    let s = it.next()?.parse().ok()?;
    Some((s, ns))
}

fn is_dir_mode(mode: u32) -> bool {
    mode & 0o170000 == 0o040000
}

/// How many leading components `a` and `b` have in common (one pass over their bytes).
pub(crate) fn shared_components(a: &RelPath, b: &RelPath) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let c = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let slashes = a[..c].iter().filter(|&&x| x == b'/').count();
    let whole = |s: &[u8]| s.get(c).is_none_or(|&x| x == b'/');
    if c > 0 && whole(a) && whole(b) {
        slashes + 1
    } else {
        slashes
    }
}

/// Whether `dir` is a proper ancestor of `p`.
pub(crate) fn is_above(dir: &RelPath, p: &RelPath) -> bool {
    let (d, p) = (dir.as_bytes(), p.as_bytes());
    p.len() > d.len() && p.starts_with(d) && p[d.len()] == b'/'
}

/// Every directory above `paths` (each proper ancestor of each path), once each, in path
/// order (a directory before what is below it). The paths are sorted first; then the
/// directories a path shares with the path before it (by then listed) are skipped after
/// one comparison of their bytes, and only those below are listed, found from the path
/// upwards: whatever the depth of the paths, the listing costs time proportional to their
/// length plus the bytes of the directories it lists, never a lookup of every ancestor in
/// a set.
pub(crate) fn dirs_above<'a>(paths: impl IntoIterator<Item = &'a RelPath>) -> Vec<RelPath> {
    let mut sorted: Vec<&RelPath> = paths.into_iter().collect();
    sorted.sort_unstable();
    sorted.dedup_by(|a, b| a.as_bytes() == b.as_bytes());
    let mut out = Vec::new();
    let mut prev: Option<(&RelPath, usize)> = None;
    for p in sorted {
        let depth = p.depth();
        // Directories above `prev` are listed, and, the paths being sorted, no earlier
        // path shares more of `p` than `prev` does (a path sorts before those below it).
        let listed = prev.map_or(0, |(q, qd)| shared_components(q, p).min(qd - 1));
        let start = out.len();
        let mut a = p.parent();
        let mut d = depth.saturating_sub(1);
        while let Some(dir) = a {
            if d <= listed {
                break;
            }
            a = dir.parent();
            out.push(dir);
            d -= 1;
        }
        out[start..].reverse();
        prev = Some((p, depth));
    }
    out
}

/// `sorted` (in path order) holds a path below `dir`.
fn any_below(sorted: &[&RelPath], dir: &RelPath) -> bool {
    // What is below `dir` sorts right after `dir` itself.
    let i = sorted.partition_point(|p| *p <= dir);
    sorted.get(i).is_some_and(|p| is_above(dir, p))
}

/// The project chokepoint for a path of the write phase: no symlink the patch plans, none
/// it replaces (`check_sets` without sets costs one pass over the path; the predicate form
/// would also build every ancestor to ask about it).
pub(crate) fn checked(root: &Path, rel: &RelPath) -> Result<ProjectPath> {
    project::check_sets(root, rel, None, None)
}

fn sub(stage: &RelPath, name: String) -> Result<RelPath> {
    Ok(stage.join(&RelPath::new(name)?))
}

fn in_stage(root: &Path, stage: &RelPath, name: &str) -> Result<ProjectPath> {
    checked(root, &sub(stage, name.to_string())?)
}

fn ignore_missing(r: Result<()>) -> Result<()> {
    match r {
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

/// For a write phase without an undo record. A record writer returns the stamp each op
/// must find at write time (keeping an original by a hard link changes its ctime).
pub(crate) const NO_RECORD: Option<fn(&Dirs) -> Result<Recorded>> = None;

/// What an undo record writer tells the write phase, one entry per op.
pub(crate) struct Recorded {
    /// The stamp each op must find at write time.
    pub stamps: Vec<Option<Stamp>>,
    /// The blob id of each file op's new contents, which the record holds too: the
    /// journal's intent takes it from here instead of hashing the contents a second time.
    pub oids: Vec<Option<String>>,
}

/// Records a completed write step (and injects test failures).
type Tick<'t> = dyn FnMut(&mut Vec<Step>, Option<Step>) -> Result<()> + 't;

/// Runs the write phase for `ops`. `record`, if any, runs on a second thread while the
/// new contents are staged (given the directories' modes and mtimes before the change),
/// and must succeed before anything in the project is replaced. On error the journal is
/// rolled back and directory mtimes restored; the error says whether the rollback was
/// complete. The project must be locked ([`ProjectLock`](super::journal::ProjectLock)).
pub(crate) fn commit<F>(
    root: &Path,
    ops: &[TxOp],
    prune: &Prune,
    dir_restore: &BTreeMap<RelPath, (u32, (i64, i64))>,
    fault: Fault,
    record: Option<F>,
    finish: &Finish,
) -> Result<CommitLog>
where
    F: FnOnce(&Dirs) -> Result<Recorded> + Send,
{
    // The write phase walks the project afresh: nothing opened while planning is reused.
    let _scope = project::DirScope::enter(root)?;
    // Directory modes and mtimes to restore if we roll back (and for the undo record). The
    // root's is in the staging directory's name too: creating it changes the root's mtime
    // before `begin` can say what it was.
    let mut dirs = Dirs {
        root_mtime: project::root_stamp(root)?.mtime,
        dirs: Vec::new(),
    };
    let stage_rel = RelPath::new(stage_name(dirs.root_mtime))?;
    let stage = checked(root, &stage_rel)?;
    let mut wanted = dirs_above(ops.iter().map(|op| op.path.rel()));
    if ops.iter().any(|op| op.before_is_dir) {
        wanted.extend(
            ops.iter()
                .filter(|op| op.before_is_dir)
                .map(|op| op.path.rel().clone()),
        );
        // A run of sorted paths and a few more: sorted again in about one pass.
        wanted = sorted_paths(wanted);
    }
    let mut dir_mtimes = Vec::new();
    // Below a directory found missing nothing is there either: not looked at.
    let mut missing: Option<&RelPath> = None;
    for d in &wanted {
        if missing.is_some_and(|m| is_above(m, d)) {
            continue;
        }
        // Below a symlink that an op replaces by a directory there is nothing yet.
        let stamped = checked(root, d).and_then(|p| Ok((project::stamp(&p)?, p)));
        match stamped {
            Ok((None, _)) => missing = Some(d),
            Ok((Some(st), p)) if is_dir_mode(st.mode) => {
                dir_mtimes.push((p, st.mtime));
                dirs.dirs.push(DirInfo {
                    rel: d.clone(),
                    perm: st.mode & 0o7777,
                    mtime: st.mtime,
                });
            }
            Ok(_) | Err(Error::Containment { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let begin = Begin {
        dirs,
        record: finish.record.clone(),
    };

    let mut journal: Vec<Step> = Vec::new();
    let mut log = CommitLog::default();
    let crashed = std::cell::Cell::new(false);
    let result = run(
        root,
        ops,
        prune,
        dir_restore,
        fault,
        &crashed,
        &stage,
        &stage_rel,
        &mut journal,
        &begin,
        finish,
        record,
    );
    match result {
        Ok(()) if finish.defer.is_deferred() => {
            log.unfinished = Some(Unfinished {
                root: root.to_path_buf(),
                stage,
                stage_rel,
                finals: finish.finals.clone(),
                finished: false,
            });
            Ok(log)
        }
        Ok(()) => {
            // DONE: from here on recovery only cleans up.
            complete(root, &stage, &stage_rel, &finish.finals, &mut log.warnings);
            Ok(log)
        }
        Err(e) if crashed.get() => Err(e),
        Err(e) => {
            let failures = roll_back_journal(root, &stage_rel, &journal, &begin, &dir_mtimes);
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

/// Undoes the journal in reverse after a failure. Once the intent exists it is renamed to
/// `abort` first (a crash during the rollback is then finished by recovery), and removed
/// only once every earlier step is undone; if one cannot be, everything is left for the
/// next recovery. Returns the failures.
fn roll_back_journal(
    root: &Path,
    stage_rel: &RelPath,
    journal: &[Step],
    begin: &Begin,
    dir_mtimes: &[(ProjectPath, (i64, i64))],
) -> Vec<String> {
    let mut failures = Vec::new();
    if journal.iter().any(|s| matches!(s, Step::Intent)) {
        let aborted = in_stage(root, stage_rel, "intent").and_then(|i| {
            ignore_missing(project::rename_noreplace(
                &i,
                &in_stage(root, stage_rel, "abort")?,
            ))
        });
        if let Err(re) = aborted {
            failures.push(re.to_string());
        }
    }
    for step in journal.iter().rev() {
        let r = match step {
            Step::Placed(p) => project::remove_file(p),
            Step::Exchanged { path, staged } => match project::exchange(path, staged) {
                Ok(true) => Ok(()),
                Ok(false) => Err(Error::ApplyFailed(format!(
                    "cannot swap {} back",
                    path.to_path_buf().display()
                ))),
                Err(e) => Err(e),
            },
            Step::CreatedDir { path, depth } => match path.ancestor(*depth) {
                Some(p) => project::remove_dir_if_empty(&p).map(|_| ()),
                None => Ok(()),
            },
            Step::RemovedDir { path, perm } => project::make_dir(path, Some(*perm)),
            Step::Moved { from, to } => project::rename_noreplace(to, from),
            Step::Intent => {
                if !failures.is_empty() {
                    // Originals may still be aside: keep the journal for recovery.
                    return failures;
                }
                project::sync_fs(root).and_then(|()| {
                    for name in ["abort", "intent"] {
                        ignore_missing(project::remove_file(&in_stage(root, stage_rel, name)?))?;
                    }
                    Ok(())
                })
            }
            Step::Staged(p) => ignore_missing(project::remove_file(p)),
            Step::StageDir(p) => match project::remove_dir_if_empty(p) {
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
    if failures.is_empty() {
        if let Some((dir, created)) = &begin.record {
            if let Err(re) = super::undo_dir::discard_record(dir, *created) {
                failures.push(re.to_string());
            }
        }
    }
    for (p, t) in dir_mtimes {
        if let Err(re) = project::set_mtime(p, *t) {
            failures.push(re.to_string());
        }
    }
    if let Err(re) = project::set_root_mtime(root, begin.dirs.root_mtime) {
        failures.push(re.to_string());
    }
    let _ = project::sync_root(root);
    failures
}

/// Removes a complete transaction's staging directory (backups, journal; `done` last), then
/// sets the final mtimes. Failures become warnings: the change itself is complete.
pub(crate) fn finish_cleanup(
    root: &Path,
    stage: &ProjectPath,
    stage_rel: &RelPath,
    finals: &[(Option<RelPath>, (i64, i64))],
    warnings: &mut Vec<String>,
) {
    let done = sub(stage_rel, "done".into()).ok();
    match project::list_leaves(stage) {
        Ok(leaves) => {
            for l in leaves.iter().filter(|l| Some(*l) != done.as_ref()) {
                if let Err(e) = checked(root, l).and_then(|p| project::remove_file(&p)) {
                    warnings.push(format!("cannot remove backup: {e}"));
                }
            }
        }
        Err(e) => warnings.push(format!("cannot list the staging directory: {e}")),
    }
    if let Err(e) =
        in_stage(root, stage_rel, "done").and_then(|d| ignore_missing(project::remove_file(&d)))
    {
        warnings.push(format!("cannot remove the journal: {e}"));
    }
    match project::remove_dir_if_empty(stage) {
        Ok(true) => {}
        Ok(false) => warnings.push(format!(
            "staging directory {} is not empty; remove it by hand",
            stage.to_path_buf().display()
        )),
        Err(e) => warnings.push(format!("cannot remove staging directory: {e}")),
    }
    for (d, t) in finals {
        let r = match d {
            None => project::set_root_mtime(root, *t),
            Some(d) => checked(root, d).and_then(|p| match project::stamp(&p)? {
                Some(_) => project::set_mtime(&p, *t),
                None => Ok(()),
            }),
        };
        if let Err(e) = r {
            warnings.push(format!("cannot restore a directory's mtime: {e}"));
        }
    }
    // No sync here: the change was durable before `done` was written, and a crash that
    // loses this cleanup leaves the staging directory with its `done`, which recovery
    // removes (then sets the same mtimes). Syncing the root would make every apply wait for
    // one more journal commit (4–9 ms on a journaled ext4 image) for tidiness alone.
}

/// Writes a marker file outside the project. When it is on the project's filesystem it is
/// only created: the write phase's last `syncfs`, which follows, makes it durable with the
/// change. Elsewhere it is synced (file and directory) at once.
fn write_marker(path: &Path, root: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let f = std::fs::File::create(path).ctx("create", path)?;
    let dir = path.parent().unwrap_or(Path::new("/"));
    let here = std::fs::metadata(root).ctx("inspect", root)?.dev();
    if f.metadata().ctx("inspect", path)?.dev() == here {
        return Ok(());
    }
    f.sync_all().ctx("sync", path)?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .ctx("sync", dir)
}

/// Puts every swapped pair of a crashed transaction back in the shape of two renames: where
/// the staged entry of op `i` is at its path (its inode, as the intent records) while
/// another entry is at its staged name `s<i>` (the original, swapped there by step 6), the
/// original is renamed to `b<i>`, as if it had been moved aside and the staged entry placed.
/// Recovery then rolls forward or back exactly as it does after two renames. Idempotent: a
/// crash during it is recovered by running it again.
pub(crate) fn unswap(root: &Path, stage_rel: &RelPath, intent: &Intent) -> Result<()> {
    let none = |_: &RelPath| false;
    let gone = intent.replaced_paths();
    for (i, op) in intent.ops.iter().enumerate() {
        let Some(ino) = op.after.ino() else { continue };
        if op.expect.is_none() || op.before_is_dir {
            continue;
        }
        let s = in_stage(root, stage_rel, &format!("s{i}"))?;
        match project::stamp(&s)? {
            Some(st) if st.ino != ino => {}
            _ => continue,
        };
        let b = in_stage(root, stage_rel, &format!("b{i}"))?;
        if project::stamp(&b)?.is_some() {
            continue;
        }
        let Ok(p) = project::check_with(root, &op.rel, &none, &|a| gone.contains(a)) else {
            continue;
        };
        if matches!(project::stamp(&p), Ok(Some(st)) if st.ino == ino) {
            project::rename_noreplace(&s, &b)?;
        }
    }
    Ok(())
}

/// Completes a transaction whose intent is durable (recovery). Checks first that every op
/// can complete (staged contents intact, originals not yet moved still as recorded), so a
/// failure leaves the project as the crash did, for a rollback.
pub(crate) fn roll_forward(
    root: &Path,
    _stage: &ProjectPath,
    stage_rel: &RelPath,
    intent: &Intent,
) -> Result<()> {
    unswap(root, stage_rel, intent)?;
    let none = |_: &RelPath| false;
    let gone = intent.replaced_paths();
    let mut rest = Vec::with_capacity(intent.ops.len());
    let mut staged = Vec::with_capacity(intent.ops.len());
    for (i, op) in intent.ops.iter().enumerate() {
        let p = project::check_with(root, &op.rel, &none, &|a| gone.contains(a))?;
        let now = match project::stamp(&p) {
            Err(Error::Containment { .. }) => None,
            r => r?,
        };
        let s = in_stage(root, stage_rel, &format!("s{i}"))?;
        let b = in_stage(root, stage_rel, &format!("b{i}"))?;
        let s_entry = match op.after {
            JAfter::Absent => project::Entry::Absent,
            _ => project::read(&s)?,
        };
        let placed = op.after.ino().is_some()
            && matches!(s_entry, project::Entry::Absent)
            && now.is_some_and(|st| Some(st.ino) == op.after.ino());
        let complete = placed || (op.after == JAfter::Absent && now.is_none());
        if op.after != JAfter::Absent && !placed && !staged_matches(&s_entry, &op.after) {
            return Err(Error::ApplyFailed(format!(
                "the staged contents of {} are missing or torn",
                op.rel
            )));
        }
        let moved = project::stamp(&b)?.is_some();
        let skip_move = moved || complete || op.expect.is_none() || op.before_is_dir;
        if !skip_move && now != op.expect {
            return Err(Error::ApplyFailed(format!(
                "{} changed since the interrupted change began",
                op.rel
            )));
        }
        if op.expect.is_none() && !placed && !op.before_is_dir && now.is_some() {
            return Err(Error::ApplyFailed(format!(
                "{} appeared since the interrupted change began",
                op.rel
            )));
        }
        rest.push(RestOp {
            path: p,
            expect: op.expect,
            before_is_dir: op.before_is_dir,
            places: op.after != JAfter::Absent,
            skip_move,
        });
        staged.push((op.after != JAfter::Absent && !placed).then_some(s));
    }
    let mut journal = Vec::new();
    stage_rest(
        root,
        &rest,
        &intent.prune,
        &intent.restore,
        stage_rel,
        &mut journal,
        &staged,
        intent.marker.as_deref(),
        true,
        &mut |_, _| Ok(()),
    )?;
    project::rename_noreplace(
        &in_stage(root, stage_rel, "intent")?,
        &in_stage(root, stage_rel, "done")?,
    )
}

/// One path for steps 3 to 7.
struct RestOp {
    path: ProjectPath,
    expect: Option<Stamp>,
    before_is_dir: bool,
    /// Something is placed there.
    places: bool,
    /// The original is already aside or gone (recovery).
    skip_move: bool,
}

#[allow(clippy::too_many_arguments)]
fn run<F>(
    root: &Path,
    ops: &[TxOp],
    prune: &Prune,
    dir_restore: &BTreeMap<RelPath, (u32, (i64, i64))>,
    fault: Fault,
    crashed: &std::cell::Cell<bool>,
    stage: &ProjectPath,
    stage_rel: &RelPath,
    journal: &mut Vec<Step>,
    begin: &Begin,
    finish: &Finish,
    record: Option<F>,
) -> Result<()>
where
    F: FnOnce(&Dirs) -> Result<Recorded> + Send,
{
    let mut steps = 0usize;
    // Records a completed step; a test build may inject a fault after the n-th one.
    let mut tick = |journal: &mut Vec<Step>, s: Option<Step>| -> Result<()> {
        journal.extend(s);
        steps += 1;
        fault.after_step(steps, crashed)
    };

    // 1. STAGING: the journal's `begin`, then the new contents (and the undo record
    //    alongside).
    project::make_dir(stage, Some(0o700))?;
    tick(journal, Some(Step::StageDir(stage.clone())))?;
    let bp = in_stage(root, stage_rel, "begin")?;
    journal.push(Step::Staged(bp.clone()));
    project::create_file(&bp, begin.to_text().as_bytes(), 0o600, None)?;
    tick(journal, None)?;
    let mut staged: Vec<Option<ProjectPath>> = Vec::with_capacity(ops.len());
    let (staging, recorded) = std::thread::scope(|scope| {
        let recorder = record.map(|r| scope.spawn(|| r(&begin.dirs)));
        // A member of a commit group stages while the other members do, on every core:
        // its writeback is left to the group's sync (see `project::Writeback`).
        let wb = match finish.defer {
            Defer::Shared(_) => project::Writeback::Leave,
            Defer::No | Defer::Yes => project::Writeback::Start,
        };
        let staging = stage_all(root, ops, stage_rel, wb, journal, &mut staged, &mut tick);
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
    let (expect, oids) = match recorded {
        Some(r) => {
            let r = r?;
            (r.stamps, r.oids)
        }
        None => (ops.iter().map(|op| op.expect).collect(), Vec::new()),
    };

    // 2. INTENT: written, then one filesystem sync makes it durable together with the
    //    staged contents and an undo record on this file system.
    let mut jops = Vec::with_capacity(ops.len());
    for (i, ((op, expect), s)) in ops.iter().zip(&expect).zip(&staged).enumerate() {
        let ino = match s {
            Some(s) => project::stamp(s)?.map(|st| st.ino).unwrap_or_default(),
            None => 0,
        };
        jops.push(JOp {
            rel: op.path.rel().clone(),
            expect: *expect,
            before_is_dir: op.before_is_dir,
            after: match &op.after {
                Target::Absent => JAfter::Absent,
                Target::File { data, perm, .. } => JAfter::File {
                    perm: *perm,
                    sha1: match oids.get(i) {
                        Some(Some(id)) => id.clone(),
                        _ => blob_id_hex(data),
                    },
                    ino,
                },
                Target::Symlink { target, .. } => JAfter::Link {
                    target: target.clone(),
                    ino,
                },
            },
        });
    }
    let intent = Intent {
        ops: jops,
        prune: prune.clone(),
        restore: dir_restore.clone(),
        finals: finish.finals.clone(),
        marker: finish.marker.clone(),
    };
    let ip = in_stage(root, stage_rel, "intent")?;
    journal.push(Step::Intent);
    project::create_file(&ip, intent.to_text().as_bytes(), 0o600, None)?;
    match &finish.defer {
        Defer::Shared(hook) => hook.0.intent_written(root)?,
        _ => project::sync_fs(root)?,
    }
    tick(journal, None)?;

    // 3. Nothing changed since the check.
    for (op, expect) in ops.iter().zip(&expect) {
        let now = match project::stamp(&op.path) {
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
    let rest: Vec<RestOp> = ops
        .iter()
        .map(|op| RestOp {
            path: op.path.clone(),
            expect: op.expect,
            before_is_dir: op.before_is_dir,
            places: !matches!(op.after, Target::Absent),
            skip_move: false,
        })
        .collect();
    stage_rest(
        root,
        &rest,
        prune,
        dir_restore,
        stage_rel,
        journal,
        &staged,
        finish.marker.as_deref(),
        !finish.defer.is_deferred(),
        &mut tick,
    )?;
    if finish.marker.is_some() {
        tick(journal, None)?;
    }
    Ok(())
}

/// Writes each op's new contents into the staging directory.
fn stage_all(
    root: &Path,
    ops: &[TxOp],
    stage_rel: &RelPath,
    wb: project::Writeback,
    journal: &mut Vec<Step>,
    staged: &mut Vec<Option<ProjectPath>>,
    tick: &mut Tick<'_>,
) -> Result<()> {
    for (i, op) in ops.iter().enumerate() {
        let s = match &op.after {
            Target::Absent => None,
            Target::File { data, perm, mtime } => {
                let p = checked(root, &sub(stage_rel, format!("s{i}"))?)?;
                // Journal first: a half-written staged file is removed on rollback.
                journal.push(Step::Staged(p.clone()));
                project::create_file_beside(&p, &op.path, data, *perm, *mtime, wb)?;
                tick(journal, None)?;
                Some(p)
            }
            Target::Symlink { target, mtime } => {
                let p = checked(root, &sub(stage_rel, format!("s{i}"))?)?;
                journal.push(Step::Staged(p.clone()));
                project::create_symlink(&p, target)?;
                if let Some(t) = mtime {
                    project::set_mtime(&p, *t)?;
                }
                tick(journal, None)?;
                Some(p)
            }
        };
        staged.push(s);
    }
    Ok(())
}

/// Steps 3 to 7: move originals aside, prune and create directories, place, write the
/// undo record's `marker`, sync (unless `sync` is false: the caller syncs later, see
/// [`Unfinished`]).
#[allow(clippy::too_many_arguments)]
fn stage_rest(
    root: &Path,
    ops: &[RestOp],
    prune: &Prune,
    dir_restore: &BTreeMap<RelPath, (u32, (i64, i64))>,
    stage_rel: &RelPath,
    journal: &mut Vec<Step>,
    staged: &[Option<ProjectPath>],
    marker: Option<&Path>,
    sync: bool,
    tick: &mut Tick<'_>,
) -> Result<()> {
    // The paths something is placed at, sorted: their directories are kept (step 4) and
    // a path with something placed below it is no file to swap.
    let mut placed: Vec<&RelPath> = ops
        .iter()
        .filter(|op| op.places)
        .map(|op| op.path.rel())
        .collect();
    placed.sort_unstable();
    let keep = |d: &RelPath| any_below(&placed, d);
    // A file or symlink replaced in place by a staged entry is swapped with it in step 6
    // (one `RENAME_EXCHANGE`, the original ending at the staged name) instead of being moved
    // aside here and replaced there (two renames). Recovery tells a swapped pair by the
    // staged inode at the path and another entry at the staged name ([`unswap`]).
    let swaps: Vec<bool> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            op.expect.is_some()
                && !op.before_is_dir
                && !op.skip_move
                && op.places
                && matches!(staged.get(i), Some(Some(_)))
                && !keep(op.path.rel())
        })
        .collect();

    // 3. Move what is replaced or deleted aside (deepest first).
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_cached_key(|&i| std::cmp::Reverse(ops[i].path.rel().depth()));
    let mut removed: Vec<RelPath> = Vec::new();
    for &i in &order {
        let op = &ops[i];
        if op.expect.is_some() && !op.before_is_dir && !swaps[i] {
            if op.skip_move {
                removed.push(op.path.rel().clone());
                continue;
            }
            let b = checked(root, &sub(stage_rel, format!("b{i}"))?)?;
            project::rename_noreplace(&op.path, &b)?;
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

    // 4. Remove directories that became empty (never an ancestor of something we place),
    //    deepest first. Each candidate carries whether it may go: with `Prune::Only`, only
    //    the directories named there (and those an op replaces) may.
    //    Each depth is counted once: the directories of `Prune::Only`, in path order, are
    //    each measured from the one before (a chain of nested directories then costs its
    //    length once, not its length times its depth), and a parent is one level above.
    let mut candidates: BTreeMap<(usize, RelPath), bool> = BTreeMap::new();
    let mut add = |depth: usize, d: RelPath, may_go: bool| {
        *candidates.entry((depth, d)).or_default() |= may_go;
    };
    let emptied = matches!(prune, Prune::EmptiedParents);
    for r in &removed {
        if let Some(p) = r.parent() {
            add(r.depth().saturating_sub(1), p, emptied);
        }
    }
    for op in ops {
        if op.before_is_dir {
            add(op.path.rel().depth(), op.path.rel().clone(), true);
        }
    }
    if let Prune::Only(set) = prune {
        let mut before: Option<(&RelPath, usize)> = None;
        for d in set {
            let depth = before.map_or_else(|| d.depth(), |(q, qd)| d.depth_near(q, qd));
            add(depth, d.clone(), true);
            before = Some((d, depth));
        }
    }
    while let Some(((depth, d), may_go)) = candidates.pop_last() {
        if !may_go || keep(&d) {
            continue;
        }
        let p = checked(root, &d)?;
        let Some(st) = project::stamp(&p)? else {
            continue;
        };
        if !is_dir_mode(st.mode) {
            continue;
        }
        if project::remove_dir_if_empty(&p)? {
            tick(
                journal,
                Some(Step::RemovedDir {
                    path: p,
                    perm: st.mode & 0o7777,
                }),
            )?;
            if emptied {
                if let Some(pp) = d.parent() {
                    *candidates.entry((depth.saturating_sub(1), pp)).or_default() = true;
                }
            }
        }
    }

    // 5. Create missing parent directories (shallowest first). An op whose path held an
    //    entry (checked just before this step) has its directories: step 4 removes none
    //    of a placed path's ancestors. Each parent is made in one walk down it
    //    (`project::make_dirs`: each component looked at once, below one created nothing
    //    looked up), skipping a parent above the next one (the next one's walk makes it),
    //    and each created directory is journaled as a depth along that parent's path, not
    //    as a path of its own: a path D directories deep costs time proportional to D.
    let mut parents: Vec<RelPath> = ops
        .iter()
        .filter(|op| op.places && op.expect.is_none())
        .filter_map(|op| op.path.rel().parent())
        .collect();
    parents.sort_unstable();
    parents.dedup_by(|a, b| a.as_bytes() == b.as_bytes());
    for (i, dir) in parents.iter().enumerate() {
        if parents.get(i + 1).is_some_and(|next| is_above(dir, next)) {
            continue;
        }
        let p = Arc::new(checked(root, dir)?);
        let mut perm = |k: usize| {
            if dir_restore.is_empty() {
                return None;
            }
            let a = dir.ancestor(k)?;
            dir_restore.get(&a).map(|(perm, _)| *perm)
        };
        let mut created = |k: usize| {
            tick(
                journal,
                Some(Step::CreatedDir {
                    path: Arc::clone(&p),
                    depth: k,
                }),
            )
        };
        project::make_dirs(&p, &mut perm, &mut created)?;
    }

    // 6. Place the new contents.
    for (i, op) in ops.iter().enumerate() {
        if let Some(Some(s)) = staged.get(i) {
            // Re-check the target's parents right before writing.
            let target = checked(root, op.path.rel())?;
            if swaps[i] {
                if project::exchange(s, &target)? {
                    tick(
                        journal,
                        Some(Step::Exchanged {
                            path: target,
                            staged: s.clone(),
                        }),
                    )?;
                    continue;
                }
                // No exchange on this filesystem: the original goes aside now.
                let b = checked(root, &sub(stage_rel, format!("b{i}"))?)?;
                project::rename_noreplace(&target, &b)?;
                tick(
                    journal,
                    Some(Step::Moved {
                        from: target.clone(),
                        to: b,
                    }),
                )?;
            }
            project::rename_noreplace(s, &target)?;
            tick(journal, Some(Step::Placed(target)))?;
        }
    }

    // 7. The marker, then one filesystem sync (directory mtimes are set at the end:
    //    `Finish::finals`). The sync makes every rename and directory change durable, and the
    //    marker with them when it is on this filesystem: one journal commit instead of one
    //    `fsync` per changed directory. A crash before the sync is over leaves the intent,
    //    so recovery completes the change (writing the marker again) or rolls it back
    //    (removing the record, marker included).
    if let Some(m) = marker {
        write_marker(m, root)?;
    }
    if sync {
        project::sync_fs(root)?;
    }
    Ok(())
}
