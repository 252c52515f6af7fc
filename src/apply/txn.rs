//! The write phase: stage, verify, move aside, place; roll back on failure.
//!
//! It owns every change an apply or an undo makes to the project, and keeps the all-or-
//! nothing promise: new contents are first staged in a private directory inside the project
//! (same file system, see [`stage`](super::stage)) and synced; then every path must still
//! carry the stamp it had when planned (as the undo record writer left it); only then are
//! the originals moved aside into the staging directory (a rename keeps their bytes, modes
//! and mtimes) and the staged files renamed into place; a file replaced in place by a staged
//! one is swapped with it in one `RENAME_EXCHANGE` instead, the original ending at the
//! staged name (two renames where the filesystem cannot exchange); those steps are in
//! [`place`](super::place), shared with recovery. Each completed step goes into an in-memory
//! journal, and any failure undoes it in reverse and restores directory mtimes, so the
//! project ends as it was; the error says when that rollback was incomplete. Every path it
//! touches is a [`ProjectPath`], re-checked right before the write, and the filesystem is
//! synced twice per commit (after the intent, after placing), not once per file; a caller
//! may take the second sync and the cleanup over ([`finish`](super::finish): `Defer`,
//! `Unfinished`) to share one sync among several commits.
//!
//! Against crashes, the same steps are described on disk by the write-ahead journal of
//! [`journal`](super::journal) (its module doc has the state machine); recovery completes
//! or undoes them ([`recover`](super::recover)).

use super::change::{sorted_paths, Prune, Target};
use super::fault::Fault;
use super::finish::{complete, Defer, Finish, Unfinished};
use super::journal::{Begin, DirInfo, Dirs, Intent, JAfter, JOp};
use super::path_order::{dirs_above, is_above};
use super::place::{stage_rest, RestOp, Step, Tick};
use super::stage::{checked, ignore_missing, in_stage, is_dir_mode, stage_name, sub};
use crate::error::{Error, Result};
use crate::fs::project::{self, ProjectPath, Stamp};
use crate::fs::relpath::RelPath;
use crate::fs::Timestamp;
use crate::git::oid::{blob_id, ObjectId};
use std::collections::BTreeMap;
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

/// What the write phase has to say besides success.
#[derive(Default)]
pub(crate) struct CommitLog {
    pub warnings: Vec<String>,
    /// With [`Finish::defer`]: the transaction, its change in place, waiting for its last
    /// sync and cleanup.
    pub unfinished: Option<Unfinished>,
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
    pub oids: Vec<Option<ObjectId>>,
}

/// Runs the write phase for `ops`. `record`, if any, runs on a second thread while the
/// new contents are staged (given the directories' modes and mtimes before the change),
/// and must succeed before anything in the project is replaced. On error the journal is
/// rolled back and directory mtimes restored; the error says whether the rollback was
/// complete. The project must be locked ([`ProjectLock`](super::journal::ProjectLock)).
pub(crate) fn commit<F>(
    root: &Path,
    ops: &[TxOp],
    prune: &Prune,
    dir_restore: &BTreeMap<RelPath, (u32, Timestamp)>,
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
            log.unfinished = Some(Unfinished::new(
                root.to_path_buf(),
                stage,
                stage_rel,
                finish.finals.clone(),
            ));
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
    dir_mtimes: &[(ProjectPath, Timestamp)],
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

#[allow(clippy::too_many_arguments)]
fn run<F>(
    root: &Path,
    ops: &[TxOp],
    prune: &Prune,
    dir_restore: &BTreeMap<RelPath, (u32, Timestamp)>,
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
    // A member of a commit group stages while the other members do, on every core:
    // its writeback is left to the group's sync (see `project::Writeback`).
    let wb = match finish.defer {
        Defer::Shared(_) => project::Writeback::Leave,
        Defer::No | Defer::Yes => project::Writeback::Start,
    };
    let mut stage = || stage_all(root, ops, stage_rel, wb, journal, &mut staged, &mut tick);
    // The undo record is written beside the staging (after it, on this thread, when no
    // second thread can be made); a panic there is this apply's error.
    let (recorded, staging) = match record {
        None => (None, stage()),
        Some(r) => {
            let r = parking_lot::Mutex::new(Some(r));
            let record = || {
                let r = r.lock().take()?;
                Some(
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r(&begin.dirs)))
                        .unwrap_or_else(|_| {
                            Err(Error::ApplyFailed(
                                "writing the undo record panicked".into(),
                            ))
                        }),
                )
            };
            crate::cores::beside(record, stage)
        }
    };
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
                        Some(Some(id)) => *id,
                        _ => blob_id(data),
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
