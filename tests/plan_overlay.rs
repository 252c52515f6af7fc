//! The `overlay` plan strategy in each of its three modes (kernel OverlayFS, fuse-overlayfs,
//! copy fallback), against real directories: the same edits must produce the same diff and
//! the same original, byte for byte (modes and symlinks included), as `copy_on_write`; no
//! mount may outlive cleanup or the manager; a reopened manager finds the sandbox mounted.
//!
//! A mode this machine cannot provide (not root, no fuse-overlayfs or `/dev/fuse`) is
//! skipped with a printed message. The mode is forced with `PATCHBOX_OVERLAY_MODE`, which is
//! process-wide, so the tests here run one at a time.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use patchbox::plan::{DiffOp, PlanManager, Sandbox, Status, Strategy};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `mode` can run here; prints why not.
fn available(mode: &str) -> bool {
    let why = match mode {
        "kernel" => {
            let overlay = fs::read_to_string("/proc/filesystems")
                .is_ok_and(|s| s.lines().any(|l| l.ends_with("\toverlay")));
            // SAFETY: geteuid has no preconditions.
            let root = unsafe { libc::geteuid() } == 0;
            if !root {
                Some("not root (kernel OverlayFS needs CAP_SYS_ADMIN)")
            } else if !overlay {
                Some("the kernel has no overlay filesystem")
            } else {
                None
            }
        }
        "fuse" => {
            let bin = std::env::var_os("PATH").is_some_and(|p| {
                std::env::split_paths(&p).any(|d| d.join("fuse-overlayfs").is_file())
            });
            let dev = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/fuse")
                .is_ok();
            if !bin {
                Some("fuse-overlayfs is not installed")
            } else if !dev {
                Some("/dev/fuse cannot be opened")
            } else {
                None
            }
        }
        _ => None,
    };
    if let Some(why) = why {
        println!("SKIPPED overlay mode {mode}: {why}");
        return false;
    }
    true
}

/// The mount points below `root` (by /proc/self/mountinfo).
fn mounts_under(root: &Path) -> Vec<PathBuf> {
    let root = fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let info = fs::read("/proc/self/mountinfo").unwrap();
    info.split(|&b| b == b'\n')
        .filter_map(|l| l.split(|&b| b == b' ').nth(4))
        .map(|f| {
            let mut out = Vec::new();
            let mut i = 0;
            while i < f.len() {
                if f[i] == b'\\' && i + 3 < f.len() {
                    out.push((f[i + 1] - b'0') * 64 + (f[i + 2] - b'0') * 8 + (f[i + 3] - b'0'));
                    i += 4;
                } else {
                    out.push(f[i]);
                    i += 1;
                }
            }
            PathBuf::from(std::ffi::OsStr::from_bytes(&out))
        })
        .filter(|p| p.starts_with(&root))
        .collect()
}

/// Per path: type, full mode, content.
type Shape = BTreeMap<Vec<u8>, (String, u32, Vec<u8>)>;

/// Type, full mode and content of every path (mtimes left out: two copies differ there).
fn shape(root: &Path) -> Shape {
    common::fingerprint(root, false)
        .into_iter()
        .map(|(k, (kind, mode, content, _, _))| (k, (kind, mode, content)))
        .collect()
}

fn project(dir: &Path) {
    let w = |rel: &str, data: &str| {
        let p = dir.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, data).unwrap();
    };
    w("a.txt", "one\ntwo\nthree\n");
    w("keep.txt", "unchanged\n");
    w("del.txt", "going away\n");
    w("dir/x.txt", "x\n");
    w("dir/sub/y.txt", "y\n");
    w("rep/z.txt", "z\n");
    w("script.sh", "#!/bin/sh\necho hi\n");
    w("deep/er/file.txt", "deep\n");
    std::os::unix::fs::symlink("keep.txt", dir.join("old-link")).unwrap();
}

/// The edits every test makes, through `get_path`.
fn edit(sb: &dyn Sandbox) {
    let p = |rel: &str| sb.get_path(Path::new(rel)).unwrap();
    fs::write(p("a.txt"), "one\nTWO\nthree\n").unwrap();
    fs::create_dir_all(p("new/dir")).unwrap();
    fs::write(p("new/dir/added.txt"), "added\n").unwrap();
    fs::remove_file(p("del.txt")).unwrap();
    fs::remove_dir_all(p("dir")).unwrap();
    fs::remove_dir_all(p("rep")).unwrap();
    fs::write(p("rep"), "a file now\n").unwrap();
    fs::set_permissions(p("script.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("a.txt", p("link")).unwrap();
    // Deleted and made again: an opaque directory (kernel xattr, or fuse's `.wh..wh..opq`).
    fs::remove_dir_all(p("deep")).unwrap();
    fs::create_dir(p("deep")).unwrap();
    fs::write(p("deep/new.txt"), "fresh\n").unwrap();
    // Touched without a change: copied up, yet not part of the diff.
    fs::write(p("keep.txt"), "unchanged\n").unwrap();
}

fn expected_entries() -> Vec<(String, DiffOp)> {
    vec![
        ("a.txt".into(), DiffOp::Modified),
        ("deep/er/file.txt".into(), DiffOp::Deleted),
        ("deep/new.txt".into(), DiffOp::Added),
        ("del.txt".into(), DiffOp::Deleted),
        ("dir/sub/y.txt".into(), DiffOp::Deleted),
        ("dir/x.txt".into(), DiffOp::Deleted),
        ("link".into(), DiffOp::Added),
        ("new/dir/added.txt".into(), DiffOp::Added),
        ("rep".into(), DiffOp::Added),
        ("rep/z.txt".into(), DiffOp::Deleted),
        ("script.sh".into(), DiffOp::Modified),
    ]
}

fn entries(sb: &dyn Sandbox) -> Vec<(String, DiffOp)> {
    let mut e: Vec<_> = sb
        .diff()
        .unwrap()
        .entries
        .into_iter()
        .map(|e| (e.path, e.operation))
        .collect();
    e.sort_by(|a, b| a.0.cmp(&b.0));
    e
}

/// Creates an overlay sandbox in `mode` (forced through the environment).
fn create(
    mgr: &PlanManager,
    plan: &str,
    original: &Path,
    mode: &str,
) -> (Arc<dyn Sandbox>, std::time::Duration) {
    std::env::set_var("PATCHBOX_OVERLAY_MODE", mode);
    let t = Instant::now();
    let sb = mgr.get_or_create_sandbox(plan, "res", original, Strategy::Overlay);
    let took = t.elapsed();
    std::env::remove_var("PATCHBOX_OVERLAY_MODE");
    let sb = sb.unwrap();
    let want = if mode == "copy" {
        "copy_on_write"
    } else {
        mode
    };
    let ctx = sb.context().unwrap();
    assert_eq!(
        ctx.metadata.get("overlay.mode").map(String::as_str),
        Some(want)
    );
    assert_eq!(sb.strategy(), Strategy::Overlay);
    (sb, took)
}

/// What copy_on_write makes of the same edits: (diff patch, original after commit).
fn copy_on_write_reference() -> (Vec<u8>, Shape) {
    let root = tempfile::tempdir().unwrap();
    let orig = tempfile::tempdir().unwrap();
    project(orig.path());
    let mgr = PlanManager::open(root.path()).unwrap();
    let sb = mgr
        .get_or_create_sandbox("ref", "res", orig.path(), Strategy::CopyOnWrite)
        .unwrap();
    edit(&*sb);
    assert_eq!(entries(&*sb), expected_entries());
    let patch = sb.diff().unwrap().patch;
    sb.commit(None).unwrap();
    let after = shape(orig.path());
    sb.cleanup().unwrap();
    (patch, after)
}

fn lifecycle(mode: &str) {
    let _g = serial();
    if !available(mode) {
        return;
    }
    let (ref_patch, ref_after) = copy_on_write_reference();
    let root = tempfile::tempdir().unwrap();
    let orig = tempfile::tempdir().unwrap();
    project(orig.path());
    let before = shape(orig.path());
    let mgr = PlanManager::open(root.path()).unwrap();
    let (sb, create_took) = create(&mgr, "p1", orig.path(), mode);
    let tree = sb.context().unwrap().sandbox_path;
    if mode != "copy" {
        assert_eq!(
            mounts_under(root.path()),
            vec![fs::canonicalize(&tree).unwrap()]
        );
    }
    edit(&*sb);
    assert_eq!(
        shape(orig.path()),
        before,
        "the original is untouched before commit"
    );
    let t = Instant::now();
    let d = sb.diff().unwrap();
    let diff_took = t.elapsed();
    println!("overlay mode {mode}: create {create_took:?}, diff {diff_took:?} (11 changed paths)");
    assert_eq!(entries(&*sb), expected_entries());
    assert_eq!(
        String::from_utf8_lossy(&d.patch),
        String::from_utf8_lossy(&ref_patch)
    );
    sb.check_commit().unwrap();
    let r = sb.commit(None).unwrap();
    assert!(r.success);
    assert_eq!(sb.status(), Status::Committed);
    assert_eq!(
        shape(orig.path()),
        ref_after,
        "same original as copy_on_write"
    );
    sb.rollback().unwrap();
    assert_eq!(sb.status(), Status::RolledBack);
    assert_eq!(shape(orig.path()), before, "the undo restores the original");
    sb.cleanup().unwrap();
    assert_eq!(sb.status(), Status::CleanedUp);
    assert!(
        mounts_under(root.path()).is_empty(),
        "no mount after cleanup"
    );
    assert!(!tree.exists());
    drop(sb);
    drop(mgr);
    assert!(mounts_under(root.path()).is_empty());
}

fn rollback_active(mode: &str) {
    let _g = serial();
    if !available(mode) {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let orig = tempfile::tempdir().unwrap();
    project(orig.path());
    let before = shape(orig.path());
    let mgr = PlanManager::open(root.path()).unwrap();
    let (sb, _) = create(&mgr, "p1", orig.path(), mode);
    let tree = sb.context().unwrap().sandbox_path;
    edit(&*sb);
    sb.rollback().unwrap();
    assert_eq!(sb.status(), Status::RolledBack);
    assert_eq!(shape(&tree), before, "the sandbox is the base again");
    assert!(sb.diff().unwrap().entries.is_empty());
    if mode != "copy" {
        assert_eq!(mounts_under(root.path()).len(), 1, "remounted once");
    }
    // Re-use after rollback.
    edit(&*sb);
    assert_eq!(entries(&*sb), expected_entries());
    mgr.cleanup_all("p1").unwrap();
    assert_eq!(shape(orig.path()), before);
    assert!(mounts_under(root.path()).is_empty());
}

fn reopen(mode: &str, crash: bool) {
    let _g = serial();
    if !available(mode) {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let orig = tempfile::tempdir().unwrap();
    project(orig.path());
    let before = shape(orig.path());
    let id;
    let patch;
    {
        let mgr = PlanManager::open(root.path()).unwrap();
        let (sb, _) = create(&mgr, "p1", orig.path(), mode);
        edit(&*sb);
        id = sb.sandbox_id().to_string();
        patch = sb.diff().unwrap().patch;
        if crash {
            // The process "dies": nothing is dropped, so the mount stays behind.
            std::mem::forget(sb);
            std::mem::forget(mgr);
            if mode != "copy" {
                assert_eq!(mounts_under(root.path()).len(), 1);
            }
        } else {
            drop(sb);
            drop(mgr);
            assert!(
                mounts_under(root.path()).is_empty(),
                "no mount after the manager is dropped"
            );
        }
    }
    let mgr = PlanManager::open(root.path()).unwrap();
    let sb = mgr
        .get_sandbox("p1", "res")
        .expect("the sandbox is found again");
    assert_eq!(sb.sandbox_id(), id);
    assert_eq!(sb.status(), Status::Active);
    let tree = sb.context().unwrap().sandbox_path;
    if mode != "copy" {
        assert_eq!(
            mounts_under(root.path()),
            vec![fs::canonicalize(&tree).unwrap()],
            "remounted, once"
        );
    }
    assert_eq!(sb.diff().unwrap().patch, patch);
    assert_eq!(
        fs::read_to_string(tree.join("a.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );
    let results = mgr.commit_all("p1").unwrap();
    assert!(results.iter().all(|r| r.success));
    assert_eq!(sb.status(), Status::Committed);
    assert_ne!(shape(orig.path()), before);
    sb.rollback().unwrap();
    assert_eq!(shape(orig.path()), before);
    mgr.cleanup_all("p1").unwrap();
    drop(sb);
    drop(mgr);
    assert!(mounts_under(root.path()).is_empty());
}

#[test]
fn kernel_lifecycle_matches_copy_on_write() {
    lifecycle("kernel");
}

#[test]
fn fuse_lifecycle_matches_copy_on_write() {
    lifecycle("fuse");
}

#[test]
fn copy_lifecycle_matches_copy_on_write() {
    lifecycle("copy");
}

#[test]
fn kernel_rollback_active_restores_base() {
    rollback_active("kernel");
}

#[test]
fn fuse_rollback_active_restores_base() {
    rollback_active("fuse");
}

#[test]
fn copy_rollback_active_restores_base() {
    rollback_active("copy");
}

#[test]
fn kernel_reopen_remounts() {
    reopen("kernel", false);
}

#[test]
fn fuse_reopen_remounts() {
    reopen("fuse", false);
}

#[test]
fn copy_reopen_finds_sandbox() {
    reopen("copy", false);
}

#[test]
fn kernel_reopen_after_crash_replaces_stale_mount() {
    reopen("kernel", true);
}

#[test]
fn fuse_reopen_after_crash_replaces_stale_mount() {
    reopen("fuse", true);
}

/// Commas, colons and spaces in the paths reach the kernel escaped.
#[test]
fn kernel_mount_escapes_separators() {
    let _g = serial();
    if !available("kernel") {
        return;
    }
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("odd,root:name with space");
    let orig = tempfile::tempdir().unwrap();
    project(orig.path());
    let mgr = PlanManager::open(&root).unwrap();
    let (sb, _) = create(&mgr, "p1", orig.path(), "kernel");
    edit(&*sb);
    assert_eq!(entries(&*sb), expected_entries());
    assert_eq!(mounts_under(&root).len(), 1);
    mgr.cleanup_all("p1").unwrap();
    assert!(mounts_under(&root).is_empty());
}

/// Without a forced mode, root gets the kernel's overlay; a forced mode that cannot be had
/// is a creation error that leaves nothing behind.
#[test]
fn auto_mode_and_unknown_mode() {
    let _g = serial();
    let root = tempfile::tempdir().unwrap();
    let orig = tempfile::tempdir().unwrap();
    project(orig.path());
    let mgr = PlanManager::open(root.path()).unwrap();
    std::env::set_var("PATCHBOX_OVERLAY_MODE", "bogus");
    let refused = mgr.get_or_create_sandbox("p1", "res", orig.path(), Strategy::Overlay);
    std::env::remove_var("PATCHBOX_OVERLAY_MODE");
    let err = refused.err().expect("unknown mode refused").to_string();
    assert!(err.contains("PATCHBOX_OVERLAY_MODE"), "{err}");
    let sb = mgr
        .get_or_create_sandbox("p2", "res", orig.path(), Strategy::Overlay)
        .unwrap();
    let mode = sb.context().unwrap().metadata["overlay.mode"].clone();
    println!("overlay auto mode here: {mode}");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(mode, "kernel");
    }
    mgr.cleanup_all("p2").unwrap();
    assert!(mounts_under(root.path()).is_empty());
}

/// New files the repository ignores are not changes, in every mode (as in copy_on_write).
#[test]
fn ignored_new_files_are_left_out() {
    let _g = serial();
    for mode in ["kernel", "fuse", "copy"] {
        if !available(mode) {
            continue;
        }
        let root = tempfile::tempdir().unwrap();
        let orig = tempfile::tempdir().unwrap();
        project(orig.path());
        fs::write(orig.path().join(".gitignore"), "*.log\nbuild/\n").unwrap();
        common::git_init(orig.path());
        common::git_commit_all(orig.path());
        let mgr = PlanManager::open(root.path()).unwrap();
        let (sb, _) = create(&mgr, "p1", orig.path(), mode);
        let p = |rel: &str| sb.get_path(Path::new(rel)).unwrap();
        fs::write(p("out.log"), "noise\n").unwrap();
        fs::create_dir_all(p("build")).unwrap();
        fs::write(p("build/x.o"), "obj\n").unwrap();
        fs::write(p("src.txt"), "real\n").unwrap();
        assert_eq!(
            entries(&*sb),
            vec![("src.txt".to_string(), DiffOp::Added)],
            "mode {mode}"
        );
        mgr.cleanup_all("p1").unwrap();
        assert!(mounts_under(root.path()).is_empty());
    }
}

/// A diff reads the upper layer only: on a larger tree it costs what changed. Prints the
/// figures (run with --nocapture).
#[test]
fn diff_cost_on_a_larger_tree() {
    let _g = serial();
    let orig = tempfile::tempdir().unwrap();
    for d in 0..40 {
        for f in 0..50 {
            let p = orig.path().join(format!("d{d}/f{f}.txt"));
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, format!("file {d} {f}\n").repeat(20)).unwrap();
        }
    }
    for mode in ["kernel", "fuse", "copy"] {
        if !available(mode) {
            continue;
        }
        let root = tempfile::tempdir().unwrap();
        let mgr = PlanManager::open(root.path()).unwrap();
        let (sb, create_took) = create(&mgr, "p1", orig.path(), mode);
        fs::write(sb.get_path(Path::new("d3/f7.txt")).unwrap(), "changed\n").unwrap();
        fs::remove_file(sb.get_path(Path::new("d9/f1.txt")).unwrap()).unwrap();
        fs::write(sb.get_path(Path::new("d9/new.txt")).unwrap(), "new\n").unwrap();
        let t = Instant::now();
        let e = entries(&*sb);
        let diff_took = t.elapsed();
        assert_eq!(e.len(), 3, "mode {mode}: {e:?}");
        println!(
            "overlay mode {mode}, 2000 files, 3 changed: create {create_took:?}, diff {diff_took:?}"
        );
        mgr.cleanup_all("p1").unwrap();
        assert!(mounts_under(root.path()).is_empty());
    }
}

/// A busy mount (a file held open in the view) is detached lazily: cleanup still leaves no
/// mount and no directory behind.
fn busy_cleanup(mode: &str) {
    let _g = serial();
    if !available(mode) {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let orig = tempfile::tempdir().unwrap();
    project(orig.path());
    let mgr = PlanManager::open(root.path()).unwrap();
    let (sb, _) = create(&mgr, "p1", orig.path(), mode);
    let held = fs::File::open(sb.get_path(Path::new("a.txt")).unwrap()).unwrap();
    let tree = sb.context().unwrap().sandbox_path;
    mgr.cleanup_all("p1").unwrap();
    assert!(mounts_under(root.path()).is_empty());
    assert!(!tree.exists());
    drop(held);
}

#[test]
fn kernel_busy_cleanup_detaches() {
    busy_cleanup("kernel");
}

#[test]
fn fuse_busy_cleanup_detaches() {
    busy_cleanup("fuse");
}

/// A commit right after its check reuses the check's diff only while the upper layer's
/// stat data prove the view unchanged: writes made between the check and the commit (a
/// same-size rewrite in place, a new file) are committed, and the original ends as
/// `git apply` of the final diff makes it; without such writes the commit gives the checked
/// diff's result.
fn commit_after_check(mode: &str) {
    let _g = serial();
    if !available(mode) {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    for write_between in [false, true] {
        let orig = tempfile::tempdir().unwrap();
        project(orig.path());
        let mgr = PlanManager::open(root.path()).unwrap();
        let plan = if write_between { "between" } else { "still" };
        let (sb, _) = create(&mgr, plan, orig.path(), mode);
        edit(&*sb);
        // Past the racy window, so the check's fingerprint can prove the view unchanged.
        std::thread::sleep(std::time::Duration::from_millis(250));
        let before = scratch.path().join(format!("before-{plan}"));
        fs::create_dir(&before).unwrap();
        common::copy_tree(orig.path(), &before);
        sb.check_commit().unwrap();
        if write_between {
            let p = |rel: &str| sb.get_path(Path::new(rel)).unwrap();
            fs::write(p("a.txt"), "one\nTWO\nTHREE\n").unwrap();
            assert_eq!(fs::read(p("a.txt")).unwrap().len(), 14);
            fs::write(p("late.txt"), "late\n").unwrap();
        }
        let patch = sb.diff().unwrap().patch;
        sb.commit(None).unwrap();
        let want = common::git_apply_copy(&before, &patch, scratch.path());
        assert_eq!(
            common::mode_view(orig.path()),
            common::mode_view(&want),
            "{mode}, {plan}"
        );
        if write_between {
            assert_eq!(
                fs::read_to_string(orig.path().join("a.txt")).unwrap(),
                "one\nTWO\nTHREE\n"
            );
            assert!(orig.path().join("late.txt").exists());
        }
        mgr.cleanup_all(plan).unwrap();
    }
}

#[test]
fn kernel_commit_after_check_sees_later_writes() {
    commit_after_check("kernel");
}

#[test]
fn fuse_commit_after_check_sees_later_writes() {
    commit_after_check("fuse");
}
