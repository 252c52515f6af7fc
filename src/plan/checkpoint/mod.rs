//! Checkpoints of plan sandboxes: before Execute, after a successful Execute, before Apply —
//! and rollback to the latest one when a phase fails.
//!
//! ```
//! use patchbox::plan::checkpoint::{CheckpointManager, Phase};
//! use patchbox::plan::{PlanManager, Strategy};
//! # fn main() -> Result<(), patchbox::plan::SandboxError> {
//! let root = tempfile::tempdir().unwrap();
//! let project = tempfile::tempdir().unwrap();
//! std::fs::write(project.path().join("a.txt"), "one\n").unwrap();
//! let plans = PlanManager::open(root.path())?;
//! let sb = plans.get_or_create_sandbox("p", "r", project.path(), Strategy::CopyOnWrite)?;
//! let checkpoints = CheckpointManager::new(root.path());
//! let before = checkpoints.create_checkpoint(&sb, "p", Phase::PreExecute.name(), Default::default())?;
//! std::fs::write(sb.get_path("a.txt".as_ref())?, "broken\n").unwrap(); // a failing phase
//! assert!(checkpoints.rollback_to(&before)?);
//! assert_eq!(std::fs::read_to_string(sb.get_path("a.txt".as_ref())?).unwrap(), "one\n");
//! # Ok(()) }
//! ```
//!
//! A checkpoint is not a copy of the sandbox. It records the sandbox's changes against its
//! base ([`store`]: content-addressed objects named by git blob id, plus a small manifest),
//! so it costs what changed, content several checkpoints share is stored once, and N
//! checkpoints of an unchanged tree cost N small files. Rollback writes only the paths where
//! the sandbox and the checkpoint differ ([`files`]). Checkpoints live in the sandbox's own
//! directory: cleaning the sandbox up removes them. A database sandbox checkpoints natively
//! (savepoints); `none` refuses (its writes went to the original).

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use super::backend::{Checkpoints, NativeCheckpoints};
use super::error::SandboxError;
use super::lock::PlanGuard;
use super::manager::PLANS_DIR;
use super::sandbox::{CheckpointSupport, Sandbox};
use super::status::Status;
use crate::id::{CheckpointId, IntoId, PlanId, SandboxId};

pub mod files;
pub mod remote;
pub mod store;

use remote::RemoteCheckpoints;

use store::{Manifest, Store};

/// The phases plan executors checkpoint at (any other name is accepted as a free-form phase).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Before the Execute phase.
    PreExecute,
    /// After a successful Execute phase.
    PostExecute,
    /// Before the Apply phase.
    PreApply,
}

impl Phase {
    /// `pre_execute`, `post_execute` or `pre_apply`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::PreExecute => "pre_execute",
            Phase::PostExecute => "post_execute",
            Phase::PreApply => "pre_apply",
        }
    }
}

/// A point-in-time state of a sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// Its ULID.
    pub checkpoint_id: String,
    /// The sandbox.
    pub sandbox_id: String,
    /// The plan.
    pub plan_id: String,
    /// The phase it was taken at.
    pub phase: String,
    /// When.
    pub created_at: SystemTime,
    /// The caller's metadata.
    pub metadata: BTreeMap<String, String>,
    /// Its manifest (the snapshot: the changes it records and where their content is).
    pub snapshot_path: PathBuf,
}

impl Checkpoint {
    fn from_manifest(m: &Manifest, path: PathBuf) -> Checkpoint {
        Checkpoint {
            checkpoint_id: m.checkpoint_id.to_string(),
            sandbox_id: m.sandbox_id.to_string(),
            plan_id: m.plan_id.to_string(),
            phase: m.phase.clone(),
            created_at: UNIX_EPOCH + Duration::from_millis(m.created_at_ms),
            metadata: m.metadata.clone(),
            snapshot_path: path,
        }
    }
}

struct Known {
    sandbox: Arc<dyn Sandbox>,
    store: Arc<Store>,
    /// Serializes checkpoint and rollback of one sandbox.
    op: Arc<Mutex<()>>,
}

/// Checkpoints of the sandboxes of one [`PlanManager`](super::PlanManager)'s root.
/// `Send + Sync`.
///
/// On drop, the checkpoints it made are removed unless [`CheckpointManager::keep`] was
/// called.
pub struct CheckpointManager {
    plans_dir: PathBuf,
    /// Set by [`CheckpointManager::temporary`]: the manager's own folder under the system
    /// temp folder, where its checkpoints are (removed with them).
    temp_root: Option<PathBuf>,
    sandboxes: Mutex<HashMap<SandboxId, Known>>,
    /// checkpoint id → sandbox id, for the checkpoints made here.
    made: Mutex<Vec<(CheckpointId, SandboxId)>>,
    keep: AtomicBool,
    /// The object store checkpoints are also written to ([`CheckpointManager::with_store`]).
    remote: Option<RemoteCheckpoints>,
}

impl CheckpointManager {
    /// The checkpoint manager of the sandboxes under `root` (the root a
    /// [`PlanManager`](super::PlanManager) was opened with).
    pub fn new(root: impl AsRef<Path>) -> CheckpointManager {
        CheckpointManager {
            plans_dir: root.as_ref().join(PLANS_DIR),
            temp_root: None,
            sandboxes: Mutex::new(HashMap::new()),
            made: Mutex::new(Vec::new()),
            keep: AtomicBool::new(false),
            remote: None,
        }
    }

    /// A checkpoint manager whose file checkpoints are also written to the object store
    /// `url` (`s3://bucket/prefix`, or a directory), so another machine's manager can
    /// restore a sandbox from them ([`CheckpointManager::restore_from_store`]). Nothing is
    /// sent before the first checkpoint. Checkpoints in the store outlive this manager (its
    /// drop removes only the local copies); [`CheckpointManager::delete_checkpoint`] and
    /// [`CheckpointManager::prune_store`] remove them.
    pub fn with_store(
        root: impl AsRef<Path>,
        url: &crate::store::StoreUrl,
    ) -> Result<CheckpointManager, SandboxError> {
        let mut m = CheckpointManager::new(root);
        m.remote = Some(RemoteCheckpoints::open(url)?);
        Ok(m)
    }

    /// [`CheckpointManager::with_store`] with a store already open (an
    /// [`S3Objects`](crate::store::S3Objects) configured in code, say).
    pub fn with_objects(
        root: impl AsRef<Path>,
        objects: Arc<dyn crate::store::Objects>,
    ) -> CheckpointManager {
        let mut m = CheckpointManager::new(root);
        m.remote = Some(RemoteCheckpoints::new(objects));
        m
    }

    /// A checkpoint manager whose checkpoints live in a folder of its own under the system
    /// temp folder (`$TMPDIR/patchbox-checkpoints-<ULID>`), as the plan executors'
    /// documentation places them: deleting a checkpoint removes its folders once empty,
    /// [`CheckpointManager::cleanup`] removes every checkpoint it made, and dropping it removes
    /// the folder (unless [`CheckpointManager::keep`] was called). Checkpoints and rollbacks
    /// take the lock of the sandbox's own plan, wherever its manager's root is.
    pub fn temporary() -> Result<CheckpointManager, SandboxError> {
        let dir =
            std::env::temp_dir().join(format!("patchbox-checkpoints-{}", crate::id::next_string()));
        // Private (0700): the folder holds the sandbox's content, in a shared temp folder.
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| {
                SandboxError::from_lower(
                    None,
                    "create checkpoint folder",
                    crate::Error::io("create directory", &dir, e),
                )
            })?;
        let mut m = CheckpointManager::new(&dir);
        m.plans_dir = dir.clone();
        m.temp_root = Some(dir);
        Ok(m)
    }

    /// Where the checkpoints are: the root's plans folder, or the temporary folder.
    pub fn storage_dir(&self) -> &Path {
        &self.plans_dir
    }

    /// Keeps the checkpoints on disk when the manager is dropped.
    pub fn keep(&self) {
        self.keep.store(true, Ordering::Relaxed);
    }

    fn known(&self, sb: &Arc<dyn Sandbox>) -> Result<(Arc<Store>, Arc<Mutex<()>>), SandboxError> {
        let mut map = self.sandboxes.lock();
        if let Some(k) = map.get(sb.sandbox_id()) {
            return Ok((k.store.clone(), k.op.clone()));
        }
        let ctx = sb.context().ok_or_else(|| SandboxError::State {
            sandbox_id: Some(sb.sandbox_id().to_string()),
            from: sb.status(),
            to: Status::Active,
        })?;
        let dir = self
            .plans_dir
            .join(format!("plan-{}", ctx.plan_id))
            .join(sb.sandbox_id());
        let k = Known {
            sandbox: sb.clone(),
            store: Arc::new(Store::new(&dir)),
            op: Arc::new(Mutex::new(())),
        };
        let out = (k.store.clone(), k.op.clone());
        map.insert(sb.id().clone(), k);
        Ok(out)
    }

    /// Records the state of `sandbox` now. `phase` is `pre_execute`, `post_execute`,
    /// `pre_apply` ([`Phase::name`]) or any other name.
    pub fn create_checkpoint(
        &self,
        sandbox: &Arc<dyn Sandbox>,
        plan_id: impl IntoId<PlanId>,
        phase: &str,
        metadata: BTreeMap<String, String>,
    ) -> Result<Checkpoint, SandboxError> {
        let plan_id = plan_id.into_id()?;
        if let Some(ctx) = sandbox.context() {
            if plan_id != ctx.plan_id {
                return Err(SandboxError::sandbox(
                    Some(sandbox.sandbox_id()),
                    format!(
                        "refused checkpoint: plan_id {plan_id:?} is not the sandbox's plan {:?}",
                        ctx.plan_id
                    ),
                ));
            }
        }
        let (store, op) = self.known(sandbox)?;
        let _plan = self.lock_plan_of(sandbox)?;
        let _op = op.lock();
        let id = CheckpointId::new();
        let (kind, changes) = match sandbox.checkpoints() {
            Checkpoints::Files => ("files", files::capture(sandbox.as_ref(), &store)?),
            Checkpoints::Native(native) => {
                native.save(id.as_str())?;
                ("native", BTreeMap::new())
            }
            Checkpoints::None => {
                return Err(SandboxError::sandbox(
                    Some(sandbox.sandbox_id()),
                    format!(
                        "strategy {} cannot be checkpointed: its writes went to the original",
                        sandbox.strategy()
                    ),
                ))
            }
        };
        // Recorded as a delta against the sandbox's latest checkpoint: a checkpoint costs
        // what changed since the previous one.
        let parent = store.list()?.pop().filter(|_| kind == "files");
        let changes = match &parent {
            Some(p) => store::delta(&store.full(&p.checkpoint_id)?, &changes),
            None => changes,
        };
        let m = Manifest {
            checkpoint_id: id.clone(),
            parent: parent.map(|p| p.checkpoint_id),
            sandbox_id: sandbox.id().clone(),
            plan_id,
            phase: phase.to_string(),
            created_at_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            metadata,
            kind: kind.to_string(),
            changes,
        };
        let path = store.write(&m)?;
        self.made.lock().push((id.clone(), sandbox.id().clone()));
        if let (Some(remote), "files") = (&self.remote, kind) {
            // The local checkpoint stands whatever the store does: a failure says so, and
            // `publish_checkpoint` sends it later.
            remote.publish(&store, &m, store.full(&id)?).map_err(|e| {
                SandboxError::sandbox(
                    Some(sandbox.sandbox_id()),
                    format!(
                        "checkpoint {id} is kept locally, but storing it in {} failed: {e}",
                        remote.url()
                    ),
                )
            })?;
        }
        Ok(Checkpoint::from_manifest(&m, path))
    }

    /// Writes a local checkpoint to the object store (again): for one whose upload failed.
    /// Refused without a store, or for a native (database) checkpoint, which lives in its
    /// database.
    pub fn publish_checkpoint(&self, checkpoint: &Checkpoint) -> Result<(), SandboxError> {
        let remote = self.remote_or_refuse()?;
        let store = match self.sandboxes.lock().get(checkpoint.sandbox_id.as_str()) {
            Some(k) => k.store.clone(),
            None => {
                return Err(SandboxError::sandbox(
                    Some(&checkpoint.sandbox_id),
                    "this checkpoint manager does not know the sandbox: attach it first",
                ))
            }
        };
        // A text that is no checkpoint id names no checkpoint.
        let id = CheckpointId::parse(&checkpoint.checkpoint_id).ok();
        let m = id.map(|id| store.read(&id)).transpose()?.flatten();
        let m = m.ok_or_else(|| {
            SandboxError::sandbox(
                Some(&checkpoint.sandbox_id),
                format!("no checkpoint {}", checkpoint.checkpoint_id),
            )
        })?;
        if m.kind != "files" {
            return Err(SandboxError::sandbox(
                Some(&checkpoint.sandbox_id),
                "a native checkpoint lives in its database and cannot be stored elsewhere",
            ));
        }
        remote.publish(&store, &m, store.full(&m.checkpoint_id)?)
    }

    fn remote_or_refuse(&self) -> Result<&RemoteCheckpoints, SandboxError> {
        self.remote.as_ref().ok_or_else(|| {
            SandboxError::sandbox(None, "this checkpoint manager has no object store")
        })
    }

    /// The checkpoints in the object store, of every plan and sandbox, oldest first (their
    /// `snapshot_path` is empty: they have no local manifest).
    pub fn list_stored(&self) -> Result<Vec<Checkpoint>, SandboxError> {
        Ok(self
            .remote_or_refuse()?
            .list()?
            .iter()
            .map(|m| Checkpoint::from_manifest(m, PathBuf::new()))
            .collect())
    }

    /// Makes `sandbox` exactly what the sandbox of stored checkpoint `checkpoint_id` was at
    /// that checkpoint — on this machine, from the object store. The sandbox must have the
    /// same base (a sandbox of a copy of the same project state); its files then match the
    /// checkpoint's, and the checkpoint is kept locally too, so a later
    /// [`CheckpointManager::rollback_to`] works without the store. `Ok(None)` when the store
    /// has no such checkpoint. Refused on a committed sandbox, as rollback is.
    pub fn restore_from_store(
        &self,
        sandbox: &Arc<dyn Sandbox>,
        checkpoint_id: &str,
    ) -> Result<Option<Checkpoint>, SandboxError> {
        let remote = self.remote_or_refuse()?;
        let (store, op) = self.known(sandbox)?;
        let _plan = self.lock_plan_of(sandbox)?;
        let _op = op.lock();
        if sandbox.status() == Status::Committed {
            return Err(SandboxError::State {
                sandbox_id: Some(sandbox.sandbox_id().to_string()),
                from: Status::Committed,
                to: Status::Active,
            });
        }
        if sandbox.checkpoint_support() != CheckpointSupport::Files {
            return Err(SandboxError::sandbox(
                Some(sandbox.sandbox_id()),
                format!(
                    "strategy {} cannot restore a file checkpoint",
                    sandbox.strategy()
                ),
            ));
        }
        // The caller's text, parsed here where it first names a file or a key.
        let checkpoint_id = &CheckpointId::parse(checkpoint_id)?;
        let Some(m) = remote.read(checkpoint_id)? else {
            return Ok(None);
        };
        remote.fetch_into(&m, &store)?;
        files::restore(sandbox.as_ref(), &store, &m.changes)?;
        let local = Manifest {
            sandbox_id: sandbox.id().clone(),
            ..m
        };
        let path = match store.read(checkpoint_id)? {
            Some(_) => store.manifest_path(checkpoint_id),
            None => store.write(&local)?,
        };
        Ok(Some(Checkpoint::from_manifest(&local, path)))
    }

    /// Removes the object store's checkpoint objects that no stored checkpoint refers to any
    /// more and that are older than `grace` (younger ones may belong to an upload running
    /// elsewhere); returns how many went.
    pub fn prune_store(&self, grace: Duration) -> Result<usize, SandboxError> {
        self.remote_or_refuse()?.prune(grace)
    }

    /// Makes the checkpoint's sandbox exactly what it was at the checkpoint (contents, modes,
    /// symlinks, deleted and added files), in time proportional to the difference. `Ok(false)`
    /// when the checkpoint no longer exists (deleted, or its sandbox cleaned up).
    ///
    /// Rolling back to a checkpoint is only for a sandbox whose work is not committed: on a
    /// `Committed` sandbox it is refused alike for every strategy, with a
    /// [`SandboxError::State`] naming the sandbox and its status (`committed -> active`), and
    /// nothing changes, neither the sandbox nor the original. To go back, undo the commit
    /// first ([`Sandbox::rollback`]: the sandbox is then `RolledBack`, keeps its changes, and
    /// may be rolled back to a checkpoint).
    pub fn rollback_to(&self, checkpoint: &Checkpoint) -> Result<bool, SandboxError> {
        let (sb, store, op) = {
            let map = self.sandboxes.lock();
            let Some(k) = map.get(checkpoint.sandbox_id.as_str()) else {
                return Err(SandboxError::sandbox(
                    Some(&checkpoint.sandbox_id),
                    "this checkpoint manager does not know the sandbox: attach it first",
                ));
            };
            (k.sandbox.clone(), k.store.clone(), k.op.clone())
        };
        let _plan = self.lock_plan_of(&sb)?;
        let _op = op.lock();
        // Checked before anything is read or restored: a committed sandbox's files are what
        // its original holds now, and a restore would make them disagree with the commit.
        if sb.status() == Status::Committed {
            return Err(SandboxError::State {
                sandbox_id: Some(sb.sandbox_id().to_string()),
                from: Status::Committed,
                to: Status::Active,
            });
        }
        let Ok(id) = CheckpointId::parse(&checkpoint.checkpoint_id) else {
            // A text that is no checkpoint id names no checkpoint.
            return Ok(false);
        };
        let Some(m) = store.read(&id)? else {
            return Ok(false);
        };
        if m.kind == "native" {
            native_of(&sb)?.restore(m.checkpoint_id.as_str())?;
        } else {
            files::restore(sb.as_ref(), &store, &store.full(&m.checkpoint_id)?)?;
        }
        Ok(true)
    }

    /// Writes into `dest` (a directory that must not exist yet) the whole tree the sandbox had
    /// at `checkpoint`, leaving the sandbox as it is: what the plan executors' documentation
    /// calls the snapshot directory, made on demand (a checkpoint itself records only what
    /// changed). `Ok(false)` when the checkpoint no longer exists. Only checkpoints of files
    /// (`copy_on_write`, `overlay`) have a tree to write; a strategy's native checkpoint (a
    /// `git_worktree` commit, SQLite savepoints, a custom strategy's own) is refused with
    /// [`SandboxError`].
    pub fn materialize(&self, checkpoint: &Checkpoint, dest: &Path) -> Result<bool, SandboxError> {
        let (sb, store, op) = {
            let map = self.sandboxes.lock();
            let Some(k) = map.get(checkpoint.sandbox_id.as_str()) else {
                return Err(SandboxError::sandbox(
                    Some(&checkpoint.sandbox_id),
                    "this checkpoint manager does not know the sandbox: attach it first",
                ));
            };
            (k.sandbox.clone(), k.store.clone(), k.op.clone())
        };
        let _plan = self.lock_plan_of(&sb)?;
        let _op = op.lock();
        let Ok(id) = CheckpointId::parse(&checkpoint.checkpoint_id) else {
            return Ok(false);
        };
        let Some(m) = store.read(&id)? else {
            return Ok(false);
        };
        if m.kind == "native" {
            return Err(SandboxError::sandbox(
                Some(sb.sandbox_id()),
                format!(
                    "checkpoint {}: strategy {} checkpoints natively; there is no tree to write",
                    m.checkpoint_id,
                    sb.strategy()
                ),
            ));
        }
        let ctx = sb.context().ok_or_else(|| SandboxError::State {
            sandbox_id: Some(sb.sandbox_id().to_string()),
            from: sb.status(),
            to: Status::Active,
        })?;
        let target = store.full(&m.checkpoint_id)?;
        files::materialize(sb.as_ref(), &store, &target, &ctx.sandbox_path, dest)
            .map_err(|e| e.for_sandbox(sb.sandbox_id()))?;
        Ok(true)
    }

    /// The lock of `sb`'s plan (see [`crate::plan::lock`]): checkpoints and rollbacks to
    /// them change the sandbox, so they serialize with the plan's other operations.
    fn lock_plan_of(&self, sb: &Arc<dyn Sandbox>) -> Result<PlanGuard, SandboxError> {
        if let Some(plan_dir) = sb.home().parent() {
            return PlanGuard::acquire(plan_dir);
        }
        let ctx = sb.context().ok_or_else(|| SandboxError::State {
            sandbox_id: Some(sb.sandbox_id().to_string()),
            from: sb.status(),
            to: Status::Active,
        })?;
        PlanGuard::acquire(&self.plans_dir.join(format!("plan-{}", ctx.plan_id)))
    }

    /// Makes the manager know `sandbox` (for checkpoints read back from disk after a
    /// restart: [`CheckpointManager::list_checkpoints`] then finds them).
    pub fn attach(&self, sandbox: &Arc<dyn Sandbox>) -> Result<(), SandboxError> {
        self.known(sandbox).map(|_| ())
    }

    /// The checkpoints of a sandbox this manager knows, oldest first (none once the sandbox
    /// is cleaned up: its checkpoints went with it).
    /// A `sandbox_id` that is not a [`SandboxId`] names no sandbox here: no checkpoints.
    pub fn list_checkpoints(
        &self,
        sandbox_id: impl IntoId<SandboxId>,
    ) -> Result<Vec<Checkpoint>, SandboxError> {
        let Ok(sandbox_id) = sandbox_id.into_id() else {
            return Ok(Vec::new());
        };
        let store = match self.sandboxes.lock().get(&sandbox_id) {
            Some(k) if k.sandbox.status() != Status::CleanedUp => k.store.clone(),
            _ => return Ok(Vec::new()),
        };
        Ok(store
            .list()?
            .iter()
            .map(|m| Checkpoint::from_manifest(m, store.manifest_path(&m.checkpoint_id)))
            .collect())
    }

    /// Removes a checkpoint (and the objects no other checkpoint uses), here and in the
    /// object store if there is one. `Ok(false)` when it was in neither.
    pub fn delete_checkpoint(&self, checkpoint_id: &str) -> Result<bool, SandboxError> {
        match CheckpointId::parse(checkpoint_id) {
            Ok(id) => self.delete_parsed(&id),
            // No checkpoint here has such a name; an object store refuses the text.
            Err(e) if self.remote.is_some() => Err(e.into()),
            Err(_) => Ok(false),
        }
    }

    /// [`CheckpointManager::delete_checkpoint`] of an id already parsed.
    fn delete_parsed(&self, checkpoint_id: &CheckpointId) -> Result<bool, SandboxError> {
        let local = self.delete_local(checkpoint_id)?;
        let stored = match &self.remote {
            Some(r) => r.remove(checkpoint_id)?,
            None => false,
        };
        Ok(local || stored)
    }

    /// [`CheckpointManager::delete_checkpoint`] of the local copy only.
    fn delete_local(&self, checkpoint_id: &CheckpointId) -> Result<bool, SandboxError> {
        let known: Vec<Known> = self
            .sandboxes
            .lock()
            .values()
            .map(|k| Known {
                sandbox: k.sandbox.clone(),
                store: k.store.clone(),
                op: k.op.clone(),
            })
            .collect();
        for Known {
            sandbox: sb,
            store,
            op,
        } in known
        {
            let _op = op.lock();
            if let Some(m) = store.read(checkpoint_id)? {
                if let (true, Checkpoints::Native(native)) = (m.kind == "native", sb.checkpoints())
                {
                    native.release(checkpoint_id.as_str())?;
                }
                let removed = store.remove(checkpoint_id)?;
                self.made.lock().retain(|(id, _)| id != checkpoint_id);
                self.prune_folders(&store);
                return Ok(removed);
            }
        }
        Ok(false)
    }

    /// In a temporary manager, removes the store of a sandbox once it holds no checkpoint,
    /// and its then empty folders up to the temporary folder (a manager over a root leaves
    /// the sandbox's folders to the sandbox: another manager may share them).
    fn prune_folders(&self, store: &Store) {
        let Some(top) = &self.temp_root else { return };
        if !store.list().map(|l| l.is_empty()).unwrap_or(false) {
            return;
        }
        let _ = std::fs::remove_dir_all(store.dir());
        let mut dir = store.dir().parent();
        while let Some(d) = dir {
            if d == top.as_path() || !d.starts_with(top) || std::fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
    }

    /// Removes every checkpoint this manager made (their folders too, in a temporary
    /// manager); returns how many were removed. The first error is returned after trying
    /// them all.
    pub fn cleanup(&self) -> Result<usize, SandboxError> {
        let made: Vec<CheckpointId> = self.made.lock().iter().map(|(id, _)| id.clone()).collect();
        let mut n = 0;
        let mut first = None;
        for id in made {
            match self.delete_parsed(&id) {
                Ok(true) => n += 1,
                Ok(false) => {}
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        // Stores of sandboxes cleaned up meanwhile (their checkpoints no longer list).
        if self.temp_root.is_some() {
            let stores: Vec<Arc<Store>> = self
                .sandboxes
                .lock()
                .values()
                .filter(|k| k.sandbox.status() == Status::CleanedUp)
                .map(|k| k.store.clone())
                .collect();
            for st in stores {
                let _ = std::fs::remove_dir_all(st.dir());
                self.prune_folders(&st);
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    /// Bytes the checkpoints of a sandbox take on disk (0 for a `sandbox_id` that is not a
    /// [`SandboxId`]: it names no sandbox here).
    pub fn disk_bytes(&self, sandbox_id: impl IntoId<SandboxId>) -> u64 {
        let Ok(sandbox_id) = sandbox_id.into_id() else {
            return 0;
        };
        self.sandboxes
            .lock()
            .get(&sandbox_id)
            .map(|k| k.store.disk_bytes())
            .unwrap_or(0)
    }
}

impl Drop for CheckpointManager {
    fn drop(&mut self) {
        if self.keep.load(Ordering::Relaxed) {
            return;
        }
        let made = std::mem::take(&mut *self.made.lock());
        for (id, _) in made {
            let _ = self.delete_local(&id);
        }
        if let Some(top) = &self.temp_root {
            let _ = std::fs::remove_dir_all(top);
        }
    }
}

/// The native checkpoints of `sb`, which a native checkpoint was taken of.
fn native_of(sb: &Arc<dyn Sandbox>) -> Result<&dyn NativeCheckpoints, SandboxError> {
    match sb.checkpoints() {
        Checkpoints::Native(native) => Ok(native),
        _ => Err(SandboxError::sandbox(
            Some(sb.sandbox_id()),
            format!("strategy {} keeps no native checkpoints", sb.strategy()),
        )),
    }
}
