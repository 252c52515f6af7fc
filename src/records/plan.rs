//! Records of plan sandboxes: what `patchbox plan list` and `plan diff` print with `--json`
//! (`plan commit --json` prints the library's own `CommitResult`s, which serialize as
//! records themselves).
//!
//! [`plan_records`] and [`plan_diff_records`] build them from a [`PlanManager`], so the CLI,
//! the C++ and the Python faces hand back the same documents for the same plan.

use serde::Serialize;

use super::path_str;
use crate::patch::parse::parse_patch;
use crate::patch::stat::{file_stats, FileStat};
use crate::plan::{PlanManager, Sandbox, SandboxError, Status};

/// The records of `plan` (every plan `mgr` knows, in [`PlanManager::list_plans`] order, when
/// `None`), as `patchbox plan list --json [PLAN]` prints them. A plan id that names no plan
/// gives a record with no sandboxes, as the CLI does.
pub fn plan_records(mgr: &PlanManager, plan: Option<&str>) -> Vec<PlanRecord> {
    let plans = match plan {
        Some(p) => vec![p.to_string()],
        None => mgr.list_plans(),
    };
    plans
        .into_iter()
        .map(|p| PlanRecord {
            sandboxes: mgr
                .list_sandboxes(&p)
                .iter()
                .map(|s| PlanSandboxRecord::of(s.as_ref()))
                .collect(),
            plan: p,
        })
        .collect()
}

/// One record per created or active sandbox of `plan`, its files and patch included, as
/// `patchbox plan diff --json PLAN` prints them. Committed, rolled back and failed sandboxes
/// have nothing left to review and get none.
///
/// # Errors
/// A sandbox whose diff cannot be computed ([`Sandbox::diff`]).
pub fn plan_diff_records(
    mgr: &PlanManager,
    plan: &str,
) -> Result<Vec<PlanDiffRecord>, SandboxError> {
    let mut recs = Vec::new();
    for s in mgr.list_sandboxes(plan) {
        if matches!(s.status(), Status::Created | Status::Active) {
            let d = s.diff()?;
            recs.push(PlanDiffRecord::of(plan, s.as_ref(), &d.patch));
        }
    }
    Ok(recs)
}

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
