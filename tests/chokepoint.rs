//! The session chokepoint under attack: a thread swaps `pending/`, `base/` and sandbox
//! directories for symlinks to a victim directory, in a tight loop, while the manager writes
//! pending patches, finalizes (materializing pre-images into `base/`) and creates and
//! discards sandboxes. Nothing may ever land in the victim directory, and every call either
//! succeeds inside the root or fails with a clear error.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;
use patchbox::{Error, Options, SandboxManager};

/// Every file under `dir` with its content (symlinks as their target).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(dir).follow_links(false) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(dir).unwrap().to_path_buf();
        let ft = e.file_type();
        let v = if ft.is_symlink() {
            use std::os::unix::ffi::OsStrExt;
            fs::read_link(e.path())
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec()
        } else if ft.is_file() {
            fs::read(e.path()).unwrap()
        } else {
            b"<dir>".to_vec()
        };
        out.insert(rel, v);
    }
    out
}

/// Exchanges `a` and `b` atomically (`renameat2(RENAME_EXCHANGE)`): at no moment is either
/// name missing.
fn exchange(a: &Path, b: &Path) -> bool {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).is_ok()
}

/// Swaps each of `names` (in `session`) for a symlink to `victim` and back, until `stop`.
/// Each swap is a pair of exchanges, so when it stops every name is what it was.
fn racer(
    session: PathBuf,
    names: Vec<&'static str>,
    victim: PathBuf,
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<()> {
    for n in &names {
        symlink(&victim, session.join(format!("{n}.link"))).unwrap();
    }
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            for n in &names {
                let (real, link) = (session.join(n), session.join(format!("{n}.link")));
                if exchange(&real, &link) {
                    swaps.fetch_add(1, Ordering::Relaxed);
                    std::thread::yield_now();
                    // Back: the real directory is at `link` now (unless the library moved
                    // the symlink away, a discard's rename: then it is left where it is).
                    if !exchange(&real, &link) {
                        // Or the library removed its own directory from `link` (a discard
                        // proving what it removes): the symlink goes back to `link`, so
                        // `real` is free again and the library can make it anew.
                        let gone = fs::symlink_metadata(&link).is_err();
                        if gone && fs::symlink_metadata(&real).is_ok_and(|m| m.is_symlink()) {
                            use rustix::fs::{renameat_with, RenameFlags, CWD};
                            let _ = renameat_with(CWD, &real, CWD, &link, RenameFlags::NOREPLACE);
                        }
                    }
                }
            }
        }
    })
}

/// A clear error: refused by the chokepoint, or a system call that failed with its path.
fn clear(e: &Error, session: &Path) -> bool {
    match e {
        Error::Containment { base, .. } => base.starts_with(session),
        Error::Io { path, .. } => path.starts_with(session),
        _ => false,
    }
}

#[test]
fn swapping_session_directories_for_symlinks_never_writes_outside() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let root = tmp.path().join("sandbox");
    let victim = tmp.path().join("victim");
    for i in 0..200 {
        write(
            &project,
            &format!("src/f{i}.txt"),
            format!("line {i}\n").as_bytes(),
        );
    }
    git_init(&project);
    git_commit_all(&project);
    write(&victim, "keep.txt", b"precious\n");
    write(&victim, "inner/keep.txt", b"precious too\n");
    let before = snapshot(&victim);

    let mgr = SandboxManager::with_options(
        &project,
        Options {
            root: Some(root.clone()),
            no_prune_on_start: true,
            ..Options::default()
        },
    )
    .unwrap();
    let session = mgr.session_base().to_path_buf();
    let sb = mgr.create_sandbox("s", None).unwrap();
    // pending/ exists before the race starts (so it can be swapped).
    let first = mgr.write_pending_patch("w", b"first\n").unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicUsize::new(0));
    let race = racer(
        session.clone(),
        vec!["pending", "base", "d-s", "d-t"],
        victim.clone(),
        stop.clone(),
        swaps.clone(),
    );

    let mut stored = vec![first];
    let (mut ok, mut refused) = (0, 0);
    let mut t = None;
    let mut note = |r: Result<(), Error>, what: &str| match r {
        Ok(()) => ok += 1,
        Err(e) => {
            assert!(clear(&e, &session), "{what}: unclear error {e:?}");
            refused += 1;
        }
    };
    for i in 0..60 {
        // Written through d-s's real directory, wherever the racer has it now.
        let real = [sb.path.clone(), session.join("d-s.link")]
            .into_iter()
            .find(|p| p.join("src").is_dir() && !fs::symlink_metadata(p).unwrap().is_symlink());
        if let Some(real) = real {
            let _ = fs::write(real.join(format!("src/f{i}.txt")), b"changed\n");
        }
        note(mgr.finalize_sandbox(&sb).map(|_| ()), "finalize");
        match mgr.write_pending_patch("w", format!("patch {i}\n").as_bytes()) {
            Ok(p) => {
                stored.push(p);
                note(Ok(()), "write_pending_patch");
            }
            Err(e) => note(Err(e), "write_pending_patch"),
        }
        // A sandbox made and discarded; one whose discard was refused (d-t was a symlink
        // at that moment) is still the manager's, and is discarded again next time.
        if t.is_none() {
            match mgr.create_sandbox("t", None) {
                Ok(info) => t = Some(info),
                Err(e) => note(Err(e), "create_sandbox"),
            }
        }
        if let Some(info) = &t {
            let r = mgr.discard_sandbox(info);
            if r.is_ok() {
                t = None;
            }
            note(r, "discard");
        }
    }
    stop.store(true, Ordering::Relaxed);
    race.join().unwrap();
    assert!(swaps.load(Ordering::Relaxed) > 0, "the racer never swapped");
    assert!(ok > 0, "nothing succeeded");
    eprintln!(
        "{ok} calls succeeded, {refused} refused, {} swaps",
        swaps.load(Ordering::Relaxed)
    );

    // Nothing landed in the victim directory.
    assert_eq!(snapshot(&victim), before);
    // Every pending patch a call reported stored is in the real pending/ and listed.
    let pending = session.join("pending");
    assert!(!fs::symlink_metadata(&pending).unwrap().is_symlink());
    let listed: Vec<PathBuf> = patchbox::session::pending::list(&root)
        .unwrap()
        .into_iter()
        .map(|e| e.patch_path)
        .collect();
    for p in &stored {
        assert_eq!(p.parent(), Some(pending.as_path()), "{}", p.display());
        assert!(
            fs::symlink_metadata(p).unwrap().is_file(),
            "{}",
            p.display()
        );
        assert!(listed.contains(p), "{} is not listed", p.display());
    }
    // The racer's links (and a sandbox whose symlink a discard moved away) go before drop.
    for n in ["pending", "base", "d-s", "d-t"] {
        let link = session.join(format!("{n}.link"));
        match fs::symlink_metadata(&link) {
            Ok(m) if m.is_symlink() => fs::remove_file(&link).unwrap(),
            Ok(_) => fs::remove_dir_all(&link).unwrap(),
            Err(_) => {}
        }
    }
    drop(mgr);
    assert_eq!(snapshot(&victim), before);
}

#[test]
fn a_symlinked_pending_dir_during_write_is_refused_and_the_store_stays_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let root = tmp.path().join("sandbox");
    let victim = tmp.path().join("victim");
    write(&project, "a.txt", b"a\n");
    write(&victim, "keep.txt", b"precious\n");
    let mgr = SandboxManager::with_options(
        &project,
        Options {
            root: Some(root.clone()),
            no_prune_on_start: true,
            ..Options::default()
        },
    )
    .unwrap();
    let session = mgr.session_base().to_path_buf();
    mgr.write_pending_patch("x", b"one\n").unwrap();
    let pending = session.join("pending");
    fs::rename(&pending, session.join("pending.real")).unwrap();
    symlink(&victim, &pending).unwrap();
    let r = mgr.write_pending_patch("x", b"two\n");
    assert!(matches!(r, Err(Error::Containment { .. })), "{r:?}");
    assert_eq!(fs::read_dir(&victim).unwrap().count(), 1);
    fs::remove_file(&pending).unwrap();
    fs::rename(session.join("pending.real"), &pending).unwrap();
    assert_eq!(patchbox::session::pending::list(&root).unwrap().len(), 1);
}
