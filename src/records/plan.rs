//! Records of plan sandboxes: what `patchbox plan list` and `plan diff` print with `--json`
//! (`plan commit --json` prints the library's own `CommitResult`s).

use serde::Serialize;

use super::path_str;
use crate::patch::parse::parse_patch;
use crate::patch::stat::{file_stats, FileStat};
use crate::plan::Sandbox;

/// One plan and its sandboxes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanRecord {
    /// The plan id.
    pub plan: String,
    /// Its sandboxes, in creation order.
    pub sandboxes: Vec<PlanSandboxRecord>,
}

/// One sandbox of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanSandboxRecord {
    /// The sandbox id.
    pub sandbox_id: String,
    /// Its strategy (`copy_on_write`, `overlay`, …).
    pub strategy: String,
    /// Its status (`created`, `active`, `committed`, …).
    pub status: &'static str,
    /// The resource's id, if its context is readable.
    pub resource_id: Option<String>,
    /// The original resource.
    pub original_path: Option<String>,
    /// Where the sandboxed files are.
    pub sandbox_path: Option<String>,
}

impl PlanSandboxRecord {
    /// The record of sandbox `s`.
    pub fn of(s: &dyn Sandbox) -> PlanSandboxRecord {
        let ctx = s.context();
        PlanSandboxRecord {
            sandbox_id: s.sandbox_id().to_string(),
            strategy: s.strategy().name().to_string(),
            status: s.status().name(),
            resource_id: ctx.as_ref().map(|c| c.resource_id.clone()),
            original_path: ctx.as_ref().map(|c| path_str(&c.original_path)),
            sandbox_path: ctx.as_ref().map(|c| path_str(&c.sandbox_path)),
        }
    }
}

/// One sandbox's changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanDiffRecord {
    /// The plan.
    pub plan: String,
    /// The sandbox.
    pub sandbox_id: String,
    /// The resource's id, if known.
    pub resource_id: Option<String>,
    /// Its files, in patch order.
    pub files: Vec<FileStat>,
    /// The changes as a patch (lossily UTF-8).
    pub patch: String,
}

impl PlanDiffRecord {
    /// The record of sandbox `s` of `plan` whose diff is `patch`.
    pub fn of(plan: &str, s: &dyn Sandbox, patch: &[u8]) -> PlanDiffRecord {
        PlanDiffRecord {
            plan: plan.to_string(),
            sandbox_id: s.sandbox_id().to_string(),
            resource_id: s.context().map(|c| c.resource_id),
            files: parse_patch(patch)
                .map(|p| file_stats(&p))
                .unwrap_or_default(),
            patch: String::from_utf8_lossy(patch).into_owned(),
        }
    }
}
