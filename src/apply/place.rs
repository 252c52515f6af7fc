//! Steps 3 to 7 of the write phase, shared by a commit and by recovery's roll forward:
//! move the originals aside, remove the directories that became empty, create missing
//! parents, place the staged entries, write the undo record's marker, sync.
//!
//! Each step done is handed to a [`Tick`], which records it as a [`Step`] (a commit undoes
//! them in reverse on failure; a test build may inject a fault after any of them). A file
//! replaced in place is swapped with its staged entry in one `RENAME_EXCHANGE` where the file
//! system can, instead of two renames; recovery tells such a pair apart (see
//! [`unswap`](super::recover::unswap)).

use super::change::Prune;
use super::path_order::{any_below, is_above};
use super::stage::{checked, is_dir_mode, sub};
use crate::error::{IoContext, Result};
use crate::fs::project::{self, ProjectPath, Stamp};
use crate::fs::relpath::RelPath;
use crate::fs::Timestamp;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// One completed step of a write phase, kept in memory so that a failure can undo every
/// step done so far, in reverse.
pub(super) enum Step {
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

/// Records a completed write step (and injects test failures).
pub(super) type Tick<'t> = dyn FnMut(&mut Vec<Step>, Option<Step>) -> Result<()> + 't;

/// One path for steps 3 to 7.
pub(super) struct RestOp {
    pub(super) path: ProjectPath,
    pub(super) expect: Option<Stamp>,
    pub(super) before_is_dir: bool,
    /// Something is placed there.
    pub(super) places: bool,
    /// The original is already aside or gone (recovery).
    pub(super) skip_move: bool,
}

/// Steps 3 to 7: move originals aside, prune and create directories, place, write the
/// undo record's `marker`, sync (unless `sync` is false: the caller syncs later, see
/// [`Unfinished`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn stage_rest(
    root: &Path,
    ops: &[RestOp],
    prune: &Prune,
    dir_restore: &BTreeMap<RelPath, (u32, Timestamp)>,
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
