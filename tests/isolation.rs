//! Overlay isolation against copies: the same edits through `d-<id>/` give byte for byte the
//! same patch, chained sandboxes stack without seeing their predecessor's later writes,
//! rename / hard links / mmap / file locks work through the mount, and nothing stays mounted.
//!
//! The backend is the first available (the kernel's, as root); run with
//! `PATCHBOX_OVERLAY_MODE=fuse` to test `fuse-overlayfs` (`tests/run-all.sh` does both). A
//! machine where no overlay can be mounted skips with a message.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{git, git_commit_all, git_init, write};
use patchbox::{Isolation, IsolationMode, Options, SandboxInfo, SandboxManager};

struct Env {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    root: PathBuf,
}

fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let root = tmp.path().join("sandbox");
    fs::create_dir_all(&project).unwrap();
    Env {
        _tmp: tmp,
        project,
        root,
    }
}

fn manager(e: &Env, isolation: Isolation) -> SandboxManager {
    SandboxManager::with_options(
        &e.project,
        Options {
            root: Some(e.root.clone()),
            isolation,
            no_prune_on_start: true,
            ..Options::default()
        },
    )
    .unwrap()
}

/// The mode the environment asks for, as the manager should report it.
fn wanted_mode() -> IsolationMode {
    match std::env::var("PATCHBOX_OVERLAY_MODE").as_deref() {
        Ok("fuse") => IsolationMode::FuseOverlay,
        _ => IsolationMode::KernelOverlay,
    }
}

/// An overlay manager, or `None` (with a message) where no overlay can be mounted.
fn overlay_manager(e: &Env) -> Option<SandboxManager> {
    let mgr = manager(e, Isolation::Overlay);
    let probe = mgr.create_sandbox("probe", None).unwrap();
    mgr.discard_sandbox(&probe).unwrap();
    match mgr.isolation_mode() {
        Some(IsolationMode::Copy) => {
            eprintln!(
                "skipped: no overlay can be mounted here (needs CAP_SYS_ADMIN or fuse-overlayfs)"
            );
            None
        }
        m => {
            assert_eq!(m, Some(wanted_mode()));
            Some(mgr)
        }
    }
}

/// A populated project and an overlay manager for it, or `None` where none can be mounted.
fn overlay_env() -> Option<(Env, SandboxManager)> {
    let e = env();
    populate(&e.project);
    let over = overlay_manager(&e)?;
    Some((e, over))
}

fn mounts_under(root: &Path) -> Vec<String> {
    let root = root.canonicalize().unwrap_or(root.to_path_buf());
    let root = root.to_string_lossy().into_owned();
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_string))
        .filter(|m| m.starts_with(&root))
        .collect()
}

/// A git project with something of every kind.
fn populate(p: &Path) {
    write(p, "a.txt", b"alpha\n");
    write(p, "c.txt", b"charlie\n");
    write(p, "same.txt", b"same\n");
    write(p, "touched.txt", b"touched\n");
    write(p, "script.sh", b"#!/bin/sh\necho hi\n");
    write(p, "dir/b.txt", b"bravo\n");
    write(p, "sub/one.txt", b"one\n");
    write(p, "sub/deeper/two.txt", b"two\n");
    write(p, "x", b"a file that becomes a directory\n");
    write(p, "d2/f1", b"f1\n");
    write(p, "d2/f2", b"f2\n");
    write(p, "deep/keep.txt", b"keep\n");
    write(p, "deep/gone.txt", b"gone\n");
    write(p, "mm.bin", &[b'.'; 8192]);
    write(p, ".gitignore", b"build/\n");
    std::os::unix::fs::symlink("a.txt", p.join("link")).unwrap();
    git_init(p);
    git_commit_all(p);
    // A file that is not committed: copied into base/, not a blob.
    write(p, "untracked.txt", b"untracked\n");
}

/// Every kind of edit, as an in-process tool makes it through the sandbox directory.
fn edit(d: &Path) {
    write(d, "a.txt", b"alpha\nmore\n");
    write(d, "new/file.txt", b"new\n");
    fs::remove_file(d.join("dir/b.txt")).unwrap();
    fs::rename(d.join("c.txt"), d.join("c2.txt")).unwrap();
    // A directory rename: mv (which copies on EXDEV, as fuse-overlayfs answers).
    let st = Command::new("mv")
        .arg(d.join("sub"))
        .arg(d.join("sub2"))
        .status()
        .unwrap();
    assert!(st.success());
    fs::set_permissions(d.join("script.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::remove_file(d.join("x")).unwrap();
    write(d, "x/y", b"now a directory\n");
    fs::remove_dir_all(d.join("d2")).unwrap();
    write(d, "d2", b"now a file\n");
    fs::remove_dir_all(d.join("deep")).unwrap();
    write(d, "deep/keep.txt", b"keep\n");
    write(d, "deep/fresh.txt", b"fresh\n");
    // Copied up with the same content, and copied up for metadata only: no change.
    write(d, "same.txt", b"same\n");
    let f = fs::File::options()
        .write(true)
        .open(d.join("touched.txt"))
        .unwrap();
    f.set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
    drop(f);
    fs::remove_file(d.join("link")).unwrap();
    std::os::unix::fs::symlink("c2.txt", d.join("link")).unwrap();
    fs::hard_link(d.join("a.txt"), d.join("a-hard.txt")).unwrap();
    write(d, "build/out.o", b"ignored output\n");
    fs::remove_file(d.join("untracked.txt")).unwrap();
}

fn finalize(mgr: &SandboxManager, sb: &SandboxInfo) -> patchbox::SandboxResult {
    let r = mgr.finalize_sandbox(sb).unwrap();
    assert!(!r.patch.is_empty());
    r
}

fn same_result(copy: &patchbox::SandboxResult, over: &patchbox::SandboxResult) {
    assert_eq!(
        String::from_utf8_lossy(&over.patch),
        String::from_utf8_lossy(&copy.patch)
    );
    assert_eq!(over.patch, copy.patch);
    assert_eq!(over.files_touched, copy.files_touched);
    assert_eq!(over.added, copy.added);
    assert_eq!(over.deleted, copy.deleted);
    assert_eq!(over.modified, copy.modified);
    assert_eq!(over.ignored, copy.ignored);
}

/// A copy manager beside `over`, and a sandbox `id` in each.
fn pair(e: &Env, over: &SandboxManager, id: &str) -> (SandboxManager, SandboxInfo, SandboxInfo) {
    let copy = manager(e, Isolation::Copy);
    let sc = copy.create_sandbox(id, None).unwrap();
    let so = over.create_sandbox(id, None).unwrap();
    (copy, sc, so)
}

#[test]
fn the_same_edits_give_the_copy_paths_patch() {
    let Some((e, over)) = overlay_env() else {
        return;
    };
    let (copy, sc, so) = pair(&e, &over, "t");
    assert_eq!(sc.mode, IsolationMode::Copy);
    assert_eq!(so.mode, wanted_mode());
    assert_eq!(so.path.file_name().unwrap(), "d-t");
    assert_eq!(
        common::content_view(&sc.path),
        common::content_view(&so.path)
    );
    edit(&sc.path);
    edit(&so.path);
    let (rc, ro) = (finalize(&copy, &sc), finalize(&over, &so));
    same_result(&rc, &ro);
    assert!(ro.ignored.contains(&PathBuf::from("build/out.o")));
    assert!(ro.files_touched.contains(&PathBuf::from("a-hard.txt")));
    assert!(!ro.files_touched.contains(&PathBuf::from("same.txt")));
    assert!(!ro.files_touched.contains(&PathBuf::from("touched.txt")));
    // git apply, the oracle: the patch turns the project into the sandbox.
    let scratch = e._tmp.path().join("scratch");
    fs::create_dir_all(&scratch).unwrap();
    let applied = common::git_apply_copy(&e.project, &ro.patch, &scratch);
    fs::remove_dir_all(so.path.join("build")).unwrap();
    assert_eq!(
        common::content_view(&applied),
        common::content_view(&so.path)
    );
    over.discard_sandbox(&so).unwrap();
    assert!(mounts_under(&e.root).is_empty());
}

/// A renamed lower directory (rename(2) in process: the kernel redirects it) is read from the
/// whole view, with the same patch.
#[test]
fn an_in_process_directory_rename_gives_the_same_patch() {
    let Some((e, over)) = overlay_env() else {
        return;
    };
    let (copy, sc, so) = pair(&e, &over, "r");
    for d in [&sc.path, &so.path] {
        match fs::rename(d.join("sub"), d.join("moved")) {
            Ok(()) => {}
            // fuse-overlayfs does not rename lower directories (tools copy instead).
            Err(err) if err.raw_os_error() == Some(libc::EXDEV) => {
                assert_eq!(so.mode, IsolationMode::FuseOverlay);
                eprintln!("skipped: fuse-overlayfs answers a directory rename with EXDEV");
                return;
            }
            Err(err) => panic!("{err}"),
        }
        write(d, "moved/deeper/two.txt", b"two, edited\n");
    }
    same_result(&finalize(&copy, &sc), &finalize(&over, &so));
}

#[test]
fn chained_sandboxes_stack_and_never_see_later_writes() {
    let Some((e, over)) = overlay_env() else {
        return;
    };
    let copy = manager(&e, Isolation::Copy);
    let mut results = Vec::new();
    for mgr in [&copy, &over] {
        let a = mgr.create_sandbox("a", None).unwrap();
        edit(&a.path);
        let b = mgr.create_sandbox("b", Some(&a)).unwrap();
        // Written to a after b was made: b never sees it.
        write(&a.path, "late.txt", b"late\n");
        write(&a.path, "a.txt", b"changed again by a\n");
        assert!(!b.path.join("late.txt").exists());
        assert_eq!(fs::read(b.path.join("a.txt")).unwrap(), b"alpha\nmore\n");
        write(&b.path, "by-b.txt", b"b\n");
        fs::remove_file(b.path.join("new/file.txt")).unwrap();
        write(&b.path, "dir/b.txt", b"bravo again\n");
        let c = mgr.create_sandbox("c", Some(&b)).unwrap();
        fs::remove_dir_all(c.path.join("x")).unwrap();
        write(&c.path, "same.txt", b"same\n");
        // a discarded: its successors keep their layers.
        mgr.discard_sandbox(&a).unwrap();
        let rb = finalize(mgr, &b);
        let rc = finalize(mgr, &c);
        assert_eq!(fs::read(c.path.join("by-b.txt")).unwrap(), b"b\n");
        results.push((rb, rc));
    }
    same_result(&results[0].0, &results[1].0);
    same_result(&results[0].1, &results[1].1);
}

/// A chain longer than one mount can stack (a page of options) is collapsed into one frozen
/// layer, with the same patch.
#[test]
fn a_long_chain_collapses_and_stays_exact() {
    let Some((e, over)) = overlay_env() else {
        return;
    };
    let copy = manager(&e, Isolation::Copy);
    let mut last = Vec::new();
    for mgr in [&copy, &over] {
        let mut prev: Option<SandboxInfo> = None;
        for i in 0..80 {
            let sb = mgr.create_sandbox(&format!("s{i}"), prev.as_ref()).unwrap();
            write(
                &sb.path,
                &format!("chain/f{i}.txt"),
                format!("{i}\n").as_bytes(),
            );
            if i % 7 == 3 {
                fs::remove_file(sb.path.join(format!("chain/f{}.txt", i - 2))).unwrap();
            }
            if let Some(p) = prev.take() {
                mgr.discard_sandbox(&p).unwrap();
            }
            prev = Some(sb);
        }
        let sb = prev.unwrap();
        last.push(finalize(mgr, &sb));
    }
    same_result(&last[0], &last[1]);
    let layers = fs::read_dir(over.session_base())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".layer-")
        })
        .count();
    assert!(layers < 60, "{layers} frozen layers left");
}

#[test]
fn mmap_writes_and_hard_links_reach_the_patch() {
    let Some((_e, over)) = overlay_env() else {
        return;
    };
    let sb = over.create_sandbox("m", None).unwrap();
    let p = sb.path.join("mm.bin");
    let f = fs::File::options().read(true).write(true).open(&p).unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: a shared mapping of a file of 8192 bytes, written within it, then unmapped.
    unsafe {
        let m = libc::mmap(
            std::ptr::null_mut(),
            8192,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(m, libc::MAP_FAILED);
        std::ptr::copy_nonoverlapping(b"MMAP".as_ptr(), m.cast::<u8>().add(100), 4);
        assert_eq!(libc::msync(m, 8192, libc::MS_SYNC), 0);
        assert_eq!(libc::munmap(m, 8192), 0);
    }
    drop(f);
    fs::hard_link(sb.path.join("c.txt"), sb.path.join("c-link.txt")).unwrap();
    // Written through one name, seen through the other.
    fs::write(sb.path.join("c-link.txt"), "charlie 2\n").unwrap();
    assert_eq!(fs::read(sb.path.join("c.txt")).unwrap(), b"charlie 2\n");
    let r = finalize(&over, &sb);
    let text = r.patch_text();
    assert!(text.contains("diff --git a/mm.bin b/mm.bin"), "{text}");
    assert!(text.contains("+charlie 2"), "{text}");
    assert!(r.added.contains(&PathBuf::from("c-link.txt")));
    assert!(r.modified.contains(&PathBuf::from("c.txt")));
}

#[test]
fn flock_and_fcntl_locks_hold_through_the_mount() {
    let Some((_e, over)) = overlay_env() else {
        return;
    };
    let sb = over.create_sandbox("l", None).unwrap();
    let p = sb.path.join("a.txt");
    let f = fs::File::options().read(true).write(true).open(&p).unwrap();
    f.lock().unwrap();
    // Another process cannot take it.
    let other = Command::new("flock")
        .args(["-n"])
        .arg(&p)
        .arg("true")
        .status()
        .unwrap();
    assert!(!other.success(), "flock taken twice");
    f.unlock().unwrap();
    let other = Command::new("flock")
        .args(["-n"])
        .arg(&p)
        .arg("true")
        .status()
        .unwrap();
    assert!(other.success());
    // A POSIX record lock.
    use std::os::fd::AsRawFd;
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as i16;
    fl.l_whence = libc::SEEK_SET as i16;
    // SAFETY: a valid descriptor and a valid flock struct.
    assert_eq!(unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &fl) }, 0);
    let script = format!(
        "import fcntl,sys\nf=open({:?},'r+')\ntry:\n fcntl.lockf(f,fcntl.LOCK_EX|fcntl.LOCK_NB)\n sys.exit(0)\nexcept OSError:\n sys.exit(3)\n",
        p.display().to_string()
    );
    let st = Command::new("python3").arg("-c").arg(&script).status();
    match st {
        Ok(st) => assert_eq!(st.code(), Some(3), "fcntl lock taken twice"),
        Err(_) => eprintln!("skipped the fcntl half: no python3"),
    }
}

/// Dropping the manager unmounts every sandbox; work left open is stored as pending, as
/// for copies; a kept session is unmounted too and recovered from its upper layers.
#[test]
fn nothing_stays_mounted_and_kept_work_is_recovered() {
    let Some((e, over)) = overlay_env() else {
        return;
    };
    let a = over.create_sandbox("open", None).unwrap();
    write(&a.path, "a.txt", b"left open\n");
    let want = over.finalize_sandbox(&a).unwrap().patch;
    let b = over.create_sandbox("chained", Some(&a)).unwrap();
    write(&b.path, "c.txt", b"chained work\n");
    let want_b = over.finalize_sandbox(&b).unwrap().patch;
    assert_eq!(mounts_under(&e.root).len(), 2);
    let session = over.keep();
    assert!(mounts_under(&e.root).is_empty());
    assert!(fs::read_dir(session.join("d-open"))
        .unwrap()
        .next()
        .is_none());
    let report = patchbox::session::recover::prune(&e.root).unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(mounts_under(&e.root).is_empty());
    let pend = patchbox::session::pending::list(&e.root).unwrap();
    let mut got: Vec<(String, Vec<u8>)> = pend
        .iter()
        .map(|p| (p.meta.delegation.clone(), fs::read(&p.patch_path).unwrap()))
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![("chained".to_string(), want_b), ("open".to_string(), want)]
    );
    assert!(!session.join(".lower").exists());
}

/// A sandbox of a git project holds its own `.git` (a private repository, written once into
/// the lower layer): what a tool writes there is never part of a patch, in the upper layer or
/// in a frozen one, and never reaches a chained successor (which sees the snapshot's).
#[test]
fn a_private_git_directory_is_never_in_a_patch() {
    let Some((_e, over)) = overlay_env() else {
        return;
    };
    let a = over.create_sandbox("g", None).unwrap();
    git(&a.path, &["init", "-q"]);
    fs::write(a.path.join(".git/from-a"), b"private\n").unwrap();
    write(&a.path, "a.txt", b"edited\n");
    let b = over.create_sandbox("g2", Some(&a)).unwrap();
    assert!(!b.path.join(".git/from-a").exists());
    for (sb, n) in [(&a, 1), (&b, 1)] {
        let r = finalize(&over, sb);
        assert_eq!(r.files_touched, vec![PathBuf::from("a.txt")], "{n}");
    }
}
