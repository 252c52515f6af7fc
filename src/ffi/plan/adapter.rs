//! The C++ `patchbox::plan::BuiltInSandboxStrategyAdapter`'s Rust half: a built-in strategy
//! behind the nine-operation protocol ([`BuiltInAdapter`]), in the documented shapes
//! (`create(plan_id, resource)` returning the reference, `write` returning the change).
//!
//! Why its own file: the plan bridge only declares these functions. Invariants: the adapter's
//! sandboxes live in a manager of its own under the root it was made with; a failure crosses
//! with the plan bridge's encoding, as the step's class (create → `creation`, commit →
//! `commit`, rollback → `rollback`, else `sandbox`); no panic crosses (every function runs
//! under [`guarded`]).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::bridge;
use super::convert::{meta_out, millis, sref_out};
use super::error::{encode, plan};
use crate::ffi::{guarded, guarded_or_default, path_from};
use crate::plan::custom::{
    BuiltInAdapter, DiffView, SandboxRef, StrategyFailure, StrategyProtocol,
};
use crate::plan::{DiffOp, SandboxError, Strategy};

/// The adapter handed to C++.
pub struct PlanAdapter {
    inner: BuiltInAdapter,
}

/// The adapter of the built-in `strategy` with its sandboxes under `root` (empty:
/// `<default root>/adapter`, as the Python adapter).
pub fn plan_adapter_new(root: &[u8], strategy: &str) -> Result<Box<PlanAdapter>, String> {
    guarded(|| {
        let strategy = plan(Strategy::from_name(strategy))?;
        let root = if root.is_empty() {
            let base = crate::session::layout::default_root()
                .map_err(|e| encode(&SandboxError::from_lower(None, "default root", e)))?;
            base.join("adapter")
        } else {
            path_from(root)
        };
        let inner = plan(BuiltInAdapter::new(root, strategy))?;
        Ok(Box::new(PlanAdapter { inner }))
    })
}

/// A step's failure about `r` as the class of its step.
fn failed(op: &str, r: &SandboxRef, f: StrategyFailure) -> String {
    let reason = format!("{op}: {f}");
    let sandbox_id = r.sandbox_id.clone();
    encode(&match op {
        "create" => SandboxError::Creation {
            resource_id: r.resource_id.clone(),
            reason,
            source: None,
        },
        "commit" => SandboxError::Commit {
            sandbox_id,
            reason,
            files: Vec::new(),
            source: None,
        },
        "rollback" => SandboxError::Rollback {
            sandbox_id,
            reason,
            files: Vec::new(),
            source: None,
        },
        _ => SandboxError::sandbox(Some(&sandbox_id), reason),
    })
}

fn sref_in(r: &bridge::FfiSandboxRef) -> SandboxRef {
    let at = Duration::from_millis(r.created_at_ms.unsigned_abs());
    SandboxRef {
        sandbox_id: r.sandbox_id.clone(),
        plan_id: r.plan_id.clone(),
        resource_id: r.resource_id.clone(),
        created_at: if r.created_at_ms >= 0 {
            UNIX_EPOCH + at
        } else {
            UNIX_EPOCH - at
        },
        metadata: r
            .metadata
            .iter()
            .map(|m| (m.key.clone(), m.value.clone()))
            .collect(),
    }
}

fn op_name(op: DiffOp) -> String {
    match op {
        DiffOp::Added => "added",
        DiffOp::Modified => "modified",
        DiffOp::Deleted => "deleted",
    }
    .to_string()
}

fn view_out(v: DiffView) -> bridge::FfiDiffView {
    bridge::FfiDiffView {
        sandbox_id: v.sandbox_id,
        entries: v
            .entries
            .into_iter()
            .map(|e| bridge::FfiDiffEntry {
                path: e.path,
                operation: op_name(e.operation),
                has_before: e.before.is_some(),
                before: e.before.unwrap_or_default(),
                has_after: e.after.is_some(),
                after: e.after.unwrap_or_default(),
            })
            .collect(),
        summary: v.summary,
    }
}

impl PlanAdapter {
    pub(super) fn strategy_name(&self) -> String {
        guarded_or_default(|| self.inner.strategy().name().to_string())
    }

    pub(super) fn create(
        &self,
        plan_id: &str,
        resource_id: &str,
        original: &[u8],
    ) -> Result<bridge::FfiSandboxRef, String> {
        guarded(|| {
            let original = path_from(original);
            let mut r = SandboxRef {
                sandbox_id: format!("adapter-{}", ulid::Ulid::new()),
                plan_id: plan_id.to_string(),
                resource_id: resource_id.to_string(),
                created_at: SystemTime::now(),
                metadata: BTreeMap::new(),
            };
            r.metadata = self
                .inner
                .create(&r, &original)
                .map_err(|f| failed("create", &r, f))?;
            r.metadata.insert(
                "original_path".into(),
                original.to_string_lossy().into_owned(),
            );
            let mut out = sref_out(&r);
            out.created_at_ms = millis(r.created_at);
            out.metadata = meta_out(r.metadata);
            Ok(out)
        })
    }

    pub(super) fn read(
        &self,
        r: &bridge::FfiSandboxRef,
        path: &str,
        found: &mut bool,
    ) -> Result<Vec<u8>, String> {
        guarded(|| {
            let r = sref_in(r);
            let data = self
                .inner
                .read(&r, path)
                .map_err(|f| failed("read", &r, f))?;
            *found = data.is_some();
            Ok(data.unwrap_or_default())
        })
    }

    /// Writes `path`; returns the change (`added` or `modified`, both contents).
    pub(super) fn write(
        &self,
        r: &bridge::FfiSandboxRef,
        path: &str,
        data: &[u8],
    ) -> Result<bridge::FfiDiffEntry, String> {
        guarded(|| {
            let r = sref_in(r);
            let before = self
                .inner
                .read(&r, path)
                .and_then(|before| self.inner.write(&r, path, data).map(|()| before))
                .map_err(|f| failed("write", &r, f))?;
            Ok(bridge::FfiDiffEntry {
                path: path.to_string(),
                operation: op_name(if before.is_some() {
                    DiffOp::Modified
                } else {
                    DiffOp::Added
                }),
                has_before: before.is_some(),
                before: before.unwrap_or_default(),
                has_after: true,
                after: data.to_vec(),
            })
        })
    }

    pub(super) fn diff(&self, r: &bridge::FfiSandboxRef) -> Result<bridge::FfiDiffView, String> {
        guarded(|| {
            let r = sref_in(r);
            let v = self.inner.diff(&r).map_err(|f| failed("diff", &r, f))?;
            Ok(view_out(v))
        })
    }

    pub(super) fn commit(
        &self,
        r: &bridge::FfiSandboxRef,
        has_message: bool,
        message: &str,
        has_ref: &mut bool,
    ) -> Result<String, String> {
        guarded(|| {
            let r = sref_in(r);
            let c = self
                .inner
                .commit(&r, has_message.then_some(message))
                .map_err(|f| failed("commit", &r, f))?;
            *has_ref = c.is_some();
            Ok(c.unwrap_or_default())
        })
    }

    pub(super) fn rollback(
        &self,
        r: &bridge::FfiSandboxRef,
        after_commit: bool,
    ) -> Result<(), String> {
        guarded(|| {
            let r = sref_in(r);
            self.inner
                .rollback(&r, after_commit)
                .map_err(|f| failed("rollback", &r, f))
        })
    }

    pub(super) fn checkpoint(&self, r: &bridge::FfiSandboxRef, id: &str) -> Result<(), String> {
        guarded(|| {
            let r = sref_in(r);
            self.inner
                .checkpoint(&r, id)
                .map_err(|f| failed("checkpoint", &r, f))
        })
    }

    pub(super) fn restore_checkpoint(
        &self,
        r: &bridge::FfiSandboxRef,
        id: &str,
    ) -> Result<(), String> {
        guarded(|| {
            let r = sref_in(r);
            self.inner
                .restore_checkpoint(&r, id)
                .map_err(|f| failed("restore_checkpoint", &r, f))
        })
    }

    pub(super) fn cleanup(&self, r: &bridge::FfiSandboxRef) -> Result<(), String> {
        guarded(|| {
            let r = sref_in(r);
            self.inner.cleanup(&r).map_err(|f| failed("cleanup", &r, f))
        })
    }

    pub(super) fn is_rollbackable(&self) -> bool {
        guarded_or_default(|| self.inner.is_rollbackable())
    }
}
