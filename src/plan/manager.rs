//! The plan manager: every sandbox of every plan of one engine, found again after a crash.
//!
//! ```text
//! <root>/plans/
//!   undo/                     undo records of commits (their ids are commit_refs)
//!   lower/                    shared snapshots of originals (see crate::plan::lower)
//!   plan-<plan id>/
//!     commit.lock             the plan's lock (see crate::plan::lock)
//!     commit.journal          present while a commit_all runs (see journal)
//!     <sandbox id>/           one per sandbox: state.json and the strategy's files
//! ```
//!
//! Several managers, in one process or in several, may share a root. Each operation that
//! changes a plan holds the plan's lock for its whole length and starts from the plan's
//! sandboxes as they are on disk, so their operations on one plan serialize. Recovery of an
//! interrupted `commit_all` (its journal still there) is done only by a holder of the plan's
//! lock that took it itself — the proof that the committer is gone; a manager opened while
//! another process commits leaves that plan alone and names it in [`Recovery::busy`], and the
//! first operation on the plan after that commit's process died settles it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::batch::CommitBatch;
use super::boundary::{Resource, ResourceRegistry};
use super::custom::registry::{self, StrategyRegistry};
use super::error::SandboxError;
use super::group::CommitGroup;
use super::journal::CommitJournal;
use super::lock::PlanGuard;
use super::lower::{self, SnapshotInfo};
use super::model::{CommitResult, Strategy};
use super::record::{Record, STATE_FILE};
use super::sandbox::Sandbox;
use super::status::Status;
use super::strategy::{self, Env};
use crate::apply::store::{PrunePolicy, UndoStore};

/// Name of the plans directory under the root.
pub const PLANS_DIR: &str = "plans";

/// Prefix of a plan's directory.
const PLAN_PREFIX: &str = "plan-";

/// Longest accepted plan id, in bytes.
const MAX_ID_LEN: usize = 128;

/// A slot of the sandbox table: filled once, by the first caller (others wait on its lock).
type Slot = Arc<Mutex<Option<Arc<dyn Sandbox>>>>;

/// What opening a manager found and did about earlier runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Plans whose interrupted `commit_all` was rolled back, with the sandboxes undone.
    pub rolled_back: Vec<(String, Vec<String>)>,
    /// What could not be settled (a sandbox that cannot be read, a rollback refused).
    pub warnings: Vec<String>,
    /// Plans left alone at open because another process held their lock (a commit was
    /// running): the first operation on such a plan settles what that process leaves.
    pub busy: Vec<String>,
}

/// One plan executor's sandboxes.
///
/// `Send + Sync`: share it as `Arc<PlanManager>`. Sandboxes are made lazily by
/// [`PlanManager::get_or_create_sandbox`]; their state is on disk under the root, so a
/// manager opened over the same root after a crash lists them again, and an interrupted
/// [`PlanManager::commit_all`] is rolled back when it opens.
///
/// On drop, sandboxes holding no uncommitted work are cleaned up; an active sandbox with
/// changes is kept for the next manager (never lose work).
pub struct Manager {
    root: PathBuf,
    env: Arc<Env>,
    /// The strategies sandboxes are made of by name (the built-in registry until the manager
    /// is given one).
    registry: parking_lot::RwLock<Option<Arc<StrategyRegistry>>>,
    table: Mutex<BTreeMap<(String, String), Slot>>,
    boundaries: Mutex<HashMap<String, String>>,
    recovery: Mutex<Recovery>,
    /// The sandboxes this manager made: the only ones its drop may clean up (others may be
    /// in use by the manager of another process).
    made: Mutex<std::collections::HashSet<String>>,
    cleanup_on_drop: AtomicBool,
}

/// The plan manager under its earlier name. The same type as [`Manager`]; new code names
/// `patchbox::plan::Manager`, as the session family's is `patchbox::session::Manager`.
pub type PlanManager = Manager;

impl PlanManager {
    /// Opens the manager of `root` (the library's sandbox root; plan sandboxes live in
    /// `<root>/plans`). Sandboxes on disk are loaded; interrupted commits are rolled back.
    pub fn open(root: impl AsRef<Path>) -> Result<PlanManager, SandboxError> {
        PlanManager::open_inner(root.as_ref(), None)
    }

    /// [`PlanManager::open`] with the custom strategies of `registry`: sandboxes of them can be
    /// made ([`Strategy::Custom`]), and those on disk are reopened. (A manager opened without
    /// the registry of its custom sandboxes leaves them on disk, with a warning in
    /// [`PlanManager::recovery`]; [`PlanManager::set_registry`] then reopens them.)
    pub fn open_with_registry(
        root: impl AsRef<Path>,
        registry: Arc<StrategyRegistry>,
    ) -> Result<PlanManager, SandboxError> {
        PlanManager::open_inner(root.as_ref(), Some(registry))
    }

    /// Sets the registry of custom strategies, and reopens the custom sandboxes on disk that
    /// were left for want of it (now registered). Returns the ids of those reopened.
    pub fn set_registry(&self, registry: Arc<StrategyRegistry>) -> Vec<String> {
        *self.registry.write() = Some(registry);
        self.reopen_custom()
    }

    /// The registry of custom strategies, if the manager has one.
    pub fn registry(&self) -> Option<Arc<StrategyRegistry>> {
        self.registry.read().clone()
    }

    /// A sandbox of `record` on disk, opened by its strategy's factory.
    fn open_sandbox(&self, record: Record, dir: PathBuf) -> Result<Arc<dyn Sandbox>, SandboxError> {
        let registry = self.registry.read().clone();
        registry::open_sandbox(registry.as_deref(), &self.env, record, dir)
    }

    /// Reopens the custom sandboxes on disk that the manager does not hold yet and whose
    /// strategy is now registered (call after registering a strategy). Returns their ids.
    pub fn reopen_custom(&self) -> Vec<String> {
        let mut out = Vec::new();
        let Ok(plans) = self.plan_dirs() else {
            return out;
        };
        for (_, plan_dir) in plans {
            for dir in subdirs(&plan_dir) {
                if !dir.join(STATE_FILE).exists() {
                    continue;
                }
                let Ok(r) = Record::load(&dir) else { continue };
                if !r.strategy.is_custom() || r.status.is_terminal() {
                    continue;
                }
                let key = (r.plan_id.clone(), r.resource_id.clone());
                let slot = self.table.lock().entry(key.clone()).or_default().clone();
                let mut filled = slot.lock();
                if filled.is_some() {
                    continue;
                }
                let id = r.sandbox_id.clone();
                match self.open_sandbox(r, dir.clone()) {
                    Ok(sb) => {
                        *filled = Some(sb);
                        out.push(id);
                    }
                    Err(_) => {
                        drop(filled);
                        self.forget_empty(&key);
                    }
                }
            }
        }
        out
    }

    fn open_inner(
        root: &Path,
        registry: Option<Arc<StrategyRegistry>>,
    ) -> Result<PlanManager, SandboxError> {
        std::fs::create_dir_all(root.join(PLANS_DIR)).map_err(|e| {
            SandboxError::from_lower(
                None,
                "create plans directory",
                crate::Error::io("create directory", root.join(PLANS_DIR), e),
            )
        })?;
        let root = std::fs::canonicalize(root).map_err(|e| {
            SandboxError::from_lower(None, "resolve root", crate::Error::io("resolve", root, e))
        })?;
        let plans_dir = root.join(PLANS_DIR);
        let env = Arc::new(Env {
            undo: UndoStore::new(&plans_dir).with_policy(PrunePolicy {
                keep_per_project: 1000,
                ..PrunePolicy::default()
            }),
            exclude: vec![root.clone()],
            lowers: plans_dir.join(super::lower::LOWER_DIR),
            lower_bases: Mutex::new(HashMap::new()),
            plans_dir,
        });
        let mut mgr = PlanManager {
            root,
            env,
            registry: parking_lot::RwLock::new(registry),
            table: Mutex::new(BTreeMap::new()),
            boundaries: Mutex::new(HashMap::new()),
            recovery: Mutex::new(Recovery::default()),
            made: Mutex::new(std::collections::HashSet::new()),
            cleanup_on_drop: AtomicBool::new(true),
        };
        mgr.load()?;
        Ok(mgr)
    }

    /// Opens the manager of the default root (`$PATCHBOX_ROOT`, else
    /// `$HOME/.entropic/sandbox`).
    pub fn open_default() -> Result<PlanManager, SandboxError> {
        let root = crate::isolation::default_root()
            .map_err(|e| SandboxError::from_lower(None, "default root", e))?;
        PlanManager::open(root)
    }

    /// Whether dropping the manager cleans up the sandboxes that hold no uncommitted work
    /// (on by default). Tools that only look at plans (the CLI's `plan list`) turn it off.
    pub fn set_cleanup_on_drop(&self, on: bool) {
        self.cleanup_on_drop.store(on, Ordering::Relaxed);
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What recovery found and did: at open, and since (an interrupted commit settled by
    /// the first operation on its plan after its process died).
    pub fn recovery(&self) -> Recovery {
        self.recovery.lock().clone()
    }

    fn plan_dir(&self, plan_id: &str) -> PathBuf {
        self.env.plans_dir.join(format!("{PLAN_PREFIX}{plan_id}"))
    }

    /// Loads every plan's sandboxes; a plan nobody holds the lock of is settled (an
    /// interrupted `commit_all` rolled back, commits left in flight settled); a plan whose
    /// lock is held elsewhere is left to its holder ([`Recovery::busy`]).
    fn load(&mut self) -> Result<(), SandboxError> {
        for (plan_id, plan_dir) in self.plan_dirs()? {
            self.sync_plan(&plan_id);
            match PlanGuard::try_acquire_for(&plan_dir, super::lock::FORK_PATIENCE)? {
                Some(guard) => self.recover_plan(&plan_id, &guard)?,
                None => self.recovery.get_mut().busy.push(plan_id),
            }
        }
        Ok(())
    }

    /// Makes the table know every sandbox of `plan_id` on disk (another manager, maybe in
    /// another process, may have made some): a sandbox the table lacks is opened. The
    /// newest of a resource's sandboxes holds its slot unless the slot's is still in use.
    /// Changes nothing on disk.
    fn sync_plan(&self, plan_id: &str) {
        let plan_dir = self.plan_dir(plan_id);
        let known: std::collections::HashSet<String> = self
            .slots()
            .into_iter()
            .filter(|((p, _), _)| p == plan_id)
            .filter_map(|(_, s)| s.lock().as_ref().map(|s| s.sandbox_id().to_string()))
            .collect();
        for dir in subdirs(&plan_dir) {
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if known.contains(name) || !dir.join(STATE_FILE).exists() {
                continue;
            }
            let record = match Record::load(&dir) {
                Ok(r) if r.plan_id == plan_id => r,
                Ok(_) => continue,
                Err(e) => {
                    self.warn(format!("{}: {e}", dir.display()));
                    continue;
                }
            };
            let key = (record.plan_id.clone(), record.resource_id.clone());
            let slot = self.table.lock().entry(key.clone()).or_default().clone();
            let mut filled = slot.lock();
            let replace = match filled.as_ref() {
                None => true,
                Some(s) => s.status().is_terminal() && *s.sandbox_id() < *record.sandbox_id,
            };
            if !replace {
                continue;
            }
            match self.open_sandbox(record, dir.clone()) {
                Ok(sb) => *filled = Some(sb),
                Err(e) => {
                    self.warn(format!("{}: {e}", dir.display()));
                    drop(filled);
                    self.forget_empty(&key);
                }
            }
        }
    }

    fn warn(&self, w: String) {
        let mut r = self.recovery.lock();
        if !r.warnings.contains(&w) {
            r.warnings.push(w);
        }
    }

    /// Takes the plan's lock for an operation that changes the plan. The table is synced
    /// with the disk first; a holder that took the lock itself settles what a dead holder
    /// left (see [`PlanManager::recover_plan`]).
    fn lock_plan(&self, plan_id: &str) -> Result<PlanGuard, SandboxError> {
        validate_id("plan id", plan_id)?;
        let guard = PlanGuard::acquire(&self.plan_dir(plan_id))?;
        self.sync_plan(plan_id);
        if guard.is_fresh() {
            self.recover_plan(plan_id, &guard)?;
        }
        Ok(guard)
    }

    /// Waits for the plan's lock and settles what a holder that died left: an interrupted
    /// `commit_all` is rolled back, commits and reverts left in flight are settled (a git
    /// that outlived its caller is waited for: it holds the lock until it exits). For a plan
    /// [`Recovery::busy`] named at open. Returns [`PlanManager::recovery`] afterwards.
    pub fn recover(&self, plan_id: &str) -> Result<Recovery, SandboxError> {
        drop(self.lock_plan(plan_id)?);
        Ok(self.recovery())
    }

    /// Under the plan's lock, taken by this thread itself (`guard` proves that no
    /// `commit_all` of the plan is running anywhere): an interrupted `commit_all` (its
    /// journal) is rolled back, and commits left in flight are settled.
    fn recover_plan(&self, plan_id: &str, guard: &PlanGuard) -> Result<(), SandboxError> {
        debug_assert!(guard.is_fresh());
        let plan_dir = guard.plan_dir();
        if let Some(j) = CommitJournal::read(plan_dir)? {
            let (undone, failed) = self.roll_back_lifo(plan_id, &j.order);
            for (id, e) in failed {
                self.warn(format!(
                    "plan {plan_id}: cannot roll back sandbox {id}: {e}"
                ));
            }
            CommitJournal::remove(plan_dir)?;
            self.recovery
                .lock()
                .rolled_back
                .push((plan_id.to_string(), undone));
        }
        for s in self.list_sandboxes(plan_id) {
            if matches!(s.status(), Status::Active | Status::Committed) {
                if let Err(e) = s.settle_in_flight() {
                    self.warn(format!(
                        "plan {plan_id}: cannot settle sandbox {}: {e}",
                        s.sandbox_id()
                    ));
                }
            }
        }
        Ok(())
    }

    fn plan_dirs(&self) -> Result<Vec<(String, PathBuf)>, SandboxError> {
        let mut out = Vec::new();
        for d in subdirs(&self.env.plans_dir) {
            let Some(name) = d.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if let Some(id) = name.strip_prefix(PLAN_PREFIX) {
                out.push((id.to_string(), d.clone()));
            }
        }
        Ok(out)
    }

    /// The sandbox of `(plan_id, resource_id)`, made and created on first use with
    /// `strategy` over `original_path`. Later calls return the same sandbox (whatever
    /// strategy they name). Concurrent first calls make it once. A [`Strategy::Custom`] needs
    /// its name registered in the manager's registry ([`PlanManager::open_with_registry`]);
    /// otherwise the error names the built-in and registered strategies.
    pub fn get_or_create_sandbox(
        &self,
        plan_id: &str,
        resource_id: &str,
        original_path: impl AsRef<Path>,
        strategy: Strategy,
    ) -> Result<Arc<dyn Sandbox>, SandboxError> {
        validate_id("plan id", plan_id)?;
        if resource_id.is_empty() {
            return Err(SandboxError::sandbox(
                None,
                "a resource id must not be empty",
            ));
        }
        // Under the plan's lock, after the table learnt the sandboxes made elsewhere: a
        // second caller, in this process or another, finds the first one's sandbox.
        let plan = self.lock_plan(plan_id)?;
        let key = (plan_id.to_string(), resource_id.to_string());
        let slot = self.table.lock().entry(key.clone()).or_default().clone();
        let mut filled = slot.lock();
        if let Some(sb) = filled.as_ref() {
            if !sb.status().is_terminal() {
                return Ok(sb.clone());
            }
        }
        let original = original_path.as_ref();
        let meta = std::fs::metadata(original);
        // A custom strategy's resource need not be a directory (it resolves it itself).
        let (fits, want) = if strategy.is_custom() {
            (meta.is_ok(), "there")
        } else if strategy.resource_is_file() {
            (meta.as_ref().is_ok_and(|m| m.is_file()), "a file")
        } else {
            (meta.as_ref().is_ok_and(|m| m.is_dir()), "a directory")
        };
        if !fits {
            drop(filled);
            self.forget_empty(&key);
            forget_plan_dir(&plan);
            return Err(SandboxError::Creation {
                resource_id: resource_id.to_string(),
                reason: format!("{} is not {want} (strategy {strategy})", original.display()),
                source: None,
            });
        }
        // An overlay sandbox takes a shared snapshot, or its plan's own one, or makes the
        // latter, as a copy_on_write one does: no sweep removes one meanwhile.
        let _lower_lock = if matches!(strategy, Strategy::Overlay | Strategy::CopyOnWrite) {
            Some(
                lower::lock(&self.env.lowers, false)
                    .map_err(|e| SandboxError::from_lower(None, "lock the shared snapshots", e))?,
            )
        } else {
            None
        };
        let registry = self.registry.read().clone();
        let made = registry::new_sandbox(
            registry.as_deref(),
            &strategy,
            &self.env,
            &self.plan_dir(plan_id),
            resource_id,
            original,
        )
        .and_then(|sb| sb.create(plan_id).map(|_| sb));
        match made {
            Ok(sb) => {
                self.made.lock().insert(sb.sandbox_id().to_string());
                *filled = Some(sb.clone());
                Ok(sb)
            }
            Err(e) => {
                drop(filled);
                self.forget_empty(&key);
                forget_plan_dir(&plan);
                Err(e)
            }
        }
    }

    /// Removes the slot of `key` if no sandbox was made in it (a failed creation).
    fn forget_empty(&self, key: &(String, String)) {
        let mut table = self.table.lock();
        if table
            .get(key)
            .is_some_and(|s| s.try_lock().is_some_and(|s| s.is_none()))
        {
            table.remove(key);
        }
    }

    /// The sandbox of `(plan_id, resource_id)`, if one was made.
    pub fn get_sandbox(&self, plan_id: &str, resource_id: &str) -> Option<Arc<dyn Sandbox>> {
        self.sync_plan(plan_id);
        let slot = self
            .table
            .lock()
            .get(&(plan_id.to_string(), resource_id.to_string()))
            .cloned()?;
        let sb = slot.lock().clone();
        sb
    }

    /// Every sandbox of `plan_id`, in creation order (those other managers of the root made
    /// too). A read: nothing is changed or recovered.
    pub fn list_sandboxes(&self, plan_id: &str) -> Vec<Arc<dyn Sandbox>> {
        self.sync_plan(plan_id);
        let mut out: Vec<Arc<dyn Sandbox>> = self
            .slots()
            .into_iter()
            .filter(|((p, _), _)| p == plan_id)
            .filter_map(|(_, s)| s.lock().clone())
            .collect();
        out.sort_by(|a, b| a.sandbox_id().cmp(b.sandbox_id()));
        out
    }

    /// The ids of every plan with sandboxes.
    pub fn list_plans(&self) -> Vec<String> {
        if let Ok(plans) = self.plan_dirs() {
            for (p, _) in plans {
                self.sync_plan(&p);
            }
        }
        let mut plans: Vec<String> = self
            .slots()
            .into_iter()
            .filter(|(_, s)| s.lock().is_some())
            .map(|((p, _), _)| p)
            .collect();
        plans.dedup();
        plans
    }

    fn slots(&self) -> Vec<((String, String), Slot)> {
        self.table
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

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
    pub fn commit_all(&self, plan_id: &str) -> Result<Vec<CommitResult>, SandboxError> {
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
        plan_id: &str,
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
        plan_id: &str,
        opts: &CommitAllOptions,
    ) -> Result<Vec<CommitResult>, SandboxError> {
        let plan_dir = self.plan_dir(plan_id);
        let _lock = self.lock_plan(plan_id)?;
        let mut todo: Vec<Arc<dyn Sandbox>> = self
            .list_sandboxes(plan_id)
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
        let order: Vec<String> = todo.iter().map(|s| s.sandbox_id().to_string()).collect();
        CommitJournal {
            plan_id: plan_id.to_string(),
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

    /// Rolls back, newest first, every sandbox of `order` that is `Committed`, after
    /// settling a commit one left in flight (a panic between its change landing and its
    /// status saying so: it is `Committed` then, and undone with the others). Returns the
    /// ids undone (in that order) and those that could not be.
    fn roll_back_lifo(
        &self,
        plan_id: &str,
        order: &[String],
    ) -> (Vec<String>, Vec<(String, String)>) {
        let by_id: HashMap<String, Arc<dyn Sandbox>> = self
            .list_sandboxes(plan_id)
            .into_iter()
            .map(|s| (s.sandbox_id().to_string(), s))
            .collect();
        let mut undone = Vec::new();
        let mut failed = Vec::new();
        for id in order.iter().rev() {
            let Some(s) = by_id.get(id) else { continue };
            // Also brings the status up to what is on disk (another process's doing).
            if let Err(e) = s.settle_in_flight() {
                failed.push((id.clone(), e.to_string()));
                continue;
            }
            if s.status() != Status::Committed {
                continue;
            }
            match s.rollback() {
                Ok(()) => {
                    // Compensation, not abandonment: the sandbox keeps its changes and is
                    // active again (RolledBack → Active), so the plan can commit again.
                    let _ = s.get_path(Path::new(""));
                    undone.push(id.clone())
                }
                Err(e) => failed.push((id.clone(), e.to_string())),
            }
        }
        (undone, failed)
    }

    /// Rolls back every `Active` (discarding its changes) and `Committed` (undoing its
    /// commit) sandbox of the plan; the first error is returned after trying them all.
    pub fn rollback_all(&self, plan_id: &str) -> Result<(), SandboxError> {
        let _plan = self.lock_plan(plan_id)?;
        let mut first = None;
        for s in self.list_sandboxes(plan_id).into_iter().rev() {
            if matches!(s.status(), Status::Active | Status::Committed) {
                if let Err(e) = s.rollback() {
                    first.get_or_insert(e);
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Cleans up every sandbox of the plan (an active one's changes are discarded) and
    /// forgets them; the first error is returned after trying them all.
    pub fn cleanup_all(&self, plan_id: &str) -> Result<(), SandboxError> {
        let plan = self.lock_plan(plan_id)?;
        let mut first = None;
        for s in self.list_sandboxes(plan_id) {
            if let Err(e) = s.cleanup() {
                first.get_or_insert(e);
            }
        }
        self.table.lock().retain(|(p, _), slot| {
            p != plan_id
                || slot
                    .lock()
                    .as_ref()
                    .is_some_and(|s| !s.status().is_terminal())
        });
        if first.is_none() {
            forget_plan_dir(&plan);
        }
        first.map_or(Ok(()), Err)
    }

    /// Cleans up sandboxes whose work is over (`Committed`, `RolledBack`, `Errored`), the
    /// remains of creations a crash interrupted, and the shared snapshots no sandbox uses
    /// that are not the newest of their original; returns how many were removed.
    pub fn cleanup_abandoned(&self) -> Result<usize, SandboxError> {
        let mut n = 0;
        // Every plan's lock, in turn order: no sandbox is half-made or in use meanwhile.
        let mut guards = Vec::new();
        for (plan_id, _) in self.plan_dirs()? {
            guards.push(self.lock_plan(&plan_id)?);
        }
        for (_, slot) in self.slots() {
            let sb = slot.lock().clone();
            if let Some(s) = sb {
                if matches!(
                    s.status(),
                    Status::Committed | Status::RolledBack | Status::Errored
                ) {
                    s.cleanup()?;
                    n += 1;
                }
            }
        }
        self.table.lock().retain(|_, slot| {
            slot.lock()
                .as_ref()
                .is_some_and(|s| !s.status().is_terminal())
        });
        let known: std::collections::HashSet<String> = self
            .slots()
            .into_iter()
            .filter_map(|(_, s)| s.lock().as_ref().map(|s| s.sandbox_id().to_string()))
            .collect();
        for (_, plan_dir) in self.plan_dirs()? {
            for dir in subdirs(&plan_dir) {
                let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if ulid::Ulid::from_string(name).is_ok()
                    && !known.contains(name)
                    && !dir.join(STATE_FILE).exists()
                {
                    strategy::remove_dir(&dir).map_err(|e| {
                        SandboxError::from_lower(Some(name), "remove a half-made sandbox", e)
                    })?;
                    n += 1;
                }
            }
        }
        drop(guards);
        n += self.sweep_lowers(&|_, newest| !newest)?;
        Ok(n)
    }

    /// Takes a stable snapshot of `original` that every `overlay` sandbox created for it
    /// afterwards (same canonical path, any plan) uses as its lower layer, pre-images and
    /// rollback source, instead of copying the tree: their creation then costs a few
    /// directories and a mount, whatever the tree's size. The snapshot is taken with the
    /// snapshot engine into `<root>/plans/lower/<ulid>/` and becomes ready atomically (a
    /// rename) when complete; a manager opened later over the root finds it.
    ///
    /// A snapshot is a point-in-time view: edits made to the original after it are not in
    /// the sandboxes' view, and their commits merge with those edits through the 3-way apply
    /// (or refuse on a conflict), as for any sandbox whose original changed after create.
    /// Calling this again takes a newer snapshot for the sandboxes created after it;
    /// existing sandboxes keep theirs, and the older snapshots of the original that no
    /// sandbox uses are removed then. [`PlanManager::cleanup_abandoned`] removes the
    /// snapshots no sandbox uses that are not the newest of their original;
    /// [`PlanManager::drop_snapshots`] removes the unused ones of an original.
    pub fn prepare_snapshot(
        &self,
        original: impl AsRef<Path>,
    ) -> Result<SnapshotInfo, SandboxError> {
        let original = original.as_ref();
        let canon = std::fs::canonicalize(original)
            .ok()
            .filter(|p| p.is_dir())
            .ok_or_else(|| {
                SandboxError::sandbox(
                    None,
                    format!("cannot snapshot {}: not a directory", original.display()),
                )
            })?;
        let (info, base) = lower::prepare(&self.env.lowers, &canon, &self.env.exclude, None)
            .map_err(|e| SandboxError::from_lower(None, "prepare a snapshot", e))?;
        self.env
            .lower_bases
            .lock()
            .insert(info.id.clone(), Arc::new(base));
        // The older snapshots of this original are never taken by a new sandbox again (the
        // newest is), and each is a copy of the tree: those no sandbox uses go now rather
        // than at the next `cleanup_abandoned`, so repeated prepares do not fill the disk.
        // The new snapshot is ready either way: a sweep that fails is retried by that call.
        let _ = self.sweep_lowers(&|s, newest| s.original == canon && !newest);
        // The cached bases of the removed ones go too (a stat each, not a second listing).
        self.env
            .lower_bases
            .lock()
            .retain(|id, _| lower::base_dir(&self.env.lowers, id).is_dir());
        Ok(info)
    }

    /// Every ready shared snapshot under the root, oldest first.
    pub fn snapshots(&self) -> Vec<SnapshotInfo> {
        lower::list(&self.env.lowers)
    }

    /// Removes every shared snapshot of `original` that no sandbox uses (the newest too:
    /// sandboxes created afterwards take private snapshots until the next
    /// [`PlanManager::prepare_snapshot`]). Returns how many were removed.
    pub fn drop_snapshots(&self, original: impl AsRef<Path>) -> Result<usize, SandboxError> {
        let original = original.as_ref();
        let canon = std::fs::canonicalize(original).unwrap_or_else(|_| original.to_path_buf());
        self.sweep_lowers(&|s, _| s.original == canon)
    }

    /// Removes the shared snapshots no sandbox's state names that `removable` accepts.
    fn sweep_lowers(
        &self,
        removable: &dyn Fn(&SnapshotInfo, bool) -> bool,
    ) -> Result<usize, SandboxError> {
        let err = |e| SandboxError::from_lower(None, "remove unused shared snapshots", e);
        if !self.env.lowers.is_dir() {
            return Ok(0);
        }
        // Taken first, so no sandbox can start using a snapshot while references are read.
        let _lock = lower::lock(&self.env.lowers, true).map_err(err)?;
        let mut referenced = std::collections::HashSet::new();
        for (_, plan_dir) in self.plan_dirs()? {
            for dir in subdirs(&plan_dir) {
                if !dir.join(STATE_FILE).exists() {
                    continue;
                }
                match Record::load(&dir) {
                    Ok(r) => {
                        if let Some(id) = r.metadata.get(lower::LOWER_KEY) {
                            referenced.insert(id.clone());
                        }
                    }
                    // A state that cannot be read might name any of them: keep them all.
                    Err(_) => return Ok(0),
                }
            }
        }
        lower::sweep(&self.env.lowers, &referenced, removable).map_err(err)
    }

    /// The boundary key of `resource` (the id of the resource whose sandbox it shares), cached
    /// until [`PlanManager::clear_boundary_cache`].
    pub fn resolve_sandbox_key(
        &self,
        resource: &Resource,
        registry: &ResourceRegistry,
    ) -> Result<String, SandboxError> {
        if let Some(k) = self.boundaries.lock().get(&resource.id) {
            return Ok(k.clone());
        }
        let k = registry.resolve_boundary(&resource.id)?;
        self.boundaries
            .lock()
            .insert(resource.id.clone(), k.clone());
        Ok(k)
    }

    /// The sandbox of the boundary `resource` belongs to, shared by every resource under that
    /// boundary; the returned view's `get_path` maps resource-relative paths into it.
    pub fn get_or_create_sandbox_for_resource(
        &self,
        plan_id: &str,
        resource: &Resource,
        registry: &ResourceRegistry,
    ) -> Result<ResourceSandbox, SandboxError> {
        let key = self.resolve_sandbox_key(resource, registry)?;
        let boundary = registry.get(&key).ok_or_else(|| {
            SandboxError::sandbox(None, format!("unknown boundary resource {key:?}"))
        })?;
        let sandbox = self.get_or_create_sandbox(
            plan_id,
            &boundary.id,
            &boundary.path,
            boundary.boundary_strategy(),
        )?;
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let prefix = canon(&resource.path)
            .strip_prefix(canon(&boundary.path))
            .map(Path::to_path_buf)
            .map_err(|_| {
                SandboxError::sandbox(
                    None,
                    format!(
                        "resource {:?} at {} is not under its boundary {} at {}",
                        resource.id,
                        resource.path.display(),
                        boundary.id,
                        boundary.path.display()
                    ),
                )
            })?;
        Ok(ResourceSandbox { sandbox, prefix })
    }

    /// Drops the boundary cache (call when the resource registry changes).
    pub fn clear_boundary_cache(&self) {
        self.boundaries.lock().clear();
    }
}

impl Drop for PlanManager {
    fn drop(&mut self) {
        if !self.cleanup_on_drop.load(Ordering::Relaxed) {
            return;
        }
        let made = std::mem::take(&mut *self.made.lock());
        for (_, slot) in self.slots() {
            let Some(s) = slot.lock().clone() else {
                continue;
            };
            if !made.contains(s.sandbox_id()) {
                continue;
            }
            let keep = match s.status() {
                Status::Active => s.diff().map(|d| !d.entries.is_empty()).unwrap_or(true),
                Status::Pending | Status::CleanedUp => true,
                _ => false,
            };
            if !keep {
                let _ = s.cleanup();
            }
        }
    }
}

/// A resource's view of its boundary's sandbox.
#[derive(Clone)]
pub struct ResourceSandbox {
    /// The boundary's sandbox.
    pub sandbox: Arc<dyn Sandbox>,
    /// The resource's place under its boundary.
    pub prefix: PathBuf,
}

impl ResourceSandbox {
    /// Where `resource_relative` (relative to the resource) lives in the sandbox.
    pub fn get_path(&self, resource_relative: impl AsRef<Path>) -> Result<PathBuf, SandboxError> {
        self.sandbox
            .get_path(&self.prefix.join(resource_relative.as_ref()))
    }
}

/// The options of [`PlanManager::commit_all_with`].
#[doc(hidden)]
#[derive(Clone, Debug, Default)]
pub struct CommitAllOptions {
    /// Test fault (feature `fault-injection`): the commit at this position fails (as a
    /// conflict would).
    #[cfg(feature = "fault-injection")]
    pub fail_at: Option<usize>,
    /// Test fault (feature `fault-injection`): the process aborts before the commit at this
    /// position.
    #[cfg(feature = "fault-injection")]
    pub crash_before: Option<usize>,
    /// What produced the work, into each result's metadata.
    pub provenance: crate::provenance::Provenance,
}

impl CommitAllOptions {
    /// The failure injected into the commit at position `i` (`s`'s), if any; never one
    /// without the feature `fault-injection`.
    fn injected_failure(&self, i: usize, s: &Arc<dyn Sandbox>) -> Option<SandboxError> {
        #[cfg(feature = "fault-injection")]
        if self.fail_at == Some(i) {
            return Some(super::fault::commit_failure(s.sandbox_id()));
        }
        let _ = (i, s);
        None
    }

    /// Where the process is to abort (before the commit at that position); never without
    /// the feature `fault-injection`.
    fn crash_point(&self) -> Option<usize> {
        #[cfg(feature = "fault-injection")]
        return self.crash_before;
        #[cfg(not(feature = "fault-injection"))]
        None
    }
}

/// Removes the directory of `plan`'s plan when no sandbox is left in it (its lock file too:
/// waiters on it start again on a new one, see [`crate::plan::lock`]).
fn forget_plan_dir(plan: &PlanGuard) {
    let dir = plan.plan_dir();
    if subdirs(dir).is_empty() && !dir.join(super::journal::JOURNAL_FILE).exists() {
        plan.remove_file();
        let _ = std::fs::remove_dir(dir);
    }
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

fn validate_id(what: &str, id: &str) -> Result<(), SandboxError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(SandboxError::sandbox(
            None,
            format!("invalid {what} {id:?}: use 1 to {MAX_ID_LEN} of A-Z a-z 0-9 . _ - (not starting with '.')"),
        ))
    }
}

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
fn check_all(todo: &[Arc<dyn Sandbox>]) -> Option<(&Arc<dyn Sandbox>, SandboxError)> {
    use std::sync::atomic::AtomicUsize;
    let parallel: Vec<usize> = (0..todo.len())
        .filter(|&i| through_apply(&todo[i]))
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(parallel.len());
    let mut errors: Vec<Option<SandboxError>> = (0..todo.len()).map(|_| None).collect();
    if threads > 1 {
        let next = AtomicUsize::new(0);
        let found: Vec<(usize, SandboxError)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut out = Vec::new();
                        while let Some(&i) = parallel.get(next.fetch_add(1, Ordering::Relaxed)) {
                            if let Err(e) = todo[i].check_commit() {
                                out.push((i, e));
                            }
                        }
                        out
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        for (i, e) in found {
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
fn group_len(todo: &[Arc<dyn Sandbox>]) -> usize {
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
fn commit_group(
    members: &[Arc<dyn Sandbox>],
    message: &str,
    opts: &CommitAllOptions,
) -> Vec<(Result<CommitResult, SandboxError>, CommitBatch)> {
    let group = CommitGroup::new(members.len(), opts.crash_point());
    // The members commit under the caller's plan lock.
    let lent = super::lock::lend();
    std::thread::scope(|scope| {
        let handles: Vec<_> = members
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let group = &group;
                let lent = &lent;
                scope.spawn(move || {
                    let _held = lent.enter();
                    let mut batch = CommitBatch::member(group.hook(i));
                    let r = match opts.injected_failure(i, s) {
                        Some(e) => Err(e),
                        None => commit_caught(s, message, &mut batch),
                    };
                    group.done(i, r.is_ok());
                    (r, batch)
                })
            })
            .collect();
        handles
            .into_iter()
            .zip(members)
            .map(|(h, s)| {
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
fn commit_caught(
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
