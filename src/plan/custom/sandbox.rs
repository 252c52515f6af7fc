//! [`CustomSandbox`]: the [`Sandbox`](crate::plan::Sandbox) of a custom strategy — the library's lifecycle
//! (status checks, `state.json`, `commit_all`) over the strategy's nine operations.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::protocol::{SandboxRef, StrategyFailure, StrategyProtocol};
use crate::id::{PlanId, SandboxId};
use crate::plan::backend::{Backend, Checkpoints, NativeCheckpoints};
use crate::plan::error::SandboxError;
use crate::plan::model::{CommitResult, DiffEntry, SandboxContext, SandboxDiff, Strategy};
use crate::plan::record::{Lifecycle, Record, State};
use crate::plan::status::Status;
use crate::plan::strategy::{self as builtin, through_apply};

/// Metadata key holding the registered strategy name.
pub const STRATEGY_KEY: &str = "strategy";
/// Metadata key holding the original resource's path.
pub const ORIGINAL_KEY: &str = "original_path";

/// A sandbox of a custom strategy.
///
/// Its files are the strategy's business: [`Sandbox::get_path`](crate::plan::Sandbox::get_path) of the empty path is the
/// sandbox's own directory (where `state.json` is; the strategy may keep files there), any
/// other path is refused — actors use [`Sandbox::read`](crate::plan::Sandbox::read) and [`Sandbox::write`](crate::plan::Sandbox::write), which go to
/// the strategy. Checkpoints are native (the strategy's `checkpoint`/`restore_checkpoint`).
/// `check_commit` checks the lifecycle only (the protocol has no dry run).
///
/// Crash atomicity is the strategy's: `commit_all`'s journal makes a reopened manager roll
/// back the custom sandboxes recorded as committed (through the strategy's `rollback`), but a
/// crash between the strategy's `commit` and the status change on disk leaves a commit the
/// library does not know of (built-in strategies record the commit's reference first; the
/// protocol has no lookup for that).
pub struct CustomSandbox {
    lc: Lifecycle,
    name: String,
    proto: Arc<dyn StrategyProtocol>,
    resource_id: String,
    original: PathBuf,
}

fn fail(what: &str, f: StrategyFailure) -> String {
    format!("{what}: {f}")
}

impl CustomSandbox {
    /// A pending sandbox of the strategy `name` (whose instance is `proto`) over `original`.
    pub fn new(
        name: &str,
        proto: Arc<dyn StrategyProtocol>,
        plan_dir: &Path,
        resource_id: &str,
        original: &Path,
    ) -> CustomSandbox {
        CustomSandbox {
            lc: Lifecycle::pending(Strategy::Custom(name.to_string()), plan_dir),
            name: name.to_string(),
            proto,
            resource_id: resource_id.to_string(),
            original: original.to_path_buf(),
        }
    }

    /// One found on disk (the strategy must be registered again under its name).
    pub fn open(proto: Arc<dyn StrategyProtocol>, record: Record, dir: PathBuf) -> CustomSandbox {
        CustomSandbox {
            name: record.strategy.name().to_string(),
            resource_id: record.resource_id.clone(),
            original: record.original_path.clone(),
            lc: Lifecycle::loaded(record, dir),
            proto,
        }
    }

    fn sref(&self, st: &State) -> Result<SandboxRef, SandboxError> {
        let r = st.record.as_ref().ok_or_else(|| {
            SandboxError::sandbox(Some(self.lc.id().as_str()), "sandbox has no context")
        })?;
        Ok(SandboxRef {
            sandbox_id: r.sandbox_id.to_string(),
            plan_id: r.plan_id.to_string(),
            resource_id: r.resource_id.clone(),
            created_at: r.created_at,
            metadata: r.metadata.clone(),
        })
    }

    fn err(&self, what: &str, f: StrategyFailure) -> SandboxError {
        SandboxError::sandbox(
            Some(self.lc.id().as_str()),
            format!("strategy {}: {}", self.name, fail(what, f)),
        )
    }
}

/// `rel` as the protocol's path: relative, `/`-separated, no `..`, UTF-8.
fn protocol_path(id: &SandboxId, rel: &Path) -> Result<String, SandboxError> {
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_str().ok_or_else(|| {
                SandboxError::sandbox(
                    Some(id.as_str()),
                    format!("refused path {}: not UTF-8", rel.display()),
                )
            })?),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(SandboxError::sandbox(
                    Some(id.as_str()),
                    format!("refused path {}: path contains '..'", rel.display()),
                ))
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(SandboxError::sandbox(
                    Some(id.as_str()),
                    format!("refused path {}: path is absolute", rel.display()),
                ))
            }
        }
    }
    if parts.is_empty() {
        return Err(SandboxError::sandbox(
            Some(id.as_str()),
            "refused the empty path",
        ));
    }
    Ok(parts.join("/"))
}

/// The git patch of `entries` (paths that are not valid relative paths are left out).
fn patch_of(entries: &[DiffEntry]) -> Vec<u8> {
    use crate::patch::write::{write_file_diff, Side};
    let mut out = Vec::new();
    for e in entries {
        let Ok(p) = crate::RelPath::new(&e.path) else {
            continue;
        };
        let old = e.before.as_deref().map(|d| Side {
            path: &p,
            mode: e.before_mode.unwrap_or(0o100644),
            data: d,
        });
        let new = e.after.as_deref().map(|d| Side {
            path: &p,
            mode: e.after_mode.unwrap_or(0o100644),
            data: d,
        });
        write_file_diff(&mut out, old, new);
    }
    out
}

impl Backend for CustomSandbox {
    fn lifecycle(&self) -> &Lifecycle {
        &self.lc
    }

    fn create(&self, plan_id: &PlanId) -> Result<SandboxContext, SandboxError> {
        let mut st = self.lc.lock_op(|_| Ok(()))?;
        self.lc.check(st.status, Status::Created)?;
        let creation = |reason: String| SandboxError::Creation {
            resource_id: self.resource_id.clone(),
            reason,
            source: None,
        };
        let original = std::fs::canonicalize(&self.original)
            .map_err(|e| creation(format!("resolve {}: {e}", self.original.display())))?;
        std::fs::create_dir_all(self.lc.dir())
            .map_err(|e| creation(format!("create {}: {e}", self.lc.dir().display())))?;
        let mut metadata = BTreeMap::new();
        metadata.insert(STRATEGY_KEY.to_string(), self.name.clone());
        metadata.insert(
            ORIGINAL_KEY.to_string(),
            original.to_string_lossy().into_owned(),
        );
        let mut record = Record::new(
            self.lc.id(),
            plan_id,
            &self.resource_id,
            self.lc.strategy(),
            &original,
            self.lc.dir(),
            metadata,
        );
        let sref = SandboxRef {
            sandbox_id: record.sandbox_id.to_string(),
            plan_id: record.plan_id.to_string(),
            resource_id: record.resource_id.clone(),
            created_at: record.created_at,
            metadata: record.metadata.clone(),
        };
        let extra = match self.proto.create(&sref, &original) {
            Ok(m) => m,
            Err(f) => {
                let _ = builtin::remove_dir(self.lc.dir());
                return Err(creation(format!("strategy {}: {f}", self.name)));
            }
        };
        for (k, v) in extra {
            // The library's own keys stay the library's.
            if k != STRATEGY_KEY && k != ORIGINAL_KEY {
                record.metadata.insert(k, v);
            }
        }
        builtin::record_created(&self.lc, &mut st, record, &self.resource_id, |_| {
            let _ = self.proto.cleanup(&sref);
        })
    }

    /// The empty path: the sandbox's own directory (and the sandbox becomes active). Any other
    /// path is refused: a custom strategy's content is reached with `read`/`write`.
    fn get_path(&self, rel: &Path) -> Result<PathBuf, SandboxError> {
        let mut st = self.lc.lock_for_path()?;
        let empty = rel.components().all(|c| c == Component::CurDir);
        if !empty {
            return Err(SandboxError::sandbox(
                Some(self.lc.id().as_str()),
                format!(
                    "strategy {} keeps its content itself: use read/write, not get_path({})",
                    self.name,
                    rel.display()
                ),
            ));
        }
        builtin::activate_for_path(&self.lc, &mut st)?;
        Ok(self.lc.dir().to_path_buf())
    }

    fn read(&self, rel: &Path) -> Result<Option<Vec<u8>>, SandboxError> {
        let st = self.lc.lock();
        builtin::require_created(&self.lc, &st)?;
        let p = protocol_path(self.lc.id(), rel)?;
        let sref = self.sref(&st)?;
        self.proto
            .read(&sref, &p)
            .map_err(|f| self.err(&format!("read {p}"), f))
    }

    fn write(&self, rel: &Path, data: &[u8]) -> Result<(), SandboxError> {
        let mut st = self.lc.lock_for_path()?;
        let p = protocol_path(self.lc.id(), rel)?;
        builtin::activate_for_path(&self.lc, &mut st)?;
        let sref = self.sref(&st)?;
        self.proto
            .write(&sref, &p, data)
            .map_err(|f| self.err(&format!("write {p}"), f))
    }

    fn diff(&self) -> Result<SandboxDiff, SandboxError> {
        let st = self.lc.lock();
        builtin::require_created(&self.lc, &st)?;
        let sref = self.sref(&st)?;
        let mut view = self.proto.diff(&sref).map_err(|f| self.err("diff", f))?;
        view.entries.sort_by(|a, b| a.path.cmp(&b.path));
        let patch = patch_of(&view.entries);
        Ok(SandboxDiff {
            entries: view.entries,
            patch,
        })
    }

    fn commit(&self, message: Option<&str>) -> Result<CommitResult, SandboxError> {
        let mut st = self.lc.lock_op(|_| Ok(()))?;
        let from = st.status;
        let target = if from == Status::Created {
            Status::Active
        } else {
            Status::Committed
        };
        self.lc.check(from, target)?;
        let sref = self.sref(&st)?;
        // An unanticipated failure stays one (`commit_all` raises for it rather than
        // reporting a failed commit).
        let commit_err = |reason: String, unexpected: bool| {
            if unexpected {
                SandboxError::Unexpected {
                    sandbox_id: Some(self.lc.id().to_string()),
                    reason,
                }
            } else {
                SandboxError::Commit {
                    sandbox_id: self.lc.id().to_string(),
                    reason,
                    files: Vec::new(),
                    source: None,
                }
            }
        };
        let view = self.proto.diff(&sref).map_err(|f| {
            let unexpected = f.unexpected;
            commit_err(
                format!("strategy {}: {}", self.name, fail("diff", f)),
                unexpected,
            )
        })?;
        let commit_ref = self
            .proto
            .commit(&sref, message)
            .map_err(|f| commit_err(format!("strategy {}: {f}", self.name), f.unexpected))?;
        if from == Status::Created {
            self.lc.advance(&mut st, Status::Active)?;
        }
        if let Some(r) = st.record.as_mut() {
            r.commit_ref = commit_ref.clone();
        }
        self.lc.advance(&mut st, Status::Committed)?;
        let diff = SandboxDiff {
            entries: view.entries,
            patch: Vec::new(),
        };
        let mut result = through_apply::result(self.lc.id(), commit_ref, &diff);
        result
            .metadata
            .insert(STRATEGY_KEY.to_string(), self.name.clone());
        Ok(result)
    }

    fn rollback(&self) -> Result<(), SandboxError> {
        let mut st = self.lc.lock_op(|_| Ok(()))?;
        self.lc.check(st.status, Status::RolledBack)?;
        let after_commit = st.status == Status::Committed;
        let rb = |reason: String| SandboxError::Rollback {
            sandbox_id: self.lc.id().to_string(),
            reason,
            files: Vec::new(),
            source: None,
        };
        if after_commit && !self.proto.is_rollbackable() {
            return Err(rb(format!(
                "strategy {} says its commits cannot be undone",
                self.name
            )));
        }
        let sref = self.sref(&st)?;
        self.proto
            .rollback(&sref, after_commit)
            .map_err(|f| rb(format!("strategy {}: {f}", self.name)))?;
        if let Some(r) = st.record.as_mut() {
            if after_commit {
                r.commit_ref = None;
            }
        }
        self.lc.advance(&mut st, Status::RolledBack)
    }

    fn cleanup(&self) -> Result<(), SandboxError> {
        let mut st = self.lc.lock_op(|_| Ok(()))?;
        let sref = match st.status {
            Status::Pending | Status::CleanedUp => None,
            _ => Some(self.sref(&st)?),
        };
        let name = self.name.clone();
        let proto = self.proto.clone();
        let id = self.lc.id().to_string();
        builtin::cleanup_dir(&self.lc, &mut st, move || match sref {
            Some(r) => proto.cleanup(&r).map_err(|f| {
                SandboxError::sandbox(Some(&id), format!("strategy {name}: cleanup: {f}"))
            }),
            None => Ok(()),
        })
    }

    fn is_rollbackable(&self) -> bool {
        self.proto.is_rollbackable()
    }

    fn checkpoints(&self) -> Checkpoints<'_> {
        Checkpoints::Native(self)
    }
}

impl NativeCheckpoints for CustomSandbox {
    fn save(&self, id: &str) -> Result<(), SandboxError> {
        let st = self.lc.lock();
        builtin::require_created(&self.lc, &st)?;
        let sref = self.sref(&st)?;
        self.proto
            .checkpoint(&sref, id)
            .map_err(|f| self.err(&format!("checkpoint {id}"), f))
    }

    fn restore(&self, id: &str) -> Result<(), SandboxError> {
        let st = self.lc.lock();
        builtin::require_created(&self.lc, &st)?;
        let sref = self.sref(&st)?;
        self.proto
            .restore_checkpoint(&sref, id)
            .map_err(|f| self.err(&format!("restore checkpoint {id}"), f))
    }
}
