//! Crash recovery of apply and undo, and their side effects: a simulated kill at every
//! write step ends exactly before or exactly after once recovered (and the undo record works
//! from the moment the first original moves); a caller's undo directory is never deleted;
//! undo restores directory mtimes; the undo store lists, drops and prunes; the CLI's errors
//! name what failed.

// Without the feature `fault-injection` the tests that inject faults are left out, and
// with them some helpers and imports.
#![cfg_attr(not(feature = "fault-injection"), allow(unused))]

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use common::*;
use patchbox::apply::store::{PrunePolicy, RecordState, UndoStore};
use patchbox::apply::{
    apply_patch, recover_project, undo_apply, ApplyOptions, Outcome, RecoveryAction,
};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_patchbox"))
}

fn base(r: &Path) {
    write(r, "a.txt", b"alpha\nbeta\ngamma\n");
    write(r, "b.txt", b"to be deleted\n");
    write(r, "dir/c.txt", b"renamed\nwith some\nlines\n");
    write(r, "dir/sub/d.txt", b"stays\n");
    write(r, "exec.sh", b"#!/bin/sh\necho hi\n");
    chmod(r, "exec.sh", 0o755);
    write(r, "gone/only.txt", b"its directory goes too\n");
    std::os::unix::fs::symlink("a.txt", r.join("link")).unwrap();
    for i in 0..12 {
        write(
            r,
            &format!("many/f{i}.txt"),
            format!("file {i}\n").as_bytes(),
        );
    }
}

fn change(r: &Path) {
    write(r, "a.txt", b"alpha\nBETA\ngamma\n");
    fs::remove_file(r.join("b.txt")).unwrap();
    fs::create_dir_all(r.join("moved")).unwrap();
    fs::rename(r.join("dir/c.txt"), r.join("moved/c2.txt")).unwrap();
    write(r, "exec.sh", b"#!/bin/sh\necho bye\n");
    chmod(r, "exec.sh", 0o644);
    fs::remove_dir_all(r.join("gone")).unwrap();
    fs::remove_file(r.join("link")).unwrap();
    std::os::unix::fs::symlink("dir/sub/d.txt", r.join("link")).unwrap();
    write(r, "new/deep/e.txt", b"created\n");
    write(r, "bin.dat", &[0, 1, 2, 255, 0]);
    for i in 0..12 {
        write(
            r,
            &format!("many/f{i}.txt"),
            format!("file {i} edited\n").as_bytes(),
        );
    }
}

/// The patch from `base` to `change`, by git.
fn patch() -> Vec<u8> {
    let repo = tempfile::tempdir().unwrap();
    base(repo.path());
    git_init(repo.path());
    git_commit_all(repo.path());
    change(repo.path());
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["diff", "--cached", "--binary", "-M", "HEAD"]).stdout
}

fn project() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    base(d.path());
    d
}

fn no_debris(root: &Path) {
    for e in fs::read_dir(root).unwrap() {
        let n = e.unwrap().file_name().into_string().unwrap();
        assert!(!n.starts_with(".patchbox-"), "debris left: {n}");
    }
}

/// Sets every directory's mtime (the root's too) to a fixed old time, so a changed one
/// shows.
fn age_dirs(root: &Path) {
    for e in walkdir::WalkDir::new(root) {
        let e = e.unwrap();
        if e.file_type().is_dir() {
            let st = Command::new("touch")
                .args(["-h", "-d", "@1000000000"])
                .arg(e.path())
                .status()
                .unwrap();
            assert!(st.success());
        }
    }
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_crash_at_every_write_step_recovers_to_before_or_after() {
    let patch = patch();
    let reference = project();
    let records = tempfile::tempdir().unwrap();
    apply_patch(reference.path(), &patch, &ApplyOptions::default()).unwrap();
    let after = mode_view(reference.path());
    let (mut befores, mut afters) = (0, 0);
    for k in 1.. {
        let p = project();
        age_dirs(p.path());
        let before = mode_view(p.path());
        let before_exact = exact_fingerprint(p.path());
        let undo = records.path().join(format!("u{k}"));
        let o = ApplyOptions {
            crash_after_steps: Some(k),
            undo_dir: Some(undo.clone()),
            ..ApplyOptions::default()
        };
        match apply_patch(p.path(), &patch, &o) {
            Ok(r) => {
                assert_eq!(r.outcome, Outcome::Applied);
                assert!(k > 20, "only {k} steps?");
                break;
            }
            Err(e) => assert!(e.to_string().contains("injected crash"), "step {k}: {e}"),
        }
        // What a kill leaves: a staging directory, maybe a half-changed project.
        assert!(
            fs::read_dir(p.path()).unwrap().any(|e| e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".patchbox-txn-")),
            "step {k}: no staging directory"
        );
        let r = recover_project(p.path()).unwrap();
        assert_eq!(r.recovered.len(), 1, "step {k}: {r}");
        no_debris(p.path());
        let now = mode_view(p.path());
        if now == before {
            befores += 1;
            assert_eq!(
                r.recovered[0].action,
                RecoveryAction::RolledBack,
                "step {k}"
            );
            assert_eq!(
                exact_fingerprint(p.path()),
                before_exact,
                "step {k}: mtimes"
            );
            assert!(
                !undo.exists(),
                "step {k}: the record of a rolled-back apply stays"
            );
        } else {
            assert_eq!(now, after, "step {k}: neither before nor after");
            afters += 1;
            // The record works: undo gives back exactly the tree before, mtimes included.
            let u = undo_apply(p.path(), &undo, false).unwrap();
            assert!(!u.already_undone, "step {k}");
            assert_eq!(exact_fingerprint(p.path()), before_exact, "step {k}: undo");
            no_debris(p.path());
        }
        // Recovering again finds nothing.
        assert!(recover_project(p.path()).unwrap().is_empty());
    }
    eprintln!("crash at every step: {befores} rolled back, {afters} completed");
    assert!(befores > 0 && afters > 0);
}

/// The other way out of a crash: a change whose roll-forward cannot complete (something
/// changed since) is rolled back from what is on disk, whatever step it stopped at, the
/// swapped pairs of files replaced in place included. Simulated by turning each crashed
/// change's `intent` into `abort`, as recovery does when roll-forward fails.
#[cfg(feature = "fault-injection")]
#[test]
fn a_crash_rolled_back_from_disk_at_any_step_after_the_intent_is_exactly_before() {
    let patch = patch();
    let mut aborted = 0;
    for k in 1.. {
        let p = project();
        age_dirs(p.path());
        let before = mode_view(p.path());
        let before_exact = exact_fingerprint(p.path());
        let o = ApplyOptions {
            crash_after_steps: Some(k),
            ..ApplyOptions::default()
        };
        if apply_patch(p.path(), &patch, &o).is_ok() {
            break;
        }
        let stage = fs::read_dir(p.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|e| {
                e.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(".patchbox-txn-")
            })
            .expect("a staging directory");
        if !stage.join("intent").exists() {
            continue;
        }
        fs::rename(stage.join("intent"), stage.join("abort")).unwrap();
        let r = recover_project(p.path()).unwrap();
        assert_eq!(
            r.recovered[0].action,
            RecoveryAction::RolledBack,
            "step {k}"
        );
        no_debris(p.path());
        assert_eq!(mode_view(p.path()), before, "step {k}");
        assert_eq!(
            exact_fingerprint(p.path()),
            before_exact,
            "step {k}: mtimes"
        );
        aborted += 1;
    }
    assert!(aborted > 12, "only {aborted} steps after the intent");
}

#[cfg(feature = "fault-injection")]
#[test]
fn the_next_apply_or_undo_recovers_first() {
    let patch = patch();
    let records = tempfile::tempdir().unwrap();
    // Crashed late (after the intent): the next apply completes it and finds it applied.
    let p = project();
    let undo = records.path().join("late");
    let o = ApplyOptions {
        crash_after_steps: Some(40),
        undo_dir: Some(undo.clone()),
        ..ApplyOptions::default()
    };
    assert!(apply_patch(p.path(), &patch, &o).is_err());
    let again = apply_patch(p.path(), &patch, &ApplyOptions::default()).unwrap();
    assert_eq!(again.outcome, Outcome::AlreadyApplied, "{again}");
    assert_eq!(again.recovery.recovered.len(), 1);
    assert!(again.to_string().contains("completed"), "{again}");
    no_debris(p.path());
    // …and the interrupted apply's record undoes it.
    let before = mode_view(&{
        let b = project();
        b.keep()
    });
    undo_apply(p.path(), &undo, false).unwrap();
    assert_eq!(mode_view(p.path()), before);

    // Crashed early (while staging): undo_apply of its record recovers, then refuses: that
    // apply never happened.
    let p = project();
    let before = mode_view(p.path());
    let undo = records.path().join("early");
    let o = ApplyOptions {
        crash_after_steps: Some(3),
        undo_dir: Some(undo.clone()),
        ..ApplyOptions::default()
    };
    assert!(apply_patch(p.path(), &patch, &o).is_err());
    assert!(undo_apply(p.path(), &undo, false).is_err());
    assert_eq!(mode_view(p.path()), before);
    no_debris(p.path());

    // Check mode recovers nothing but says so.
    let p = project();
    let o = ApplyOptions {
        crash_after_steps: Some(30),
        ..ApplyOptions::default()
    };
    assert!(apply_patch(p.path(), &patch, &o).is_err());
    let checked = apply_patch(
        p.path(),
        &patch,
        &ApplyOptions {
            check: true,
            ..ApplyOptions::default()
        },
    )
    .unwrap();
    assert!(
        checked.warnings.iter().any(|w| w.contains("interrupted")),
        "{checked}"
    );
    recover_project(p.path()).unwrap();
    no_debris(p.path());
}

#[test]
fn undo_restores_directory_mtimes() {
    let patch = patch();
    let p = project();
    age_dirs(p.path());
    let before = exact_fingerprint(p.path());
    let records = tempfile::tempdir().unwrap();
    let undo = records.path().join("u");
    let o = ApplyOptions {
        undo_dir: Some(undo.clone()),
        ..ApplyOptions::default()
    };
    apply_patch(p.path(), &patch, &o).unwrap();
    assert_ne!(exact_fingerprint(p.path()), before);
    undo_apply(p.path(), &undo, false).unwrap();
    assert_eq!(exact_fingerprint(p.path()), before);
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_callers_undo_directory_is_never_deleted() {
    let patch = patch();
    let p = project();
    let before = mode_view(p.path());
    let records = tempfile::tempdir().unwrap();
    // An empty directory of the caller's: a failed apply empties what it wrote, keeps it.
    let mine = records.path().join("mine");
    fs::create_dir(&mine).unwrap();
    fs::set_permissions(&mine, fs::Permissions::from_mode(0o750)).unwrap();
    for k in [2, 5, 30] {
        let o = ApplyOptions {
            undo_dir: Some(mine.clone()),
            fail_after_steps: Some(k),
            ..ApplyOptions::default()
        };
        assert!(apply_patch(p.path(), &patch, &o).is_err());
        assert!(mine.is_dir(), "step {k}");
        assert_eq!(fs::read_dir(&mine).unwrap().count(), 0, "step {k}");
        assert_eq!(mode_view(p.path()), before);
    }
    // A directory that is not empty is refused, and left alone.
    write(&mine, "precious.txt", b"mine\n");
    let o = ApplyOptions {
        undo_dir: Some(mine.clone()),
        ..ApplyOptions::default()
    };
    let e = apply_patch(p.path(), &patch, &o).unwrap_err();
    assert!(e.to_string().contains("not empty"), "{e}");
    assert_eq!(fs::read(mine.join("precious.txt")).unwrap(), b"mine\n");
    assert_eq!(mode_view(p.path()), before);
}

#[test]
fn missing_preimages_are_an_error() {
    let p = project();
    let o = ApplyOptions {
        preimages: Some("/nonexistent/pre".into()),
        ..ApplyOptions::default()
    };
    let e = apply_patch(p.path(), &patch(), &o).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("/nonexistent/pre") && msg.contains("pre-image"),
        "{msg}"
    );
}

#[test]
fn the_store_lists_drops_undoes_and_prunes() {
    let root = tempfile::tempdir().unwrap();
    let p = tempfile::tempdir().unwrap();
    write(p.path(), "n.txt", b"0\n");
    let store = UndoStore::new(root.path()).with_policy(PrunePolicy {
        keep_per_project: 3,
        ..PrunePolicy::default()
    });
    for i in 0..5 {
        let patch = format!("--- a/n.txt\n+++ b/n.txt\n@@ -1 +1 @@\n-{i}\n+{}\n", i + 1);
        let r = store
            .apply(p.path(), patch.as_bytes(), &ApplyOptions::default())
            .unwrap();
        assert!(r.wrote(), "{r}");
    }
    // Pruned by count: the newest 3.
    let list = store.list(Some(p.path())).unwrap();
    assert_eq!(list.len(), 3);
    assert!(list
        .iter()
        .all(|r| r.state == RecordState::Applied && r.paths == 1));
    // An interrupted undo (the record used, not dropped) is what the next undo_last
    // finishes: nothing more is undone.
    undo_apply(p.path(), &list[2].dir, false).unwrap();
    assert_eq!(fs::read(p.path().join("n.txt")).unwrap(), b"4\n");
    let r = store.undo_last(p.path(), false).unwrap();
    assert!(r.report.already_undone);
    assert_eq!(r.record.id, list[2].id);
    assert_eq!(fs::read(p.path().join("n.txt")).unwrap(), b"4\n");
    let r = store.undo_last(p.path(), false).unwrap();
    assert_eq!(r.record.id, list[1].id);
    assert_eq!(fs::read(p.path().join("n.txt")).unwrap(), b"3\n");
    // Drop: by id; a bad id is refused without touching anything.
    assert!(store.drop_record("../../etc").is_err());
    store.drop_record(&list[0].id).unwrap();
    assert!(store.list(Some(p.path())).unwrap().is_empty());
    assert!(store.undo_last(p.path(), false).is_err());
    // Pruned by age: a record older than 30 days goes.
    store
        .apply(
            p.path(),
            b"--- a/n.txt\n+++ b/n.txt\n@@ -1 +1 @@\n-3\n+9\n",
            &ApplyOptions::default(),
        )
        .unwrap();
    let fresh = store.list(None).unwrap().remove(0);
    let old_time = std::time::SystemTime::now() - std::time::Duration::from_secs(31 * 24 * 3600);
    let old_id = ulid::Ulid::from_datetime(old_time).to_string();
    fs::rename(&fresh.dir, store.dir().join(&old_id)).unwrap();
    assert_eq!(store.prune().unwrap(), [old_id]);
    assert!(store.list(None).unwrap().is_empty());
}

#[test]
fn cli_errors_name_what_failed() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let p = project();
    let pf = tmp.path().join("p.patch");
    fs::write(&pf, patch()).unwrap();

    // A project that cannot be resolved.
    let out = bin()
        .args(["apply", "--project", "/nonexistent/project", "--root"])
        .arg(&root)
        .arg(&pf)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "an error, not a refusal: {err}");
    assert!(
        err.contains("resolve project /nonexistent/project") && !err.contains("not a directory"),
        "{err}"
    );
    // Pre-images that do not exist.
    let out = bin()
        .arg("apply")
        .arg("--project")
        .arg(p.path())
        .arg("--root")
        .arg(&root)
        .args(["--preimages", "/nonexistent"])
        .arg(&pf)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "an error, not a refusal: {err}");
    assert!(err.contains("/nonexistent"), "{err}");
    // `run` without a command: one line.
    let out = bin()
        .arg("run")
        .arg("--project")
        .arg(p.path())
        .arg("--root")
        .arg(&root)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no command given"), "{err}");
}

#[test]
fn cli_lists_drops_and_recovers() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let p = project();
    let pf = tmp.path().join("p.patch");
    fs::write(&pf, patch()).unwrap();
    let run = |args: &[&str]| {
        let out = bin()
            .args(args)
            .arg("--project")
            .arg(p.path())
            .arg("--root")
            .arg(&root)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let out = bin()
        .arg("apply")
        .arg("--project")
        .arg(p.path())
        .arg("--root")
        .arg(&root)
        .arg(&pf)
        .output()
        .unwrap();
    assert!(out.status.success());
    let list = run(&["apply", "--list-undo"]);
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(list.contains("applied"), "{list}");
    let id = list.split('\t').next().unwrap().to_string();
    run(&["apply", "--drop-undo", &id]);
    assert_eq!(run(&["apply", "--list-undo"]), "");
    assert_eq!(run(&["recover"]).trim(), "nothing to recover");
    let help = bin().args(["apply", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--list-undo") && help.contains("30 days"),
        "{help}"
    );
}
