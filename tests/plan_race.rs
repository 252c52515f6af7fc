//! Two processes on one plan: every pair of changing operations ends as if they had run one
//! after the other, with every record agreeing with the originals on disk, and nothing of
//! the user's lost.
//!
//! Each scenario runs `PATCHBOX_RACE_TRIALS` times (6 by default, the CI form; the long
//! form, by hand: `PATCHBOX_RACE_TRIALS=30 cargo test --release --test plan_race --
//! --nocapture`). The processes are the CLI (`plan commit`, `plan rollback`, `plan cleanup`,
//! `plan list`) and this test binary itself (`get_or_create_sandbox`, see `child`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;
use patchbox::plan::{PlanManager, Status, Strategy};

const PLAN: &str = "race";

fn race_trials() -> usize {
    std::env::var("PATCHBOX_RACE_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
}

/// A project of 100 files and a root holding one `copy_on_write` sandbox per project in
/// `projects`, each with every file edited; the manager is gone when this returns.
fn setup(dir: &Path, projects: usize) -> (PathBuf, Vec<PathBuf>) {
    let root = dir.join("root");
    let mut out = Vec::new();
    let mgr = PlanManager::open(&root).unwrap();
    mgr.set_cleanup_on_drop(false);
    for p in 0..projects {
        let proj = dir.join(format!("p{p}"));
        for i in 0..100 {
            write(
                &proj,
                &format!("d{}/f{i}.txt", i % 5),
                format!("{p} {i}\n").as_bytes(),
            );
        }
        let sb = mgr
            .get_or_create_sandbox(PLAN, &format!("r{p}"), &proj, Strategy::CopyOnWrite)
            .unwrap();
        for i in 0..100 {
            let f = sb
                .get_path(Path::new(&format!("d{}/f{i}.txt", i % 5)))
                .unwrap();
            std::fs::write(f, format!("{p} {i} edited\n")).unwrap();
        }
        out.push(proj);
    }
    (root, out)
}

fn plan_cmd(root: &Path, verb: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_patchbox"));
    c.args(["plan", verb]);
    if verb != "list" {
        c.arg(PLAN);
    }
    c.arg("--root").arg(root);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// Runs `a` and `b` at once; returns their outputs.
fn race(mut a: Command, mut b: Command) -> (std::process::Output, std::process::Output) {
    let ca = a.spawn().unwrap();
    let cb = b.spawn().unwrap();
    (
        ca.wait_with_output().unwrap(),
        cb.wait_with_output().unwrap(),
    )
}

/// The status each sandbox's `state.json` records, read straight from disk.
fn recorded(root: &Path) -> Vec<String> {
    let plan = root.join(format!("plans/plan-{PLAN}"));
    let mut out = Vec::new();
    for e in std::fs::read_dir(&plan).into_iter().flatten().flatten() {
        let p = e.path().join("state.json");
        if let Ok(d) = std::fs::read(&p) {
            let v: serde_json::Value = serde_json::from_slice(&d).unwrap();
            out.push(v["status"].as_str().unwrap_or("").to_string());
        }
    }
    out.sort();
    out
}

#[test]
fn commit_beside_rollback_ends_as_one_then_the_other() {
    for trial in 0..race_trials() {
        let dir = tempfile::tempdir().unwrap();
        let (root, projects) = setup(dir.path(), 3);
        let before: Vec<_> = projects.iter().map(|p| tree_view(p)).collect();
        let (c, r) = race(plan_cmd(&root, "commit"), plan_cmd(&root, "rollback"));
        assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        // Commit then rollback, or rollback then (nothing to) commit: the originals are as
        // before either way, with every file there.
        let now: Vec<_> = projects.iter().map(|p| tree_view(p)).collect();
        assert!(
            now == before,
            "trial {trial}: an original changed or lost files"
        );
        let out = String::from_utf8_lossy(&c.stdout);
        assert!(
            !out.contains("deleted") || out.contains(" 0 deleted"),
            "{out}"
        );
        // The records agree: nothing claims to be committed over an original that is not.
        let rec = recorded(&root);
        assert!(
            rec.iter().all(|s| s == "rolled_back"),
            "trial {trial}: records {rec:?}"
        );
    }
}

#[test]
fn commit_beside_cleanup_ends_as_one_then_the_other() {
    for trial in 0..race_trials() {
        let dir = tempfile::tempdir().unwrap();
        let (root, projects) = setup(dir.path(), 3);
        let before: Vec<_> = projects.iter().map(|p| tree_view(p)).collect();
        let (c, k) = race(plan_cmd(&root, "commit"), plan_cmd(&root, "cleanup"));
        assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
        assert!(k.status.success(), "{}", String::from_utf8_lossy(&k.stderr));
        let now: Vec<_> = projects.iter().map(|p| tree_view(p)).collect();
        let committed = String::from_utf8_lossy(&c.stdout).contains("committed ");
        for (p, (b, n)) in projects.iter().zip(before.iter().zip(&now)) {
            let files = walkdir::WalkDir::new(p)
                .into_iter()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_file())
                .count();
            assert_eq!(files, 100, "trial {trial}: {} lost files", p.display());
            if committed {
                assert_ne!(
                    b, n,
                    "trial {trial}: reported committed, original unchanged"
                );
            } else {
                assert_eq!(b, n, "trial {trial}: nothing committed, original changed");
            }
        }
        assert!(
            recorded(&root).is_empty(),
            "the cleanup removed every sandbox"
        );
    }
}

#[test]
fn a_reader_beside_a_commit_recovers_nothing() {
    for trial in 0..race_trials() {
        let dir = tempfile::tempdir().unwrap();
        let (root, projects) = setup(dir.path(), 3);
        let before: Vec<_> = projects.iter().map(|p| tree_view(p)).collect();
        let mut commit = plan_cmd(&root, "commit").spawn().unwrap();
        let mut lists = Vec::new();
        while commit.try_wait().unwrap().is_none() {
            let l = plan_cmd(&root, "list").output().unwrap();
            assert!(l.status.success());
            lists.push(l);
        }
        let c = commit.wait_with_output().unwrap();
        assert!(
            c.status.success(),
            "trial {trial}: {}",
            String::from_utf8_lossy(&c.stderr)
        );
        for l in &lists {
            let err = String::from_utf8_lossy(&l.stderr);
            assert!(!err.contains("rolled back"), "a reader recovered: {err}");
        }
        let now: Vec<_> = projects.iter().map(|p| tree_view(p)).collect();
        assert!(now.iter().zip(&before).all(|(n, b)| n != b));
        assert!(!root
            .join(format!("plans/plan-{PLAN}/commit.journal"))
            .exists());
        assert!(recorded(&root).iter().all(|s| s == "committed"));
    }
}

/// The child side of `create_beside_create`: with `PATCHBOX_RACE_CHILD=<root>:<project>`,
/// makes the sandbox of (plan, "shared") and prints its id; otherwise does nothing.
#[test]
fn child() {
    let Ok(spec) = std::env::var("PATCHBOX_RACE_CHILD") else {
        return;
    };
    let (root, project) = spec.split_once(':').unwrap();
    let mgr = PlanManager::open(root).unwrap();
    mgr.set_cleanup_on_drop(false);
    let sb = mgr
        .get_or_create_sandbox(PLAN, "shared", project, Strategy::CopyOnWrite)
        .unwrap();
    println!("sandbox={}", sb.sandbox_id());
}

#[test]
fn create_beside_create_makes_one_sandbox() {
    let me = std::env::current_exe().unwrap();
    for trial in 0..race_trials() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let proj = dir.path().join("proj");
        for i in 0..200 {
            write(&proj, &format!("f{i}.txt"), b"x\n");
        }
        let child = || {
            let mut c = Command::new(&me);
            c.args(["--exact", "child", "--nocapture", "--test-threads=1"])
                .env(
                    "PATCHBOX_RACE_CHILD",
                    format!("{}:{}", root.display(), proj.display()),
                )
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            c
        };
        let (a, b) = race(child(), child());
        let id = |o: &std::process::Output| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .find_map(|l| l.split("sandbox=").nth(1).map(|s| s.trim().to_string()))
                .unwrap_or_else(|| {
                    panic!(
                        "{:?} {} {}",
                        o.status,
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    )
                })
        };
        assert_eq!(
            id(&a),
            id(&b),
            "trial {trial}: two sandboxes for one resource"
        );
        assert_eq!(recorded(&root).len(), 1);
        let mgr = PlanManager::open(&root).unwrap();
        assert_eq!(mgr.list_sandboxes(PLAN).len(), 1);
        assert_eq!(mgr.list_sandboxes(PLAN)[0].status(), Status::Created);
    }
}
