//! A plan's own snapshot of an original: the first `overlay` or `copy_on_write` sandbox a
//! plan creates over an original (without a snapshot prepared for every plan) takes a
//! snapshot into the snapshot store (see [`crate::isolation::snapshot`]), and the plan's
//! later sandboxes over the same original use it as their base instead of copying the tree
//! again: an `overlay` one's creation then costs a few directories and a mount, a
//! `copy_on_write` one's a single copy. The store keeps it while a sandbox that took it
//! exists (each is among its holders); this file holds only the plan's rule for reusing it.
//!
//! The snapshot is the plan's point-in-time view of the original, as a session's base is
//! the session's: a later sandbox of the plan reuses it only while it is still what the
//! original was as far as the plan knows, that is while every sandbox that took it exists
//! and none of them, nor any other sandbox of the plan over the same original, has
//! committed (or has a commit in flight). Otherwise the create takes a new snapshot. Edits
//! made to the original by others after the snapshot reach the original's files through
//! the 3-way commit, as for any sandbox whose original changed after it was created.
//! Another plan never takes it; once its last taker is cleaned up it is removed
//! ([`crate::isolation::prune::release`]).

use std::path::{Path, PathBuf};

use super::record::Record;
use super::status::Status;
use crate::id::PlanId;
use crate::isolation::snapshot::{self, SnapshotInfo};
use crate::isolation::tree_base::TreeBase;

/// The snapshot a new sandbox, whose directory is `sandbox_dir` in the directory `plan_dir`
/// of plan `plan_id`, takes for `original` (canonical): the plan's own one when it may be
/// reused, else a new one (its base returned too, already listed). The sandbox is recorded
/// among its holders before this returns. The caller holds the store's shared lock.
pub(crate) fn take(
    store: &Path,
    exclude: &[PathBuf],
    plan_dir: &Path,
    plan_id: &PlanId,
    sandbox_dir: &Path,
    original: &Path,
) -> Result<(SnapshotInfo, Option<TreeBase>), crate::Error> {
    let found = snapshot::list(store)
        .into_iter()
        .rev()
        .find(|s| s.plan.as_deref() == Some(plan_id.as_str()) && s.original == original)
        .filter(|s| reusable(store, s, plan_dir));
    let (info, base) = match found {
        Some(s) => (s, None),
        None => {
            let (s, b) = snapshot::prepare(store, original, exclude, Some(plan_id.as_str()))?;
            (s, Some(b))
        }
    };
    snapshot::hold_for(store, &info.id, sandbox_dir)?;
    Ok((info, base))
}

/// Whether the plan's snapshot `s` still shows the original as the plan knows it (see the
/// module documentation). Anything unreadable says no: a new snapshot is always correct.
fn reusable(store: &Path, s: &SnapshotInfo, plan_dir: &Path) -> bool {
    let Some(takers) = snapshot::holders(store, &s.id) else {
        return false;
    };
    let live = |r: &Record| {
        matches!(r.status, Status::Created | Status::Active)
            && r.commit_ref.is_none()
            && r.commit_in_flight.is_none()
    };
    let takers_live = !takers.is_empty()
        && takers
            .iter()
            .all(|t| t.parent() == Some(plan_dir) && Record::load(t).is_ok_and(|r| live(&r)));
    if !takers_live {
        return false;
    }
    // Any sandbox of the plan over the same original, whatever its strategy, that has
    // committed changed the original since.
    let Ok(rd) = std::fs::read_dir(plan_dir) else {
        return false;
    };
    rd.filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| crate::id::SandboxId::parse(n).is_ok())
        })
        .filter_map(|e| Record::load(&e.path()).ok())
        .filter(|r| std::fs::canonicalize(&r.original_path).is_ok_and(|o| o == s.original))
        .all(|r| live(&r) || r.status == Status::Pending)
}
