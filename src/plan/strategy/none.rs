//! `none`: pass-through. `get_path` is the original resource, so every write is permanent
//! the moment it is made.
//!
//! **This bypasses isolation**: there is nothing to review, `diff` is always empty, `commit`
//! succeeds without doing anything, and `rollback` is refused. Choose it only for resources
//! that cannot be sandboxed; never for files or databases a user may want back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::id::PlanId;
use crate::plan::backend::{Backend, Checkpoints};
use crate::plan::error::SandboxError;
use crate::plan::model::{CommitResult, SandboxContext, SandboxDiff, Strategy};
use crate::plan::record::{Lifecycle, Record};
use crate::plan::status::Status;
use crate::plan::strategy::factory::FnFactory;

/// A `none` sandbox.
pub struct NoSandbox {
    lc: Lifecycle,
    resource_id: String,
    original: PathBuf,
}

impl NoSandbox {
    /// A pending pass-through for `original`.
    pub fn new(plan_dir: &Path, resource_id: &str, original: &Path) -> Self {
        NoSandbox {
            lc: Lifecycle::pending(Strategy::None, plan_dir),
            resource_id: resource_id.to_string(),
            original: original.to_path_buf(),
        }
    }

    /// One found on disk.
    pub fn open(record: Record, dir: PathBuf) -> Self {
        NoSandbox {
            resource_id: record.resource_id.clone(),
            original: record.original_path.clone(),
            lc: Lifecycle::loaded(record, dir),
        }
    }
}

impl Backend for NoSandbox {
    fn lifecycle(&self) -> &Lifecycle {
        &self.lc
    }

    fn create(&self, plan_id: &PlanId) -> Result<SandboxContext, SandboxError> {
        let mut st = self.lc.lock_op(|_| Ok(()))?;
        self.lc.check(st.status, Status::Created)?;
        let creation = |reason: String, source: Option<crate::Error>| SandboxError::Creation {
            resource_id: self.resource_id.clone(),
            reason,
            source: source.map(Box::new),
        };
        let original = std::fs::canonicalize(&self.original)
            .map_err(|e| crate::Error::io("resolve resource", &self.original, e))
            .map_err(|e| creation(e.to_string(), Some(e)))?;
        let made = std::fs::create_dir_all(self.lc.dir())
            .map_err(|e| crate::Error::io("create sandbox directory", self.lc.dir(), e));
        if let Err(e) = made {
            return Err(creation(e.to_string(), Some(e)));
        }
        let mut metadata = BTreeMap::new();
        metadata.insert("strategy".into(), "none".into());
        metadata.insert("isolation".into(), "bypassed".into());
        let record = Record::new(
            self.lc.id(),
            plan_id,
            &self.resource_id,
            Strategy::None,
            &original,
            &original,
            metadata,
        );
        super::record_created(&self.lc, &mut st, record, &self.resource_id, |_| {})
    }

    /// Always empty: the writes went to the original directly.
    fn diff(&self) -> Result<SandboxDiff, SandboxError> {
        let st = self.lc.lock();
        super::require_created(&self.lc, &st)?;
        Ok(SandboxDiff::default())
    }

    fn commit(&self, _message: Option<&str>) -> Result<CommitResult, SandboxError> {
        let mut st = self.lc.lock_op(|_| Ok(()))?;
        if st.status == Status::Created {
            self.lc.advance(&mut st, Status::Active)?;
        }
        self.lc.advance(&mut st, Status::Committed)?;
        let mut r = super::through_apply::result(self.lc.id(), None, &SandboxDiff::default());
        r.metadata.insert("isolation".into(), "bypassed".into());
        Ok(r)
    }

    fn rollback(&self) -> Result<(), SandboxError> {
        let st = self.lc.lock();
        self.lc.check(st.status, Status::RolledBack)?;
        Err(SandboxError::Rollback {
            sandbox_id: self.lc.id().to_string(),
            reason:
                "strategy `none` wrote to the original directly; its writes cannot be rolled back"
                    .into(),
            files: Vec::new(),
            source: None,
        })
    }

    fn cleanup(&self) -> Result<(), SandboxError> {
        let mut st = self.lc.lock_op(|_| Ok(()))?;
        // Nothing of the resource is removed: only the sandbox's own state.
        super::cleanup_dir(&self.lc, &mut st, || Ok(()))
    }

    /// None: the writes went to the original; there is nothing to restore from.
    fn checkpoints(&self) -> Checkpoints<'_> {
        Checkpoints::None
    }
}

/// How the registry makes and reopens `none` backends (see [`builtins`](crate::plan::strategy::builtins)).
pub const FACTORY: FnFactory = FnFactory {
    new: |r| {
        Ok(Box::new(NoSandbox::new(
            r.plan_dir,
            r.resource_id,
            r.original,
        )))
    },
    open: |_, rec, dir| Ok(Box::new(NoSandbox::open(rec, dir))),
};
