//! The bridge behind `<patchbox/checkpoint.hpp>`: [`PlanCheckpoints`] is the C++
//! `patchbox::plan::CheckpointManager`'s Rust half (a [`CheckpointManager`], local or with a
//! store); a sandbox's checkpoint support crosses as its name. The C++ `PhaseRunner` is written
//! in C++ over these calls.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::UNIX_EPOCH;

use super::bridge;
use super::convert::{bytes, meta_out, millis};
use super::error::{encode, plan};
use super::sandbox::PlanSandbox;
use crate::ffi::{guarded, guarded_or_default, internal, path_from};
use crate::plan::checkpoint::{Checkpoint, CheckpointManager};
use crate::plan::{CheckpointSupport, SandboxError};

impl PlanSandbox {
    pub(super) fn checkpoint_support(&self) -> String {
        guarded_or_default(|| {
            match self.inner.as_ref().map(|s| s.checkpoint_support()) {
                Some(CheckpointSupport::Files) => "files",
                Some(CheckpointSupport::Native) => "native",
                Some(CheckpointSupport::Unsupported) | None => "unsupported",
            }
            .to_string()
        })
    }
}

/// The C++ `patchbox::plan::CheckpointManager`'s Rust half, until its `close` drops it.
pub struct PlanCheckpoints {
    inner: Option<CheckpointManager>,
}

/// A checkpoint known by its ids only: what `rollback_to` and `materialize` read of it (the
/// rest is from the manifest on disk).
fn by_ids(checkpoint_id: &str, sandbox_id: &str) -> Checkpoint {
    Checkpoint {
        checkpoint_id: checkpoint_id.to_string(),
        sandbox_id: sandbox_id.to_string(),
        plan_id: String::new(),
        phase: String::new(),
        created_at: UNIX_EPOCH,
        metadata: BTreeMap::new(),
        snapshot_path: PathBuf::new(),
    }
}

fn checkpoint_out(c: Checkpoint) -> bridge::FfiCheckpoint {
    bridge::FfiCheckpoint {
        checkpoint_id: c.checkpoint_id,
        sandbox_id: c.sandbox_id,
        plan_id: c.plan_id,
        phase: c.phase,
        created_at_ms: millis(c.created_at),
        metadata: meta_out(c.metadata),
        snapshot_path: bytes(c.snapshot_path),
    }
}

/// The checkpoint manager of `root`; an empty `root`: one of its own under the system temp
/// folder ([`CheckpointManager::temporary`]).
pub(super) fn plan_checkpoints_new(root: &[u8]) -> Result<Box<PlanCheckpoints>, String> {
    guarded(|| {
        let inner = if root.is_empty() {
            plan(CheckpointManager::temporary())?
        } else {
            CheckpointManager::new(path_from(root))
        };
        Ok(Box::new(PlanCheckpoints { inner: Some(inner) }))
    })
}

pub(super) fn plan_checkpoints_with_store(
    root: &[u8],
    store: &str,
) -> Result<Box<PlanCheckpoints>, String> {
    guarded(|| {
        let url = crate::store::StoreUrl::parse(store)
            .map_err(|e| encode(&SandboxError::from_lower(None, "store URL", e.into())))?;
        Ok(Box::new(PlanCheckpoints {
            inner: Some(plan(CheckpointManager::with_store(path_from(root), &url))?),
        }))
    })
}

impl PlanCheckpoints {
    pub(super) fn list_stored(&self) -> Result<Vec<bridge::FfiCheckpoint>, String> {
        guarded(|| {
            let list = plan(self.get()?.list_stored())?;
            Ok(list.into_iter().map(checkpoint_out).collect())
        })
    }

    pub(super) fn restore_from_store(
        &self,
        sandbox: &PlanSandbox,
        checkpoint_id: &str,
    ) -> Result<bridge::FfiCheckpoint, String> {
        guarded(
            || match plan(self.get()?.restore_from_store(sandbox.sb()?, checkpoint_id))? {
                Some(c) => Ok(checkpoint_out(c)),
                None => Ok(bridge::FfiCheckpoint {
                    checkpoint_id: String::new(),
                    sandbox_id: String::new(),
                    plan_id: String::new(),
                    phase: String::new(),
                    created_at_ms: 0,
                    metadata: Vec::new(),
                    snapshot_path: Vec::new(),
                }),
            },
        )
    }

    pub(super) fn prune_store(&self, grace_seconds: u64) -> Result<usize, String> {
        guarded(|| {
            plan(
                self.get()?
                    .prune_store(std::time::Duration::from_secs(grace_seconds)),
            )
        })
    }
}

impl PlanCheckpoints {
    fn get(&self) -> Result<&CheckpointManager, String> {
        self.inner
            .as_ref()
            .ok_or_else(|| internal("the checkpoint manager is closed"))
    }

    pub(super) fn keep(&self) -> Result<(), String> {
        guarded(|| {
            self.get()?.keep();
            Ok(())
        })
    }

    pub(super) fn attach(&self, sandbox: &PlanSandbox) -> Result<(), String> {
        guarded(|| plan(self.get()?.attach(sandbox.sb()?)))
    }

    pub(super) fn create_checkpoint(
        &self,
        sandbox: &PlanSandbox,
        plan_id: &str,
        phase: &str,
        metadata: &[bridge::FfiPlanMeta],
    ) -> Result<bridge::FfiCheckpoint, String> {
        guarded(|| {
            let metadata = metadata
                .iter()
                .map(|m| (m.key.clone(), m.value.clone()))
                .collect();
            let cp = plan(
                self.get()?
                    .create_checkpoint(sandbox.sb()?, plan_id, phase, metadata),
            )?;
            Ok(checkpoint_out(cp))
        })
    }

    pub(super) fn rollback_to(
        &self,
        checkpoint_id: &str,
        sandbox_id: &str,
    ) -> Result<bool, String> {
        guarded(|| plan(self.get()?.rollback_to(&by_ids(checkpoint_id, sandbox_id))))
    }

    pub(super) fn materialize(
        &self,
        checkpoint_id: &str,
        sandbox_id: &str,
        dest: &[u8],
    ) -> Result<bool, String> {
        guarded(|| {
            let cp = by_ids(checkpoint_id, sandbox_id);
            plan(self.get()?.materialize(&cp, &path_from(dest)))
        })
    }

    pub(super) fn list_checkpoints(
        &self,
        sandbox_id: &str,
    ) -> Result<Vec<bridge::FfiCheckpoint>, String> {
        guarded(|| {
            let list = plan(self.get()?.list_checkpoints(sandbox_id))?;
            Ok(list.into_iter().map(checkpoint_out).collect())
        })
    }

    pub(super) fn delete_checkpoint(&self, checkpoint_id: &str) -> Result<bool, String> {
        guarded(|| plan(self.get()?.delete_checkpoint(checkpoint_id)))
    }

    pub(super) fn disk_bytes(&self, sandbox_id: &str) -> u64 {
        guarded_or_default(|| {
            self.inner
                .as_ref()
                .map(|m| m.disk_bytes(sandbox_id))
                .unwrap_or(0)
        })
    }

    /// Drops the manager now (the Rust `Drop`: its checkpoints removed unless kept), so the
    /// C++ destructor runs it under `catch_unwind`. Idempotent.
    pub(super) fn close(&mut self) {
        let inner = self.inner.take();
        let _ = catch_unwind(AssertUnwindSafe(move || drop(inner)));
    }
}
