//! Checkpoints and phase hooks: exact restore after random edits (content, mode, type,
//! added and deleted files), disk use proportional to change, threads, every file strategy,
//! `none` refused, failing and panicking phases rolled back.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use common::{mode_view, write, Rng};
use patchbox::plan::checkpoint::{CheckpointManager, Phase};
use patchbox::plan::phases::PhaseRunner;
use patchbox::plan::{PlanManager, Sandbox, SandboxError, Strategy};

fn project(n: usize) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for i in 0..n {
        write(
            d.path(),
            &format!("d{}/f{i}.txt", i % 7),
            format!("file {i}\n").as_bytes(),
        );
    }
    d
}

/// One random edit of the sandbox: modify, add, delete, chmod, symlink, file→dir, dir→file.
/// What [`one`]'s sandbox needs alive: its manager (whose drop cleans it up) and its project.
struct Keep {
    _plans: PlanManager,
    _project: tempfile::TempDir,
}

/// A plan root and one sandbox `r` of plan `p` over a project of `n` files.
fn one(n: usize, strategy: Strategy) -> (tempfile::TempDir, Arc<dyn Sandbox>, Keep) {
    let root = tempfile::tempdir().unwrap();
    let project = project(n);
    let plans = PlanManager::open(root.path()).unwrap();
    let sb = plans
        .get_or_create_sandbox("p", "r", project.path(), strategy)
        .unwrap();
    let keep = Keep {
        _plans: plans,
        _project: project,
    };
    (root, sb, keep)
}

fn random_edit(sb: &Arc<dyn Sandbox>, rng: &mut Rng, n: usize) {
    let at = |p: &str| sb.get_path(Path::new(p)).unwrap();
    let i = rng.below(n as u64) as usize;
    let f = at(&format!("d{}/f{i}.txt", i % 7));
    match rng.below(7) {
        0 => {
            let _ = std::fs::write(&f, format!("edited {}\n", rng.below(1000)));
        }
        1 => {
            let p = at(&format!("new{}/n{}.txt", rng.below(3), rng.below(50)));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            if std::fs::symlink_metadata(&p)
                .map(|m| m.is_dir())
                .unwrap_or(false)
            {
                return;
            }
            std::fs::write(p, format!("new {}\n", rng.below(1000))).unwrap();
        }
        2 => {
            let _ = std::fs::remove_file(&f);
        }
        3 => {
            if f.is_file() {
                let mode = if rng.below(2) == 0 { 0o755 } else { 0o644 };
                std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            }
        }
        4 => {
            if std::fs::symlink_metadata(&f).is_ok() && !f.is_dir() {
                std::fs::remove_file(&f).unwrap();
                std::os::unix::fs::symlink(format!("f{}.txt", rng.below(n as u64)), &f).unwrap();
            }
        }
        5 => {
            // A file becomes a directory.
            if std::fs::symlink_metadata(&f).is_ok() && !f.is_dir() {
                std::fs::remove_file(&f).unwrap();
                std::fs::create_dir(&f).unwrap();
                std::fs::write(f.join("inside"), "x\n").unwrap();
            }
        }
        _ => {
            // A directory of new files goes away.
            let d = at(&format!("new{}", rng.below(3)));
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn round_trips(strategy: Strategy, trials: usize) {
    let mut rng = Rng::new(&format!("checkpoint round trips {strategy}"));
    for trial in 0..trials {
        let root = tempfile::tempdir().unwrap();
        let n = 40;
        let p = project(n);
        if strategy == Strategy::GitWorktree {
            common::git_init(p.path());
            common::git_commit_all(p.path());
        }
        let plans = PlanManager::open(root.path()).unwrap();
        let sb = plans
            .get_or_create_sandbox("p", "r", p.path(), strategy.clone())
            .unwrap();
        let cm = CheckpointManager::new(root.path());
        let tree = sb.get_path(Path::new("")).unwrap();
        let mut saved = Vec::new();
        for _ in 0..4 {
            for _ in 0..1 + rng.below(8) {
                random_edit(&sb, &mut rng, n);
            }
            let cp = cm
                .create_checkpoint(&sb, "p", "step", BTreeMap::new())
                .unwrap();
            saved.push((cp, mode_view(&tree)));
        }
        for _ in 0..1 + rng.below(8) {
            random_edit(&sb, &mut rng, n);
        }
        // Written out whole (`materialize`), each checkpoint of files is exactly the tree it
        // recorded, and the sandbox stays as it is; a native checkpoint is refused.
        let now = mode_view(&tree);
        let out = tempfile::tempdir().unwrap();
        for (i, (cp, view)) in saved.iter().enumerate() {
            let dest = out.path().join(format!("t{i}"));
            if strategy == Strategy::GitWorktree {
                assert!(cm.materialize(cp, &dest).is_err());
                assert!(!dest.exists());
                continue;
            }
            assert!(cm.materialize(cp, &dest).unwrap());
            assert_eq!(
                &mode_view(&dest),
                view,
                "{strategy}: trial {trial}: tree of {}",
                cp.checkpoint_id
            );
        }
        assert_eq!(
            mode_view(&tree),
            now,
            "{strategy}: materialize changed the sandbox"
        );
        // Back to each checkpoint, in random order: the sandbox is exactly what it was.
        for _ in 0..saved.len() {
            let (cp, view) = &saved[rng.below(saved.len() as u64) as usize];
            assert!(cm.rollback_to(cp).unwrap());
            assert_eq!(
                &mode_view(&tree),
                view,
                "{strategy}: trial {trial}: restore of {}",
                cp.checkpoint_id
            );
        }
        assert_eq!(cm.list_checkpoints(sb.sandbox_id()).unwrap().len(), 4);
        if strategy == Strategy::GitWorktree {
            let refs = common::git(p.path(), &["for-each-ref", "refs/patchbox"]);
            assert!(
                !refs.stdout.is_empty(),
                "checkpoints are refs while the sandbox lives"
            );
        }
        sb.cleanup().unwrap();
        assert!(cm.list_checkpoints(sb.sandbox_id()).unwrap().is_empty());
        if strategy == Strategy::GitWorktree {
            let refs = common::git(p.path(), &["for-each-ref"]);
            let refs = String::from_utf8_lossy(&refs.stdout).into_owned();
            assert!(!refs.contains("patchbox"), "refs left behind: {refs}");
            assert!(refs.lines().count() == 1, "only the user's branch: {refs}");
        }
    }
}

#[test]
fn copy_on_write_checkpoints_restore_exactly() {
    round_trips(Strategy::CopyOnWrite, 20);
}

#[test]
fn overlay_checkpoints_restore_exactly() {
    round_trips(Strategy::Overlay, 8);
}

#[test]
fn git_worktree_checkpoints_restore_exactly() {
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    round_trips(Strategy::GitWorktree, 5);
}

/// 20 checkpoints of a 10,000-file sandbox with 10 changed files between each take a small
/// fraction of one copy of it.
#[test]
fn checkpoints_cost_what_changed() {
    let root = tempfile::tempdir().unwrap();
    let n = 10_000;
    let p = tempfile::tempdir().unwrap();
    for i in 0..n {
        write(
            p.path(),
            &format!("d{}/f{i}.txt", i % 50),
            format!("{i:0>200}\n").as_bytes(),
        );
    }
    let plans = PlanManager::open(root.path()).unwrap();
    let sb = plans
        .get_or_create_sandbox("p", "r", p.path(), Strategy::CopyOnWrite)
        .unwrap();
    let cm = CheckpointManager::new(root.path());
    let copy_bytes: u64 = (0..n).map(|i| format!("{i:0>200}\n").len() as u64).sum();
    let mut changed_bytes = 0u64;
    let mut cps = Vec::new();
    for round in 0..20 {
        for k in 0..10 {
            let i = round * 10 + k;
            let text = format!("round {round} {i:0>200}\n");
            changed_bytes += text.len() as u64;
            std::fs::write(
                sb.get_path(Path::new(&format!("d{}/f{i}.txt", i % 50)))
                    .unwrap(),
                text,
            )
            .unwrap();
        }
        cps.push(
            cm.create_checkpoint(&sb, "p", "step", BTreeMap::new())
                .unwrap(),
        );
    }
    let used = cm.disk_bytes(sb.sandbox_id());
    eprintln!(
        "20 checkpoints: {used} bytes on disk; changed content {changed_bytes} bytes; one copy {copy_bytes} bytes"
    );
    assert!(
        used < copy_bytes / 10,
        "{used} bytes vs a copy of {copy_bytes}"
    );
    // N checkpoints of an unchanged tree cost almost nothing more.
    for _ in 0..20 {
        cm.create_checkpoint(&sb, "p", "idle", BTreeMap::new())
            .unwrap();
    }
    let idle = cm.disk_bytes(sb.sandbox_id()) - used;
    assert!(idle < 20 * 40_000, "20 idle checkpoints took {idle} bytes");
    // Deleting a checkpoint frees what no other one holds.
    assert!(cm.rollback_to(&cps[0]).unwrap());
    assert!(cm.delete_checkpoint(&cps[19].checkpoint_id).unwrap());
    assert!(!cm.delete_checkpoint(&cps[19].checkpoint_id).unwrap());
    assert!(!cm.rollback_to(&cps[19]).unwrap());
}

#[test]
fn eight_threads_checkpoint_concurrently() {
    let root = tempfile::tempdir().unwrap();
    let plans = Arc::new(PlanManager::open(root.path()).unwrap());
    let cm = Arc::new(CheckpointManager::new(root.path()));
    let projects: Vec<_> = (0..4).map(|_| project(30)).collect();
    let sbs: Vec<_> = projects
        .iter()
        .enumerate()
        .map(|(i, p)| {
            plans
                .get_or_create_sandbox("p", &format!("r{i}"), p.path(), Strategy::CopyOnWrite)
                .unwrap()
        })
        .collect();
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let cm = cm.clone();
            let sb = sbs[t % 4].clone();
            std::thread::spawn(move || {
                let mut ids = Vec::new();
                for k in 0..5 {
                    let f = sb.get_path(Path::new(&format!("t{t}-{k}.txt"))).unwrap();
                    std::fs::write(f, format!("{t} {k}\n")).unwrap();
                    ids.push(
                        cm.create_checkpoint(&sb, "p", "step", BTreeMap::new())
                            .unwrap(),
                    );
                }
                ids
            })
        })
        .collect();
    let all: Vec<_> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(all.len(), 40);
    for sb in &sbs {
        let list = cm.list_checkpoints(sb.sandbox_id()).unwrap();
        assert_eq!(list.len(), 10);
        assert!(
            list.windows(2)
                .all(|w| w[0].checkpoint_id < w[1].checkpoint_id),
            "oldest first"
        );
    }
}

/// CI once listed two checkpoints made in the same millisecond the other way round (a plain
/// ULID is random within its millisecond). A burst of checkpoints of an unchanged sandbox
/// lands several in one millisecond on a fast disk (here each takes about 3 ms, so this
/// test catches it only there; `id`'s unit test catches it anywhere); they list in the
/// order they were made.
#[test]
fn checkpoints_made_in_one_millisecond_list_in_the_order_they_were_made() {
    let (root, sb, _keep) = one(3, Strategy::CopyOnWrite);
    let cm = CheckpointManager::new(root.path());
    let made: Vec<(String, String)> = (0..40)
        .map(|i| {
            let cp = cm
                .create_checkpoint(&sb, "p", &format!("step-{i}"), BTreeMap::new())
                .unwrap();
            (cp.checkpoint_id, cp.phase)
        })
        .collect();
    let listed: Vec<(String, String)> = cm
        .list_checkpoints(sb.sandbox_id())
        .unwrap()
        .into_iter()
        .map(|c| (c.checkpoint_id, c.phase))
        .collect();
    assert_eq!(listed, made);
}

#[test]
fn none_refuses_checkpoints() {
    let (root, sb, _keep) = one(3, Strategy::None);
    let cm = CheckpointManager::new(root.path());
    let e = cm
        .create_checkpoint(&sb, "p", Phase::PreExecute.name(), BTreeMap::new())
        .unwrap_err();
    assert!(e.to_string().contains("cannot be checkpointed"), "{e}");
}

#[test]
fn dropping_the_manager_removes_its_checkpoints_unless_kept() {
    let (root, sb, _keep) = one(3, Strategy::CopyOnWrite);
    let path = {
        let cm = CheckpointManager::new(root.path());
        cm.create_checkpoint(&sb, "p", "x", BTreeMap::new())
            .unwrap()
            .snapshot_path
    };
    assert!(!path.exists());
    let kept = {
        let cm = CheckpointManager::new(root.path());
        cm.keep();
        cm.create_checkpoint(&sb, "p", "x", BTreeMap::new())
            .unwrap()
    };
    assert!(kept.snapshot_path.exists());
    // A new manager finds it once it knows the sandbox.
    let cm = CheckpointManager::new(root.path());
    cm.attach(&sb).unwrap();
    assert_eq!(cm.list_checkpoints(sb.sandbox_id()).unwrap(), [kept]);
}

#[test]
fn phases_roll_back_failing_and_panicking_work() {
    let root = tempfile::tempdir().unwrap();
    let p = project(5);
    let plans = PlanManager::open(root.path()).unwrap();
    let sb = plans
        .get_or_create_sandbox("p", "r", p.path(), Strategy::CopyOnWrite)
        .unwrap();
    std::fs::write(
        sb.get_path(Path::new("kept.txt")).unwrap(),
        "earlier work\n",
    )
    .unwrap();
    let tree = sb.get_path(Path::new("")).unwrap();
    let before = mode_view(&tree);
    let cm = CheckpointManager::new(root.path());
    let runner = PhaseRunner::new(&plans, Some(&cm));
    let e = runner
        .execute("p", || -> Result<(), String> {
            std::fs::write(sb.get_path(Path::new("d0/f0.txt")).unwrap(), "bad\n").unwrap();
            std::fs::remove_file(sb.get_path(Path::new("kept.txt")).unwrap()).unwrap();
            Err("tool failed".into())
        })
        .unwrap_err();
    assert!(!e.panicked && e.reason == "tool failed");
    assert_eq!(e.restored, [sb.sandbox_id()]);
    assert_eq!(mode_view(&tree), before);
    let e = runner
        .execute("p", || -> Result<(), String> {
            std::fs::write(sb.get_path(Path::new("d1/f1.txt")).unwrap(), "bad\n").unwrap();
            panic!("model crashed");
        })
        .unwrap_err();
    assert!(e.panicked && e.reason.contains("model crashed"), "{e}");
    assert_eq!(mode_view(&tree), before);
    let phases: Vec<String> = cm
        .list_checkpoints(sb.sandbox_id())
        .unwrap()
        .into_iter()
        .map(|c| c.phase)
        .collect();
    assert_eq!(phases, ["pre_execute", "pre_execute"]);
    runner
        .execute("p", || -> Result<(), String> {
            std::fs::write(sb.get_path(Path::new("d2/f2.txt")).unwrap(), "good\n").unwrap();
            Ok(())
        })
        .unwrap();
    // Apply fails (the user changed the same file): the sandbox is as before apply, the
    // original untouched.
    std::fs::write(p.path().join("d2/f2.txt"), "user\n").unwrap();
    // `commit_all` reports the conflict as its one failed result (a sandbox-level failure):
    // the phase fails with it, as a commit error of that sandbox.
    let e = runner.apply("p").unwrap_err();
    assert!(e.reason.contains("check failed, nothing written"), "{e}");
    assert!(
        matches!(e.source.as_deref(), Some(SandboxError::Commit { sandbox_id, .. }) if sandbox_id == sb.sandbox_id()),
        "{e:?}"
    );
    assert_eq!(
        std::fs::read_to_string(p.path().join("d2/f2.txt")).unwrap(),
        "user\n"
    );
    std::fs::write(p.path().join("d2/f2.txt"), "file 2\n").unwrap();
    runner.apply("p").unwrap();
    assert_eq!(
        std::fs::read_to_string(p.path().join("d2/f2.txt")).unwrap(),
        "good\n"
    );
    // Without a checkpoint manager the hooks are skipped: a failure is reported, nothing
    // is rolled back.
    let plans2 = PlanManager::open(root.path()).unwrap();
    let bare = PhaseRunner::new(&plans2, None);
    let e = bare
        .execute("p", || -> Result<(), String> { Err("x".into()) })
        .unwrap_err();
    assert!(e.restored.is_empty());
}

#[test]
fn sqlite_checkpoints_are_savepoints() {
    let root = tempfile::tempdir().unwrap();
    let db = root.path().join("app.db");
    let setup = rusqlite::Connection::open(&db).unwrap();
    setup
        .execute_batch(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'a');",
        )
        .unwrap();
    let plans = PlanManager::open(root.path().join("sandboxes")).unwrap();
    let sb = plans
        .get_or_create_sandbox("p", "db", &db, Strategy::TransactionRollback)
        .unwrap();
    let cm = CheckpointManager::new(root.path().join("sandboxes"));
    let sql = sb.sql().unwrap();
    sql.execute("INSERT INTO t VALUES (2, 'b')", &[]).unwrap();
    let cp = cm
        .create_checkpoint(&sb, "p", Phase::PreExecute.name(), BTreeMap::new())
        .unwrap();
    sql.execute("INSERT INTO t VALUES (3, 'c')", &[]).unwrap();
    sql.execute("DELETE FROM t WHERE id = 1", &[]).unwrap();
    assert!(cm.rollback_to(&cp).unwrap());
    let ids: Vec<String> = sb
        .diff()
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(ids, ["t/2"], "back to the checkpoint: only row 2 inserted");
    plans.commit_all("p").unwrap();
    let n: i64 = setup
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 2);
}

/// A directory the sandbox replaced by a symlink to somewhere else: restoring the checkpoint
/// brings the directory back and never writes through the link.
#[test]
fn restore_never_writes_through_a_symlink() {
    let outside = tempfile::tempdir().unwrap();
    let (root, sb, _keep) = one(3, Strategy::CopyOnWrite);
    let cm = CheckpointManager::new(root.path());
    let d = sb.get_path(Path::new("made")).unwrap();
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("x"), "inside\n").unwrap();
    let cp = cm
        .create_checkpoint(&sb, "p", "step", BTreeMap::new())
        .unwrap();
    std::fs::remove_dir_all(&d).unwrap();
    std::os::unix::fs::symlink(outside.path(), &d).unwrap();
    assert!(cm.rollback_to(&cp).unwrap());
    assert!(std::fs::symlink_metadata(&d).unwrap().is_dir());
    assert_eq!(std::fs::read_to_string(d.join("x")).unwrap(), "inside\n");
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing written outside"
    );
}

/// Rolling back to a checkpoint is for a sandbox whose work is not committed: on a committed
/// sandbox every strategy refuses it alike — a state error naming the sandbox and its status —
/// and changes nothing, neither the sandbox nor the original. Once the commit is undone, the
/// work is no longer committed and the rollback goes through.
#[test]
fn rollback_to_a_committed_sandbox_is_refused_alike_by_every_strategy() {
    use patchbox::plan::{SandboxError, Status};
    std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
    let refused = |what: &str, sb: &Arc<dyn Sandbox>, r: Result<bool, SandboxError>| match r {
        Err(SandboxError::State {
            sandbox_id, from, ..
        }) => {
            assert_eq!(sandbox_id.as_deref(), Some(sb.sandbox_id()), "{what}");
            assert_eq!(from, Status::Committed, "{what}");
        }
        other => panic!("{what}: rollback_to a committed sandbox gave {other:?}"),
    };
    for strategy in [
        Strategy::CopyOnWrite,
        Strategy::Overlay,
        Strategy::GitWorktree,
    ] {
        let root = tempfile::tempdir().unwrap();
        let p = project(5);
        if strategy == Strategy::GitWorktree {
            common::git_init(p.path());
            common::git_commit_all(p.path());
        }
        let plans = PlanManager::open(root.path()).unwrap();
        let sb = plans
            .get_or_create_sandbox("p", "r", p.path(), strategy.clone())
            .unwrap();
        let cm = CheckpointManager::new(root.path());
        let tree = sb.get_path(Path::new("")).unwrap();
        std::fs::write(tree.join("d0/f0.txt"), "before the checkpoint\n").unwrap();
        let cp = cm
            .create_checkpoint(&sb, "p", Phase::PreApply.name(), BTreeMap::new())
            .unwrap();
        std::fs::write(tree.join("d1/f1.txt"), "after the checkpoint\n").unwrap();
        plans.commit_all("p").unwrap();
        assert_eq!(sb.status(), Status::Committed);
        let (original, sandbox) = (mode_view(p.path()), mode_view(&tree));
        refused(&strategy.to_string(), &sb, cm.rollback_to(&cp));
        assert_eq!(sb.status(), Status::Committed, "{strategy}");
        assert_eq!(mode_view(p.path()), original, "{strategy}: original");
        assert_eq!(mode_view(&tree), sandbox, "{strategy}: sandbox");
        sb.rollback().unwrap();
        assert!(cm.rollback_to(&cp).unwrap(), "{strategy}");
        let read = |rel: &str| std::fs::read_to_string(tree.join(rel)).unwrap();
        assert_eq!(read("d0/f0.txt"), "before the checkpoint\n", "{strategy}");
        assert_eq!(read("d1/f1.txt"), "file 1\n", "{strategy}");
        sb.cleanup().unwrap();
    }

    let root = tempfile::tempdir().unwrap();
    let db = root.path().join("app.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);")
        .unwrap();
    let plans = PlanManager::open(root.path().join("sandboxes")).unwrap();
    let sb = plans
        .get_or_create_sandbox("p", "db", &db, Strategy::TransactionRollback)
        .unwrap();
    let cm = CheckpointManager::new(root.path().join("sandboxes"));
    let sql = sb.sql().unwrap();
    sql.execute("INSERT INTO t VALUES (1, 'a')", &[]).unwrap();
    let cp = cm
        .create_checkpoint(&sb, "p", Phase::PreApply.name(), BTreeMap::new())
        .unwrap();
    plans.commit_all("p").unwrap();
    refused("transaction_rollback", &sb, cm.rollback_to(&cp));
    assert_eq!(sb.status(), Status::Committed);
}

/// Ids from text are parsed where they come in: a bad plan id is refused before a phase runs
/// or a checkpoint is taken, and a text that is no sandbox id names no checkpoints.
#[test]
fn bad_ids_are_refused_at_the_entry_points() {
    let root = tempfile::tempdir().unwrap();
    let p = project(1);
    let plans = PlanManager::open(root.path()).unwrap();
    let sb = plans
        .get_or_create_sandbox("p", "r", p.path(), Strategy::CopyOnWrite)
        .unwrap();
    let cm = CheckpointManager::new(root.path());
    let runner = PhaseRunner::new(&plans, Some(&cm));
    let mut ran = false;
    let e = runner
        .execute("a/b", || -> Result<(), String> {
            ran = true;
            Ok(())
        })
        .unwrap_err();
    assert!(!ran);
    assert!(e.reason.contains("invalid plan id \"a/b\""), "{}", e.reason);
    let e = runner.apply("a/b").unwrap_err();
    assert!(e.reason.contains("invalid plan id \"a/b\""), "{}", e.reason);
    let e = cm
        .create_checkpoint(&sb, "a/b", Phase::PreExecute.name(), BTreeMap::new())
        .unwrap_err();
    assert!(e.to_string().contains("invalid plan id"), "{e}");
    cm.create_checkpoint(&sb, "p", Phase::PreExecute.name(), BTreeMap::new())
        .unwrap();
    assert_eq!(cm.list_checkpoints(sb.sandbox_id()).unwrap().len(), 1);
    assert_eq!(cm.list_checkpoints(sb.id()).unwrap().len(), 1);
    assert!(cm.list_checkpoints("../x").unwrap().is_empty());
    assert_eq!(cm.disk_bytes("../x"), 0);
    assert!(cm.disk_bytes(sb.id()) > 0);
}
