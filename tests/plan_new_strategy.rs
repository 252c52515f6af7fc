//! A new strategy is one backend and one registration line: a toy `memory` strategy (its
//! writes wait in memory until commit) registered by name in a [`StrategyRegistry`] and
//! driven through the [`PlanManager`] end to end — create, write, diff, `commit_all`,
//! rollback, cleanup — with the library's lifecycle, journal and recovery around it.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use patchbox::id::PlanId;
use patchbox::plan::backend::{Backend, Checkpoints};
use patchbox::plan::custom::StrategyRegistry;
use patchbox::plan::record::{Lifecycle, Record};
use patchbox::plan::strategy::factory::{FnFactory, NewBackend};
use patchbox::plan::strategy::{self as builtin, through_apply};
use patchbox::plan::{
    CommitResult, DiffEntry, DiffOp, PlanManager, SandboxContext, SandboxDiff, SandboxError,
    Status, Strategy,
};

/// The `memory` strategy's backend: writes are kept in memory; a commit writes them into the
/// original and remembers what they replaced, which a rollback puts back.
struct Memory {
    lc: Lifecycle,
    resource_id: String,
    original: PathBuf,
    /// Writes not in the original yet: path -> content.
    writes: Mutex<BTreeMap<String, Vec<u8>>>,
    /// What the last commit replaced: path -> content before (`None`: it was absent).
    replaced: Mutex<BTreeMap<String, Option<Vec<u8>>>>,
}

impl Memory {
    fn new(r: &NewBackend<'_>) -> Memory {
        Memory {
            lc: Lifecycle::pending(r.strategy.clone(), r.plan_dir),
            resource_id: r.resource_id.to_string(),
            original: r.original.to_path_buf(),
            writes: Mutex::new(BTreeMap::new()),
            replaced: Mutex::new(BTreeMap::new()),
        }
    }

    fn open(record: Record, dir: PathBuf) -> Memory {
        Memory {
            resource_id: record.resource_id.clone(),
            original: record.original_path.clone(),
            lc: Lifecycle::loaded(record, dir),
            writes: Mutex::new(BTreeMap::new()),
            replaced: Mutex::new(BTreeMap::new()),
        }
    }

    fn err(&self, reason: impl Into<String>) -> SandboxError {
        SandboxError::sandbox(Some(self.lc.id().as_str()), reason)
    }

    fn key(&self, rel: &Path) -> Result<String, SandboxError> {
        let parts: Option<Vec<&str>> = rel
            .components()
            .map(|c| match c {
                Component::Normal(s) => s.to_str(),
                _ => None,
            })
            .collect();
        match parts {
            Some(p) if !p.is_empty() => Ok(p.join("/")),
            _ => Err(self.err(format!("refused path {}", rel.display()))),
        }
    }

    fn entries(&self) -> Vec<DiffEntry> {
        let writes = self.writes.lock().unwrap();
        writes
            .iter()
            .map(|(path, after)| {
                let before = std::fs::read(self.original.join(path)).ok();
                DiffEntry {
                    path: path.clone(),
                    operation: if before.is_some() {
                        DiffOp::Modified
                    } else {
                        DiffOp::Added
                    },
                    before,
                    after: Some(after.clone()),
                    before_mode: None,
                    after_mode: None,
                }
            })
            .filter(|e| e.before != e.after)
            .collect()
    }
}

impl Backend for Memory {
    fn lifecycle(&self) -> &Lifecycle {
        &self.lc
    }

    fn create(&self, plan_id: &PlanId) -> Result<SandboxContext, SandboxError> {
        let mut st = self.lc.lock_op(|_| Ok(()))?;
        self.lc.check(st.status, Status::Created)?;
        std::fs::create_dir_all(self.lc.dir()).map_err(|e| self.err(e.to_string()))?;
        let record = Record::new(
            self.lc.id(),
            plan_id,
            &self.resource_id,
            self.lc.strategy(),
            &self.original,
            self.lc.dir(),
            BTreeMap::new(),
        );
        builtin::record_created(&self.lc, &mut st, record, &self.resource_id, |_| {})
    }

    fn get_path(&self, rel: &Path) -> Result<PathBuf, SandboxError> {
        Err(self.err(format!(
            "memory keeps its files in memory: use read/write, not get_path({})",
            rel.display()
        )))
    }

    fn read(&self, rel: &Path) -> Result<Option<Vec<u8>>, SandboxError> {
        let key = self.key(rel)?;
        if let Some(d) = self.writes.lock().unwrap().get(&key) {
            return Ok(Some(d.clone()));
        }
        Ok(std::fs::read(self.original.join(&key)).ok())
    }

    fn write(&self, rel: &Path, data: &[u8]) -> Result<(), SandboxError> {
        let key = self.key(rel)?;
        let mut st = self.lc.lock_for_path()?;
        builtin::activate_for_path(&self.lc, &mut st)?;
        self.writes.lock().unwrap().insert(key, data.to_vec());
        Ok(())
    }

    fn diff(&self) -> Result<SandboxDiff, SandboxError> {
        let st = self.lc.lock();
        builtin::require_created(&self.lc, &st)?;
        Ok(SandboxDiff {
            entries: self.entries(),
            patch: Vec::new(),
        })
    }

    fn commit(&self, _message: Option<&str>) -> Result<CommitResult, SandboxError> {
        let mut st = self.lc.lock_op(|_| Ok(()))?;
        if st.status == Status::Created {
            self.lc.advance(&mut st, Status::Active)?;
        }
        self.lc.check(st.status, Status::Committed)?;
        let diff = SandboxDiff {
            entries: self.entries(),
            patch: Vec::new(),
        };
        let mut replaced = self.replaced.lock().unwrap();
        replaced.clear();
        for e in &diff.entries {
            replaced.insert(e.path.clone(), e.before.clone());
            let to = self.original.join(&e.path);
            std::fs::write(&to, e.after.as_deref().unwrap_or_default())
                .map_err(|err| self.err(format!("write {}: {err}", to.display())))?;
        }
        self.lc.advance(&mut st, Status::Committed)?;
        Ok(through_apply::result(self.lc.id(), None, &diff))
    }

    fn rollback(&self) -> Result<(), SandboxError> {
        let mut st = self.lc.lock_op(|_| Ok(()))?;
        self.lc.check(st.status, Status::RolledBack)?;
        if st.status == Status::Committed {
            for (path, before) in std::mem::take(&mut *self.replaced.lock().unwrap()) {
                let to = self.original.join(&path);
                let undone = match before {
                    Some(d) => std::fs::write(&to, d),
                    None => std::fs::remove_file(&to),
                };
                undone.map_err(|err| self.err(format!("restore {}: {err}", to.display())))?;
            }
        } else {
            self.writes.lock().unwrap().clear();
        }
        self.lc.advance(&mut st, Status::RolledBack)
    }

    fn cleanup(&self) -> Result<(), SandboxError> {
        let mut st = self.lc.lock_op(|_| Ok(()))?;
        builtin::cleanup_dir(&self.lc, &mut st, || Ok(()))
    }

    fn checkpoints(&self) -> Checkpoints<'_> {
        Checkpoints::None
    }
}

#[test]
fn a_strategy_registered_by_name_runs_through_the_manager() {
    let root = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("notes.txt"), "one\n").unwrap();

    let registry = StrategyRegistry::new();
    registry
        .register_backend(
            "memory",
            Arc::new(FnFactory {
                new: |r| Ok(Box::new(Memory::new(r))),
                open: |_, record, dir| Ok(Box::new(Memory::open(record, dir))),
            }),
        )
        .unwrap();
    assert!(registry.has_custom_strategy("memory"));
    assert_eq!(registry.names(), vec!["memory".to_string()]);
    let mgr = PlanManager::open_with_registry(root.path(), Arc::new(registry)).unwrap();

    let sb = mgr
        .get_or_create_sandbox("p1", "docs", project.path(), Strategy::parse("memory"))
        .unwrap();
    assert_eq!(sb.strategy().name(), "memory");
    assert_eq!(sb.status(), Status::Created);
    sb.write("notes.txt".as_ref(), b"two\n").unwrap();
    sb.write("new.txt".as_ref(), b"new\n").unwrap();
    assert_eq!(sb.status(), Status::Active);
    assert_eq!(
        std::fs::read_to_string(project.path().join("notes.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(
        sb.read("notes.txt".as_ref()).unwrap().as_deref(),
        Some(&b"two\n"[..])
    );

    let diff = sb.diff().unwrap();
    assert_eq!(diff.paths(DiffOp::Modified), vec!["notes.txt".to_string()]);
    assert_eq!(diff.paths(DiffOp::Added), vec!["new.txt".to_string()]);

    let results = mgr.commit_all("p1").unwrap();
    assert_eq!(results.len(), 1);
    assert!(results[0].success);
    assert_eq!(sb.status(), Status::Committed);
    assert_eq!(
        std::fs::read_to_string(project.path().join("notes.txt")).unwrap(),
        "two\n"
    );
    assert!(project.path().join("new.txt").exists());

    sb.rollback().unwrap();
    assert_eq!(sb.status(), Status::RolledBack);
    assert_eq!(
        std::fs::read_to_string(project.path().join("notes.txt")).unwrap(),
        "one\n"
    );
    assert!(!project.path().join("new.txt").exists());

    mgr.cleanup_all("p1").unwrap();
    assert_eq!(sb.status(), Status::CleanedUp);
}

#[test]
fn a_registered_backend_name_is_refused_twice_and_for_a_built_in() {
    let registry = StrategyRegistry::new();
    let f = || {
        Arc::new(FnFactory {
            new: |r| Ok(Box::new(Memory::new(r))),
            open: |_, record, dir| Ok(Box::new(Memory::open(record, dir))),
        })
    };
    registry.register_backend("memory", f()).unwrap();
    assert!(registry.register_backend("memory", f()).is_err());
    assert!(registry.register_backend("copy_on_write", f()).is_err());
    // The built-in strategies are in every registry, but not among its custom names.
    assert!(registry.backend_factory("copy_on_write").is_some());
    assert!(!registry.has_custom_strategy("copy_on_write"));
}

#[test]
fn a_manager_without_the_strategy_refuses_it_by_name() {
    let root = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let mgr = PlanManager::open(root.path()).unwrap();
    let err = mgr
        .get_or_create_sandbox("p1", "docs", project.path(), Strategy::parse("memory"))
        .err()
        .expect("memory is not registered");
    assert!(
        err.to_string().contains("unknown sandbox strategy"),
        "{err}"
    );
}
