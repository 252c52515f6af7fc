//! Shared lower snapshots (`PlanManager::prepare_snapshot`): `overlay` sandboxes of one
//! original share the prepared snapshot instead of copying the tree; cleanup never removes a
//! snapshot a sandbox uses; `cleanup_abandoned` removes unused, superseded ones; commits
//! merge with edits the user made after the snapshot; a reopened manager finds them.
//!
//! Each test runs in kernel mode when this process may mount (root), and in copy mode (the
//! fallback, which copies from the shared snapshot). The mode is forced with
//! `PATCHBOX_OVERLAY_MODE`, process-wide, so the tests run one at a time.

mod common;

use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use patchbox::plan::{PlanManager, Sandbox, Status, Strategy};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The modes to test here: kernel when root and the kernel has overlay, and copy.
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
    fs::write(dir.join("a.txt"), "1\n2\n3\n4\n5\n6\n7\n8\n").unwrap();
    fs::write(dir.join("src/lib.rs"), "fn main() {}\n").unwrap();
}

fn create(mgr: &PlanManager, plan: &str, original: &Path, mode: &str) -> Arc<dyn Sandbox> {
    std::env::set_var("PATCHBOX_OVERLAY_MODE", mode);
    let sb = mgr.get_or_create_sandbox(plan, "res", original, Strategy::Overlay);
    std::env::remove_var("PATCHBOX_OVERLAY_MODE");
    sb.unwrap()
}

fn lower_of(sb: &dyn Sandbox) -> Option<String> {
    sb.context()?.metadata.get("overlay.lower").cloned()
}

fn sandbox_dir(sb: &dyn Sandbox) -> std::path::PathBuf {
    let ctx = sb.context().unwrap();
    ctx.sandbox_path.parent().unwrap().to_path_buf()
}

#[test]
fn sandboxes_share_one_lower_and_cleanup_keeps_it() {
    let _g = serial();
    for mode in modes() {
        let root = tempfile::tempdir().unwrap();
        let orig = tempfile::tempdir().unwrap();
        project(orig.path());
        let mgr = PlanManager::open(root.path()).unwrap();
        let info = mgr.prepare_snapshot(orig.path()).unwrap();
        assert_eq!(info.files, 2);
        assert_eq!(info.original, fs::canonicalize(orig.path()).unwrap());
        assert_eq!(mgr.snapshots(), vec![info.clone()]);

        let a = create(&mgr, "p1", orig.path(), mode);
        let b = create(&mgr, "p2", orig.path(), mode);
        assert_eq!(lower_of(&*a).as_deref(), Some(info.id.as_str()), "{mode}");
        assert_eq!(lower_of(&*b).as_deref(), Some(info.id.as_str()), "{mode}");
        // No private snapshot was taken.
        assert!(!sandbox_dir(&*a).join("base").exists(), "{mode}");

        fs::write(a.get_path("a.txt".as_ref()).unwrap(), "changed\n").unwrap();
        let in_b = fs::read_to_string(b.get_path("a.txt".as_ref()).unwrap()).unwrap();
        assert_eq!(
            in_b, "1\n2\n3\n4\n5\n6\n7\n8\n",
            "{mode}: sandboxes are isolated"
        );
        assert_eq!(a.diff().unwrap().entries.len(), 1);
        assert!(b.diff().unwrap().entries.is_empty());

        mgr.cleanup_all("p1").unwrap();
        assert_eq!(a.status(), Status::CleanedUp);
        assert!(
            info.path.join("a.txt").exists(),
            "{mode}: cleanup kept the lower"
        );
        // Newest of its original: kept even once unused.
        mgr.cleanup_all("p2").unwrap();
        mgr.cleanup_abandoned().unwrap();
        assert!(info.path.join("a.txt").exists(), "{mode}");
        assert_eq!(mgr.drop_snapshots(orig.path()).unwrap(), 1);
        assert!(mgr.snapshots().is_empty());
        // Without a snapshot, a private one again.
        let c = create(&mgr, "p3", orig.path(), mode);
        assert_eq!(lower_of(&*c), None);
        assert!(sandbox_dir(&*c).join("base").exists());
        mgr.cleanup_all("p3").unwrap();
    }
}

/// Preparing again removes the superseded snapshots of that original no sandbox uses (each
/// is a copy of the tree: an engine preparing before every plan would fill the disk), keeps
/// one a sandbox still uses, and leaves other originals' snapshots alone.
#[test]
fn prepare_again_removes_the_unused_superseded_snapshots() {
    let _g = serial();
    for mode in modes() {
        let root = tempfile::tempdir().unwrap();
        let orig = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        project(orig.path());
        project(other.path());
        let mgr = PlanManager::open(root.path()).unwrap();
        let theirs = mgr.prepare_snapshot(other.path()).unwrap();
        let first = mgr.prepare_snapshot(orig.path()).unwrap();
        let second = mgr.prepare_snapshot(orig.path()).unwrap();
        assert!(
            !first.path.exists(),
            "{mode}: unused and superseded: removed"
        );
        let sb = create(&mgr, "p", orig.path(), mode);
        assert_eq!(lower_of(&*sb).as_deref(), Some(second.id.as_str()));
        let third = mgr.prepare_snapshot(orig.path()).unwrap();
        assert!(second.path.is_dir(), "{mode}: used by a sandbox: kept");
        assert_eq!(
            mgr.snapshots(),
            vec![theirs.clone(), second.clone(), third.clone()]
        );
        fs::write(sb.get_path("new.txt".as_ref()).unwrap(), "n\n").unwrap();
        mgr.commit_all("p").unwrap();
        mgr.cleanup_all("p").unwrap();
        let fourth = mgr.prepare_snapshot(orig.path()).unwrap();
        assert_eq!(mgr.snapshots(), vec![theirs, fourth], "{mode}");
        assert_eq!(
            fs::read_to_string(orig.path().join("new.txt")).unwrap(),
            "n\n"
        );
    }
}

#[test]
fn cleanup_abandoned_removes_unreferenced_superseded_lowers() {
    let _g = serial();
    for mode in modes() {
        let root = tempfile::tempdir().unwrap();
        let orig = tempfile::tempdir().unwrap();
        project(orig.path());
        let mgr = PlanManager::open(root.path()).unwrap();
        let old = mgr.prepare_snapshot(orig.path()).unwrap();
        let sb = create(&mgr, "p1", orig.path(), mode);
        fs::write(sb.get_path("new.txt".as_ref()).unwrap(), "n\n").unwrap();
        let new = mgr.prepare_snapshot(orig.path()).unwrap();
        assert!(new.id > old.id);
        // A sandbox made now takes the newest.
        let sb2 = create(&mgr, "p2", orig.path(), mode);
        assert_eq!(lower_of(&*sb2).as_deref(), Some(new.id.as_str()));
        mgr.cleanup_all("p2").unwrap();

        // The old one is still used by p1.
        mgr.cleanup_abandoned().unwrap();
        assert!(old.path.is_dir(), "{mode}: a used lower is kept");
        assert!(new.path.is_dir(), "{mode}: the newest lower is kept");
        assert_eq!(sb.diff().unwrap().entries.len(), 1);

        mgr.commit_all("p1").unwrap();
        mgr.cleanup_abandoned().unwrap();
        assert!(!old.path.exists(), "{mode}: unused and superseded: removed");
        assert!(new.path.is_dir(), "{mode}");
        assert_eq!(mgr.snapshots(), vec![new.clone()]);
        assert_eq!(
            fs::read_to_string(orig.path().join("new.txt")).unwrap(),
            "n\n"
        );
    }
}

#[test]
fn commit_merges_with_drift_made_after_the_snapshot() {
    let _g = serial();
    for mode in modes() {
        let root = tempfile::tempdir().unwrap();
        let orig = tempfile::tempdir().unwrap();
        project(orig.path());
        let mgr = PlanManager::open(root.path()).unwrap();
        mgr.prepare_snapshot(orig.path()).unwrap();
        // The user edits the original after the snapshot.
        fs::write(orig.path().join("a.txt"), "1 user\n2\n3\n4\n5\n6\n7\n8\n").unwrap();
        fs::write(orig.path().join("later.txt"), "user's\n").unwrap();

        let sb = create(&mgr, "p", orig.path(), mode);
        // The sandbox shows the snapshot: a point-in-time view.
        let p = sb.get_path("a.txt".as_ref()).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "1\n2\n3\n4\n5\n6\n7\n8\n");
        assert!(!sb.get_path("later.txt".as_ref()).unwrap().exists());
        fs::write(&p, "1\n2\n3\n4\n5\n6\n7\n8 sandbox\n").unwrap();
        let d = sb.diff().unwrap();
        assert_eq!(d.entries.len(), 1, "{mode}: only what the sandbox changed");

        mgr.commit_all("p").unwrap();
        assert_eq!(
            fs::read_to_string(orig.path().join("a.txt")).unwrap(),
            "1 user\n2\n3\n4\n5\n6\n7\n8 sandbox\n",
            "{mode}: merged 3-way with the user's edit"
        );
        assert_eq!(
            fs::read_to_string(orig.path().join("later.txt")).unwrap(),
            "user's\n"
        );
        // Undo gives the user's state back.
        sb.rollback().unwrap();
        assert_eq!(
            fs::read_to_string(orig.path().join("a.txt")).unwrap(),
            "1 user\n2\n3\n4\n5\n6\n7\n8\n"
        );

        // A conflicting edit is refused, nothing written.
        let sb2 = create(&mgr, "q", orig.path(), mode);
        fs::write(
            sb2.get_path("a.txt".as_ref()).unwrap(),
            "1 sandbox\n2\n3\n4\n5\n6\n7\n8\n",
        )
        .unwrap();
        assert!(common::as_failure(mgr.commit_all("q")).is_err());
        assert_eq!(
            fs::read_to_string(orig.path().join("a.txt")).unwrap(),
            "1 user\n2\n3\n4\n5\n6\n7\n8\n"
        );
        mgr.cleanup_all("p").unwrap();
        mgr.cleanup_all("q").unwrap();
    }
}

#[test]
fn reopened_manager_finds_lowers_and_their_sandboxes() {
    let _g = serial();
    for mode in modes() {
        let root = tempfile::tempdir().unwrap();
        let orig = tempfile::tempdir().unwrap();
        project(orig.path());
        let info = {
            let mgr = PlanManager::open(root.path()).unwrap();
            let info = mgr.prepare_snapshot(orig.path()).unwrap();
            let sb = create(&mgr, "p", orig.path(), mode);
            fs::write(sb.get_path("src/lib.rs".as_ref()).unwrap(), "fn f() {}\n").unwrap();
            info
        };
        let mgr = PlanManager::open(root.path()).unwrap();
        assert_eq!(mgr.snapshots(), vec![info.clone()]);
        let sb = mgr.get_sandbox("p", "res").expect("kept: it has changes");
        assert_eq!(lower_of(&*sb).as_deref(), Some(info.id.as_str()));
        assert_eq!(sb.diff().unwrap().entries.len(), 1, "{mode}");
        let sb2 = create(&mgr, "p2", orig.path(), mode);
        assert_eq!(lower_of(&*sb2).as_deref(), Some(info.id.as_str()));
        mgr.commit_all("p").unwrap();
        assert_eq!(
            fs::read_to_string(orig.path().join("src/lib.rs")).unwrap(),
            "fn f() {}\n"
        );
        mgr.cleanup_all("p").unwrap();
        mgr.cleanup_all("p2").unwrap();
        // A half-prepared snapshot (a crash) is swept.
        let half = root
            .path()
            .join("plans/lower/.tmp-01ARZ3NDEKTSV4RRFFQ69G5FAV");
        fs::create_dir_all(half.join("base")).unwrap();
        mgr.cleanup_abandoned().unwrap();
        assert!(!half.exists());
        assert!(info.path.is_dir());
    }
}
