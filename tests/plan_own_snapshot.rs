//! A plan's own snapshot: without a prepared snapshot, the first `overlay` sandbox of a plan
//! over an original takes one into the shared store, and the plan's later `overlay`
//! sandboxes over that original stack on it instead of copying the tree, until the plan
//! commits into that original; another plan never takes it; it goes with its last sandbox.
//!
//! Each test runs in kernel mode when this process may mount (root), and in copy mode. The
//! mode is forced with `PATCHBOX_OVERLAY_MODE`, process-wide, so the tests run one at a time.

use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use patchbox::plan::{PlanManager, Sandbox, Strategy};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn modes() -> Vec<&'static str> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let overlay = fs::read_to_string("/proc/filesystems")
        .is_ok_and(|s| s.lines().any(|l| l.ends_with("\toverlay")));
    if root && overlay {
        vec!["kernel", "copy"]
    } else {
        println!("SKIPPED kernel mode: not root or no overlay filesystem");
        vec!["copy"]
    }
}

fn project(dir: &Path) {
    fs::create_dir_all(dir.join("src")).unwrap();
    fs::write(dir.join("a.txt"), "one\n").unwrap();
    fs::write(dir.join("src/lib.rs"), "fn main() {}\n").unwrap();
}

fn create(
    mgr: &PlanManager,
    plan: &str,
    res: &str,
    original: &Path,
    mode: &str,
) -> Arc<dyn Sandbox> {
    std::env::set_var("PATCHBOX_OVERLAY_MODE", mode);
    let sb = mgr.get_or_create_sandbox(plan, res, original, Strategy::Overlay);
    std::env::remove_var("PATCHBOX_OVERLAY_MODE");
    sb.unwrap()
}

fn lower_of(sb: &dyn Sandbox) -> String {
    sb.context()
        .unwrap()
        .metadata
        .get("overlay.lower")
        .cloned()
        .expect("a snapshot in the store")
}

fn read(sb: &dyn Sandbox, rel: &str) -> String {
    fs::read_to_string(sb.get_path(rel.as_ref()).unwrap()).unwrap()
}

#[test]
fn a_plans_later_sandboxes_reuse_its_snapshot_and_stay_isolated() {
    let _g = serial();
    for mode in modes() {
        let root = tempfile::tempdir().unwrap();
        let orig = tempfile::tempdir().unwrap();
        project(orig.path());
        let mgr = PlanManager::open(root.path()).unwrap();
        let a = create(&mgr, "p", "r1", orig.path(), mode);
        let b = create(&mgr, "p", "r2", orig.path(), mode);
        assert_eq!(lower_of(&*a), lower_of(&*b), "{mode}");
        assert_eq!(mgr.snapshots().len(), 1, "{mode}");
        fs::write(a.get_path("a.txt".as_ref()).unwrap(), "two\n").unwrap();
        assert_eq!(read(&*b, "a.txt"), "one\n", "{mode}: isolated");
        assert_eq!(a.diff().unwrap().entries.len(), 1);
        assert!(b.diff().unwrap().entries.is_empty());
        // A manager opened later over the root reuses it too.
        mgr.set_cleanup_on_drop(false);
        drop((a, b, mgr));
        let mgr = PlanManager::open(root.path()).unwrap();
        let b = mgr.get_sandbox("p", "r2").unwrap();
        let c = create(&mgr, "p", "r3", orig.path(), mode);
        assert_eq!(lower_of(&*c), lower_of(&*b), "{mode}");
        mgr.cleanup_all("p").unwrap();
    }
}

#[test]
fn after_the_plan_commits_into_the_original_the_next_sandbox_sees_it() {
    let _g = serial();
    for mode in modes() {
        let root = tempfile::tempdir().unwrap();
        let orig = tempfile::tempdir().unwrap();
        project(orig.path());
        let mgr = PlanManager::open(root.path()).unwrap();
        let a = create(&mgr, "p", "r1", orig.path(), mode);
        fs::write(a.get_path("a.txt".as_ref()).unwrap(), "two\n").unwrap();
        a.commit(None).unwrap();
        assert_eq!(
            fs::read_to_string(orig.path().join("a.txt")).unwrap(),
            "two\n"
        );
        let b = create(&mgr, "p", "r2", orig.path(), mode);
        assert_ne!(lower_of(&*a), lower_of(&*b), "{mode}: taken again");
        assert_eq!(read(&*b, "a.txt"), "two\n", "{mode}");
        mgr.cleanup_all("p").unwrap();
    }
}

#[test]
fn another_plan_takes_its_own_and_sees_later_edits() {
    let _g = serial();
    for mode in modes() {
        let root = tempfile::tempdir().unwrap();
        let orig = tempfile::tempdir().unwrap();
        project(orig.path());
        let mgr = PlanManager::open(root.path()).unwrap();
        let a = create(&mgr, "p1", "r", orig.path(), mode);
        fs::write(orig.path().join("a.txt"), "edited by the user\n").unwrap();
        let b = create(&mgr, "p2", "r", orig.path(), mode);
        assert_ne!(lower_of(&*a), lower_of(&*b), "{mode}");
        assert_eq!(read(&*b, "a.txt"), "edited by the user\n", "{mode}");
        // The plan's point in time: its later sandboxes see what its first saw.
        let a2 = create(&mgr, "p1", "r2", orig.path(), mode);
        assert_eq!(lower_of(&*a2), lower_of(&*a), "{mode}");
        assert_eq!(read(&*a2, "a.txt"), "one\n", "{mode}");
        mgr.cleanup_all("p1").unwrap();
        mgr.cleanup_all("p2").unwrap();
    }
}

#[test]
fn the_snapshot_goes_with_its_last_sandbox() {
    let _g = serial();
    for mode in modes() {
        let root = tempfile::tempdir().unwrap();
        let orig = tempfile::tempdir().unwrap();
        project(orig.path());
        let mgr = PlanManager::open(root.path()).unwrap();
        let a = create(&mgr, "p", "r1", orig.path(), mode);
        let b = create(&mgr, "p", "r2", orig.path(), mode);
        let info = mgr.snapshots().pop().unwrap();
        assert_eq!(info.id, lower_of(&*a));
        a.cleanup().unwrap();
        assert!(info.path.join("a.txt").exists(), "{mode}: b still uses it");
        assert_eq!(read(&*b, "a.txt"), "one\n");
        b.cleanup().unwrap();
        assert!(!info.path.exists(), "{mode}: removed with its last sandbox");
        assert!(mgr.snapshots().is_empty());
    }
}

/// `copy_on_write` takes the plan's own snapshot as its base too: the plan's second sandbox
/// over the original copies the tree once; commit and rollback work against the shared base.
#[test]
fn copy_on_write_sandboxes_of_a_plan_share_their_base() {
    let _g = serial();
    let root = tempfile::tempdir().unwrap();
    let orig = tempfile::tempdir().unwrap();
    project(orig.path());
    let mgr = PlanManager::open(root.path()).unwrap();
    let cow = |res: &str| {
        mgr.get_or_create_sandbox("p", res, orig.path(), Strategy::CopyOnWrite)
            .unwrap()
    };
    let (a, b) = (cow("r1"), cow("r2"));
    assert_eq!(lower_of(&*a), lower_of(&*b));
    fs::write(a.get_path("a.txt".as_ref()).unwrap(), "two\n").unwrap();
    assert_eq!(read(&*b, "a.txt"), "one\n", "isolated");
    fs::write(b.get_path("new.txt".as_ref()).unwrap(), "new\n").unwrap();
    b.rollback().unwrap();
    assert!(
        !b.get_path("new.txt".as_ref()).unwrap().exists(),
        "rolled back"
    );
    a.commit(None).unwrap();
    assert_eq!(
        fs::read_to_string(orig.path().join("a.txt")).unwrap(),
        "two\n"
    );
    a.rollback().unwrap();
    assert_eq!(
        fs::read_to_string(orig.path().join("a.txt")).unwrap(),
        "one\n",
        "undone"
    );
    let info = mgr.snapshots().pop().unwrap();
    mgr.cleanup_all("p").unwrap();
    assert!(!info.path.exists(), "removed with its last sandbox");
}

/// The sandbox directory of `sb` (`<root>/plans/plan-<plan>/<sandbox id>`).
fn sandbox_dir(root: &Path, plan: &str, sb: &dyn Sandbox) -> std::path::PathBuf {
    root.join("plans")
        .join(format!("plan-{plan}"))
        .join(sb.sandbox_id())
}

/// One prune for both faces: `sessions prune` removes a plan snapshot once no sandbox that
/// took it exists (here its sandbox's directory vanished, as after a crash and a manual
/// removal), and keeps one a sandbox still holds.
#[test]
fn sessions_prune_removes_plan_snapshots_nobody_holds() {
    let _g = serial();
    let root = tempfile::tempdir().unwrap();
    let (o1, o2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    project(o1.path());
    project(o2.path());
    let mgr = PlanManager::open(root.path()).unwrap();
    mgr.set_cleanup_on_drop(false);
    let a = create(&mgr, "p", "r1", o1.path(), "copy");
    let b = create(&mgr, "q", "r1", o2.path(), "copy");
    let (gone, kept) = (lower_of(&*a), lower_of(&*b));
    let store = root.path().join("plans/lower");
    fs::remove_dir_all(sandbox_dir(root.path(), "p", &*a)).unwrap();
    drop((a, b, mgr));

    let report = patchbox::session::recover::prune(root.path()).unwrap();
    assert_eq!(report.snapshots_removed, 1, "{report:?}");
    assert!(!store.join(&gone).exists(), "the unheld snapshot went");
    assert!(
        store.join(&kept).join("base/a.txt").exists(),
        "the held one stays"
    );
    let again = patchbox::session::recover::prune(root.path()).unwrap();
    assert_eq!(again.snapshots_removed, 0, "{again:?}");
}

/// A snapshot whose users were never recorded (as an earlier version left them) is never
/// guessed unused: `sessions prune` keeps it; a plan manager's cleanup records its users
/// from the sandboxes' states, and then prunes it when none names it.
#[test]
fn snapshots_without_holder_records_are_kept_until_their_users_are_known() {
    let _g = serial();
    let root = tempfile::tempdir().unwrap();
    let orig = tempfile::tempdir().unwrap();
    project(orig.path());
    let store = root.path().join("plans/lower");
    let mgr = PlanManager::open(root.path()).unwrap();
    mgr.set_cleanup_on_drop(false);
    let live = create(&mgr, "p", "r1", orig.path(), "copy");
    let dead = create(&mgr, "q", "r1", orig.path(), "copy");
    let (live_id, dead_id) = (lower_of(&*live), lower_of(&*dead));
    assert_ne!(live_id, dead_id, "each plan takes its own");
    for id in [&live_id, &dead_id] {
        fs::remove_dir_all(store.join(id).join("holders")).unwrap();
    }
    fs::remove_dir_all(sandbox_dir(root.path(), "q", &*dead)).unwrap();
    drop((dead, mgr));

    let report = patchbox::session::recover::prune(root.path()).unwrap();
    assert_eq!(report.snapshots_removed, 0, "unknown users: {report:?}");
    assert!(store.join(&dead_id).exists());

    let mgr = PlanManager::open(root.path()).unwrap();
    mgr.set_cleanup_on_drop(false);
    mgr.cleanup_abandoned().unwrap();
    assert!(!store.join(&dead_id).exists(), "no state names it: pruned");
    assert!(
        store.join(&live_id).join("holders").is_dir(),
        "its user recorded"
    );
    assert_eq!(read(&*live, "a.txt"), "one\n");
    live.cleanup().unwrap();
    assert!(!store.join(&live_id).exists(), "gone with its last sandbox");
}
