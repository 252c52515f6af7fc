//! Values crossing the plan bridge: paths as bytes, times as milliseconds since the Unix
//! epoch, metadata as key/value lists, and the shared structs of contexts, commit results,
//! diffs, sandbox references and resources. Kept apart so every bridge file converts the
//! same way.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use super::bridge;
use crate::ffi::path_from;
use crate::plan::custom::SandboxRef;
use crate::plan::{
    CommitResult, DiffOp, Resource, ResourceKind, ResourceRegistry, SandboxContext, SandboxDiff,
    SandboxError, Strategy,
};

pub(super) fn sref_out(r: &SandboxRef) -> bridge::FfiSandboxRef {
    bridge::FfiSandboxRef {
        sandbox_id: r.sandbox_id.clone(),
        plan_id: r.plan_id.clone(),
        resource_id: r.resource_id.clone(),
        created_at_ms: millis(r.created_at),
        metadata: meta_out(r.metadata.clone()),
    }
}

pub(super) fn bytes(p: PathBuf) -> Vec<u8> {
    p.into_os_string().into_vec()
}

pub(super) fn millis(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

pub(super) fn meta_out(m: BTreeMap<String, String>) -> Vec<bridge::FfiPlanMeta> {
    m.into_iter()
        .map(|(key, value)| bridge::FfiPlanMeta { key, value })
        .collect()
}

pub(super) fn context_out(c: SandboxContext) -> bridge::FfiPlanContext {
    bridge::FfiPlanContext {
        sandbox_id: c.sandbox_id,
        sandbox_path: bytes(c.sandbox_path),
        original_path: bytes(c.original_path),
        resource_id: c.resource_id,
        plan_id: c.plan_id,
        created_at_ms: millis(c.created_at),
        metadata: meta_out(c.metadata),
    }
}

pub(super) fn empty_context() -> bridge::FfiPlanContext {
    bridge::FfiPlanContext {
        sandbox_id: String::new(),
        sandbox_path: Vec::new(),
        original_path: Vec::new(),
        resource_id: String::new(),
        plan_id: String::new(),
        created_at_ms: 0,
        metadata: Vec::new(),
    }
}

pub(super) fn result_out(r: CommitResult) -> bridge::FfiCommitResult {
    let json = crate::records::to_json(&r);
    bridge::FfiCommitResult {
        sandbox_id: r.sandbox_id,
        success: r.success,
        has_commit_ref: r.commit_ref.is_some(),
        commit_ref: r.commit_ref.unwrap_or_default(),
        changed_files: r.changed_files,
        added_files: r.added_files,
        deleted_files: r.deleted_files,
        has_error: r.error.is_some(),
        error: r.error.unwrap_or_default(),
        timestamp_ms: millis(r.timestamp),
        metadata: meta_out(r.metadata),
        json,
    }
}

pub(super) fn diff_out(d: SandboxDiff) -> bridge::FfiDiff {
    bridge::FfiDiff {
        entries: d
            .entries
            .into_iter()
            .map(|e| bridge::FfiDiffEntry {
                path: e.path,
                operation: match e.operation {
                    DiffOp::Added => "added",
                    DiffOp::Modified => "modified",
                    DiffOp::Deleted => "deleted",
                }
                .to_string(),
                has_before: e.before.is_some(),
                before: e.before.unwrap_or_default(),
                has_after: e.after.is_some(),
                after: e.after.unwrap_or_default(),
            })
            .collect(),
        patch: d.patch,
    }
}

/// A registry from C++ resources (added in order, so parents come first).
pub(super) fn registry_in(
    resources: &[bridge::FfiResource],
) -> Result<ResourceRegistry, SandboxError> {
    let mut reg = ResourceRegistry::new();
    for r in resources {
        let kind = match r.kind.as_str() {
            "git_repository" => ResourceKind::GitRepository,
            "directory" => ResourceKind::Directory,
            "file" => ResourceKind::File,
            "database" => ResourceKind::Database,
            other => ResourceKind::Other(other.to_string()),
        };
        let mut res = Resource::new(&r.id, kind, path_from(&r.path));
        if r.has_parent {
            res = res.with_parent(&r.parent);
        }
        if r.has_strategy {
            res = res.with_strategy(Strategy::parse(&r.strategy));
        }
        reg.add(res)?;
    }
    Ok(reg)
}
