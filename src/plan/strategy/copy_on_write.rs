//! `copy_on_write`: the sandbox is a copy of the resource made by the snapshot engine; its
//! changes reach the original only through the atomic 3-way apply.
//!
//! ```text
//! <plan dir>/<sandbox id>/
//!   state.json    the lifecycle record ("overlay.lower": the snapshot that is its base)
//!   base/         the stable snapshot, in sandboxes made before bases were shared
//!   tree/         the sandbox: what get_path points into
//!   manifest      stat data of tree/ right after it was copied (diff trusts it)
//! ```
//!
//! The base (pre-images, rollback source) is the plan's own snapshot of the original in the
//! shared store (see [`crate::plan::own_snapshot`]), which the plan's later sandboxes over the
//! same original share. A plan's first create costs two copies of the selected files
//! (reflinks where the filesystem has them), its later ones one; diff costs one `lstat` per
//! file plus reading what changed — or, where `tree/` is a Btrfs subvolume with a change
//! record ([`crate::fs::btrfs`]), what changed alone; commit costs what
//! changed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::change_record::{self, ChangeRecord};
use super::tree_base::{self, TreeBase};
use super::Env;
use crate::fs::overlay::fingerprint::Fingerprint;
use crate::fs::state_dir::{self, StateDir, StatePath};
use crate::fs::RelPath;
use crate::id::PlanId;
use crate::plan::backend::Backend;
use crate::plan::error::SandboxError;
use crate::plan::model::{CommitResult, DiffEntry, SandboxContext, SandboxDiff, Strategy};
use crate::plan::record::{Lifecycle, OpGuard, Record, State};
use crate::plan::status::Status;
use crate::plan::strategy::factory::FnFactory;
use crate::tree::diff::Manifest;
use crate::tree::snapshot::StatKey;

const BASE: &str = "base";
const TREE: &str = "tree";
const MANIFEST: &str = "manifest";
/// The pre-images of a commit over a layered base (see `preimages_for`).
const PREIMAGES: &str = "preimages";

/// A `copy_on_write` sandbox.
pub struct CopyOnWrite {
    pub(super) lc: Lifecycle,
    pub(super) env: Arc<Env>,
    pub(super) resource_id: String,
    pub(super) original: PathBuf,
    /// The base, loaded on first need after a reopen.
    base: Mutex<Option<Arc<TreeBase>>>,
    /// The shared snapshot used as base instead of `base/` (see [`crate::isolation::snapshot`] and
    /// [`crate::plan::own_snapshot`]); `None` for a sandbox made with a private `base/`.
    shared: Mutex<Option<String>>,
    /// The last successful check, for the commit that follows (`commit_all`).
    checked: Mutex<Option<super::through_apply::Checked>>,
    /// The diff that check was of, with the fingerprint of the sandbox taken before it was
    /// computed: the commit reuses it when the fingerprint is the same then (see
    /// [`CopyOnWrite::commit_with`]).
    checked_diff: Mutex<Option<(Fingerprint, SandboxDiff)>>,
    /// How `tree/`'s changes are learned: a walk, or the filesystem's own record.
    record: Mutex<ChangeRecord>,
    /// The manifest as last read, with the stat data of its file then: read again only
    /// when the file was replaced (by this process or another).
    manifest: Mutex<Option<(StatKey, Arc<Manifest>)>>,
}

impl CopyOnWrite {
    /// A pending sandbox for `original`.
    pub fn new(env: Arc<Env>, plan_dir: &Path, resource_id: &str, original: &Path) -> Self {
        Self::new_as(Strategy::CopyOnWrite, env, plan_dir, resource_id, original)
    }

    /// A pending sandbox recorded as `strategy`: `overlay` behaves as this one when it
    /// cannot mount, and shares its base and commit path when it can.
    pub(super) fn new_as(
        strategy: Strategy,
        env: Arc<Env>,
        plan_dir: &Path,
        resource_id: &str,
        original: &Path,
    ) -> Self {
        CopyOnWrite {
            lc: Lifecycle::pending(strategy, plan_dir),
            env,
            resource_id: resource_id.to_string(),
            original: original.to_path_buf(),
            base: Mutex::new(None),
            shared: Mutex::new(None),
            checked: Mutex::new(None),
            checked_diff: Mutex::new(None),
            record: Mutex::new(ChangeRecord::default()),
            manifest: Mutex::new(None),
        }
    }

    /// A sandbox found on disk; a commit interrupted by a crash is settled here.
    pub fn open(env: Arc<Env>, record: Record, dir: PathBuf) -> Result<Self, SandboxError> {
        let sb = CopyOnWrite {
            resource_id: record.resource_id.clone(),
            original: record.original_path.clone(),
            shared: Mutex::new(
                record
                    .metadata
                    .get(crate::isolation::snapshot::LOWER_KEY)
                    .cloned(),
            ),
            lc: Lifecycle::loaded(record, dir),
            env,
            base: Mutex::new(None),
            checked: Mutex::new(None),
            checked_diff: Mutex::new(None),
            record: Mutex::new(ChangeRecord::default()),
            manifest: Mutex::new(None),
        };
        // A commit it shows in flight is settled by the first operation that takes the
        // plan's lock (see `op`): opening proves nothing about its committer.
        Ok(sb)
    }

    /// The hold of an operation that changes the sandbox or its original: the plan's lock,
    /// the operation lock, the state as on disk, and a dead committer's commit settled.
    pub(super) fn op(&self) -> Result<OpGuard<'_>, SandboxError> {
        self.lc
            .lock_op(|st| super::through_apply::reconcile(&self.lc, st, &self.env.undo))
    }

    fn dir(&self) -> Result<StateDir, SandboxError> {
        self.lc.state_dir()
    }

    fn at(&self, dir: &StateDir, name: &str) -> Result<StatePath, SandboxError> {
        dir.join(Path::new(name))
            .map_err(|e| SandboxError::from_lower(Some(self.lc.id().as_str()), "sandbox layout", e))
    }

    /// The shared snapshot this sandbox uses as its base, if any.
    pub(super) fn shared_lower(&self) -> Option<String> {
        self.shared.lock().clone()
    }

    /// Makes the shared snapshot `id` this sandbox's base (before it is created).
    pub(super) fn use_shared(&self, id: &str) {
        *self.shared.lock() = Some(id.to_string());
        *self.base.lock() = None;
    }

    /// Where the base's files are: `base/`, or the shared snapshot's files.
    pub(super) fn base_dir(&self) -> PathBuf {
        match self.shared.lock().as_deref() {
            Some(id) => crate::isolation::snapshot::base_dir(&self.env.lowers, id),
            None => self.lc.dir().join(BASE),
        }
    }

    /// The overlay's lower layers, top first: the base's directory, and under it the
    /// project's shared lower layer when the shared snapshot is layered over one.
    pub(super) fn lower_layers(&self) -> Vec<PathBuf> {
        let mut v = vec![self.base_dir()];
        if let Some(id) = self.shared.lock().as_deref() {
            v.extend(
                crate::isolation::snapshot::read_info(&self.env.lowers, id).and_then(|i| i.shared),
            );
        }
        v
    }

    /// The pre-images the 3-way commit of `d` merges with: the base's directory when it
    /// holds every file; for a base layered over a shared layer, the old sides of `d`'s
    /// files written into `preimages/` (afresh for each diff: what a commit merges is
    /// exactly what its diff read).
    fn preimages_for(&self, d: &SandboxDiff) -> Result<PathBuf, SandboxError> {
        let base = self.base()?;
        if base.under.is_none() {
            return Ok(self.base_dir());
        }
        let err = |e| self.lower("write the pre-images", e);
        let dir = self.dir()?;
        let pre = self.at(&dir, PREIMAGES)?;
        state_dir::remove_tree(&pre).map_err(err)?;
        state_dir::create_dir_new(&pre).map_err(err)?;
        for e in &d.entries {
            let (Some(before), Some(mode)) = (&e.before, e.before_mode) else {
                continue;
            };
            // Symlinks are never merged; a path the listing cannot name has no pre-image
            // (the apply then refuses rather than merges a file that moved on).
            let Ok(rel) = RelPath::new(&e.path) else {
                continue;
            };
            if mode == 0o120000 {
                continue;
            }
            if let Some(parent) = rel.parent() {
                state_dir::create_dir_all(&pre.child(&parent)).map_err(err)?;
            }
            let perm = if mode == 0o100755 { 0o755 } else { 0o644 };
            state_dir::write_file_replace(&pre.child(&rel), before, perm).map_err(err)?;
        }
        Ok(pre.as_path().to_path_buf())
    }

    /// The base snapshot (`base/` or the shared one), read from disk on first need after a
    /// reopen.
    pub(super) fn base(&self) -> Result<Arc<TreeBase>, SandboxError> {
        let mut b = self.base.lock();
        if let Some(b) = b.as_ref() {
            return Ok(b.clone());
        }
        let loaded = match self.shared_lower() {
            Some(id) => self.env.lower_base(&id),
            None => tree_base::load(&self.lc.dir().join(BASE)).map(Arc::new),
        }
        .map_err(|e| SandboxError::from_lower(Some(self.lc.id().as_str()), "read the base", e))?;
        *b = Some(loaded.clone());
        Ok(loaded)
    }

    /// The manifest of `tree/`; `None` when it is missing or unreadable (the diff then
    /// reads every file that exists in both trees).
    fn manifest(&self) -> Option<Arc<Manifest>> {
        let path = self.lc.dir().join(MANIFEST);
        let now = StatKey::from_metadata(&std::fs::metadata(&path).ok()?);
        let mut cached = self.manifest.lock();
        if let Some((key, m)) = cached.as_ref() {
            if *key == now {
                return Some(m.clone());
            }
        }
        // Stat first, read second: a replacement in between leaves a stale key, which only
        // makes the next call read again.
        let m = Arc::new(Manifest::decode(&std::fs::read(&path).ok()?)?);
        *cached = Some((now, m.clone()));
        Some(m)
    }

    /// A plan-layer error naming this sandbox and `what` was being done.
    pub(super) fn lower(&self, what: &str, e: crate::Error) -> SandboxError {
        SandboxError::from_lower(Some(self.lc.id().as_str()), what, e)
    }

    /// The changes of `tree/` against the base; with `all`, ignored new files too.
    fn changes(&self, all: bool) -> Result<Vec<crate::tree::diff::Change>, SandboxError> {
        let base = self.base()?;
        let tree = self.lc.dir().join(TREE);
        let manifest = self.manifest();
        let rules = if all {
            None
        } else {
            Some(
                tree_base::ignore_rules(&tree, &self.original)
                    .map_err(|e| self.lower("ignore rules", e))?,
            )
        };
        let ignored = |rel: &RelPath| rules.as_ref().is_some_and(|r| r.is_ignored(rel, false));
        self.record
            .lock()
            .with_listing(&tree, |head| {
                tree_base::changes(&base, &tree, head, manifest.as_deref(), &ignored)
            })
            .map_err(|e| self.lower("diff the sandbox", e))
    }

    /// The diff of `tree/` against the base.
    pub(super) fn diff_now(&self) -> Result<SandboxDiff, SandboxError> {
        self.diff_with(true)
    }

    /// The diff of `tree/` against the base; the patch only `with_patch`.
    pub(super) fn diff_with(&self, with_patch: bool) -> Result<SandboxDiff, SandboxError> {
        let changes = self.changes(false)?;
        tree_base::render(
            &*self.base()?,
            &self.lc.dir().join(TREE),
            &changes,
            with_patch,
        )
        .map_err(|e| self.lower("render the diff", e))
    }

    /// Makes the (empty) sandbox directory.
    pub(super) fn make_dir(&self) -> Result<StateDir, crate::Error> {
        let plan_dir = self.lc.dir().parent().unwrap_or(Path::new("/"));
        std::fs::create_dir_all(plan_dir)
            .map_err(|e| crate::Error::io("create plan directory", plan_dir, e))?;
        std::fs::create_dir(self.lc.dir())
            .map_err(|e| crate::Error::io("create sandbox directory", self.lc.dir(), e))?;
        StateDir::open(self.lc.dir())
    }

    /// Copies the base into `tree/` and records its manifest: the sandbox of this strategy.
    pub(super) fn make_copy(
        &self,
        dir: &StateDir,
        base: &TreeBase,
    ) -> Result<StatePath, crate::Error> {
        let tree_p = dir.join(Path::new(TREE))?;
        let marker = dir.join(Path::new(".clock"))?;
        let manifest = if let Some(m) = tree_base::copy_by_snapshot(base, &tree_p, &marker)? {
            m
        } else if change_record::make_subvolume(dir.path(), TREE)? {
            tree_base::copy_into(base, &tree_p, &marker)?
        } else {
            tree_base::copy_to(base, &tree_p, &marker)?
        };
        state_dir::write_atomic(&dir.join(Path::new(MANIFEST))?, &manifest.encode())?;
        Ok(tree_p)
    }

    /// The record of a sandbox just made, whose files are at `tree`.
    pub(super) fn new_record(
        &self,
        plan_id: &PlanId,
        tree: &Path,
        mut metadata: std::collections::BTreeMap<String, String>,
    ) -> Record {
        metadata.insert("strategy".into(), self.lc.strategy().name().into());
        Record::new(
            self.lc.id(),
            plan_id,
            &self.resource_id,
            self.lc.strategy(),
            &self.original,
            tree,
            metadata,
        )
    }

    /// Takes the plan's own snapshot of the original (`canon`) as this sandbox's base (see
    /// [`crate::plan::own_snapshot`]): reused, or taken now and then returned with its listing.
    pub(super) fn take_own_snapshot(
        &self,
        plan_id: &PlanId,
        canon: &Path,
    ) -> Result<
        (
            crate::isolation::snapshot::SnapshotInfo,
            Option<Arc<TreeBase>>,
        ),
        crate::Error,
    > {
        let plan_dir = self.lc.dir().parent().unwrap_or(Path::new("/"));
        let env = &self.env;
        let (info, base) = crate::plan::own_snapshot::take(
            &env.lowers,
            &env.exclude,
            plan_dir,
            plan_id,
            self.lc.dir(),
            canon,
        )?;
        let base = base.map(|b| {
            let b = Arc::new(b);
            env.lower_bases.lock().insert(info.id.clone(), b.clone());
            b
        });
        self.use_shared(&info.id);
        Ok((info, base))
    }

    /// Lets go of the plan's own snapshot this sandbox took, if it did: removed when no
    /// sandbox that took it is left.
    pub(super) fn release_own_snapshot(&self) {
        if let Some(id) = self.shared_lower() {
            crate::isolation::prune::release(&self.env.lowers, &id);
        }
    }

    /// The base is the plan's own snapshot (a plan's later sandboxes over the original copy
    /// the tree once, not twice); the sandbox is a copy of it.
    fn make(&self, plan_id: &PlanId) -> Result<Record, crate::Error> {
        let canon = std::fs::canonicalize(&self.original)
            .map_err(|e| crate::Error::io("resolve", &self.original, e))?;
        let (info, base) = self.take_own_snapshot(plan_id, &canon)?;
        let base = match base {
            Some(b) => b,
            None => self.env.lower_base(&info.id)?,
        };
        let dir = self.make_dir()?;
        let tree_p = self.make_copy(&dir, &base)?;
        let mut metadata = std::collections::BTreeMap::new();
        metadata.insert(crate::isolation::snapshot::LOWER_KEY.to_string(), info.id);
        Ok(self.new_record(plan_id, tree_p.as_path(), metadata))
    }

    /// `create` around `make`: the lifecycle step, the record, and no leftovers on failure.
    pub(super) fn create_with(
        &self,
        make: impl FnOnce() -> Result<Record, crate::Error>,
        undo_make: impl FnOnce(),
    ) -> Result<SandboxContext, SandboxError> {
        let mut st = self.op()?;
        self.lc.check(st.status, Status::Created)?;
        match make() {
            Ok(record) => {
                super::record_created(&self.lc, &mut st, record, &self.resource_id, |_| {
                    undo_make()
                })
            }
            Err(e) => {
                undo_make();
                let _ = super::remove_dir(self.lc.dir());
                Err(SandboxError::Creation {
                    resource_id: self.resource_id.clone(),
                    reason: e.to_string(),
                    source: Some(Box::new(e)),
                })
            }
        }
    }

    /// `check_commit` with the diff `diff_now` computes, and the sandbox's fingerprint
    /// taken before any of that diff's content was read (`None`: no proof possible): the
    /// commit reuses this diff while the fingerprint is unchanged.
    pub(super) fn check_commit_with(
        &self,
        diff_now: impl FnOnce() -> Result<(SandboxDiff, Option<Fingerprint>), SandboxError>,
    ) -> Result<(), SandboxError> {
        let st = self.lc.lock();
        let target = if st.status == Status::Created {
            Status::Active
        } else {
            Status::Committed
        };
        self.lc.check(st.status, target)?;
        // A failed check leaves no plan behind.
        *self.checked.lock() = None;
        *self.checked_diff.lock() = None;
        let (d, before) = diff_now()?;
        let pre = self.preimages_for(&d)?;
        let checked = super::through_apply::check(&self.lc, &self.original, &pre, &d)?;
        if checked.is_some() {
            *self.checked_diff.lock() = before.map(|f| (f, d));
        }
        *self.checked.lock() = checked;
        Ok(())
    }

    /// `commit` with the diff `diff_now` computes (under the operation lock); `batch`: see
    /// [`Sandbox::commit_batched`].
    ///
    /// The diff of the check before is reused, instead of computing it again, when
    /// `unchanged` says the fingerprint taken before that diff was computed still holds:
    /// nothing was written in the sandbox since (see [`crate::fs::overlay::fingerprint`]).
    pub(super) fn commit_with(
        &self,
        diff_now: impl FnOnce() -> Result<SandboxDiff, SandboxError>,
        unchanged: impl FnOnce(&Fingerprint) -> Result<bool, SandboxError>,
        batch: Option<&mut crate::plan::batch::CommitBatch>,
    ) -> Result<CommitResult, SandboxError> {
        // In a batch the apply may still hold the original's lock (until the batch is
        // finished): `commit_all` settles after finishing it, before its rollback.
        if batch.is_some() {
            return self.commit_locked(diff_now, unchanged, batch);
        }
        super::settle_on_panic(
            || self.commit_locked(diff_now, unchanged, None),
            || {
                let _ = self.settle_in_flight();
            },
        )
    }

    fn commit_locked(
        &self,
        diff_now: impl FnOnce() -> Result<SandboxDiff, SandboxError>,
        unchanged: impl FnOnce(&Fingerprint) -> Result<bool, SandboxError>,
        batch: Option<&mut crate::plan::batch::CommitBatch>,
    ) -> Result<CommitResult, SandboxError> {
        let mut st = self.op()?;
        if st.status == Status::Created {
            self.lc.advance(&mut st, Status::Active)?;
        }
        self.lc.check(st.status, Status::Committed)?;
        let d = match self.checked_diff.lock().take() {
            Some((then, d)) if unchanged(&then)? => d,
            _ => diff_now()?,
        };
        let checked = self.checked.lock().take();
        let pre = self.preimages_for(&d)?;
        super::through_apply::commit(&self.lc, &mut st, &self.env.undo, &pre, &d, checked, batch)
    }

    /// `rollback` with `discard` making an active sandbox equal to its base again.
    pub(super) fn rollback_with(
        &self,
        discard: impl FnOnce(&mut State) -> Result<(), SandboxError>,
    ) -> Result<(), SandboxError> {
        let mut st = self.op()?;
        *self.checked.lock() = None;
        *self.checked_diff.lock() = None;
        match st.status {
            Status::Committed => super::through_apply::undo(&self.lc, &mut st, &self.env.undo),
            _ => {
                self.lc.check(st.status, Status::RolledBack)?;
                discard(&mut st).map_err(|e| SandboxError::Rollback {
                    sandbox_id: self.lc.id().to_string(),
                    reason: e.to_string(),
                    files: Vec::new(),
                    source: None,
                })?;
                self.lc.advance(&mut st, Status::RolledBack)
            }
        }
    }

    fn discard_changes(&self, _st: &mut State) -> Result<(), SandboxError> {
        let changes = self.changes(true)?;
        if changes.is_empty() {
            return Ok(());
        }
        let dir = self.dir()?;
        let tree = self.at(&dir, TREE)?;
        let marker = self.at(&dir, ".clock")?;
        let manifest = tree_base::reset(&*self.base()?, &tree, &changes, &marker)
            .map_err(|e| self.lower("reset the sandbox", e))?;
        state_dir::write_atomic(&self.at(&dir, MANIFEST)?, &manifest.encode())
            .map_err(|e| self.lower("write the manifest", e))
    }
}

impl Backend for CopyOnWrite {
    fn lifecycle(&self) -> &Lifecycle {
        &self.lc
    }

    fn create(&self, plan_id: &PlanId) -> Result<SandboxContext, SandboxError> {
        self.create_with(|| self.make(plan_id), || ())
    }

    fn diff(&self) -> Result<SandboxDiff, SandboxError> {
        let st = self.lc.lock();
        super::require_created(&self.lc, &st)?;
        self.diff_now()
    }

    fn changes(&self) -> Result<Vec<DiffEntry>, SandboxError> {
        let st = self.lc.lock();
        super::require_created(&self.lc, &st)?;
        Ok(self.diff_with(false)?.entries)
    }

    fn check_commit(&self) -> Result<(), SandboxError> {
        // A copy has no cheap proof of being unchanged: its commit diffs again.
        self.check_commit_with(|| Ok((self.diff_now()?, None)))
    }

    fn commit(&self, _message: Option<&str>) -> Result<CommitResult, SandboxError> {
        self.commit_with(|| self.diff_now(), |_| Ok(false), None)
    }

    fn commit_batched(
        &self,
        _message: Option<&str>,
        batch: &mut crate::plan::batch::CommitBatch,
    ) -> Result<CommitResult, SandboxError> {
        self.commit_with(|| self.diff_now(), |_| Ok(false), Some(batch))
    }

    fn settle_in_flight(&self) -> Result<(), SandboxError> {
        let mut st = self.lc.lock_op(|_| Ok(()))?;
        super::through_apply::reconcile(&self.lc, &mut st, &self.env.undo)
    }

    fn rollback(&self) -> Result<(), SandboxError> {
        self.rollback_with(|st| self.discard_changes(st))
    }

    fn cleanup(&self) -> Result<(), SandboxError> {
        let mut st = self.op()?;
        super::cleanup_dir(&self.lc, &mut st, || Ok(()))?;
        drop(st);
        self.release_own_snapshot();
        Ok(())
    }
}

/// How the registry makes and reopens `copy_on_write` backends (see [`builtins`](crate::plan::strategy::builtins)).
pub const FACTORY: FnFactory = FnFactory {
    new: |r| {
        Ok(Box::new(CopyOnWrite::new(
            r.env.clone(),
            r.plan_dir,
            r.resource_id,
            r.original,
        )))
    },
    open: |env, rec, dir| Ok(Box::new(CopyOnWrite::open(env.clone(), rec, dir)?)),
};
