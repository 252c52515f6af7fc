//! The write phase: stage, verify, move aside, place; roll back on failure.
//!
//! It owns every change an apply or an undo makes to the project, and keeps the all-or-
//! nothing promise: new contents are first staged in a private directory inside the project
//! (same file system) and synced; then every path must still carry the stamp it had when
//! planned (as the undo record writer left it); only then are the originals moved aside into
//! the staging directory (a rename keeps their bytes, modes and mtimes) and the staged files
//! renamed into place. Each completed step goes into a journal, and any failure undoes the
//! journal in reverse and restores directory mtimes, so the project ends as it was; the
//! error says when that rollback was incomplete. Every path it touches is a
//! [`ProjectPath`], re-checked right before the write, and the filesystem is synced twice
//! per commit (after staging, after placing), not once per file.

use crate::error::{Error, Result};
use crate::fs::project::{self, Data, ProjectPath, Stamp};
use crate::fs::relpath::RelPath;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

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
    let _scope = project::DirScope::enter(root)?;
    let stage_rel = RelPath::new(format!(".patchbox-txn-{}", ulid::Ulid::new()))?;
    let stage = project::check(root, &stage_rel, &none)?;

    // Directory mtimes to restore if we roll back.
    let root_mtime = project::root_stamp(root)?.mtime;
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
        let stamped = project::check(root, d, &none).and_then(|p| Ok((project::stamp(&p)?, p)));
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
                    if let Err(e) = project::remove_file(to) {
                        log.warnings.push(format!("cannot remove backup: {e}"));
                    }
                }
            }
            match project::remove_dir_if_empty(&stage) {
                Ok(true) => {}
                Ok(false) => log.warnings.push(format!(
                    "staging directory {} is not empty; remove it by hand",
                    stage.to_path_buf().display()
                )),
                Err(e) => log
                    .warnings
                    .push(format!("cannot remove staging directory: {e}")),
            }
            let _ = project::sync_root(root);
            Ok(log)
        }
        Err(e) => {
            let mut failures = Vec::new();
            for step in journal.iter().rev() {
                let r = match step {
                    Step::Placed(p) => project::remove_file(p),
                    Step::CreatedDir(p) => project::remove_dir_if_empty(p).map(|_| ()),
                    Step::RemovedDir { path, perm } => project::make_dir(path, Some(*perm)),
                    Step::Moved { from, to } => project::rename_noreplace(to, from),
                    Step::Staged(p) => match project::remove_file(p) {
                        Err(Error::Io { source, .. })
                            if source.kind() == std::io::ErrorKind::NotFound =>
                        {
                            Ok(())
                        }
                        r => r,
                    },
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
            for (p, t) in &dir_mtimes {
                if let Err(re) = project::set_mtime(p, *t) {
                    failures.push(re.to_string());
                }
            }
            if let Err(re) = project::set_root_mtime(root, root_mtime) {
                failures.push(re.to_string());
            }
            let _ = project::sync_root(root);
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
    project::make_dir(stage, Some(0o700))?;
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
    project::sync_fs(root)?;

    // 2. Nothing changed since the check.
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
                let p = project::check(root, &sub(stage_rel, format!("s{i}"))?, &none)?;
                // Journal first: a half-written staged file is removed on rollback.
                journal.push(Step::Staged(p.clone()));
                project::create_file(&p, data, *perm, *mtime)?;
                tick(journal, None)?;
                Some(p)
            }
            Target::Symlink { target, mtime } => {
                let p = project::check(root, &sub(stage_rel, format!("s{i}"))?, &none)?;
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
            let b = project::check(root, &sub(stage_rel, format!("b{i}"))?, &none)?;
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
        let p = project::check(root, &d, &none)?;
        let Some(st) = project::stamp(&p)? else {
            continue;
        };
        if !is_dir_mode(st.mode) {
            continue;
        }
        if project::remove_dir_if_empty(&p)? {
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
            let p = project::check(root, &a, &none)?;
            match project::stamp(&p)? {
                None => {
                    let perm = dir_restore.get(&a).map(|(perm, _)| *perm);
                    project::make_dir(&p, perm)?;
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
            let target = project::check(root, op.path.rel(), &none)?;
            project::rename_noreplace(s, &target)?;
            tick(journal, Some(Step::Placed(target)))?;
        }
    }

    // 7. Restore recorded directory mtimes (undo) and sync.
    for p in &created {
        if let Some((_, t)) = dir_restore.get(p.rel()) {
            project::set_mtime(p, *t)?;
        }
    }
    // One filesystem sync makes every rename and directory change durable: one journal
    // commit instead of one `fsync` per changed directory.
    project::sync_fs(root)?;
    Ok(())
}
