//! Custom strategies (`patchbox::plan::custom`): the registry's allow-list and protocol
//! checks (with a C module compiled at test time), a Rust strategy driven through
//! `commit_all` beside a built-in sandbox (LIFO compensation when the custom commit fails),
//! the built-in adapter's round trip, and reopening after a restart.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use patchbox::plan::checkpoint::CheckpointManager;
use patchbox::plan::custom::{
    BuiltInAdapter, DiffView, ModuleSpec, OpResult, RegistryError, SandboxRef, StrategyFailure,
    StrategyProtocol, StrategyRegistry,
};
use patchbox::plan::{DiffEntry, DiffOp, PlanManager, SandboxError, Status, Strategy};

// ---- a Rust key-value strategy -----------------------------------------------------------

#[derive(Default, Clone)]
struct KvSandbox {
    staged: BTreeMap<String, Vec<u8>>,
    checkpoints: HashMap<String, BTreeMap<String, Vec<u8>>>,
}

/// Keys in memory; `published` is the "original" a commit writes to.
#[derive(Default)]
struct Kv {
    sandboxes: Mutex<HashMap<String, KvSandbox>>,
    published: Mutex<BTreeMap<String, Vec<u8>>>,
    /// Per sandbox: what published held before its commit.
    undo: Mutex<HashMap<String, BTreeMap<String, Vec<u8>>>>,
    fail_commit: AtomicBool,
    /// Makes `commit` fail as an unanticipated error (not a sandbox-level one).
    crash_commit: AtomicBool,
    calls: Mutex<Vec<String>>,
}

impl Kv {
    fn log(&self, op: &str, r: &SandboxRef) {
        self.calls.lock().push(format!("{op} {}", r.sandbox_id));
    }
    fn with<T>(&self, r: &SandboxRef, f: impl FnOnce(&mut KvSandbox) -> T) -> OpResult<T> {
        let mut m = self.sandboxes.lock();
        let s = m
            .get_mut(&r.sandbox_id)
            .ok_or_else(|| StrategyFailure::from("no such sandbox"))?;
        Ok(f(s))
    }
}

impl StrategyProtocol for Kv {
    fn create(&self, r: &SandboxRef, _original: &Path) -> OpResult<BTreeMap<String, String>> {
        self.log("create", r);
        self.sandboxes
            .lock()
            .insert(r.sandbox_id.clone(), KvSandbox::default());
        Ok(BTreeMap::from([("kv.keys".to_string(), "0".to_string())]))
    }
    fn read(&self, r: &SandboxRef, k: &str) -> OpResult<Option<Vec<u8>>> {
        self.with(r, |s| s.staged.get(k).cloned())
    }
    fn write(&self, r: &SandboxRef, k: &str, v: &[u8]) -> OpResult<()> {
        self.with(r, |s| {
            s.staged.insert(k.to_string(), v.to_vec());
        })
    }
    fn diff(&self, r: &SandboxRef) -> OpResult<DiffView> {
        let published = self.published.lock().clone();
        let entries = self.with(r, |s| {
            s.staged
                .iter()
                .map(|(k, v)| DiffEntry {
                    path: k.clone(),
                    operation: if published.contains_key(k) {
                        DiffOp::Modified
                    } else {
                        DiffOp::Added
                    },
                    before: published.get(k).cloned(),
                    after: Some(v.clone()),
                    before_mode: None,
                    after_mode: None,
                })
                .collect()
        })?;
        Ok(DiffView::new(&r.sandbox_id, entries))
    }
    fn commit(&self, r: &SandboxRef, _m: Option<&str>) -> OpResult<Option<String>> {
        self.log("commit", r);
        if self.fail_commit.load(Ordering::SeqCst) {
            return Err("the store is read-only".into());
        }
        if self.crash_commit.load(Ordering::SeqCst) {
            return Err(StrategyFailure::unexpected("index out of range"));
        }
        let staged = self.with(r, |s| s.staged.clone())?;
        let mut p = self.published.lock();
        self.undo.lock().insert(r.sandbox_id.clone(), p.clone());
        p.extend(staged);
        Ok(Some(format!("kv-{}", r.sandbox_id)))
    }
    fn rollback(&self, r: &SandboxRef, after_commit: bool) -> OpResult<()> {
        self.log(if after_commit { "undo" } else { "discard" }, r);
        if after_commit {
            let before = self
                .undo
                .lock()
                .remove(&r.sandbox_id)
                .ok_or_else(|| StrategyFailure::from("nothing to undo"))?;
            *self.published.lock() = before;
            Ok(())
        } else {
            self.with(r, |s| s.staged.clear())
        }
    }
    fn checkpoint(&self, r: &SandboxRef, id: &str) -> OpResult<()> {
        self.with(r, |s| {
            let snap = s.staged.clone();
            s.checkpoints.insert(id.to_string(), snap);
        })
    }
    fn restore_checkpoint(&self, r: &SandboxRef, id: &str) -> OpResult<()> {
        self.with(r, |s| match s.checkpoints.get(id) {
            Some(c) => {
                s.staged = c.clone();
                Ok(())
            }
            None => Err(StrategyFailure::from("no such checkpoint")),
        })?
    }
    fn cleanup(&self, r: &SandboxRef) -> OpResult<()> {
        self.log("cleanup", r);
        self.sandboxes.lock().remove(&r.sandbox_id);
        Ok(())
    }
}

fn kv_registry() -> (Arc<Kv>, Arc<StrategyRegistry>) {
    let kv = Arc::new(Kv::default());
    let reg = Arc::new(StrategyRegistry::new());
    reg.register_instance("kv", kv.clone()).unwrap();
    (kv, reg)
}

fn kv() -> Strategy {
    Strategy::Custom("kv".into())
}

// ---- a C module ----------------------------------------------------------------------------

/// Compiles tests/fixtures/custom_strategy.c into `<dir>/libcustom.so`.
fn build_module(dir: &Path) -> PathBuf {
    let out = dir.join("libcustom.so");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/custom_strategy.c");
    let st = std::process::Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-shared", "-fPIC", "-O0", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("run the C compiler");
    assert!(st.success(), "cc failed");
    out
}

#[test]
fn the_default_registry_loads_no_module() {
    let dir = tempfile::tempdir().unwrap();
    let so = build_module(dir.path());
    let reg = StrategyRegistry::new();
    assert!(reg.allowed_prefixes().is_empty());
    let e = reg.register("mine", &so, "full").unwrap_err();
    assert!(matches!(e, RegistryError::NotAllowed { ref allowed, .. } if allowed.is_empty()));
    assert!(e.to_string().contains("no module prefix is allowed"), "{e}");
    assert!(!reg.has_custom_strategy("mine"));
}

#[test]
fn modules_outside_the_prefixes_are_refused() {
    let allowed = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let so = build_module(other.path());
    let reg = StrategyRegistry::new();
    reg.allow_module_prefix(allowed.path()).unwrap();
    // Outside, through `..`, and through a symlink inside the allowed directory.
    let dotdot = allowed
        .path()
        .join("..")
        .join(other.path().file_name().unwrap())
        .join("libcustom.so");
    let link = allowed.path().join("link.so");
    std::os::unix::fs::symlink(&so, &link).unwrap();
    for m in [so.clone(), dotdot, link, allowed.path().join("missing.so")] {
        let e = reg.register("mine", &m, "full").unwrap_err();
        assert!(
            matches!(e, RegistryError::NotAllowed { .. }),
            "{}: {e}",
            m.display()
        );
        assert!(
            e.to_string().contains("none of the allowed prefixes"),
            "{e}"
        );
    }
    // The same module inside the prefix loads.
    let inside = build_module(allowed.path());
    reg.register("mine", &inside, "full").unwrap();
    assert!(reg.has_custom_strategy("mine"));
}

#[test]
fn protocol_mismatch_names_the_missing_operations() {
    let dir = tempfile::tempdir().unwrap();
    let so = build_module(dir.path());
    let reg = StrategyRegistry::new();
    reg.allow_module_prefix(dir.path()).unwrap();
    match reg.register("partial", &so, "partial") {
        Err(RegistryError::ProtocolMismatch { strategy, missing }) => {
            assert_eq!(strategy, "partial");
            assert_eq!(missing, ["diff", "checkpoint"]);
        }
        other => panic!("expected ProtocolMismatch, got {:?}", other.err()),
    }
    let e = reg.register("x", &so, "absent").unwrap_err();
    assert!(matches!(e, RegistryError::Load { .. }), "{e}");
    assert!(e.to_string().contains("patchbox_strategy_absent"), "{e}");
    let e = reg.register("x", &so, "old_abi").unwrap_err();
    assert!(e.to_string().contains("ABI version 0"), "{e}");
    let e = reg.register("x", &so, "../evil").unwrap_err();
    assert!(e.to_string().contains("not a C identifier"), "{e}");
    assert!(reg.names().is_empty());
}

#[test]
fn register_all_from_config_and_names() {
    let dir = tempfile::tempdir().unwrap();
    let so = build_module(dir.path());
    let reg = StrategyRegistry::new();
    reg.allow_module_prefix(dir.path()).unwrap();
    let spec = |class: &str| ModuleSpec {
        module: so.clone(),
        class: class.to_string(),
    };
    let cfg = BTreeMap::from([
        ("a".to_string(), spec("full")),
        ("b".to_string(), spec("full")),
    ]);
    reg.register_all_from_config(&cfg).unwrap();
    assert_eq!(reg.names(), ["a", "b"]);
    let bad = BTreeMap::from([("c".to_string(), spec("partial"))]);
    assert!(matches!(
        reg.register_all_from_config(&bad),
        Err(RegistryError::ProtocolMismatch { .. })
    ));
    // Names: built-ins and taken ones are refused; unknown lookups list the registered.
    for n in ["a", "copy_on_write", "", "a/b"] {
        let e = reg.register(n, &so, "full");
        assert!(matches!(e, Err(RegistryError::Duplicate { .. })), "{n}");
    }
    let e = reg.get_custom_strategy("zzz").err().unwrap();
    assert!(e.to_string().contains("registered: [a, b]"), "{e}");
}

#[test]
fn a_c_module_is_driven_through_commit_all() {
    let dir = tempfile::tempdir().unwrap();
    let so = build_module(dir.path());
    let reg = Arc::new(StrategyRegistry::new());
    reg.allow_module_prefix(dir.path()).unwrap();
    reg.register("cmod", &so, "full").unwrap();
    let root = tempfile::tempdir().unwrap();
    let res = tempfile::tempdir().unwrap();
    let mgr = PlanManager::open_with_registry(root.path(), reg).unwrap();
    let sb = mgr
        .get_or_create_sandbox("p", "r", res.path(), Strategy::Custom("cmod".into()))
        .unwrap();
    assert_eq!(sb.context().unwrap().metadata["module"], "c");
    sb.write(Path::new("k"), b"hi").unwrap();
    assert_eq!(sb.read(Path::new("k")).unwrap(), None);
    let e = sb.write(Path::new("fail"), b"x").unwrap_err();
    assert!(e.to_string().contains("refused by the module"), "{e}");
    let d = sb.diff().unwrap();
    assert_eq!(d.entries[0].after.as_deref(), Some(&b"hi"[..]));
    assert!(String::from_utf8_lossy(&d.patch).contains("+++ b/k"));
    let results = mgr.commit_all("p").unwrap();
    assert_eq!(results[0].commit_ref.as_deref(), Some("c-1"));
    assert_eq!(results[0].added_files, ["k"]);
    mgr.cleanup_all("p").unwrap();
}

// ---- the plan manager over a Rust strategy ---------------------------------------------------

#[test]
fn a_custom_sandbox_commits_beside_a_builtin_one() {
    let (kv_impl, reg) = kv_registry();
    let root = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("a.txt"), "one\n").unwrap();
    let mgr = PlanManager::open_with_registry(root.path(), reg).unwrap();
    let cow = mgr
        .get_or_create_sandbox("p", "files", project.path(), Strategy::CopyOnWrite)
        .unwrap();
    let custom = mgr
        .get_or_create_sandbox("p", "cache", project.path(), kv())
        .unwrap();
    assert_eq!(custom.strategy(), kv());
    assert_eq!(custom.strategy().name(), "kv");
    assert_eq!(custom.context().unwrap().metadata["kv.keys"], "0");
    cow.write(Path::new("a.txt"), b"two\n").unwrap();
    custom.write(Path::new("greeting"), b"hello").unwrap();
    assert_eq!(custom.status(), Status::Active);
    assert_eq!(
        custom.read(Path::new("greeting")).unwrap().as_deref(),
        Some(&b"hello"[..])
    );
    // Paths: get_path is refused except for the sandbox's own directory; `..` never.
    assert!(custom
        .get_path(Path::new("greeting"))
        .unwrap_err()
        .to_string()
        .contains("read/write"));
    assert!(custom.write(Path::new("../x"), b"").is_err());
    assert!(custom.get_path(Path::new("")).unwrap().is_dir());

    // The custom commit fails: the copy_on_write commit before it is undone.
    kv_impl.fail_commit.store(true, Ordering::SeqCst);
    match common::as_failure(mgr.commit_all("p")).unwrap_err() {
        SandboxError::AtomicCommit {
            rolled_back_ids,
            failed_sandbox_id,
            reason,
            ..
        } => {
            assert_eq!(rolled_back_ids, [cow.sandbox_id()]);
            assert_eq!(failed_sandbox_id.as_deref(), Some(custom.sandbox_id()));
            assert!(reason.contains("the store is read-only"), "{reason}");
        }
        e => panic!("{e}"),
    }
    assert_eq!(
        std::fs::read_to_string(project.path().join("a.txt")).unwrap(),
        "one\n"
    );
    assert!(kv_impl.published.lock().is_empty());
    assert_eq!(custom.status(), Status::Active);

    // Reported as the documented one failed result (a sandbox-level failure).
    let results = mgr.commit_all("p").unwrap();
    assert_eq!(results.len(), 1);
    assert!(!results[0].success);
    assert_eq!(results[0].sandbox_id, custom.sandbox_id());
    assert_eq!(results[0].metadata["rolled_back_ids"], cow.sandbox_id());

    // An unanticipated failure raises AtomicCommit, after the same rollback.
    kv_impl.fail_commit.store(false, Ordering::SeqCst);
    kv_impl.crash_commit.store(true, Ordering::SeqCst);
    match mgr.commit_all("p") {
        Err(SandboxError::AtomicCommit {
            rolled_back_ids,
            failed_rollback_ids,
            reason,
            ..
        }) => {
            assert_eq!(rolled_back_ids, [cow.sandbox_id()]);
            assert!(failed_rollback_ids.is_empty());
            assert!(reason.contains("index out of range"), "{reason}");
        }
        other => panic!("expected AtomicCommit, got {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(project.path().join("a.txt")).unwrap(),
        "one\n"
    );
    kv_impl.crash_commit.store(false, Ordering::SeqCst);

    // Now it works; the results carry the custom commit's ref and files.
    let results = mgr.commit_all("p").unwrap();
    assert_eq!(results.len(), 2);
    let r = results
        .iter()
        .find(|r| r.sandbox_id == custom.sandbox_id())
        .unwrap();
    assert_eq!(r.added_files, ["greeting"]);
    assert_eq!(r.commit_ref, Some(format!("kv-{}", custom.sandbox_id())));
    assert_eq!(kv_impl.published.lock()["greeting"], b"hello");
    // Rollback after commit undoes it in the "original".
    custom.rollback().unwrap();
    assert!(kv_impl.published.lock().is_empty());
    mgr.cleanup_all("p").unwrap();
    assert!(kv_impl.sandboxes.lock().is_empty());
}

#[test]
fn a_later_failure_undoes_the_custom_commit_lifo() {
    let (kv_impl, reg) = kv_registry();
    let root = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("a.txt"), "one\n").unwrap();
    let mgr = PlanManager::open_with_registry(root.path(), reg).unwrap();
    let custom = mgr
        .get_or_create_sandbox("p", "cache", project.path(), kv())
        .unwrap();
    let cow = mgr
        .get_or_create_sandbox("p", "files", project.path(), Strategy::CopyOnWrite)
        .unwrap();
    custom.write(Path::new("k"), b"v").unwrap();
    cow.write(Path::new("a.txt"), b"two\n").unwrap();
    let opts = patchbox::plan::manager::CommitAllOptions {
        fail_at: Some(1),
        ..Default::default()
    };
    match common::as_failure(mgr.commit_all_with("p", &opts)).unwrap_err() {
        SandboxError::AtomicCommit {
            rolled_back_ids, ..
        } => {
            assert_eq!(rolled_back_ids, [custom.sandbox_id()])
        }
        e => panic!("{e}"),
    }
    assert!(kv_impl.published.lock().is_empty());
    let calls = kv_impl.calls.lock().clone();
    assert!(
        calls.contains(&format!("undo {}", custom.sandbox_id())),
        "{calls:?}"
    );
    // Compensation keeps the changes: the sandbox is active with its key.
    assert_eq!(custom.status(), Status::Active);
    assert_eq!(
        custom.read(Path::new("k")).unwrap().as_deref(),
        Some(&b"v"[..])
    );
    mgr.cleanup_all("p").unwrap();
}

#[test]
fn checkpoints_of_a_custom_sandbox_are_native() {
    let (_kv, reg) = kv_registry();
    let root = tempfile::tempdir().unwrap();
    let res = tempfile::tempdir().unwrap();
    let mgr = PlanManager::open_with_registry(root.path(), reg).unwrap();
    let sb = mgr
        .get_or_create_sandbox("p", "cache", res.path(), kv())
        .unwrap();
    sb.write(Path::new("k"), b"1").unwrap();
    let cps = CheckpointManager::new(root.path());
    let cp = cps
        .create_checkpoint(&sb, "p", "pre_execute", BTreeMap::new())
        .unwrap();
    sb.write(Path::new("k"), b"2").unwrap();
    assert!(cps.rollback_to(&cp).unwrap());
    assert_eq!(sb.read(Path::new("k")).unwrap().as_deref(), Some(&b"1"[..]));
    mgr.cleanup_all("p").unwrap();
}

#[test]
fn unregistered_strategies_are_refused_clearly() {
    let root = tempfile::tempdir().unwrap();
    let res = tempfile::tempdir().unwrap();
    let mgr = PlanManager::open(root.path()).unwrap();
    let e = mgr
        .get_or_create_sandbox("p", "r", res.path(), Strategy::Custom("kv".into()))
        .err()
        .unwrap();
    let msg = e.to_string();
    assert!(msg.contains("unknown sandbox strategy \"kv\""), "{msg}");
    assert!(
        msg.contains("copy_on_write") && msg.contains("no strategy registry"),
        "{msg}"
    );
    assert!(mgr.get_sandbox("p", "r").is_none());
    assert_eq!(Strategy::parse("kv"), kv());
    assert_eq!(Strategy::parse("overlay"), Strategy::Overlay);
}

#[test]
fn reopening_needs_the_registry() {
    let (kv_impl, reg) = kv_registry();
    let root = tempfile::tempdir().unwrap();
    let res = tempfile::tempdir().unwrap();
    let id = {
        let mgr = PlanManager::open_with_registry(root.path(), reg.clone()).unwrap();
        let sb = mgr
            .get_or_create_sandbox("p", "cache", res.path(), kv())
            .unwrap();
        sb.write(Path::new("k"), b"v").unwrap();
        sb.sandbox_id().to_string()
        // Dropped with uncommitted work: kept on disk.
    };
    // Without the registry: left on disk, with a warning naming the strategy.
    let mgr = PlanManager::open(root.path()).unwrap();
    assert!(mgr.get_sandbox("p", "cache").is_none());
    let w = mgr.recovery().warnings.join("\n");
    assert!(w.contains("unknown sandbox strategy \"kv\""), "{w}");
    // Registering reopens it, as it was.
    assert_eq!(mgr.set_registry(reg), vec![id.clone()]);
    let sb = mgr.get_sandbox("p", "cache").unwrap();
    assert_eq!(sb.sandbox_id(), id);
    assert_eq!(sb.status(), Status::Active);
    assert_eq!(sb.read(Path::new("k")).unwrap().as_deref(), Some(&b"v"[..]));
    mgr.commit_all("p").unwrap();
    assert_eq!(kv_impl.published.lock()["k"], b"v");
    mgr.cleanup_all("p").unwrap();
}

// ---- the built-in adapter --------------------------------------------------------------------

#[test]
fn the_builtin_adapter_round_trips() {
    let adapter_root = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("a.txt"), "one\n").unwrap();
    let a = BuiltInAdapter::new(adapter_root.path(), Strategy::CopyOnWrite).unwrap();
    assert!(BuiltInAdapter::new(adapter_root.path(), kv()).is_err());
    let r = SandboxRef {
        sandbox_id: "S1".into(),
        plan_id: "p".into(),
        resource_id: "files".into(),
        created_at: std::time::SystemTime::now(),
        metadata: BTreeMap::new(),
    };
    let meta = a.create(&r, project.path()).unwrap();
    assert_eq!(meta["builtin.strategy"], "copy_on_write");
    assert_eq!(a.read(&r, "a.txt").unwrap().as_deref(), Some(&b"one\n"[..]));
    assert_eq!(a.read(&r, "missing").unwrap(), None);
    a.write(&r, "a.txt", b"two\n").unwrap();
    a.checkpoint(&r, "c1").unwrap();
    a.write(&r, "dir/b.txt", b"new\n").unwrap();
    let d = a.diff(&r).unwrap();
    assert_eq!(d.summary, "1 added, 1 modified");
    a.restore_checkpoint(&r, "c1").unwrap();
    assert_eq!(a.read(&r, "dir/b.txt").unwrap(), None);
    assert_eq!(a.diff(&r).unwrap().entries.len(), 1);
    let cref = a.commit(&r, Some("msg")).unwrap();
    assert!(cref.is_some());
    assert_eq!(
        std::fs::read_to_string(project.path().join("a.txt")).unwrap(),
        "two\n"
    );
    a.rollback(&r, true).unwrap();
    assert_eq!(
        std::fs::read_to_string(project.path().join("a.txt")).unwrap(),
        "one\n"
    );
    // Kept its change, and may discard it.
    assert_eq!(a.read(&r, "a.txt").unwrap().as_deref(), Some(&b"two\n"[..]));
    a.rollback(&r, false).unwrap();
    assert_eq!(a.read(&r, "a.txt").unwrap().as_deref(), Some(&b"one\n"[..]));
    a.cleanup(&r).unwrap();
    assert!(a.read(&r, "a.txt").is_err());
}

#[test]
fn the_adapter_is_a_custom_strategy_too() {
    // A built-in strategy registered through the adapter runs under the plan manager.
    let adapter_root = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("a.txt"), "one\n").unwrap();
    let reg = Arc::new(StrategyRegistry::new());
    let adapter =
        Arc::new(BuiltInAdapter::new(adapter_root.path(), Strategy::CopyOnWrite).unwrap());
    reg.register_instance("cow_via_protocol", adapter).unwrap();
    let mgr = PlanManager::open_with_registry(root.path(), reg).unwrap();
    let sb = mgr
        .get_or_create_sandbox(
            "p",
            "files",
            project.path(),
            Strategy::Custom("cow_via_protocol".into()),
        )
        .unwrap();
    sb.write(Path::new("a.txt"), b"two\n").unwrap();
    assert!(String::from_utf8_lossy(&sb.diff().unwrap().patch).contains("+two"));
    mgr.commit_all("p").unwrap();
    assert_eq!(
        std::fs::read_to_string(project.path().join("a.txt")).unwrap(),
        "two\n"
    );
    mgr.cleanup_all("p").unwrap();
}
