//! `patchbox plan …`: the plan executors' sandboxes under a root — list plans and their
//! sandboxes, commit or roll back a plan, clean up; list and restore checkpoints kept in an
//! object store (`checkpoints`, `restore`: see `checkpoint.rs`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use patchbox::patch::stat::diffstat;
use patchbox::plan::{PlanManager, SandboxError, Status};
use patchbox::records::{self, PlanDiffRecord};

use crate::{checkpoint, color, pager, View};

/// The `plan` subcommands.
#[derive(Subcommand)]
pub enum PlanCmd {
    /// List plans and their sandboxes: id, resource, strategy, status, original, sandbox.
    List {
        /// Only this plan.
        plan: Option<String>,
        /// Print the records as JSON (docs/json.md).
        #[arg(long)]
        json: bool,
    },
    /// Print a plan's changes as one patch per sandbox (coloured and paged as `git diff`).
    Diff {
        /// The plan.
        plan: String,
        /// A summary per file (`git diff --stat`) instead of the patch.
        #[arg(long)]
        stat: bool,
        /// Print one record per sandbox as JSON, files and patch included (docs/json.md).
        #[arg(long, conflicts_with = "stat")]
        json: bool,
    },
    /// Commit every created or active sandbox of the plan, all or nothing.
    Commit {
        /// The plan.
        plan: String,
        /// Test fault of the kill harness: abort before the commit at this position (only in
        /// a build with the feature `fault-injection`).
        #[cfg(feature = "fault-injection")]
        #[arg(long, hide = true)]
        crash_before: Option<usize>,
        /// Print the commit results as JSON (docs/json.md).
        #[arg(long)]
        json: bool,
    },
    /// Roll back the plan: active sandboxes lose their changes, committed ones are undone.
    Rollback {
        /// The plan.
        plan: String,
    },
    /// Remove every sandbox of the plan (active ones' changes are discarded).
    Cleanup {
        /// The plan.
        plan: String,
    },
    /// Wait for the plan's lock and settle what a process that died while holding it left
    /// (an interrupted commit is rolled back; a git it started is waited for).
    Recover {
        /// The plan.
        plan: String,
    },
    /// Remove sandboxes whose work is over (committed, rolled back, errored) and the remains
    /// of interrupted creations.
    CleanAbandoned,
    /// List the plan checkpoints kept in an object store: id, plan, sandbox, phase, creation
    /// time (ms since the epoch), metadata.
    Checkpoints {
        /// The object store (`s3://bucket/prefix`, or a directory); endpoint and credentials
        /// from the AWS variables.
        #[arg(long, value_name = "URL")]
        store: String,
        /// Print the checkpoints as a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Restore a checkpoint kept in an object store into a sandbox of this machine's copy of
    /// the project (made if needed); `plan diff` and `plan commit` then see its changes.
    Restore {
        /// The object store (`s3://bucket/prefix`, or a directory).
        #[arg(long, value_name = "URL")]
        store: String,
        /// The checkpoint id (`plan checkpoints` lists them).
        checkpoint: String,
        /// This machine's copy of the project, at the base the checkpoint was taken from.
        #[arg(long, value_name = "DIR")]
        project: PathBuf,
        /// The plan to restore into (default: the checkpoint's own).
        #[arg(long)]
        plan: Option<String>,
        /// The sandbox's resource id (default: the project directory's name).
        #[arg(long)]
        resource: Option<String>,
        /// The strategy of a sandbox made for it.
        #[arg(long, default_value = "copy_on_write",
              value_parser = ["copy_on_write", "overlay", "git_worktree"])]
        strategy: String,
    },
}

/// Runs a `plan` subcommand over `root`.
pub fn run(root: PathBuf, cmd: PlanCmd, view: View) -> Result<ExitCode, SandboxError> {
    let mgr = PlanManager::open(&root)?;
    // Looking is not finishing: only the commands that end a plan's sandboxes clean up.
    mgr.set_cleanup_on_drop(false);
    for (plan, ids) in &mgr.recovery().rolled_back {
        eprintln!(
            "patchbox: plan {plan}: an interrupted commit_all was rolled back ({} sandbox(es) undone)",
            ids.len()
        );
    }
    for w in &mgr.recovery().warnings {
        eprintln!("patchbox: warning: {w}");
    }
    for plan in &mgr.recovery().busy {
        eprintln!(
            "patchbox: plan {plan}: another process holds its lock (a commit is running); left to it"
        );
    }
    match cmd {
        PlanCmd::List { plan, json } => {
            if json {
                let recs = records::plan_records(&mgr, plan.as_deref());
                print!("{}", records::to_json(&recs));
                return Ok(ExitCode::SUCCESS);
            }
            let plans = match plan {
                Some(p) => vec![p],
                None => mgr.list_plans(),
            };
            for p in plans {
                println!("plan {p}");
                for s in mgr.list_sandboxes(&p) {
                    let ctx = s.context();
                    println!(
                        "  {}  {:<14} {:<11} {}  {}  {}",
                        s.sandbox_id(),
                        s.strategy().name(),
                        s.status().name(),
                        ctx.as_ref().map(|c| c.resource_id.as_str()).unwrap_or("-"),
                        ctx.as_ref()
                            .map(|c| c.original_path.display().to_string())
                            .unwrap_or_default(),
                        ctx.as_ref()
                            .map(|c| c.sandbox_path.display().to_string())
                            .unwrap_or_default(),
                    );
                }
            }
        }
        PlanCmd::Diff { plan, stat, json } => {
            if json {
                let recs = records::plan_diff_records(&mgr, &plan)?;
                print!("{}", records::to_json(&recs));
                return Ok(ExitCode::SUCCESS);
            }
            let mut files = Vec::new();
            let mut patch = Vec::new();
            for s in mgr.list_sandboxes(&plan) {
                if matches!(s.status(), Status::Created | Status::Active) {
                    let d = s.diff()?;
                    files.extend(PlanDiffRecord::of(&plan, s.as_ref(), &d.patch).files);
                    patch.extend_from_slice(&d.patch);
                }
            }
            let on = view.color.enabled();
            let text = if stat {
                diffstat(&files, 80, on).into_bytes()
            } else if on {
                color::color_patch(&patch)
            } else {
                patch
            };
            pager::page(&text, view.no_pager);
        }
        PlanCmd::Commit {
            plan,
            #[cfg(feature = "fault-injection")]
            crash_before,
            json,
        } => {
            let opts = patchbox::plan::manager::CommitAllOptions {
                #[cfg(feature = "fault-injection")]
                crash_before,
                ..Default::default()
            };
            let results = mgr.commit_all_with(&plan, &opts)?;
            if json {
                print!("{}", records::to_json(&results));
            }
            // A sandbox-level failure comes back as one failed result (the plan was rolled
            // back): the command fails as for any refused commit.
            if let Some(f) = results.iter().find(|r| !r.success) {
                let undone = f.metadata.get("rolled_back_ids").map_or("", String::as_str);
                return Err(SandboxError::AtomicCommit {
                    plan_id: plan.clone(),
                    reason: f.error.clone().unwrap_or_default(),
                    rolled_back_ids: undone
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect(),
                    failed_rollback_ids: Vec::new(),
                    failed_sandbox_id: Some(f.sandbox_id.clone()),
                });
            }
            if json {
                return Ok(ExitCode::SUCCESS);
            }
            for r in &results {
                println!(
                    "committed {}: {} changed, {} added, {} deleted{}",
                    r.sandbox_id,
                    r.changed_files.len(),
                    r.added_files.len(),
                    r.deleted_files.len(),
                    r.commit_ref
                        .as_ref()
                        .map(|c| format!(" (ref {c})"))
                        .unwrap_or_default()
                );
            }
            if results.is_empty() {
                println!("plan {plan}: nothing to commit");
            }
        }
        PlanCmd::Rollback { plan } => {
            mgr.rollback_all(&plan)?;
            println!("plan {plan}: rolled back");
        }
        PlanCmd::Cleanup { plan } => {
            mgr.cleanup_all(&plan)?;
            println!("plan {plan}: cleaned up");
        }
        PlanCmd::Recover { plan } => {
            let r = mgr.recover(&plan)?;
            match r.rolled_back.iter().find(|(p, _)| *p == plan) {
                Some((_, ids)) => println!(
                    "plan {plan}: an interrupted commit_all was rolled back ({} sandbox(es) undone)",
                    ids.len()
                ),
                None => println!("plan {plan}: nothing to recover"),
            }
        }
        PlanCmd::Checkpoints { store, json } => checkpoint::list(&root, &store, json)?,
        PlanCmd::Restore {
            store,
            checkpoint,
            project,
            plan,
            resource,
            strategy,
        } => checkpoint::restore(
            &root,
            &mgr,
            checkpoint::Restore {
                url: &store,
                checkpoint: &checkpoint,
                project,
                plan,
                resource,
                strategy: &strategy,
            },
        )?,
        PlanCmd::CleanAbandoned => {
            let n = mgr.cleanup_abandoned()?;
            println!("{n} abandoned sandbox(es) removed");
        }
    }
    Ok(ExitCode::SUCCESS)
}
