//! The isolation rows (`--isolation`): overlay sandboxes against copies and `cp -a`, and a
//! session of 20 delegations against `git worktree`.
//!
//! On `--tree DIR`, per round, in one manager of each isolation: the first create (the base,
//! and for overlays the materialized lower: one-time costs), then a fresh create after the base
//! exists, 100 edits and finalize, and a chained create from the edited sandbox; `cp -a` of
//! the materialized snapshot is the reference copy. Then (`--session20`, once, as it takes
//! minutes on a large tree) 20 delegations each doing create, 5 edits, finalize, discard,
//! against `git worktree add` / the edits / `git add -A -N && git diff --binary` /
//! `git worktree remove --force` in a `git clone --shared` of the tree. Wall-clock medians and,
//! beside them, the CPU time (user + system) of this process (and of its children for the
//! references), since a loaded machine stretches wall time but not CPU time. Peak RSS is the
//! resident high-water mark of a child doing one overlay create + 100 edits + finalize.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use std::time::Instant;

use patchbox::{Isolation, IsolationMode, Options, SandboxManager};

use super::{edit_files, edit_list, median, settle, sh};

/// CPU seconds (user + system) of `who` so far.
fn cpu(who: libc::c_int) -> f64 {
    // SAFETY: a zeroed rusage is a valid out-parameter.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid for writing.
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Wall and CPU seconds of `f` (CPU of this process and its children).
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64, f64) {
    let c0 = cpu(libc::RUSAGE_SELF) + cpu(libc::RUSAGE_CHILDREN);
    let t = Instant::now();
    let v = f();
    let wall = t.elapsed().as_secs_f64();
    (
        v,
        wall,
        cpu(libc::RUSAGE_SELF) + cpu(libc::RUSAGE_CHILDREN) - c0,
    )
}

#[derive(Default)]
struct Rows {
    rows: Vec<(String, Vec<(f64, f64)>)>,
}

impl Rows {
    fn push(&mut self, name: &str, wall: f64, cpu: f64) {
        eprintln!("  {name}: {wall:.4} s (cpu {cpu:.4})");
        match self.rows.iter_mut().find(|(n, _)| n == name) {
            Some((_, v)) => v.push((wall, cpu)),
            None => self.rows.push((name.to_string(), vec![(wall, cpu)])),
        }
    }

    fn med(&self, name: &str) -> (f64, f64) {
        let v = &self
            .rows
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no row {name}"))
            .1;
        (
            median(v.iter().map(|x| x.0).collect()),
            median(v.iter().map(|x| x.1).collect()),
        )
    }
}

fn manager(tree: &Path, root: &Path, isolation: Isolation) -> SandboxManager {
    let _ = fs::remove_dir_all(root);
    SandboxManager::with_options(
        tree,
        Options {
            root: Some(root.to_path_buf()),
            isolation,
            no_prune_on_start: true,
            ..Options::default()
        },
    )
    .expect("manager")
}

/// Runs the rows and prints them.
pub fn run(tree: &Path, work: &Path, rounds: usize, session20: bool) {
    let files = edit_list(tree, 100);
    let mut r = Rows::default();
    let mut mode = None;
    // Nothing is deleted before the last timed step: on a journal-less ext4 a deletion slows
    // every inode allocation for minutes after it (the kernel's `recently_deleted` scan),
    // which would tax whichever row came after the deletion.
    let mut kept_managers: Vec<SandboxManager> = Vec::new();
    let mut kept_dirs: Vec<PathBuf> = Vec::new();
    for round in 0..rounds {
        eprintln!("[isolation] round {}/{rounds}", round + 1);
        for (iso, tag) in [(Isolation::Copy, "copy"), (Isolation::Overlay, "overlay")] {
            let root = work.join(format!("iso-{tag}-{round}"));
            let mgr = manager(tree, &root, iso);
            settle();
            let (d1, w, c) = timed(|| mgr.create_sandbox("d1", None).expect("create"));
            r.push(&format!("{tag} first"), w, c);
            if iso == Isolation::Overlay {
                mode = mgr.isolation_mode();
            }
            settle();
            let (_d0, w, c) = timed(|| mgr.create_sandbox("d0", None).expect("create"));
            r.push(&format!("{tag} create"), w, c);
            edit_files(&d1.path, &files);
            settle();
            let (res, w, c) = timed(|| mgr.finalize_sandbox(&d1).expect("finalize"));
            assert_eq!(
                res.files_touched.len(),
                files.len(),
                "finalize found the edits"
            );
            r.push(&format!("{tag} finalize"), w, c);
            settle();
            let (_d2, w, c) = timed(|| mgr.create_sandbox("d2", Some(&d1)).expect("chain"));
            r.push(&format!("{tag} chained"), w, c);
            if iso == Isolation::Overlay {
                // The reference copy: the same snapshot, whole, with cp -a (of a fresh
                // sandbox's view: `.lower/` may hold only a difference from a shared layer).
                let lower = _d0.path.clone();
                let dst = work.join(format!("iso-cp-{round}"));
                let _ = fs::remove_dir_all(&dst);
                settle();
                let (_, w, c) = timed(|| {
                    sh(
                        &format!("cp -a {} {}", lower.display(), dst.display()),
                        work,
                    )
                });
                r.push("cp -a", w, c);
                kept_dirs.push(dst);
                // A later session of the project: its first create stacks the shared layer
                // the first session wrote under the root (only the difference is written).
                let next = SandboxManager::with_options(
                    tree,
                    Options {
                        root: Some(root.clone()),
                        isolation: Isolation::Overlay,
                        no_prune_on_start: true,
                        ..Options::default()
                    },
                )
                .expect("manager");
                settle();
                let (sb, w, c) = timed(|| next.create_sandbox("n1", None).expect("create"));
                r.push("overlay next", w, c);
                next.discard_sandbox(&sb).expect("discard");
                drop(next);
            }
            kept_managers.push(mgr);
            kept_dirs.push(root);
        }
    }
    let rss = peak_rss_kb(tree, work);
    let s20 = session20.then(|| session_of_20(tree, work));
    drop(kept_managers);
    for dir in kept_dirs {
        let _ = fs::remove_dir_all(&dir);
    }

    let mode = mode.map_or("none", IsolationMode::name);
    println!("\noverlay backend: {mode}; wall-clock medians of {rounds} rounds (CPU = user+sys)");
    println!("| step | overlay | copy path | cp -a | overlay / copy | overlay / cp -a | target |");
    println!("|---|---|---|---|---|---|---|");
    let cp = r.med("cp -a");
    for (step, target) in [
        ("first", "one-time: base + materialized lower"),
        ("create", "≤ 10 ms, ≤ 0.005× cp -a"),
        ("chained", "≤ 10 ms, ≤ 0.005× cp -a"),
        ("finalize", "≤ 0.2× copy path"),
    ] {
        let (o, c) = (
            r.med(&format!("overlay {step}")),
            r.med(&format!("copy {step}")),
        );
        let what = match step {
            "first" => "first create_sandbox",
            "create" => "create_sandbox after the base exists",
            "chained" => "chained create (from a sandbox with 100 edits)",
            _ => "finalize, 100 edited files",
        };
        println!(
            "| {what} | {:.4} s (cpu {:.4}) | {:.4} s (cpu {:.4}) | {:.3} s | {:.4}× | {:.4}× | {target} |",
            o.0,
            o.1,
            c.0,
            c.1,
            cp.0,
            o.0 / c.0,
            o.0 / cp.0
        );
    }
    let (n, f) = (r.med("overlay next"), r.med("copy first"));
    println!(
        "| a later session's first create_sandbox (the shared lower layer exists) | {:.4} s (cpu {:.4}) | {:.4} s (cpu {:.4}) (first) | {:.3} s | {:.4}× | {:.4}× | — |",
        n.0,
        n.1,
        f.0,
        f.1,
        cp.0,
        n.0 / f.0,
        n.0 / cp.0
    );
    if let Some((o, g)) = s20 {
        println!(
            "| session of 20 delegations: create, 5 edits, finalize, discard (vs git worktree add / git diff / git worktree remove) | {:.3} s (cpu {:.3}) | | {:.3} s (cpu {:.3}) git worktree | {:.4}× vs worktree | | ≤ 0.05× |",
            o.0,
            o.1,
            g.0,
            g.1,
            o.0 / g.0
        );
    }
    if let Some(kb) = rss {
        println!(
            "\npeak RSS, overlay first create + 100 edits + finalize + chained create: {:.1} MB (target < 100 MB)",
            kb as f64 / 1024.0
        );
    }
}

/// 20 delegations through patchbox (overlay) and through `git worktree`: (wall, cpu) each.
/// The manager's first create (the base) is made before timing: the row is about
/// delegations in a running session.
fn session_of_20(tree: &Path, work: &Path) -> ((f64, f64), (f64, f64)) {
    let files: Vec<PathBuf> = edit_list(tree, 100);
    let root = work.join("iso-s20");
    let mgr = manager(tree, &root, Isolation::Overlay);
    let warm = mgr.create_sandbox("warm", None).expect("create");
    mgr.discard_sandbox(&warm).expect("discard");
    settle();
    let (_, w, c) = timed(|| {
        for i in 0..20 {
            let sb = mgr.create_sandbox(&format!("s{i}"), None).expect("create");
            edit_files(&sb.path, &files[i * 5..i * 5 + 5]);
            let res = mgr.finalize_sandbox(&sb).expect("finalize");
            assert_eq!(res.files_touched.len(), 5);
            mgr.discard_sandbox(&sb).expect("discard");
        }
    });
    drop(mgr);
    let _ = fs::remove_dir_all(&root);
    // The peers' way, in a clone sharing the tree's objects (the tree's own repository is
    // not written).
    let clone = work.join("iso-clone");
    let _ = fs::remove_dir_all(&clone);
    let ok = Command::new("git")
        .args(["clone", "-q", "--shared"])
        .arg(tree)
        .arg(&clone)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "git clone --shared");
    settle();
    let (_, gw, gc) = timed(|| {
        for i in 0..20 {
            let wt = work.join(format!("iso-wt-{i}"));
            sh(
                &format!("git worktree add -q --detach {} HEAD", wt.display()),
                &clone,
            );
            edit_files(&wt, &files[i * 5..i * 5 + 5]);
            sh("git add -A -N . && git diff --binary > /dev/null", &wt);
            sh(
                &format!("git worktree remove --force {}", wt.display()),
                &clone,
            );
        }
    });
    let _ = fs::remove_dir_all(&clone);
    ((w, c), (gw, gc))
}

fn peak_rss_kb(tree: &Path, work: &Path) -> Option<i64> {
    super::child_peak_rss_kb("--rss-isolation-child", tree, work)
}

/// The child of [`peak_rss_kb`]: prints its own peak resident size (VmHWM, kB).
pub fn rss_child(tree: &Path, work: &Path) {
    let files = edit_list(tree, 100);
    let root = work.join("iso-rss");
    let mgr = manager(tree, &root, Isolation::Overlay);
    let sb = mgr.create_sandbox("m", None).expect("create");
    edit_files(&sb.path, &files);
    let r = mgr.finalize_sandbox(&sb).expect("finalize");
    assert_eq!(r.files_touched.len(), files.len());
    let _next = mgr.create_sandbox("n", Some(&sb)).expect("chain");
    let kb = super::vm_hwm_kb();
    drop(mgr);
    let _ = fs::remove_dir_all(&root);
    println!("{kb}");
}
