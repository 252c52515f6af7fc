//! The plan layer as an engine uses it: the lifecycle table, `copy_on_write` and `none`
//! against real directories, `commit_all` with a failure at every position, conflicts,
//! reopening after the engine went away, threads, boundaries.

mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use common::{as_failure, mode_view, write};
use patchbox::plan::manager::CommitAllOptions;
use patchbox::plan::{
    DiffOp, PlanManager, Resource, ResourceKind, ResourceRegistry, Sandbox, SandboxError, Status,
    Strategy,
};

fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (p, c) in files {
        write(d.path(), p, c.as_bytes());
    }
    d
}

/// The lifecycle the users' documentation describes, written out pair by pair.
#[test]
fn transition_table_every_pair() {
    use Status::*;
    let allowed: BTreeSet<(&str, &str)> = [
        ("pending", "created"),
        ("created", "active"),
        ("created", "errored"),
        ("active", "committed"),
        ("active", "rolled_back"),
        ("active", "errored"),
        ("committed", "cleaned_up"),
        ("committed", "rolled_back"),
        ("rolled_back", "active"),
        ("rolled_back", "cleaned_up"),
        ("errored", "cleaned_up"),
    ]
    .into_iter()
    .collect();
    let all = [
        Pending, Created, Active, Committed, RolledBack, CleanedUp, Errored,
    ];
    let mut checked = 0;
    for from in all {
        for to in all {
            let want = allowed.contains(&(from.name(), to.name()));
            assert_eq!(Status::can_transition(from, to), want, "{from} -> {to}");
            match Status::assert_transition(from, to) {
                Ok(()) => assert!(want),
                Err(SandboxError::State { from: f, to: t, .. }) => {
                    assert!(!want);
                    assert_eq!((f, t), (from, to));
                }
                Err(e) => panic!("unexpected error {e}"),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 49);
}

#[test]
fn copy_on_write_create_edit_diff_commit_rollback_cleanup() {
    let root = tempfile::tempdir().unwrap();
    let p = project(&[
        ("keep.txt", "same\n"),
        ("edit.txt", "one\ntwo\nthree\n"),
        ("gone.txt", "bye\n"),
        ("dir/inner.txt", "inner\n"),
        ("run.sh", "#!/bin/sh\n"),
    ]);
    std::os::unix::fs::symlink("keep.txt", p.path().join("link")).unwrap();
    let before = mode_view(p.path());
    let mgr = PlanManager::open(root.path()).unwrap();
    let sb = mgr
        .get_or_create_sandbox("p1", "proj", p.path(), Strategy::CopyOnWrite)
        .unwrap();
    assert_eq!(sb.status(), Status::Created);
    let ctx = sb.context().unwrap();
    assert!(ctx
        .sandbox_path
        .starts_with(root.path().canonicalize().unwrap()));
    assert_eq!(ctx.plan_id, "p1");
    assert_eq!(ctx.resource_id, "proj");
    // The sandbox starts as a copy of the original.
    assert_eq!(mode_view(&ctx.sandbox_path), before);

    let at = |r: &str| sb.get_path(Path::new(r)).unwrap();
    std::fs::write(at("edit.txt"), "one\nTWO\nthree\n").unwrap();
    std::fs::remove_file(at("gone.txt")).unwrap();
    std::fs::write(at("new.bin"), [0u8, 1, 2, 255]).unwrap();
    std::fs::set_permissions(at("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::remove_file(at("link")).unwrap();
    std::os::unix::fs::symlink("dir/inner.txt", at("link")).unwrap();
    assert_eq!(sb.status(), Status::Active);
    // Nothing reached the original.
    assert_eq!(mode_view(p.path()), before);

    let d = sb.diff().unwrap();
    let ops: Vec<(String, DiffOp)> = d
        .entries
        .iter()
        .map(|e| (e.path.clone(), e.operation))
        .collect();
    assert_eq!(
        ops,
        [
            ("edit.txt".to_string(), DiffOp::Modified),
            ("gone.txt".to_string(), DiffOp::Deleted),
            ("link".to_string(), DiffOp::Modified),
            ("new.bin".to_string(), DiffOp::Added),
            ("run.sh".to_string(), DiffOp::Modified),
        ]
    );
    assert_eq!(
        d.entries[0].before.as_deref(),
        Some(&b"one\ntwo\nthree\n"[..])
    );
    assert_eq!(
        d.entries[0].after.as_deref(),
        Some(&b"one\nTWO\nthree\n"[..])
    );
    // The patch is one `git apply` accepts: applied to a copy of the original, it gives the
    // sandbox.
    let scratch = tempfile::tempdir().unwrap();
    let applied = common::git_apply_copy(p.path(), &d.patch, scratch.path());
    assert_eq!(mode_view(&applied), mode_view(&ctx.sandbox_path));

    // Rollback before commit: the sandbox is the original again.
    sb.rollback().unwrap();
    assert_eq!(sb.status(), Status::RolledBack);
    assert_eq!(mode_view(&ctx.sandbox_path), before);
    assert!(sb.diff().unwrap().entries.is_empty());

    // Re-use, then commit.
    std::fs::write(
        sb.get_path(Path::new("edit.txt")).unwrap(),
        "one\nTWO\nthree\n",
    )
    .unwrap();
    std::fs::create_dir(sb.get_path(Path::new("made")).unwrap()).unwrap();
    std::fs::write(sb.get_path(Path::new("made/x")).unwrap(), "x\n").unwrap();
    let sandbox_view = mode_view(&ctx.sandbox_path);
    let r = sb.commit(Some("msg")).unwrap();
    assert!(r.success);
    assert_eq!(r.changed_files, ["edit.txt"]);
    assert_eq!(r.added_files, ["made/x"]);
    assert!(r.deleted_files.is_empty());
    assert!(r.commit_ref.is_some());
    assert_eq!(sb.status(), Status::Committed);
    assert_eq!(mode_view(p.path()), sandbox_view);

    // Rollback after commit: the undo.
    sb.rollback().unwrap();
    assert_eq!(mode_view(p.path()), before);
    sb.cleanup().unwrap();
    assert_eq!(sb.status(), Status::CleanedUp);
    assert!(!ctx.sandbox_path.exists());
    sb.cleanup().unwrap(); // idempotent
                           // Operations on a cleaned-up sandbox are state errors.
    assert!(matches!(
        sb.get_path(Path::new("x")),
        Err(SandboxError::State { .. })
    ));
    assert!(matches!(sb.commit(None), Err(SandboxError::State { .. })));
    assert_eq!(mode_view(p.path()), before);
}

#[test]
fn a_conflict_refuses_the_commit_whole_and_concurrent_edits_elsewhere_survive() {
    let root = tempfile::tempdir().unwrap();
    let p = project(&[
        ("a.txt", "1\n2\n3\n4\n5\n6\n7\n8\n9\n"),
        ("b.txt", "b\n"),
        ("c.txt", "c\n"),
    ]);
    let mgr = PlanManager::open(root.path()).unwrap();
    let sb = mgr
        .get_or_create_sandbox("p", "r", p.path(), Strategy::CopyOnWrite)
        .unwrap();
    std::fs::write(
        sb.get_path(Path::new("a.txt")).unwrap(),
        "1\nTWO\n3\n4\n5\n6\n7\n8\n9\n",
    )
    .unwrap();
    std::fs::write(sb.get_path(Path::new("b.txt")).unwrap(), "sandbox b\n").unwrap();
    // The user edits b.txt too, meanwhile: a conflict.
    std::fs::write(p.path().join("b.txt"), "user b\n").unwrap();
    let before = mode_view(p.path());
    match sb.check_commit() {
        Err(SandboxError::Commit { files, .. }) => assert_eq!(files, ["b.txt"]),
        other => panic!("expected a commit error, got {other:?}"),
    }
    match sb.commit(None) {
        Err(SandboxError::Commit { files, .. }) => assert_eq!(files, ["b.txt"]),
        other => panic!("expected a commit error, got {other:?}"),
    }
    assert_eq!(mode_view(p.path()), before, "nothing written");
    assert_eq!(sb.status(), Status::Active);
    // The user's edit elsewhere in a file the sandbox also changed merges; so does an edit
    // of a file it did not touch.
    std::fs::write(p.path().join("b.txt"), "b\n").unwrap();
    std::fs::write(p.path().join("a.txt"), "1\n2\n3\n4\n5\n6\n7\n8\nNINE\n").unwrap();
    std::fs::write(p.path().join("c.txt"), "user c\n").unwrap();
    sb.commit(None).unwrap();
    assert_eq!(
        std::fs::read_to_string(p.path().join("a.txt")).unwrap(),
        "1\nTWO\n3\n4\n5\n6\n7\n8\nNINE\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.path().join("b.txt")).unwrap(),
        "sandbox b\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.path().join("c.txt")).unwrap(),
        "user c\n"
    );
    // Rolling back after the user changed a committed file again is refused, naming it.
    std::fs::write(p.path().join("b.txt"), "user again\n").unwrap();
    match sb.rollback() {
        Err(SandboxError::Rollback { files, .. }) => assert_eq!(files, ["b.txt"]),
        other => panic!("expected a rollback error, got {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(p.path().join("b.txt")).unwrap(),
        "user again\n"
    );
    assert_eq!(sb.status(), Status::Committed);
}

#[test]
fn get_path_refuses_escapes() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let p = project(&[("a.txt", "a\n")]);
    std::os::unix::fs::symlink(outside.path(), p.path().join("out")).unwrap();
    std::os::unix::fs::symlink("a.txt", p.path().join("in")).unwrap();
    let mgr = PlanManager::open(root.path()).unwrap();
    for s in [Strategy::CopyOnWrite, Strategy::None] {
        let sb = mgr
            .get_or_create_sandbox("p", s.name(), p.path(), s.clone())
            .unwrap();
        for bad in ["../x", "/etc/passwd", "out/x", "out", "a/../../x"] {
            let e = sb.get_path(Path::new(bad)).unwrap_err();
            assert_eq!(e.kind(), "sandbox", "{s}: {bad}: {e}");
        }
        let ok = sb.get_path(Path::new("in")).unwrap();
        assert!(ok.starts_with(&sb.context().unwrap().sandbox_path));
        assert!(sb.get_path(Path::new("new/dir/file")).is_ok());
    }
}

#[test]
fn none_passes_through_and_cannot_roll_back() {
    let root = tempfile::tempdir().unwrap();
    let p = project(&[("a.txt", "a\n")]);
    let mgr = PlanManager::open(root.path()).unwrap();
    let sb = mgr
        .get_or_create_sandbox("p", "api", p.path(), Strategy::None)
        .unwrap();
    let path = sb.get_path(Path::new("a.txt")).unwrap();
    assert_eq!(path, p.path().canonicalize().unwrap().join("a.txt"));
    std::fs::write(&path, "now\n").unwrap();
    assert!(sb.diff().unwrap().entries.is_empty());
    assert!(matches!(sb.rollback(), Err(SandboxError::Rollback { .. })));
    assert_eq!(sb.context().unwrap().metadata["isolation"], "bypassed");
    let r = sb.commit(None).unwrap();
    assert!(r.success && r.commit_ref.is_none());
    assert!(matches!(sb.rollback(), Err(SandboxError::Rollback { .. })));
    sb.cleanup().unwrap();
    assert_eq!(
        std::fs::read_to_string(p.path().join("a.txt")).unwrap(),
        "now\n"
    );
}

/// A plan's sandboxes are listed (and committed) in creation order, also when many are made
/// within one millisecond (plain ULIDs are random within one: a test committing two sandboxes
/// made together saw them in either order).
#[test]
fn sandboxes_are_listed_in_creation_order_within_a_millisecond() {
    let root = tempfile::tempdir().unwrap();
    let p = project(&[("a.txt", "a\n")]);
    let mgr = PlanManager::open(root.path()).unwrap();
    let made: Vec<String> = (0..50)
        .map(|i| {
            mgr.get_or_create_sandbox("p", &format!("r{i}"), p.path(), Strategy::None)
                .unwrap()
                .sandbox_id()
                .to_string()
        })
        .collect();
    let listed: Vec<String> = mgr
        .list_sandboxes("p")
        .iter()
        .map(|s| s.sandbox_id().to_string())
        .collect();
    assert_eq!(listed, made);
}

/// Four sandboxes (three copy_on_write, one none): commit_all with a failure injected at each
/// position rolls back what it committed, newest first, and every original is byte-identical.
/// Every project is as `before` (modes, symlinks and contents).
fn assert_unchanged(projects: &[tempfile::TempDir], before: &[common::ModeView], fail_at: usize) {
    for (p, b) in projects.iter().zip(before) {
        assert_eq!(
            &mode_view(p.path()),
            b,
            "fail at {fail_at}: original changed"
        );
    }
}

#[test]
fn commit_all_failure_at_every_position_rolls_back_lifo() {
    for fail_at in 0..4 {
        let root = tempfile::tempdir().unwrap();
        let projects: Vec<_> = (0..3)
            .map(|i| project(&[("f.txt", &format!("p{i}\n")), ("g.txt", "g\n")]))
            .collect();
        let plain = project(&[("n.txt", "n\n")]);
        let mgr = PlanManager::open(root.path()).unwrap();
        // The `none` one is created first but commits last.
        let n = mgr
            .get_or_create_sandbox("plan", "none", plain.path(), Strategy::None)
            .unwrap();
        let mut ids = Vec::new();
        for (i, p) in projects.iter().enumerate() {
            let sb = mgr
                .get_or_create_sandbox("plan", &format!("r{i}"), p.path(), Strategy::CopyOnWrite)
                .unwrap();
            std::fs::write(
                sb.get_path(Path::new("f.txt")).unwrap(),
                format!("changed {i}\n"),
            )
            .unwrap();
            std::fs::write(sb.get_path(Path::new(&format!("new{i}"))).unwrap(), "x").unwrap();
            ids.push(sb.sandbox_id().to_string());
        }
        ids.push(n.sandbox_id().to_string());
        let before: Vec<_> = projects.iter().map(|p| mode_view(p.path())).collect();
        let opts = CommitAllOptions {
            fail_at: Some(fail_at),
            ..Default::default()
        };
        match as_failure(mgr.commit_all_with("plan", &opts)) {
            Err(SandboxError::AtomicCommit {
                rolled_back_ids,
                failed_rollback_ids,
                failed_sandbox_id,
                ..
            }) => {
                let want: Vec<String> = ids[..fail_at].iter().rev().cloned().collect();
                assert_eq!(rolled_back_ids, want, "fail at {fail_at}: LIFO order");
                assert!(failed_rollback_ids.is_empty());
                assert_eq!(failed_sandbox_id.as_deref(), Some(ids[fail_at].as_str()));
            }
            other => panic!("fail at {fail_at}: expected AtomicCommit, got {other:?}"),
        }
        assert_unchanged(&projects, &before, fail_at);
        assert!(!root.path().join("plans/plan-plan/commit.journal").exists());
        // Nothing lost: the same plan commits whole afterwards.
        let results = mgr.commit_all("plan").unwrap();
        assert_eq!(results.len(), 4);
        for (i, p) in projects.iter().enumerate() {
            assert_eq!(
                std::fs::read_to_string(p.path().join("f.txt")).unwrap(),
                format!("changed {i}\n")
            );
        }
    }
}

/// One `copy_on_write` sandbox of plan "plan" per project, `f.txt` changed in each; their
/// ids, in creation (commit) order.
fn edited_sandboxes(mgr: &PlanManager, projects: &[tempfile::TempDir]) -> Vec<String> {
    projects
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let sb = mgr
                .get_or_create_sandbox("plan", &format!("r{i}"), p.path(), Strategy::CopyOnWrite)
                .unwrap();
            std::fs::write(sb.get_path(Path::new("f.txt")).unwrap(), "changed\n").unwrap();
            sb.sandbox_id().to_string()
        })
        .collect()
}

/// A fault `arm`ed on one sandbox of three, at each position in turn, striking after its
/// change landed: `commit_all` fails naming it (the reason holding `reason_has`), undoes it
/// and every one before it newest first (the one after it may have moved meanwhile, as the
/// turn passes once a change is placed: then it is undone too), every original ends
/// byte-identical, and the plan, active again, commits on a second try.
fn landed_fault_at_each_position_is_rolled_back(arm: fn(&str), reason_has: &str) {
    for at_pos in 0..3 {
        let root = tempfile::tempdir().unwrap();
        let projects: Vec<_> = (0..3)
            .map(|i| project(&[("f.txt", &format!("p{i}\n"))]))
            .collect();
        let mgr = PlanManager::open(root.path()).unwrap();
        let ids = edited_sandboxes(&mgr, &projects);
        let before: Vec<_> = projects.iter().map(|p| mode_view(p.path())).collect();
        arm(&ids[at_pos]);
        match as_failure(mgr.commit_all("plan")) {
            Err(SandboxError::AtomicCommit {
                rolled_back_ids,
                failed_rollback_ids,
                failed_sandbox_id,
                reason,
                ..
            }) => {
                assert!(reason.contains(reason_has), "{reason}");
                let pos = |id: &String| ids.iter().position(|i| i == id).unwrap();
                let at: Vec<usize> = rolled_back_ids.iter().map(pos).collect();
                assert!(at.windows(2).all(|w| w[0] > w[1]), "LIFO: {at:?}");
                assert!((0..=at_pos).all(|k| at.contains(&k)), "at {at_pos}: {at:?}");
                assert!(failed_rollback_ids.is_empty(), "{failed_rollback_ids:?}");
                assert_eq!(failed_sandbox_id.as_deref(), Some(ids[at_pos].as_str()));
            }
            other => panic!("at {at_pos}: expected AtomicCommit, got {other:?}"),
        }
        assert_unchanged(&projects, &before, at_pos);
        mgr.commit_all("plan").unwrap();
        for p in &projects {
            assert_eq!(
                std::fs::read_to_string(p.path().join("f.txt")).unwrap(),
                "changed\n"
            );
        }
    }
}

/// The same fault on a lone commit, which `fails` (an error, or a panic that reaches the
/// caller): the sandbox is `Committed` (its change is in the original) and its rollback
/// undoes it.
fn landed_fault_on_a_lone_commit_leaves_it_committed(arm: fn(&str), fails: fn(&dyn Sandbox)) {
    let root = tempfile::tempdir().unwrap();
    let p = project(&[("f.txt", "old\n")]);
    let mgr = PlanManager::open(root.path()).unwrap();
    let sb = mgr
        .get_or_create_sandbox("plan", "r", p.path(), Strategy::CopyOnWrite)
        .unwrap();
    std::fs::write(sb.get_path(Path::new("f.txt")).unwrap(), "new\n").unwrap();
    arm(sb.sandbox_id());
    fails(&*sb);
    assert_eq!(sb.status(), Status::Committed);
    let read = || std::fs::read_to_string(p.path().join("f.txt")).unwrap();
    assert_eq!(read(), "new\n");
    sb.rollback().unwrap();
    assert_eq!(read(), "old\n");
}

/// A panic inside a commit after its change landed, before its status said so: the
/// sandbox is settled (`Committed`, its change is in the original) and then undone with the
/// others. Before, it stayed `Active`, `commit_all`'s rollback passed it by, and the user's
/// file kept its change under a plan reported rolled back.
#[test]
fn a_commit_that_panics_after_landing_is_settled_and_rolled_back() {
    let arm = patchbox::plan::record::panic_after_next_landing;
    landed_fault_at_each_position_is_rolled_back(arm, "panicked");
    landed_fault_on_a_lone_commit_leaves_it_committed(arm, |sb| {
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sb.commit(None)));
        assert!(caught.is_err(), "the injected panic reaches the caller");
    });
}

/// A commit whose change reached the original but whose `Committed` state could not be
/// written (a full disk, an I/O error) is a failure that must still be undone: before,
/// the sandbox stayed `Active` in memory, `commit_all`'s rollback passed it by, and the
/// user's files kept its change under a plan reported rolled back.
#[test]
fn a_commit_whose_state_cannot_be_written_is_still_rolled_back() {
    let arm = patchbox::plan::record::fail_next_committed_state_write;
    landed_fault_at_each_position_is_rolled_back(arm, "injected failure");
    landed_fault_on_a_lone_commit_leaves_it_committed(arm, |sb| {
        let e = sb.commit(None).unwrap_err();
        assert!(e.to_string().contains("injected failure"), "{e}");
    });
}

/// The documented algorithm's step 5: a sandbox-level failure (here a commit refused at
/// the second of three sandboxes) is rolled back and returned as the one failed
/// `CommitResult` — not raised — naming the sandbox, the reason, and the ids undone.
#[test]
fn a_sandbox_level_failure_is_the_one_failed_result() {
    let root = tempfile::tempdir().unwrap();
    let projects: Vec<_> = (0..3)
        .map(|i| project(&[("f.txt", &format!("p{i}\n"))]))
        .collect();
    let mgr = PlanManager::open(root.path()).unwrap();
    let ids = edited_sandboxes(&mgr, &projects);
    let opts = CommitAllOptions {
        fail_at: Some(1),
        ..Default::default()
    };
    let results = mgr.commit_all_with("plan", &opts).unwrap();
    assert_eq!(results.len(), 1);
    let r = &results[0];
    assert!(!r.success);
    assert_eq!(r.sandbox_id, ids[1]);
    assert!(
        r.error
            .as_deref()
            .unwrap_or("")
            .contains("injected failure"),
        "{r:?}"
    );
    assert_eq!(r.metadata["rolled_back_ids"], ids[0]);
    assert_eq!(r.metadata["plan_id"], "plan");
    for (i, p) in projects.iter().enumerate() {
        assert_eq!(
            std::fs::read_to_string(p.path().join("f.txt")).unwrap(),
            format!("p{i}\n")
        );
    }
}

#[test]
fn commit_all_checks_every_sandbox_before_writing() {
    let root = tempfile::tempdir().unwrap();
    let a = project(&[("f.txt", "a\n")]);
    let b = project(&[("f.txt", "b\n")]);
    let mgr = PlanManager::open(root.path()).unwrap();
    let sa = mgr
        .get_or_create_sandbox("p", "a", a.path(), Strategy::CopyOnWrite)
        .unwrap();
    let sbb = mgr
        .get_or_create_sandbox("p", "b", b.path(), Strategy::CopyOnWrite)
        .unwrap();
    std::fs::write(sa.get_path(Path::new("f.txt")).unwrap(), "A\n").unwrap();
    std::fs::write(sbb.get_path(Path::new("f.txt")).unwrap(), "B\n").unwrap();
    std::fs::write(b.path().join("f.txt"), "user\n").unwrap();
    match as_failure(mgr.commit_all("p")) {
        Err(SandboxError::AtomicCommit {
            rolled_back_ids,
            failed_sandbox_id,
            ..
        }) => {
            assert!(rolled_back_ids.is_empty(), "nothing was committed");
            assert_eq!(failed_sandbox_id.as_deref(), Some(sbb.sandbox_id()));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(a.path().join("f.txt")).unwrap(),
        "a\n"
    );
    assert_eq!(sa.status(), Status::Active);
}

#[test]
fn a_reopened_manager_finds_the_plans_and_drop_keeps_uncommitted_work() {
    let root = tempfile::tempdir().unwrap();
    let p = project(&[("f.txt", "f\n")]);
    let q = project(&[("g.txt", "g\n")]);
    let (id, path) = {
        let mgr = PlanManager::open(root.path()).unwrap();
        let sb = mgr
            .get_or_create_sandbox("p", "r", p.path(), Strategy::CopyOnWrite)
            .unwrap();
        std::fs::write(sb.get_path(Path::new("f.txt")).unwrap(), "work\n").unwrap();
        // A sandbox with no changes is cleaned on drop.
        let idle = mgr
            .get_or_create_sandbox("p", "idle", q.path(), Strategy::CopyOnWrite)
            .unwrap();
        let idle_path = idle.context().unwrap().sandbox_path;
        drop(mgr);
        assert!(!idle_path.exists());
        (
            sb.sandbox_id().to_string(),
            sb.context().unwrap().sandbox_path,
        )
    };
    assert!(path.exists(), "uncommitted work kept");
    let mgr = PlanManager::open(root.path()).unwrap();
    assert_eq!(mgr.list_plans(), ["p"]);
    let found = mgr.get_sandbox("p", "r").unwrap();
    assert_eq!(found.sandbox_id(), id);
    assert_eq!(found.status(), Status::Active);
    assert_eq!(found.diff().unwrap().entries.len(), 1);
    // get_or_create returns the same one.
    let same = mgr
        .get_or_create_sandbox("p", "r", p.path(), Strategy::CopyOnWrite)
        .unwrap();
    assert_eq!(same.sandbox_id(), id);
    mgr.commit_all("p").unwrap();
    assert_eq!(
        std::fs::read_to_string(p.path().join("f.txt")).unwrap(),
        "work\n"
    );
    assert_eq!(mgr.cleanup_abandoned().unwrap(), 1);
    assert!(mgr.list_sandboxes("p").is_empty());
}

#[test]
fn eight_threads_on_one_manager() {
    let root = tempfile::tempdir().unwrap();
    let projects: Vec<_> = (0..4)
        .map(|i| project(&[("f.txt", &format!("{i}\n"))]))
        .collect();
    let mgr = Arc::new(PlanManager::open(root.path()).unwrap());
    let paths: Vec<_> = projects.iter().map(|p| p.path().to_path_buf()).collect();
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let mgr = mgr.clone();
            let paths = paths.clone();
            std::thread::spawn(move || {
                // Every thread asks for the shared sandbox, and for one of its own plan's.
                let shared = mgr
                    .get_or_create_sandbox("shared", "r0", &paths[0], Strategy::CopyOnWrite)
                    .unwrap();
                let own_plan = format!("t{t}");
                let own = mgr
                    .get_or_create_sandbox(&own_plan, "r", &paths[1 + t % 3], Strategy::CopyOnWrite)
                    .unwrap();
                std::fs::write(own.get_path(Path::new(&format!("t{t}.txt"))).unwrap(), "x")
                    .unwrap();
                let r = mgr.commit_all(&own_plan).unwrap();
                assert_eq!(r.len(), 1);
                shared.sandbox_id().to_string()
            })
        })
        .collect();
    let ids: BTreeSet<String> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(ids.len(), 1, "one shared sandbox");
    for t in 0..8 {
        assert!(paths[1 + t % 3].join(format!("t{t}.txt")).exists());
    }
}

#[test]
fn resources_under_one_boundary_share_one_sandbox() {
    let root = tempfile::tempdir().unwrap();
    let p = project(&[("docs/a.md", "a\n"), ("src/b.rs", "b\n")]);
    let mut reg = ResourceRegistry::new();
    reg.add(
        Resource::new("top", ResourceKind::Directory, p.path())
            .with_strategy(Strategy::CopyOnWrite),
    )
    .unwrap();
    reg.add(
        Resource::new("docs", ResourceKind::Directory, p.path().join("docs")).with_parent("top"),
    )
    .unwrap();
    reg.add(Resource::new("src", ResourceKind::Directory, p.path().join("src")).with_parent("top"))
        .unwrap();
    let mgr = PlanManager::open(root.path()).unwrap();
    let docs = mgr
        .get_or_create_sandbox_for_resource("p", reg.get("docs").unwrap(), &reg)
        .unwrap();
    let src = mgr
        .get_or_create_sandbox_for_resource("p", reg.get("src").unwrap(), &reg)
        .unwrap();
    assert!(Arc::ptr_eq(&docs.sandbox, &src.sandbox));
    assert_eq!(
        mgr.resolve_sandbox_key(reg.get("src").unwrap(), &reg)
            .unwrap(),
        "top"
    );
    let a = docs.get_path("a.md").unwrap();
    assert!(a.ends_with("docs/a.md"));
    std::fs::write(&a, "A\n").unwrap();
    std::fs::write(src.get_path("b.rs").unwrap(), "B\n").unwrap();
    assert_eq!(docs.sandbox.diff().unwrap().entries.len(), 2);
    mgr.clear_boundary_cache();
    assert!(reg.resolve_boundary("nope").is_err());
    mgr.commit_all("p").unwrap();
    assert_eq!(
        std::fs::read_to_string(p.path().join("docs/a.md")).unwrap(),
        "A\n"
    );
}

#[test]
fn bad_input_is_refused_clearly() {
    let root = tempfile::tempdir().unwrap();
    let p = project(&[("f", "f\n")]);
    let mgr = PlanManager::open(root.path()).unwrap();
    for bad in ["", "../x", "a/b", ".hidden"] {
        let e = mgr
            .get_or_create_sandbox(bad, "r", p.path(), Strategy::CopyOnWrite)
            .err()
            .unwrap();
        assert!(e.to_string().contains("invalid plan id"), "{e}");
    }
    let e = mgr
        .get_or_create_sandbox("p", "r", p.path().join("missing"), Strategy::CopyOnWrite)
        .err()
        .unwrap();
    assert_eq!(e.kind(), "creation");
    assert!(Strategy::from_name("zfs")
        .unwrap_err()
        .to_string()
        .contains("unknown sandbox strategy"));
    assert!(mgr.list_plans().is_empty());
}

/// `commit_all` leaves each apply's last sync to one sync per filesystem at its end, holding
/// the project locks until then: sandboxes of one original, and of an original nested in
/// another, must still commit (a second apply to a locked project finishes the batch first,
/// instead of waiting for its own lock), give what `git apply` of their patches in order
/// gives, and leave no staging directory behind; `rollback_all` then restores the original.
#[test]
fn commit_all_with_shared_and_nested_originals_matches_git_apply() {
    let root = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let proj = project(&[
        ("a.txt", "a\n"),
        ("sub/b.txt", "b\n"),
        ("sub/c.txt", "c\n"),
        ("d.txt", "d\n"),
    ]);
    let sub = proj.path().join("sub");
    let before = mode_view(proj.path());
    let mgr = PlanManager::open(root.path()).unwrap();
    let edits: [(&str, &Path, &str, &str); 4] = [
        ("r0", proj.path(), "a.txt", "a0\n"),
        ("r1", &sub, "b.txt", "b1\n"),
        ("r2", proj.path(), "d.txt", "d2\n"),
        ("r3", proj.path(), "new.txt", "n3\n"),
    ];
    let mut patches = Vec::new();
    for (res, orig, file, text) in edits {
        let sb = mgr
            .get_or_create_sandbox("p", res, orig, Strategy::CopyOnWrite)
            .unwrap();
        std::fs::write(sb.get_path(Path::new(file)).unwrap(), text).unwrap();
        patches.push((orig.to_path_buf(), sb.diff().unwrap().patch));
    }
    // The oracle: git apply of the same patches, in the same order, on a copy.
    let want = scratch.path().join("want");
    std::fs::create_dir(&want).unwrap();
    common::copy_tree(proj.path(), &want);
    let results = mgr.commit_all("p").unwrap();
    assert_eq!(results.len(), 4);
    assert!(results.iter().all(|r| r.success && r.commit_ref.is_some()));
    for (orig, patch) in &patches {
        let rel = orig.strip_prefix(proj.path()).unwrap();
        let pf = scratch.path().join(format!("{}.patch", ulid::Ulid::new()));
        std::fs::write(&pf, patch).unwrap();
        let out = std::process::Command::new("git")
            .args(["apply", "--whitespace=nowarn"])
            .arg(&pf)
            .current_dir(want.join(rel))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    assert_eq!(mode_view(proj.path()), mode_view(&want));
    for d in [proj.path(), sub.as_path()] {
        let staging: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().starts_with(".patchbox-txn-"))
            .collect();
        assert!(
            staging.is_empty(),
            "left behind in {}: {staging:?}",
            d.display()
        );
    }
    assert!(!root.path().join("plans/plan-p/commit.journal").exists());

    mgr.rollback_all("p").unwrap();
    assert_eq!(mode_view(proj.path()), before);
}

/// Symlinks a sandbox adds (or turns a file into) that point outside the resource: an
/// absolute target elsewhere, `..` climbing out, `..` climbing out through a symlink that
/// itself points inside, a file turned into a link to `/etc/passwd`. Every one is named.
fn make_links_out(tree: &Path, outside: &Path) -> BTreeSet<String> {
    use std::os::unix::fs::symlink;
    symlink(outside.join("x"), tree.join("abs-out")).unwrap();
    symlink("../../escape", tree.join("sub/up-out")).unwrap();
    std::fs::create_dir(tree.join("sub/chain")).unwrap();
    symlink("..", tree.join("sub/chain/hop")).unwrap();
    symlink("hop/../..", tree.join("sub/chain/via-hop")).unwrap();
    std::fs::remove_file(tree.join("a.txt")).unwrap();
    symlink("/etc/passwd", tree.join("a.txt")).unwrap();
    ["abs-out", "sub/up-out", "sub/chain/via-hop", "a.txt"]
        .map(String::from)
        .into()
}

/// Symlinks pointing inside the resource (relative, up and back in, absolute into the
/// original, dangling inside): always allowed.
fn make_links_in(tree: &Path, original: &Path) {
    use std::os::unix::fs::symlink;
    symlink("sub/b.txt", tree.join("in-rel")).unwrap();
    symlink("../c.txt", tree.join("sub/in-up")).unwrap();
    symlink(original.join("c.txt"), tree.join("in-abs")).unwrap();
    symlink("not/yet", tree.join("in-dangling")).unwrap();
}

/// Removes what [`make_links_out`] made, and makes `a.txt` a file again (with new content).
fn remove_links_out(tree: &Path) {
    for l in ["abs-out", "sub/up-out", "sub/chain/via-hop", "a.txt"] {
        std::fs::remove_file(tree.join(l)).unwrap();
    }
    std::fs::write(tree.join("a.txt"), "A\n").unwrap();
}

fn assert_links_out_refused(e: &SandboxError, id: &str, links: &BTreeSet<String>) {
    match e {
        SandboxError::Commit {
            sandbox_id,
            reason,
            files,
            ..
        } => {
            assert_eq!(sandbox_id, id);
            assert!(
                reason.contains("points outside the resource"),
                "reason: {reason}"
            );
            assert_eq!(&files.iter().cloned().collect::<BTreeSet<_>>(), links);
        }
        other => panic!("not a commit refusal: {other:?}"),
    }
}

/// A sandbox that adds symlinks pointing outside the resource is refused at check and at
/// commit, before anything is written, naming the links; `commit_all` refuses the whole
/// plan. The same sandbox with only symlinks pointing inside commits them. For every
/// strategy that commits through the apply (`copy_on_write`, `overlay` in whatever mode
/// this machine has); `git_worktree` is in `plan_git_worktree.rs`.
#[test]
fn symlinks_pointing_outside_the_resource_are_refused_before_anything_is_written() {
    for strategy in [Strategy::CopyOnWrite, Strategy::Overlay] {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let p = project(&[("a.txt", "a\n"), ("c.txt", "c\n"), ("sub/b.txt", "b\n")]);
        let q = project(&[("f.txt", "f\n")]);
        let mgr = PlanManager::open(root.path()).unwrap();
        let sb = mgr
            .get_or_create_sandbox("p", "p", p.path(), strategy.clone())
            .unwrap();
        let other = mgr
            .get_or_create_sandbox("p", "q", q.path(), strategy.clone())
            .unwrap();
        std::fs::write(other.get_path(Path::new("f.txt")).unwrap(), "F\n").unwrap();
        let tree = sb.get_path(Path::new("")).unwrap();
        make_links_in(&tree, p.path());
        let links = make_links_out(&tree, outside.path());
        let before = (mode_view(p.path()), mode_view(q.path()));

        let e = sb.check_commit().unwrap_err();
        assert_links_out_refused(&e, sb.sandbox_id(), &links);
        match as_failure(mgr.commit_all("p")) {
            Err(SandboxError::AtomicCommit {
                reason,
                rolled_back_ids,
                failed_sandbox_id,
                ..
            }) => {
                assert!(reason.contains("points outside the resource"), "{reason}");
                assert!(rolled_back_ids.is_empty(), "nothing was committed");
                assert_eq!(failed_sandbox_id.as_deref(), Some(sb.sandbox_id()));
            }
            other => panic!("{strategy}: {other:?}"),
        }
        let e = sb.commit(None).unwrap_err();
        assert_links_out_refused(&e, sb.sandbox_id(), &links);
        assert_eq!(
            (mode_view(p.path()), mode_view(q.path())),
            before,
            "{strategy}"
        );
        assert_eq!(sb.status(), Status::Active, "{strategy}");
        assert_eq!(other.status(), Status::Active, "{strategy}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);

        remove_links_out(&tree);
        mgr.commit_all("p").unwrap();
        let link = |rel: &str| std::fs::read_link(p.path().join(rel)).unwrap();
        assert_eq!(link("in-rel"), Path::new("sub/b.txt"), "{strategy}");
        assert_eq!(link("sub/in-up"), Path::new("../c.txt"), "{strategy}");
        assert_eq!(link("in-abs"), p.path().join("c.txt"), "{strategy}");
        assert_eq!(link("in-dangling"), Path::new("not/yet"), "{strategy}");
        assert_eq!(link("sub/chain/hop"), Path::new(".."), "{strategy}");
        assert_eq!(
            std::fs::read_to_string(p.path().join("a.txt")).unwrap(),
            "A\n"
        );
        assert_eq!(
            std::fs::read_to_string(q.path().join("f.txt")).unwrap(),
            "F\n"
        );
    }
}
