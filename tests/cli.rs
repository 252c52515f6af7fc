//! The `patchbox` command line, end to end: run, pending, sessions, errors, and a kill -9.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_patchbox"))
}

fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let root = tmp.path().join("root");
    write(&project, "a.txt", b"one\n");
    write(&project, "src/b.txt", b"two\n");
    (tmp, project, root)
}

fn run(project: &Path, root: &Path, extra: &[&str], cmd: &str) -> Output {
    bin()
        .arg("run")
        .arg("--project")
        .arg(project)
        .arg("--root")
        .arg(root)
        .args(extra)
        .args(["--", "sh", "-c", cmd])
        .output()
        .unwrap()
}

fn only_empty_dirs(root: &Path) -> bool {
    walkdir::WalkDir::new(root)
        .into_iter()
        .all(|e| e.unwrap().file_type().is_dir())
}

/// `run` leaves deleting the sandbox to a detached reaper: waits (up to 20 s) for it.
fn reaped(root: &Path) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if only_empty_dirs(root) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn run_prints_the_patch_and_leaves_nothing_behind() {
    let (tmp, project, root) = setup();
    let before = fingerprint(&project, true);
    let out = run(
        &project,
        &root,
        &[],
        "echo changed > a.txt; echo new > c.txt; echo to-stdout; test \"$PATCHBOX_SANDBOX\" = \"$PWD\"; exit 3",
    );
    assert_eq!(out.status.code(), Some(3), "exit status is the command's");
    let patch = String::from_utf8(out.stdout).unwrap();
    assert!(patch.starts_with("diff --git a/a.txt b/a.txt"), "{patch}");
    assert!(patch.contains("+changed") && patch.contains("+++ b/c.txt"));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("to-stdout"),
        "CMD's stdout goes to stderr"
    );
    assert_eq!(fingerprint(&project, true), before);
    assert!(reaped(&root));
    let applied = git_apply_copy(&project, patch.as_bytes(), tmp.path());
    assert_eq!(fs::read(applied.join("c.txt")).unwrap(), b"new\n");
}

#[test]
fn run_with_out_and_pending_then_pending_commands() {
    let (tmp, project, root) = setup();
    let out_file = tmp.path().join("out.patch");
    let out = run(
        &project,
        &root,
        &["--out", out_file.to_str().unwrap()],
        "echo x >> a.txt",
    );
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    assert!(fs::read_to_string(&out_file).unwrap().contains("+x"));

    let out = run(
        &project,
        &root,
        &["--pending", "--id", "job-1"],
        "echo y >> a.txt",
    );
    assert!(out.status.success());
    let id = String::from_utf8(out.stderr)
        .unwrap()
        .trim()
        .lines()
        .last()
        .unwrap()
        .to_string();
    assert!(id.ends_with("/job-1"), "{id}");
    let list = bin()
        .args(["pending", "list", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let list = String::from_utf8(list.stdout).unwrap();
    assert_eq!(list.lines().count(), 1);
    assert!(list.starts_with(&id), "id first: {list}");
    let show = bin()
        .args(["pending", "show", "--root"])
        .arg(&root)
        .arg(&id)
        .output()
        .unwrap();
    assert!(String::from_utf8(show.stdout).unwrap().contains("+y"));
    // A unique delegation id works too.
    let show = bin()
        .args(["pending", "show", "--root"])
        .arg(&root)
        .arg("job-1")
        .output()
        .unwrap();
    assert!(show.status.success());
    let drop = bin()
        .args(["pending", "drop", "--root"])
        .arg(&root)
        .arg(&id)
        .output()
        .unwrap();
    assert!(drop.status.success());
    let list = bin()
        .args(["pending", "list", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(list.stdout.is_empty());
    assert!(reaped(&root));
}

#[test]
fn bad_input_is_one_clear_line() {
    let (tmp, project, root) = setup();
    let cases: Vec<Vec<String>> = vec![
        vec![
            "run".into(),
            "--project".into(),
            tmp.path().join("missing").display().to_string(),
            "--root".into(),
            root.display().to_string(),
            "--".into(),
            "true".into(),
        ],
        vec![
            "run".into(),
            "--project".into(),
            project.display().to_string(),
            "--root".into(),
            root.display().to_string(),
            "--id".into(),
            "../x".into(),
            "--".into(),
            "true".into(),
        ],
        vec![
            "pending".into(),
            "show".into(),
            "--root".into(),
            root.display().to_string(),
            "nope".into(),
        ],
        vec![
            "pending".into(),
            "drop".into(),
            "--root".into(),
            root.display().to_string(),
            "nope".into(),
        ],
    ];
    for args in cases {
        let out = bin().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: bad input");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("patchbox: "), "{err}");
        assert!(!err.contains("panicked") && !err.contains("backtrace"));
    }
    assert!(!tmp.path().join("x").exists());
}

/// The documented statuses: 1 refused, 2 an error (an empty or malformed patch, a command
/// line without `--`, I/O), 126/127 a command that cannot run or be found.
#[test]
fn exit_statuses_tell_refusals_from_errors() {
    let (tmp, project, root) = setup();
    let empty = tmp.path().join("empty.patch");
    fs::write(&empty, b"\n").unwrap();
    let garbage = tmp.path().join("garbage.patch");
    fs::write(&garbage, b"not a patch\n").unwrap();
    for p in [&empty, &garbage] {
        let out = apply_cmd(&project, &root, &[], p);
        assert_eq!(out.status.code(), Some(2), "{}", p.display());
        // git refuses both too.
        let git = Command::new("git")
            .arg("apply")
            .arg(p)
            .current_dir(&project)
            .output()
            .unwrap();
        assert!(!git.status.success());
    }
    let conflict = tmp.path().join("conflict.patch");
    fs::write(
        &conflict,
        b"--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-not what is there\n+x\n",
    )
    .unwrap();
    assert_eq!(
        apply_cmd(&project, &root, &[], &conflict).status.code(),
        Some(1)
    );
    let io = bin()
        .args(["apply", "--project"])
        .arg(&project)
        .args(["--root", "/dev/null/root"])
        .arg(&conflict)
        .output()
        .unwrap();
    assert_eq!(
        io.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&io.stderr)
    );
    let missing = bin()
        .args(["run", "--project"])
        .arg(&project)
        .arg("--root")
        .arg(&root)
        .args(["--", "no-such-command-anywhere"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(127));
    let not_exec = project.join("script.sh");
    fs::write(&not_exec, b"#!/bin/sh\n").unwrap();
    let denied = bin()
        .args(["run", "--project"])
        .arg(&project)
        .arg("--root")
        .arg(&root)
        .arg("--")
        .arg(&not_exec)
        .output()
        .unwrap();
    assert_eq!(denied.status.code(), Some(126));
    let nosep = bin()
        .args(["run", "--root"])
        .arg(&root)
        .args(["make", "test"])
        .output()
        .unwrap();
    assert_eq!(nosep.status.code(), Some(2));
    let err = String::from_utf8_lossy(&nosep.stderr);
    assert!(err.contains("-- make test"), "{err}");
}

fn wait_for(p: &Path) {
    let t = Instant::now();
    while !p.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "timed out waiting for {}",
            p.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn kill_9_mid_command_recovers_the_work_as_pending() {
    let (tmp, project, root) = setup();
    let before = fingerprint(&project, true);
    // A live session of another engine on the same root must stay untouched.
    let live = patchbox::SandboxManager::with_options(
        &project,
        patchbox::Options {
            root: Some(root.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    let live_sb = live.create_sandbox("live", None).unwrap();
    write(&live_sb.path, "a.txt", b"live edit\n");

    // The tool reports through a directory its confinement lets it write.
    let signals = tmp.path().join("signals");
    fs::create_dir_all(&signals).unwrap();
    let ready = signals.join("ready");
    let pidfile = signals.join("child.pid");
    let script = format!(
        "echo recovered-work > new.txt; echo more >> a.txt; echo $$ > {}; touch {}; exec sleep 60",
        pidfile.display(),
        ready.display()
    );
    let mut child = bin()
        .arg("run")
        .arg("--project")
        .arg(&project)
        .arg("--root")
        .arg(&root)
        .arg("--allow-write")
        .arg(&signals)
        .args(["--id", "crashy", "--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&ready);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    // The tool still runs and holds the session's lock: the session is alive, not pruned.
    let report = patchbox::session::recover::prune(&root).unwrap();
    assert!(report.recovered.is_empty());
    let tool_pid: i32 = fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    unsafe { libc::kill(tool_pid, libc::SIGKILL) };
    let t = Instant::now();
    let report = loop {
        let r = patchbox::session::recover::prune(&root).unwrap();
        if !r.recovered.is_empty() || t.elapsed() > Duration::from_secs(10) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(report.recovered.len(), 1, "{report:?}");

    let list = bin()
        .args(["pending", "list", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let list = String::from_utf8(list.stdout).unwrap();
    assert!(
        list.contains("/crashy\t") && list.contains("recovered"),
        "{list}"
    );
    let patch = fs::read(&report.recovered[0]).unwrap();
    let applied = git_apply_copy(&project, &patch, tmp.path());
    assert_eq!(
        fs::read(applied.join("new.txt")).unwrap(),
        b"recovered-work\n"
    );
    assert_eq!(fs::read(applied.join("a.txt")).unwrap(), b"one\nmore\n");
    // Stale sandboxes are gone; the live session is untouched; the project too.
    let sessions = bin()
        .args(["sessions", "list", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let sessions = String::from_utf8(sessions.stdout).unwrap();
    assert!(
        sessions.lines().any(|l| l.contains("\tlive\t")),
        "{sessions}"
    );
    assert!(
        !sessions
            .lines()
            .any(|l| l.contains("\tdead\t") && !l.contains("0 sandbox")),
        "{sessions}"
    );
    assert_eq!(
        fs::read(live_sb.path.join("a.txt")).unwrap(),
        b"live edit\n"
    );
    assert_eq!(fingerprint(&project, true), before);
}

#[test]
fn snapshot_honours_gitignore_without_a_git_binary() {
    let (tmp, project, root) = setup();
    write(&project, ".gitignore", b"*.log\n");
    write(&project, "build.log", b"ignored\n");
    common::git_init(&project);
    common::git(&project, &["add", "a.txt", ".gitignore"]);
    common::git(&project, &["commit", "-qm", "c"]);
    let empty_path = tmp.path().join("no-bin");
    fs::create_dir_all(&empty_path).unwrap();
    let out = bin()
        .arg("run")
        .arg("--project")
        .arg(&project)
        .arg("--root")
        .arg(&root)
        .args([
            "--",
            "/bin/sh",
            "-c",
            // The sandbox's private repository is made without a git binary.
            "test ! -e build.log && test -e src/b.txt && test -f .git/objects/info/alternates",
        ])
        .env("PATH", &empty_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

fn apply_cmd(project: &Path, root: &Path, args: &[&str], patch: &Path) -> Output {
    bin()
        .arg("apply")
        .arg("--project")
        .arg(project)
        .arg("--root")
        .arg(root)
        .args(args)
        .arg(patch)
        .output()
        .unwrap()
}

#[test]
fn apply_check_conflict_undo() {
    let (tmp, project, root) = setup();
    write(
        &project,
        "long.txt",
        (1..=20)
            .map(|i| format!("line {i}\n"))
            .collect::<String>()
            .as_bytes(),
    );
    let out = run(
        &project,
        &root,
        &[],
        "sed -i 's/^line 2$/LINE 2/' long.txt; echo new > new.txt",
    );
    let patch_file = tmp.path().join("p.patch");
    fs::write(&patch_file, &out.stdout).unwrap();
    let before = fingerprint(&project, true);

    let check = apply_cmd(&project, &root, &["--check"], &patch_file);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert_eq!(
        fingerprint(&project, true),
        before,
        "--check writes nothing"
    );

    // The user edited the same line meanwhile: a conflict refuses the whole patch.
    write(
        &project,
        "long.txt",
        (1..=20)
            .map(|i| {
                if i == 2 {
                    "user 2\n".to_string()
                } else {
                    format!("line {i}\n")
                }
            })
            .collect::<String>()
            .as_bytes(),
    );
    let conflicted = fingerprint(&project, true);
    let refused = apply_cmd(&project, &root, &[], &patch_file);
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("long.txt"), "report names the file: {err}");
    assert_eq!(
        fingerprint(&project, true),
        conflicted,
        "refusal leaves the tree byte-identical"
    );

    // Back to the snapshot state: it applies, a second apply is harmless, undo restores.
    write(
        &project,
        "long.txt",
        (1..=20)
            .map(|i| format!("line {i}\n"))
            .collect::<String>()
            .as_bytes(),
    );
    let restored_state = content_view(&project);
    let ok = apply_cmd(&project, &root, &[], &patch_file);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(fs::read(project.join("new.txt")).unwrap(), b"new\n");
    assert!(fs::read_to_string(project.join("long.txt"))
        .unwrap()
        .contains("LINE 2"));
    let again = apply_cmd(&project, &root, &[], &patch_file);
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("already applied"));
    let undo = bin()
        .arg("apply")
        .arg("--project")
        .arg(&project)
        .arg("--root")
        .arg(&root)
        .arg("--undo")
        .output()
        .unwrap();
    assert!(
        undo.status.success(),
        "{}",
        String::from_utf8_lossy(&undo.stderr)
    );
    assert_eq!(content_view(&project), restored_state);

    fs::write(&patch_file, b"this is not a patch\n").unwrap();
    let bad = apply_cmd(&project, &root, &[], &patch_file);
    assert!(!bad.status.success());
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr).trim().lines().count(),
        1
    );
}

#[test]
fn pending_apply_merges_against_stored_preimages_and_removes_the_patch() {
    let (_tmp, project, root) = setup();
    write(
        &project,
        "long.txt",
        (1..=20)
            .map(|i| format!("line {i}\n"))
            .collect::<String>()
            .as_bytes(),
    );
    let out = run(
        &project,
        &root,
        &["--pending", "--id", "later"],
        "sed -i 's/^line 2$/LINE 2/' long.txt",
    );
    assert!(out.status.success());
    // The session is gone; the user edits a distant line.
    let mut text = fs::read_to_string(project.join("long.txt")).unwrap();
    text = text
        .replace("line 19\n", "user 19\n")
        .replace("line 10\n", "line ten\n");
    fs::write(project.join("long.txt"), &text).unwrap();
    let ap = bin()
        .args(["pending", "apply", "--root"])
        .arg(&root)
        .arg("later")
        .output()
        .unwrap();
    assert!(
        ap.status.success(),
        "{}{}",
        String::from_utf8_lossy(&ap.stdout),
        String::from_utf8_lossy(&ap.stderr)
    );
    let now = fs::read_to_string(project.join("long.txt")).unwrap();
    assert!(
        now.contains("LINE 2\n") && now.contains("user 19\n") && now.contains("line ten\n"),
        "{now}"
    );
    let list = bin()
        .args(["pending", "list", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(list.stdout.is_empty(), "applied pending patch is removed");
}

/// The pending patches under `root` as (entry id, patch bytes).
fn pending_patches(root: &Path) -> Vec<(String, Vec<u8>)> {
    patchbox::session::pending::list(root)
        .unwrap()
        .into_iter()
        .map(|e| (e.id.clone(), fs::read(&e.patch_path).unwrap()))
        .collect()
}

/// A patch that cannot be delivered where it was asked for is kept pending, the exit status
/// says so (74), and stderr says where it went.
#[test]
fn undeliverable_patch_is_kept_pending_with_a_nonzero_exit() {
    let (_tmp, project, root) = setup();
    // stdout closed early (`| head -c 10`): the patch is far longer than what is read.
    let mut child = bin()
        .arg("run")
        .arg("--project")
        .arg(&project)
        .arg("--root")
        .arg(&root)
        .args(["--", "sh", "-c", "seq 1 200000 > big.txt"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away at once
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(74), "{err}");
    assert!(err.contains("kept as pending patch"), "{err}");
    let kept = pending_patches(&root);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(String::from_utf8_lossy(&kept[0].1).contains("+200000\n"));

    // --out into a directory that does not exist: the same, and no partial file anywhere.
    let out = run(
        &project,
        &root,
        &["--out", "/nonexistent/dir/x.patch"],
        "echo z >> a.txt",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(74), "{err}");
    assert!(err.contains("/nonexistent/dir/x.patch"), "{err}");
    let kept = pending_patches(&root);
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert!(kept
        .iter()
        .any(|(_, p)| String::from_utf8_lossy(p).contains("+z")));
}

/// Ids the pending store would not list are refused before the tool runs; a second pending
/// patch under one id is stored beside the first.
#[test]
fn hidden_ids_are_refused_and_repeated_ids_kept_apart() {
    let (tmp, project, root) = setup();
    let marker = tmp.path().join("ran");
    let out = run(
        &project,
        &root,
        &["--pending", "--id", ".hidden"],
        &format!("touch '{}'; echo x >> a.txt", marker.display()),
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("must not start with '.'"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!marker.exists(), "the tool must not run");
    for text in ["first", "second"] {
        let out = run(
            &project,
            &root,
            &["--pending", "--id", "d1"],
            &format!("echo {text} >> a.txt"),
        );
        assert!(out.status.success());
    }
    let kept = pending_patches(&root);
    assert_eq!(kept.len(), 2, "{kept:?}");
    for text in ["+first", "+second"] {
        assert!(kept
            .iter()
            .any(|(_, p)| String::from_utf8_lossy(p).contains(text)));
    }
}

/// `run` confines its command (where the kernel has Landlock): writing the project fails and
/// changes nothing; `--allow-write` and `--no-confine` widen it.
#[test]
fn run_confines_the_command() {
    let (tmp, project, root) = setup();
    let probe = patchbox::session::confine::probe();
    if probe != patchbox::session::confine::Confinement::Enforced {
        eprintln!("skipped: no Landlock here ({probe:?})");
        return;
    }
    let before = fingerprint(&project, true);
    let out = run(
        &project,
        &root,
        &[],
        &format!("echo bad >> '{}/a.txt'", project.display()),
    );
    assert!(
        !out.status.success(),
        "the write into the project must fail"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"));
    assert_eq!(fingerprint(&project, true), before);
    let extra = tmp.path().join("extra");
    fs::create_dir_all(&extra).unwrap();
    let target = extra.join("x");
    let write_extra = format!("echo ok > '{}'", target.display());
    let out = run(&project, &root, &[], &write_extra);
    assert!(!out.status.success() && !target.exists());
    let allow = ["--allow-write", extra.to_str().unwrap()];
    assert!(run(&project, &root, &allow, &write_extra).status.success());
    fs::remove_file(&target).unwrap();
    assert!(run(&project, &root, &["--no-confine"], &write_extra)
        .status
        .success());
    assert!(target.exists());
}
