//! `patchbox plan checkpoints|restore --store URL`: plan checkpoints kept in an object store
//! shared by many machines — list them, and restore one into a sandbox of this machine's own
//! copy of the project, which `plan diff`, `plan commit` and `plan rollback` then treat as any
//! other plan sandbox.

use std::path::{Path, PathBuf};

use patchbox::plan::checkpoint::CheckpointManager;
use patchbox::plan::{PlanManager, SandboxError, Strategy};
use patchbox::records::CheckpointRecord;
use patchbox::store::StoreUrl;

/// Opens the checkpoints kept in the store `url`, with `root` for the local copies a restore
/// keeps.
fn open(root: &Path, url: &str) -> Result<CheckpointManager, SandboxError> {
    let url = StoreUrl::parse(url)
        .map_err(|e| SandboxError::from_lower(None, "checkpoint store", e.into()))?;
    CheckpointManager::with_store(root, &url)
}

/// `plan checkpoints --store URL`: every stored checkpoint, oldest first — one line each (id,
/// plan, sandbox, phase, creation time in milliseconds since the epoch, metadata), or a JSON
/// array of the same fields.
pub fn list(root: &Path, url: &str, json: bool) -> Result<(), SandboxError> {
    let stored = open(root, url)?.list_stored()?;
    let recs: Vec<CheckpointRecord> = stored.iter().map(Into::into).collect();
    if json {
        print!("{}", patchbox::records::to_json(&recs));
        return Ok(());
    }
    for c in &recs {
        let meta: Vec<String> = c.metadata.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!(
            "{}\t{}\t{}\t{}\t{}\t{}",
            c.checkpoint_id,
            c.plan_id,
            c.sandbox_id,
            c.phase,
            c.created_ms,
            meta.join(",")
        );
    }
    Ok(())
}

/// What `plan restore` restores where.
pub struct Restore<'a> {
    /// The object store.
    pub url: &'a str,
    /// The stored checkpoint.
    pub checkpoint: &'a str,
    /// This machine's copy of the project (the same base the checkpoint's sandbox had).
    pub project: PathBuf,
    /// The plan to restore into (default: the checkpoint's own).
    pub plan: Option<String>,
    /// The sandbox's resource id (default: the project directory's name).
    pub resource: Option<String>,
    /// The strategy of a sandbox made for it.
    pub strategy: &'a str,
}

/// `plan restore --store URL CHECKPOINT --project DIR`: gets (or makes) the plan's sandbox of
/// the resource over `project` under `root` and makes its files the checkpoint's. The
/// project itself is untouched until `plan commit`.
pub fn restore(root: &Path, plans: &PlanManager, r: Restore<'_>) -> Result<(), SandboxError> {
    let ckpts = open(root, r.url)?;
    let Some(found) = ckpts
        .list_stored()?
        .into_iter()
        .find(|c| c.checkpoint_id == r.checkpoint)
    else {
        return Err(SandboxError::sandbox(
            None,
            format!("no checkpoint {} in {}", r.checkpoint, r.url),
        ));
    };
    let plan = r.plan.unwrap_or(found.plan_id);
    let project = std::fs::canonicalize(&r.project).map_err(|e| {
        SandboxError::from_lower(
            None,
            "project",
            patchbox::Error::io("resolve project", &r.project, e),
        )
    })?;
    let resource = r.resource.unwrap_or_else(|| {
        project
            .file_name()
            .map_or_else(|| "project".into(), |n| n.to_string_lossy().into_owned())
    });
    let sb =
        plans.get_or_create_sandbox(&plan, &resource, &project, Strategy::parse(r.strategy))?;
    ckpts
        .restore_from_store(&sb, r.checkpoint)?
        .ok_or_else(|| {
            SandboxError::sandbox(
                None,
                format!("checkpoint {} went from the store", r.checkpoint),
            )
        })?;
    println!(
        "restored checkpoint {} into plan {plan}, sandbox {} ({})",
        r.checkpoint,
        sb.sandbox_id(),
        sb.context()
            .map(|c| c.sandbox_path.display().to_string())
            .unwrap_or_default()
    );
    Ok(())
}
