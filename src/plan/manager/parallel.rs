//! The concurrent steps of `commit_all`: the checks of the sandboxes that commit through the
//! apply run on several threads, and the first of them commit as one [`CommitGroup`]
//! sharing one sync. A panic in any of them is caught and made that sandbox's failure, so
//! the plan's rollback still runs.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::options::CommitAllOptions;
use crate::plan::batch::CommitBatch;
use crate::plan::error::SandboxError;
use crate::plan::group::CommitGroup;
use crate::plan::model::{CommitResult, Strategy};
use crate::plan::sandbox::Sandbox;

/// Whether `s` commits through the apply (`copy_on_write`, `overlay`): the strategies whose
/// checks may run in parallel and whose commits may join a [`CommitGroup`].
fn through_apply(s: &Arc<dyn Sandbox>) -> bool {
    matches!(s.strategy(), Strategy::CopyOnWrite | Strategy::Overlay)
}

/// Checks every sandbox of `todo` against its original ([`Sandbox::check_commit`]); returns
/// the first in `todo`'s order that failed, with its error.
///
/// The checks of `copy_on_write` and `overlay` sandboxes (a diff of the sandbox and a
/// checked 3-way plan against the original: CPU and reads, no write to any original) run
/// on up to `available_parallelism` threads; each touches only its own sandbox. Other
/// strategies, custom ones included, are checked one after the other on the caller's
/// thread, as their code may not expect to run concurrently. A panic in a check is resumed
/// on the caller's thread, as if the check had run there.
pub(super) fn check_all(todo: &[Arc<dyn Sandbox>]) -> Option<(&Arc<dyn Sandbox>, SandboxError)> {
    use std::sync::atomic::AtomicUsize;
    let parallel: Vec<usize> = (0..todo.len())
        .filter(|&i| through_apply(&todo[i]))
        .collect();
    let threads = crate::cores::count().min(parallel.len());
    let mut errors: Vec<Option<SandboxError>> = (0..todo.len()).map(|_| None).collect();
    if threads > 1 {
        let next = AtomicUsize::new(0);
        let found = crate::cores::workers(threads, || {
            let mut out = Vec::new();
            while let Some(&i) = parallel.get(next.fetch_add(1, Ordering::Relaxed)) {
                if let Err(e) = todo[i].check_commit() {
                    out.push((i, e));
                }
            }
            out
        });
        for (i, e) in found.into_iter().flatten() {
            errors[i] = Some(e);
        }
    }
    for (i, s) in todo.iter().enumerate() {
        if threads > 1 && through_apply(s) {
            continue;
        }
        if let Err(e) = s.check_commit() {
            errors[i] = Some(e);
            // The commit is refused already: later ones need no check.
            break;
        }
    }
    errors
        .into_iter()
        .enumerate()
        .find_map(|(i, e)| e.map(|e| (&todo[i], e)))
}

/// The most sandboxes one commit group holds (each member is a thread while it commits).
const MAX_GROUP: usize = 64;

/// How many sandboxes at the head of `todo` commit as one [`CommitGroup`]: `copy_on_write`
/// and `overlay` sandboxes (their commits go through the apply, which reaches the group's
/// shared sync) whose originals are pairwise disjoint — each member holds its original's
/// lock until the end, so two members on one project would wait for each other.
pub(super) fn group_len(todo: &[Arc<dyn Sandbox>]) -> usize {
    let mut roots: Vec<PathBuf> = Vec::new();
    for s in todo.iter().take(MAX_GROUP) {
        if !through_apply(s) {
            break;
        }
        let Some(root) = s
            .context()
            .and_then(|c| std::fs::canonicalize(c.original_path).ok())
        else {
            break;
        };
        if roots
            .iter()
            .any(|r| r.starts_with(&root) || root.starts_with(r))
        {
            break;
        }
        roots.push(root);
    }
    roots.len()
}

/// Commits `members` as one [`CommitGroup`], each on its own thread, with `commit_all`'s
/// test hooks; returns each member's result and batch, in order. A member's panic is its
/// failure (the group's other members and `commit_all`'s rollback go on).
pub(super) fn commit_group(
    members: &[Arc<dyn Sandbox>],
    message: &str,
    opts: &CommitAllOptions,
) -> Vec<(Result<CommitResult, SandboxError>, CommitBatch)> {
    let group = CommitGroup::new(members.len(), opts.crash_point());
    // The members commit under the caller's plan lock.
    let lent = crate::plan::lock::lend();
    std::thread::scope(|scope| {
        let handles: Vec<_> = members
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let group = &group;
                let lent = &lent;
                // Members wait on each other's intents, so each needs its own thread: one
                // that cannot be made is this member's failure (the group refuses those
                // after it, and `commit_all` rolls back what landed), never a panic.
                let started = std::thread::Builder::new().spawn_scoped(scope, move || {
                    let _held = lent.enter();
                    let mut batch = CommitBatch::member(group.hook(i));
                    let r = match opts.injected_failure(i, s) {
                        Some(e) => Err(e),
                        None => commit_caught(s, message, &mut batch),
                    };
                    group.done(i, r.is_ok());
                    (r, batch)
                });
                started.map_err(|e| {
                    group.done(i, false);
                    SandboxError::Unexpected {
                        sandbox_id: Some(s.sandbox_id().to_string()),
                        reason: format!("no thread could be made for its commit: {e}"),
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .zip(members)
            .map(|(h, s)| {
                let h = match h {
                    Ok(h) => h,
                    Err(e) => return (Err(e), CommitBatch::default()),
                };
                h.join().unwrap_or_else(|_| {
                    let e = SandboxError::Unexpected {
                        sandbox_id: Some(s.sandbox_id().to_string()),
                        reason: "the commit panicked".into(),
                    };
                    (Err(e), CommitBatch::default())
                })
            })
            .collect()
    })
}

/// `s.commit_batched`, a panic inside it made an error of this sandbox: `commit_all` then
/// rolls the plan back, this sandbox too when its change landed (its commit is settled
/// first, see [`Sandbox::settle_in_flight`]).
pub(super) fn commit_caught(
    s: &Arc<dyn Sandbox>,
    message: &str,
    batch: &mut CommitBatch,
) -> Result<CommitResult, SandboxError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        s.commit_batched(Some(message), batch)
    }))
    .unwrap_or_else(|_| {
        Err(SandboxError::Unexpected {
            sandbox_id: Some(s.sandbox_id().to_string()),
            reason: "the commit panicked".into(),
        })
    })
}
