//! `commit_all`: every sandbox of a plan committed all or nothing — checked first, ordered
//! and journaled, committed (the first ones as a group sharing one sync), and rolled back in
//! LIFO order when one fails. Its options (provenance, test faults) are here too.

use super::options::CommitAllOptions;
use std::sync::Arc;

use super::parallel::{check_all, commit_caught, commit_group, group_len};
use super::PlanManager;
use crate::id::{IntoId, PlanId, SandboxId};
use crate::plan::batch::CommitBatch;
use crate::plan::error::SandboxError;
use crate::plan::journal::CommitJournal;
use crate::plan::model::CommitResult;
use crate::plan::sandbox::Sandbox;
use crate::plan::status::Status;

impl PlanManager {
    /// Commits every `Created`/`Active` sandbox of the plan, all or nothing.
    ///
    /// 1. Every one is checked against its original first ([`Sandbox::check_commit`]): a
    ///    conflict anywhere refuses the whole plan before anything is written.
    /// 2. The order (rollbackable strategies first, `transaction_rollback` and `none` last;
    ///    creation order within) goes into the plan's journal, durably, before the first
    ///    commit.
    /// 3. Each commits. When one fails, the committed ones are rolled back in LIFO order.
    ///    A sandbox-level failure (a conflict, a refused lock, a custom strategy's own
    ///    sandbox error: every [`SandboxError`] but [`SandboxError::Unexpected`]) then
    ///    returns `Ok` with the one failed [`CommitResult`] (`success == false`, `error` the
    ///    reason, `metadata["rolled_back_ids"]` the ids undone, comma-separated). A failed
    ///    check (step 1) is such a failure too, with nothing to undo. Any other failure (a
    ///    panic, a custom strategy's unanticipated exception, commits that could not be made
    ///    durable), and any failure whose rollback did not undo every committed sandbox, is
    ///    [`SandboxError::AtomicCommit`] with `rolled_back_ids` and `failed_rollback_ids`. The applies of `copy_on_write` and `overlay` commits share
    ///    their last sync: one per filesystem once all have written (see
    ///    [`crate::plan::batch`]); `commit_all` returns after it, so what it reports
    ///    committed is durable. An `overlay` commit reuses the diff of its check while the
    ///    upper layer's stat data show nothing was written since.
    /// 4. A crash anywhere in 3 leaves the journal: the next manager opened over the root
    ///    rolls the plan back (see [`crate::plan::journal`]).
    pub fn commit_all(
        &self,
        plan_id: impl IntoId<PlanId>,
    ) -> Result<Vec<CommitResult>, SandboxError> {
        self.commit_all_with(plan_id, &CommitAllOptions::default())
    }

    /// [`PlanManager::commit_all`], each [`CommitResult`]'s `metadata` carrying what
    /// produced the work — the command, its directory, exit status and times — under the
    /// `provenance.*` keys ([`Provenance::to_metadata`]; read back with
    /// [`Provenance::from_metadata`]).
    ///
    /// [`Provenance::to_metadata`]: crate::provenance::Provenance::to_metadata
    /// [`Provenance::from_metadata`]: crate::provenance::Provenance::from_metadata
    pub fn commit_all_as(
        &self,
        plan_id: impl IntoId<PlanId>,
        provenance: &crate::provenance::Provenance,
    ) -> Result<Vec<CommitResult>, SandboxError> {
        // Without the feature `fault-injection` the provenance is the only field.
        #[allow(clippy::needless_update)]
        let opts = CommitAllOptions {
            provenance: provenance.clone(),
            ..CommitAllOptions::default()
        };
        self.commit_all_with(plan_id, &opts)
    }

    /// [`PlanManager::commit_all`] with [`CommitAllOptions`]: the provenance of the work
    /// (and, with the feature `fault-injection`, the test faults).
    #[doc(hidden)]
    pub fn commit_all_with(
        &self,
        plan_id: impl IntoId<PlanId>,
        opts: &CommitAllOptions,
    ) -> Result<Vec<CommitResult>, SandboxError> {
        let plan_id = &plan_id.into_id()?;
        let plan_dir = self.plan_dir(plan_id);
        let _lock = self.lock_plan(plan_id)?;
        let mut todo: Vec<Arc<dyn Sandbox>> = self
            .sandboxes_of(plan_id)
            .into_iter()
            .filter(|s| matches!(s.status(), Status::Created | Status::Active))
            .collect();
        if todo.is_empty() {
            return Ok(Vec::new());
        }
        // Stable: creation order within each group.
        todo.sort_by_key(|s| !s.is_rollbackable());
        let atomic =
            |reason: String, failed: Option<&str>, undone: Vec<String>, not: Vec<String>| {
                SandboxError::AtomicCommit {
                    plan_id: plan_id.to_string(),
                    reason,
                    rolled_back_ids: undone,
                    failed_rollback_ids: not,
                    failed_sandbox_id: failed.map(str::to_string),
                }
            };
        if let Some((s, e)) = check_all(&todo) {
            let reason = format!("check failed, nothing written: {e}");
            if e.is_sandbox_level() {
                return Ok(vec![CommitResult::failed(
                    plan_id,
                    s.sandbox_id(),
                    reason,
                    &[],
                )]);
            }
            return Err(atomic(reason, Some(s.sandbox_id()), vec![], vec![]));
        }
        // The sandboxes' own ids, made by this library.
        let order: Vec<SandboxId> = todo
            .iter()
            .map(|s| SandboxId::trusted(s.sandbox_id().to_string()))
            .collect();
        CommitJournal {
            plan_id: plan_id.clone(),
            order: order.clone(),
        }
        .write(&plan_dir)?;
        let mut results = Vec::with_capacity(todo.len());
        // The applies' last syncs are one per filesystem, at the end (see `plan::batch`).
        let mut batch = CommitBatch::default();
        let message = format!("plan {plan_id}");
        let mut failure: Option<(usize, SandboxError)> = None;
        // The first sandboxes commit as one group: their intents share one sync, their
        // originals still change one sandbox at a time, in order (see `plan::group`).
        let grouped = group_len(&todo);
        if grouped > 1 {
            for (i, (r, b)) in commit_group(&todo[..grouped], &message, opts)
                .into_iter()
                .enumerate()
            {
                batch.absorb(b);
                match r {
                    Ok(res) => results.push(res),
                    // The first failure; the ones after it were refused because of it.
                    Err(e) => {
                        failure.get_or_insert((i, e));
                    }
                }
            }
        }
        let rest = if grouped > 1 { grouped } else { 0 };
        for (i, s) in todo.iter().enumerate().skip(rest) {
            if failure.is_some() {
                break;
            }
            #[cfg(feature = "fault-injection")]
            if opts.crash_before == Some(i) {
                // Test fault: the process dies here, journal in place.
                std::process::abort();
            }
            let r = match opts.injected_failure(i, s) {
                Some(e) => Err(e),
                None => commit_caught(s, &message, &mut batch),
            };
            match r {
                Ok(res) => results.push(res),
                Err(e) => failure = Some((i, e)),
            }
        }
        // Undoes every committed sandbox newest first, then drops the journal.
        // A sandbox-level failure whose rollback undid everything is reported as the one
        // failed result (the documented algorithm); anything else raises.
        let abort = |mut reason: String, failed_id: Option<&str>, sandbox_level: bool| {
            let (undone, failed) = self.roll_back_lifo(plan_id, &order);
            if let (true, true, Some(id)) = (sandbox_level, failed.is_empty(), failed_id) {
                CommitJournal::remove(&plan_dir)?;
                return Ok(vec![CommitResult::failed(plan_id, id, reason, &undone)]);
            }
            let failed_ids: Vec<String> = failed.iter().map(|(id, _)| id.clone()).collect();
            for (id, why) in &failed {
                reason.push_str(&format!("; rollback of {id} failed: {why}"));
            }
            CommitJournal::remove(&plan_dir)?;
            Err(atomic(reason, failed_id, undone, failed_ids))
        };
        if let Some((i, e)) = failure {
            // The committed ones are finished (synced, unlocked) before being undone; a
            // failure there leaves them at INTENT, which the undo's recovery completes
            // first.
            let _ = batch.finish();
            let sandbox_level = e.is_sandbox_level();
            return abort(e.to_string(), Some(todo[i].sandbox_id()), sandbox_level);
        }
        if let Err(e) = batch.finish() {
            // Not durable: undo the plan, and raise (no one sandbox's commit failed).
            return abort(
                format!("the commits could not be made durable: {e}"),
                None,
                false,
            );
        }
        CommitJournal::remove(&plan_dir)?;
        // The batch's applies left the undo store unpruned: once for the plan, not once per
        // sandbox (each prune reads every record's summary). A failure only leaves records
        // for the next prune.
        let _ = self.env.undo.prune();
        // What the caller says produced the work goes with each result (`provenance.*`).
        let provenance = opts.provenance.to_metadata();
        for r in &mut results {
            r.metadata
                .extend(provenance.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        Ok(results)
    }
}
