//! `commit_all` under kill -9: a plan of four `copy_on_write` sandboxes (four projects, 100
//! changed files each) is committed by `patchbox plan commit` in a child process, killed at a
//! random moment; the next manager opened over the root must leave every original exactly
//! before or exactly after — and all four the same way (the plan is all or nothing) — with no
//! `.patchbox-*` debris and no journal left.
//!
//! Short form (CI): 12 trials. Long form, by hand:
//! `PATCHBOX_CRASH_TRIALS=100 cargo test --release --test plan_crash -- --nocapture`; the
//! seed is printed and `PATCHBOX_CRASH_SEED` replays it.

mod common;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use patchbox::plan::{PlanManager, Status, Strategy};

const PLAN: &str = "crash";

/// Four projects of 120 files; returns them and the root, with the plan's sandboxes made and
/// edited (100 modified, 10 deleted, 10 added per project) and the manager gone.
fn setup(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let root = dir.join("root");
    let mut projects = Vec::new();
    for p in 0..4 {
        let proj = dir.join(format!("p{p}"));
        for i in 0..120 {
            write(
                &proj,
                &format!("d{}/f{i}.txt", i % 6),
                format!("p{p} file {i}\nline\n").as_bytes(),
            );
        }
        projects.push(proj);
    }
    let mgr = PlanManager::open(&root).unwrap();
    mgr.set_cleanup_on_drop(false);
    for (p, proj) in projects.iter().enumerate() {
        let sb = mgr
            .get_or_create_sandbox(PLAN, &format!("r{p}"), proj, Strategy::CopyOnWrite)
            .unwrap();
        for i in 0..100 {
            let f = sb
                .get_path(Path::new(&format!("d{}/f{i}.txt", i % 6)))
                .unwrap();
            std::fs::write(f, format!("p{p} file {i}\nedited\n")).unwrap();
        }
        for i in 100..110 {
            std::fs::remove_file(
                sb.get_path(Path::new(&format!("d{}/f{i}.txt", i % 6)))
                    .unwrap(),
            )
            .unwrap();
        }
        for i in 0..10 {
            let f = sb.get_path(Path::new(&format!("new/n{i}.txt"))).unwrap();
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, format!("new {i}\n")).unwrap();
        }
    }
    (root, projects)
}

fn commit_cmd(root: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_patchbox"));
    c.args(["plan", "commit", PLAN, "--root"]).arg(root);
    c.stdout(Stdio::null()).stderr(Stdio::null());
    c
}

fn debris(p: &Path) -> Vec<String> {
    walkdir::WalkDir::new(p)
        .into_iter()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".patchbox"))
        .collect()
}

#[test]
fn commit_all_killed_at_random_moments_is_all_or_nothing() {
    // The "after" trees and the time of an uninterrupted commit, from one clean run.
    let clean = tempfile::tempdir().unwrap();
    let (root, projects) = setup(clean.path());
    let before: Vec<_> = projects.iter().map(|p| mode_view(p)).collect();
    let t0 = Instant::now();
    assert!(commit_cmd(&root).status().unwrap().success());
    let full = t0.elapsed();
    let after: Vec<_> = projects.iter().map(|p| mode_view(p)).collect();
    assert!(before.iter().zip(&after).all(|(b, a)| b != a));
    eprintln!("an uninterrupted commit_all of 4 x 120 changes takes {full:?}");

    let mut rng = Rng::new("plan_crash");
    let (mut saw_before, mut saw_after) = (0, 0);
    for trial in 0..trials() {
        let dir = tempfile::tempdir().unwrap();
        let (root, projects) = setup(dir.path());
        // Kill anywhere from the start of the process to a little past its usual end.
        let delay = Duration::from_micros(rng.below(full.as_micros() as u64 * 12 / 10 + 1));
        let mut child = commit_cmd(&root).process_group(0).spawn().unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();

        let mgr = PlanManager::open(&root).unwrap();
        mgr.set_cleanup_on_drop(false);
        assert!(
            mgr.recovery().warnings.is_empty(),
            "{:?}",
            mgr.recovery().warnings
        );
        let now: Vec<_> = projects.iter().map(|p| mode_view(p)).collect();
        // Every trial's projects hold the same trees as the clean run's.
        let all_before = now == before;
        let all_after = now == after;
        assert!(
            all_before || all_after,
            "trial {trial} (killed after {delay:?}): the plan is half committed"
        );
        for p in &projects {
            assert!(
                debris(p).is_empty(),
                "trial {trial}: debris in {}: {:?}",
                p.display(),
                debris(p)
            );
        }
        assert!(!root.join("plans/plan-crash/commit.journal").exists());
        let statuses: Vec<Status> = mgr
            .list_sandboxes(PLAN)
            .iter()
            .map(|s| s.status())
            .collect();
        if all_after {
            saw_after += 1;
            assert!(
                statuses.iter().all(|s| *s == Status::Committed),
                "{statuses:?}"
            );
        } else {
            saw_before += 1;
            assert!(
                statuses.iter().all(|s| *s == Status::Active),
                "{statuses:?}"
            );
            // Nothing lost: the plan commits whole now.
            assert_eq!(mgr.commit_all(PLAN).unwrap().len(), 4);
            let done: Vec<_> = projects.iter().map(|p| mode_view(p)).collect();
            assert_eq!(done, after);
        }
    }
    eprintln!("plan_crash: {saw_before} trials ended before, {saw_after} after");
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_crash_between_commits_rolls_the_plan_back() {
    let dir = tempfile::tempdir().unwrap();
    let (root, projects) = setup(dir.path());
    let before: Vec<_> = projects.iter().map(|p| mode_view(p)).collect();
    // A child that aborts (as a kill would) before the third commit: two are in.
    let status = Command::new(env!("CARGO_BIN_EXE_patchbox"))
        .args(["plan", "commit", PLAN, "--crash-before", "2", "--root"])
        .arg(&root)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success());
    assert!(root.join("plans/plan-crash/commit.journal").exists());
    assert_ne!(
        mode_view(&projects[0]),
        before[0],
        "the first commit had landed"
    );
    let mgr = PlanManager::open(&root).unwrap();
    assert_eq!(mgr.recovery().rolled_back.len(), 1);
    // The four disjoint projects commit as one group (plan::group): all four intents were
    // durable before the first original moved, so the two commits the crash cut off are
    // completed by recovery and undone with the two that had landed, newest first.
    let ids: Vec<String> = mgr
        .list_sandboxes(PLAN)
        .iter()
        .map(|s| s.sandbox_id().to_string())
        .collect();
    let mut undone = mgr.recovery().rolled_back[0].1.clone();
    assert_eq!(undone.len(), 4, "{undone:?}");
    undone.sort();
    let mut all = ids.clone();
    all.sort();
    assert_eq!(undone, all);
    for (p, b) in projects.iter().zip(&before) {
        assert_eq!(&mode_view(p), b);
    }
}
