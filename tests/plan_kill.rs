//! kill -9 of a process running `commit_all` over four strategies at once — `copy_on_write`,
//! `overlay`, `git_worktree` (whose fast-forward of the user's branch is held open by a
//! `reference-transaction` hook, so kills land inside git's ref update) and a SQLite
//! `transaction_rollback` — at random moments, sometimes the process alone, sometimes its
//! whole process group. After `PlanManager::recover`, every resource must be exactly before
//! or exactly after, all four the same way, with the user's repository clean (index equal to
//! `HEAD`, no `*.lock` left in `.git`).
//!
//! Short form (CI): `PATCHBOX_CRASH_TRIALS` (12 by default). Long form, by hand:
//! `PATCHBOX_CRASH_TRIALS=100 cargo test --release --test plan_kill -- --nocapture`;
//! `PATCHBOX_CRASH_SEED` replays a run.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use patchbox::plan::strategy::sqlite::SqlValue;
use patchbox::plan::{PlanManager, Strategy};

const PLAN: &str = "kill";

/// The four resources of a trial under `dir`, made fresh: two directories, a git repository
/// with a slow `reference-transaction` hook, and a SQLite database.
fn resources(dir: &Path) {
    for (p, n) in [("cow", 60), ("ovl", 60)] {
        for i in 0..n {
            write(
                &dir.join(p),
                &format!("d{}/f{i}.txt", i % 4),
                format!("{p} {i}\n").as_bytes(),
            );
        }
    }
    let repo = dir.join("repo");
    for i in 0..20 {
        write(
            &repo,
            &format!("src/f{i}.txt"),
            format!("repo {i}\n").as_bytes(),
        );
    }
    git_init(&repo);
    git_commit_all(&repo);
    let hook = repo.join(".git/hooks/reference-transaction");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    // Held open while git holds the branch's lock ("prepared"), so kills land inside it.
    std::fs::write(
        &hook,
        "#!/bin/sh\n[ \"$1\" = prepared ] && sleep 0.3\nexit 0\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = rusqlite::Connection::open(dir.join("db.sqlite")).unwrap();
    db.execute_batch(
        "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
         INSERT INTO t(v) VALUES ('a'), ('b'), ('c');",
    )
    .unwrap();
}

/// The child: makes the plan's four sandboxes, edits them, says `ready`, commits the plan.
/// Runs only with `PATCHBOX_KILL_CHILD=<dir>`.
#[test]
fn child() {
    let Ok(dir) = std::env::var("PATCHBOX_KILL_CHILD") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let mgr = PlanManager::open(dir.join("root")).unwrap();
    mgr.set_cleanup_on_drop(false);
    for (res, strategy) in [("cow", Strategy::CopyOnWrite), ("ovl", Strategy::Overlay)] {
        let sb = mgr
            .get_or_create_sandbox(PLAN, res, dir.join(res), strategy)
            .unwrap();
        for i in 0..60 {
            let f = sb
                .get_path(Path::new(&format!("d{}/f{i}.txt", i % 4)))
                .unwrap();
            std::fs::write(f, format!("{res} {i} edited\n")).unwrap();
        }
    }
    let g = mgr
        .get_or_create_sandbox(PLAN, "repo", dir.join("repo"), Strategy::GitWorktree)
        .unwrap();
    for i in 0..20 {
        std::fs::write(
            g.get_path(Path::new(&format!("src/f{i}.txt"))).unwrap(),
            format!("repo {i} edited\n"),
        )
        .unwrap();
    }
    let s = mgr
        .get_or_create_sandbox(
            PLAN,
            "db",
            dir.join("db.sqlite"),
            Strategy::TransactionRollback,
        )
        .unwrap();
    s.sql()
        .unwrap()
        .execute("UPDATE t SET v = v || '2'", &[] as &[SqlValue])
        .unwrap();
    println!("\nready");
    use std::io::Write;
    std::io::stdout().flush().unwrap();
    let r = mgr.commit_all(PLAN).unwrap();
    assert_eq!(r.len(), 4);
    println!("\ndone");
}

fn child_cmd(dir: &Path) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("PATCHBOX_KILL_CHILD", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    c
}

/// What a trial's resources hold: the two trees, the repository's `HEAD` tree, the rows.
#[derive(Debug, PartialEq, Eq, Clone)]
struct State {
    cow: TreeView,
    ovl: TreeView,
    repo_tree: String,
    rows: String,
}

fn state(dir: &Path) -> State {
    let repo = dir.join("repo");
    let tree = git(&repo, &["rev-parse", "HEAD^{tree}"]);
    let db = rusqlite::Connection::open(dir.join("db.sqlite")).unwrap();
    let rows: String = db
        .query_row(
            "SELECT group_concat(v, ',') FROM (SELECT v FROM t ORDER BY id)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    State {
        cow: tree_view(&dir.join("cow")),
        ovl: tree_view(&dir.join("ovl")),
        repo_tree: String::from_utf8_lossy(&tree.stdout).trim().to_string(),
        rows,
    }
}

/// The user's repository as git leaves it after a clean run: nothing staged or modified
/// against `HEAD`, and no lock file anywhere in `.git`.
fn repo_problems(repo: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let st = git(repo, &["status", "--porcelain", "--untracked-files=no"]);
    if !st.stdout.is_empty() {
        out.push(format!("status: {}", String::from_utf8_lossy(&st.stdout)));
    }
    for e in walkdir::WalkDir::new(repo.join(".git"))
        .into_iter()
        .flatten()
    {
        if e.file_name().to_string_lossy().ends_with(".lock") {
            out.push(format!("stale lock {}", e.path().display()));
        }
    }
    out
}

/// Runs the child to `ready`; returns it and when it said so.
fn start(dir: &Path) -> (std::process::Child, Instant) {
    let mut child = child_cmd(dir).spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    for l in lines.by_ref() {
        if l.unwrap().trim() == "ready" {
            break;
        }
    }
    let t = Instant::now();
    // Drains the rest so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, t)
}

#[test]
fn commit_all_of_four_strategies_killed_anywhere_is_all_or_nothing() {
    let clean = tempfile::tempdir().unwrap();
    resources(clean.path());
    let before = state(clean.path());
    let (mut child, t) = start(clean.path());
    assert!(
        child.wait().unwrap().success(),
        "the uninterrupted commit failed"
    );
    let full = t.elapsed();
    let after = state(clean.path());
    assert!(repo_problems(&clean.path().join("repo")).is_empty());
    assert_ne!(before.cow, after.cow);
    assert_ne!(before.repo_tree, after.repo_tree);
    assert_ne!(before.rows, after.rows);
    eprintln!("an uninterrupted commit_all of the four takes {full:?}");

    let mut rng = Rng::new("plan_kill");
    let (mut saw_before, mut saw_after) = (0, 0);
    for trial in 0..trials() {
        let dir = tempfile::tempdir().unwrap();
        resources(dir.path());
        let (mut child, _) = start(dir.path());
        let delay = Duration::from_micros(rng.below(full.as_micros() as u64 * 12 / 10 + 1));
        std::thread::sleep(delay);
        let group = rng.below(2) == 1;
        let pid = child.id() as i32;
        // SAFETY: plain kill(2) on the child (or its process group) this test started.
        unsafe {
            libc::kill(if group { -pid } else { pid }, libc::SIGKILL);
        }
        let _ = child.wait();

        let mgr = PlanManager::open(dir.path().join("root")).unwrap();
        mgr.set_cleanup_on_drop(false);
        let rec = mgr.recover(PLAN).unwrap();
        let now = state(dir.path());
        let how = format!(
            "trial {trial} (killed {} after {delay:?})",
            if group { "group" } else { "process" }
        );
        let problems = repo_problems(&dir.path().join("repo"));
        assert!(problems.is_empty(), "{how}: {problems:?}; recovery {rec:?}");
        if now == before {
            saw_before += 1;
        } else if now == after {
            saw_after += 1;
        } else {
            panic!(
                "{how}: mixed: cow {} ovl {} repo {} db {}; recovery {rec:?}",
                now.cow == after.cow,
                now.ovl == after.ovl,
                now.repo_tree == after.repo_tree,
                now.rows == after.rows
            );
        }
        assert!(!dir
            .path()
            .join("root/plans/plan-kill/commit.journal")
            .exists());
        drop(mgr);
        // Every git the commit started has exited (none outlives the decision).
        let left = Command::new("pgrep")
            .args(["-f", &dir.path().join("repo").display().to_string()])
            .output();
        if let Ok(o) = left {
            assert!(o.stdout.is_empty(), "{how}: a git outlived recovery");
        }
    }
    eprintln!("plan_kill: {saw_before} trials ended before, {saw_after} after, 0 mixed");
}
