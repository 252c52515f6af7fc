//! A plan's own snapshot of an original: the first `overlay` or `copy_on_write` sandbox a
//! plan creates over an original (without a snapshot prepared for every plan) takes a
//! snapshot into the shared snapshot store (see [`crate::plan::lower`]), and the plan's
//! later sandboxes over the same original use it as their base instead of copying the tree
//! again: an `overlay` one's creation then costs a few directories and a mount, a
//! `copy_on_write` one's a single copy.
//!
//! ```text
//! <root>/plans/lower/<ulid>/
//!   info.json      its SnapshotInfo, whose `plan` names the plan it serves
//!   takers/<id>    one empty file per sandbox that took it
//! ```
//!
//! The snapshot is the plan's point-in-time view of the original, as a session's base is
//! the session's: a later sandbox of the plan reuses it only while it is still what the
//! original was as far as the plan knows, that is while every sandbox that took it exists
//! and none of them, nor any other sandbox of the plan over the same original, has
//! committed (or has a commit in flight). Otherwise the create takes a new snapshot. Edits
//! made to the original by others after the snapshot reach the original's files through
//! the 3-way commit, as for any sandbox whose original changed after it was created.
//! Another plan never takes it; once its last taker is cleaned up it is removed.

use std::path::{Path, PathBuf};

use super::lower::{self, SnapshotInfo};
use super::record::Record;
use super::status::Status;
use super::strategy::tree_base::TreeBase;
use crate::id::{PlanId, SandboxId};

/// The directory of a plan's snapshot naming the sandboxes that took it.
const TAKERS: &str = "takers";

/// The snapshot a new sandbox `sandbox_id` of the plan whose directory is
/// `plan_dir` takes for `original` (canonical): the plan's own one when it may be reused,
/// else a new one (its base returned too, already listed). The sandbox is recorded among
/// its takers before this returns. The caller holds the store's shared [`lower::lock`].
pub(crate) fn take(
    lowers: &Path,
    exclude: &[PathBuf],
    plan_dir: &Path,
    plan_id: &PlanId,
    sandbox_id: &SandboxId,
    original: &Path,
) -> Result<(SnapshotInfo, Option<TreeBase>), crate::Error> {
    let found = lower::list(lowers)
        .into_iter()
        .rev()
        .find(|s| s.plan.as_deref() == Some(plan_id.as_str()) && s.original == original)
        .filter(|s| reusable(lowers, s, plan_dir));
    let (info, base) = match found {
        Some(s) => (s, None),
        None => {
            let (s, b) = lower::prepare(lowers, original, exclude, Some(plan_id.as_str()))?;
            (s, Some(b))
        }
    };
    let dir = lowers.join(&info.id).join(TAKERS);
    std::fs::create_dir_all(&dir).map_err(|e| crate::Error::io("create directory", &dir, e))?;
    let p = dir.join(sandbox_id.as_str());
    std::fs::File::create(&p).map_err(|e| crate::Error::io("create", &p, e))?;
    Ok((info, base))
}

/// The sandboxes that took snapshot `id` (empty when it has no takers record).
fn takers(lowers: &Path, id: &str) -> Option<Vec<String>> {
    let rd = std::fs::read_dir(lowers.join(id).join(TAKERS)).ok()?;
    rd.map(|e| e.ok().and_then(|e| e.file_name().into_string().ok()))
        .collect()
}

/// Whether the plan's snapshot `s` still shows the original as the plan knows it (see the
/// module documentation). Anything unreadable says no: a new snapshot is always correct.
fn reusable(lowers: &Path, s: &SnapshotInfo, plan_dir: &Path) -> bool {
    let Some(takers) = takers(lowers, &s.id) else {
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
            .all(|t| Record::load(&plan_dir.join(t)).is_ok_and(|r| live(&r)));
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

/// Removes the plan's snapshot `id` once none of its takers exists any more (called after a
/// sandbox that took it is cleaned up, or failed to be created). Best effort: when the store
/// is in use (a create or a sweep holds its lock) or a taker remains, the snapshot stays for
/// [`crate::plan::PlanManager::cleanup_abandoned`].
pub(crate) fn release(lowers: &Path, plan_dir: &Path, id: &str) {
    let Some(info) = lower::read_info(lowers, id) else {
        return;
    };
    if info.plan.is_none() {
        return;
    }
    let gone = |takers: &[String]| takers.iter().all(|t| !plan_dir.join(t).exists());
    if !takers(lowers, id).is_some_and(|t| gone(&t)) {
        return;
    }
    let Some(_lock) = lower::try_lock_exclusive(lowers) else {
        return;
    };
    // Exclusive: no create is taking it meanwhile; look again.
    if takers(lowers, id).is_some_and(|t| gone(&t)) {
        let _ = lower::remove(lowers, id);
    }
}
