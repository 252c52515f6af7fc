//! The plan manager: every sandbox of every plan of one engine, found again after a crash.
//!
//! ```text
//! <root>/plans/
//!   undo/                     undo records of commits (their ids are commit_refs)
//!   lower/                    snapshots of originals (see crate::isolation::snapshot)
//!   plan-<plan id>/
//!     commit.lock             the plan's lock (see crate::plan::lock)
//!     commit.journal          present while a commit_all runs (see journal)
//!     <sandbox id>/           one per sandbox: state.json and the strategy's files
//! ```
//!
//! Several managers, in one process or in several, may share a root. Each operation that
//! changes a plan holds the plan's lock for its whole length and starts from the plan's
//! sandboxes as they are on disk, so their operations on one plan serialize. Recovery of an
//! interrupted `commit_all` (its journal still there) is done only by a holder of the plan's
//! lock that took it itself — the proof that the committer is gone; a manager opened while
//! another process commits leaves that plan alone and names it in [`Recovery::busy`], and the
//! first operation on the plan after that commit's process died settles it.
//!
//! The manager is split by idea, one file each: `open.rs` (opening over a root, the registry
//! of custom strategies), `recovery.rs` (the table learning the disk, the plan's lock, and
//! settling what a dead holder left), `sandboxes.rs` (lazy creation and lookup),
//! `commit.rs` (`commit_all`'s algorithm), `options.rs` (its options), `parallel.rs` (its parallel checks and grouped
//! commits), `cleanup.rs` (rollback, cleanup, what a drop removes), `snapshots.rs` (shared
//! snapshots of originals) and `resources.rs` (the sandbox a resource shares under its
//! boundary). This file holds what they share: the [`Manager`] with its table of sandboxes,
//! the on-disk names, and the small helpers over plan directories. A plan id is parsed into a
//! [`PlanId`] once, by the public method it is given to, and carried as the type after that.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::Mutex;

use super::custom::registry::StrategyRegistry;
use super::error::SandboxError;
use super::lock::PlanGuard;
use super::sandbox::Sandbox;
use super::strategy::Env;
use crate::id::PlanId;

mod cleanup;
mod commit;
mod open;
mod options;
mod parallel;
mod recovery;
mod resources;
mod sandboxes;
mod snapshots;

pub use cleanup::clean_up_if_idle;
pub use options::CommitAllOptions;
pub use resources::ResourceSandbox;

/// Name of the plans directory under the root.
pub const PLANS_DIR: &str = "plans";

/// Prefix of a plan's directory.
const PLAN_PREFIX: &str = "plan-";

/// The key of a sandbox in the table: its plan and its resource.
type Key = (PlanId, String);

/// A slot of the sandbox table: filled once, by the first caller (others wait on its lock).
type Slot = Arc<Mutex<Option<Arc<dyn Sandbox>>>>;

/// What opening a manager found and did about earlier runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Plans whose interrupted `commit_all` was rolled back, with the sandboxes undone.
    pub rolled_back: Vec<(String, Vec<String>)>,
    /// What could not be settled (a sandbox that cannot be read, a rollback refused).
    pub warnings: Vec<String>,
    /// Plans left alone at open because another process held their lock (a commit was
    /// running): the first operation on such a plan settles what that process leaves.
    pub busy: Vec<String>,
}

/// One plan executor's sandboxes.
///
/// `Send + Sync`: share it as `Arc<PlanManager>`. Sandboxes are made lazily by
/// [`PlanManager::get_or_create_sandbox`]; their state is on disk under the root, so a
/// manager opened over the same root after a crash lists them again, and an interrupted
/// [`PlanManager::commit_all`] is rolled back when it opens.
///
/// On drop, sandboxes holding no uncommitted work are cleaned up; an active sandbox with
/// changes is kept for the next manager (never lose work).
pub struct Manager {
    root: PathBuf,
    env: Arc<Env>,
    /// The strategies sandboxes are made of by name (the built-in registry until the manager
    /// is given one).
    registry: parking_lot::RwLock<Option<Arc<StrategyRegistry>>>,
    table: Mutex<BTreeMap<Key, Slot>>,
    boundaries: Mutex<HashMap<String, String>>,
    recovery: Mutex<Recovery>,
    /// The sandboxes this manager made: the only ones its drop may clean up (others may be
    /// in use by the manager of another process).
    made: Mutex<HashSet<String>>,
    cleanup_on_drop: AtomicBool,
}

/// The plan manager under its earlier name. The same type as [`Manager`]; new code names
/// `patchbox::plan::Manager`, as the session family's is `patchbox::session::Manager`.
pub type PlanManager = Manager;

impl PlanManager {
    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What recovery found and did: at open, and since (an interrupted commit settled by
    /// the first operation on its plan after its process died).
    pub fn recovery(&self) -> Recovery {
        self.recovery.lock().clone()
    }

    fn plan_dir(&self, plan_id: &PlanId) -> PathBuf {
        self.env.plans_dir.join(format!("{PLAN_PREFIX}{plan_id}"))
    }

    /// Every plan directory under the root, with the name it gives its plan as found on
    /// disk (not checked: a caller that acts on the plan parses it).
    fn plan_dirs(&self) -> Result<Vec<(String, PathBuf)>, SandboxError> {
        let mut out = Vec::new();
        for d in subdirs(&self.env.plans_dir) {
            let Some(name) = d.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if let Some(id) = name.strip_prefix(PLAN_PREFIX) {
                out.push((id.to_string(), d.clone()));
            }
        }
        Ok(out)
    }

    fn slots(&self) -> Vec<(Key, Slot)> {
        self.table
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn warn(&self, w: String) {
        let mut r = self.recovery.lock();
        if !r.warnings.contains(&w) {
            r.warnings.push(w);
        }
    }
}

/// Removes the directory of `plan`'s plan when no sandbox is left in it (its lock file too:
/// waiters on it start again on a new one, see [`crate::plan::lock`]).
fn forget_plan_dir(plan: &PlanGuard) {
    let dir = plan.plan_dir();
    if subdirs(dir).is_empty() && !dir.join(crate::plan::journal::JOURNAL_FILE).exists() {
        plan.remove_file();
        let _ = std::fs::remove_dir(dir);
    }
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}
