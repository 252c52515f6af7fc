//! The session side under crashes and faults: nothing a delegation wrote is lost, and nothing
//! is written outside the sandbox root.
//!
//! * kill -9 at a random moment of `patchbox run --pending` (a plain and a git project), of
//!   its finalize (a tool that changes many files), and of `patchbox sessions prune` itself;
//!   after each, the next prune runs, and then every listed pending patch must pass
//!   `git apply --check` on the project, the project must be unchanged, and the root must hold
//!   no sandbox, snapshot or temporary file;
//! * ENOSPC on a small tmpfs root during the snapshot and during the pending write (as root;
//!   skipped with a message otherwise);
//! * 8 concurrent `run --pending` with a prune loop on one root.
//!
//! Short form (CI): 12 trials per kill scenario. Long form, by hand:
//! `PATCHBOX_CRASH_TRIALS=100 cargo test --release --test crash -- --nocapture`; the seed is
//! printed and `PATCHBOX_CRASH_SEED` replays it.

mod common;

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_patchbox"))
}

/// A project of `files` small files in a few directories; a git repository with one commit
/// when `git` is set.
fn make_project(dir: &Path, files: usize, git: bool) {
    for i in 0..files {
        write(
            dir,
            &format!("d{}/f{i}.txt", i % 7),
            format!("line one of {i}\nline two\nline three\n").as_bytes(),
        );
    }
    write(dir, "bin.dat", &[0u8, 1, 2, 255, 0, 7]);
    if git {
        git_init(dir);
        git_commit_all(dir);
    }
}

/// The tool every trial runs: edits, creates and deletes files, and renames one.
const TOOL: &str = "for i in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19; do \
     echo edited >> d$((i % 7))/f$i.txt; done; \
     mkdir -p new/deeper; for i in 1 2 3 4 5; do echo created $i > new/deeper/n$i.txt; done; \
     rm -f d1/f1.txt d2/f2.txt; mv d3/f3.txt d3/moved.txt; printf 'x\\0y' > new/blob.bin";

fn kill_group(child: &mut std::process::Child) {
    // SAFETY: signalling a process group we created.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
}

fn run_pending_args<'a>(project: &'a Path, root: &'a Path) -> Vec<std::ffi::OsString> {
    let mut v: Vec<std::ffi::OsString> = vec!["run".into(), "--project".into()];
    v.push(project.into());
    v.push("--root".into());
    v.push(root.into());
    v.extend(
        ["--pending", "--id", "job", "--", "sh", "-c", TOOL]
            .iter()
            .map(|s| s.into()),
    );
    v
}

fn spawn_run(project: &Path, root: &Path) -> std::process::Child {
    bin()
        .args(run_pending_args(project, root))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap()
}

fn prune(root: &Path) -> Output {
    bin()
        .args(["sessions", "prune", "--root"])
        .arg(root)
        .output()
        .unwrap()
}

/// Prunes until no session under `root` is alive or holds a sandbox (a reaper started by a
/// killed `run` may still be finishing), at most 90 s (a loaded CI machine is slow).
fn settle(root: &Path) {
    let t = Instant::now();
    loop {
        prune(root);
        let sessions = patchbox::session::recover::list_sessions(root).unwrap();
        if sessions.iter().all(|s| !s.live && s.sandboxes.is_empty()) {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(90),
            "sessions never settled: {sessions:?}"
        );
        std::thread::sleep(Duration::from_millis(30));
    }
}

/// What a root may hold once settled: session directories with `pending/` and
/// `session.meta`, and in `pending/` only `.patch`/`.meta` files and `.pre/` trees.
fn assert_root_is_clean(root: &Path) {
    let Ok(rd) = fs::read_dir(root) else { return };
    for s in rd {
        let s = s.unwrap();
        let name = s.file_name().into_string().unwrap();
        // A session killed while being created (`.<id>.tmp`) holds no work; prune removes it
        // once it is a minute old.
        let half_made = name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".tmp"))
            .is_some_and(patchbox::session::layout::is_session_id);
        if half_made {
            for e in fs::read_dir(s.path()).unwrap() {
                let n = e.unwrap().file_name().into_string().unwrap();
                // Killed between writing the meta file and the rename into place: the
                // meta file is there too (still no work).
                assert!(
                    n == "session.lock" || n == "session.meta" || n.starts_with(".session.meta."),
                    "a half-made session holds {n}"
                );
            }
            continue;
        }
        if name == patchbox::session::shared_lower::STORE_DIR {
            // Shared lower layers (overlay sessions of git projects): kept across sessions
            // by design; a half-written one is named `.creating-<ulid>`, never a layer.
            continue;
        }
        assert!(
            patchbox::session::layout::is_session_id(&name),
            "stray entry in the root: {name}"
        );
        for e in fs::read_dir(s.path()).unwrap() {
            let n = e.unwrap().file_name().into_string().unwrap();
            assert!(
                n == "pending" || n == "session.meta",
                "left in session {name}: {n}"
            );
        }
        if let Ok(rd) = fs::read_dir(s.path().join("pending")) {
            for e in rd {
                let n = e.unwrap().file_name().into_string().unwrap();
                assert!(
                    !n.starts_with('.')
                        && (n.ends_with(".patch") || n.ends_with(".meta") || n.ends_with(".pre")),
                    "debris in pending/ of {name}: {n}"
                );
            }
        }
    }
}

/// Every pending patch under `root` must apply to `project` by git's rules; returns them.
fn assert_pending_apply(project: &Path, root: &Path, scratch: &Path) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for e in patchbox::session::pending::list(root).unwrap() {
        let patch = fs::read(&e.patch_path).unwrap();
        let _ = fs::remove_dir_all(scratch);
        // git_apply_copy asserts that git accepts it.
        git_apply_copy(project, &patch, scratch);
        out.push(patch);
    }
    out
}

/// No file appeared beside the project and the root in the trial's directory.
fn assert_nothing_outside(top: &Path, allowed: &[&str]) {
    for e in fs::read_dir(top).unwrap() {
        let n = e.unwrap().file_name().into_string().unwrap();
        assert!(
            allowed.contains(&n.as_str()),
            "written outside the root: {n}"
        );
    }
}

/// How long an uninterrupted `run --pending` takes here: the window the kills fall in.
fn run_duration(project: &Path, root: &Path) -> Duration {
    let t = Instant::now();
    let out = bin()
        .args(run_pending_args(project, root))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d = t.elapsed();
    settle(root);
    for e in patchbox::session::pending::list(root).unwrap() {
        patchbox::session::pending::drop_pending(root, &e.id).unwrap();
    }
    d
}

fn kill_run_trials(git: bool) {
    let scenario = if git {
        "kill -9 of run --pending, git project"
    } else {
        "kill -9 of run --pending, plain project"
    };
    let mut rng = Rng::new(scenario);
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let root = tmp.path().join("root");
    let scratch = tmp.path().join("scratch");
    make_project(&project, 300, git);
    let before = fingerprint(&project, true);
    let window = run_duration(&project, &root);
    let (mut with_work, mut failures) = (0, 0);
    for trial in 0..trials() {
        let mut child = spawn_run(&project, &root);
        let delay = rng.below(window.as_micros() as u64 + 1);
        std::thread::sleep(Duration::from_micros(delay));
        kill_group(&mut child);
        let checked = std::panic::catch_unwind(|| {
            settle(&root);
            let patches = assert_pending_apply(&project, &root, &scratch);
            assert!(
                patches.len() <= 1,
                "the work was stored twice: {}",
                patches.len()
            );
            assert_root_is_clean(&root);
            assert_eq!(fingerprint(&project, true), before, "the project changed");
            assert_nothing_outside(tmp.path(), &["project", "root", "scratch"]);
            patches.len()
        });
        match checked {
            Ok(n) => with_work += n,
            Err(_) => {
                failures += 1;
                eprintln!("{scenario}: trial {trial} failed (kill after {delay} µs)");
            }
        }
        for e in patchbox::session::pending::list(&root).unwrap_or_default() {
            let _ = patchbox::session::pending::drop_pending(&root, &e.id);
        }
    }
    eprintln!(
        "{scenario}: {} trials in a {window:?} window, {with_work} kept work as a pending \
         patch, {failures} failed",
        trials()
    );
    assert_eq!(failures, 0);
}

#[test]
fn kill_9_during_run_pending_plain_project() {
    kill_run_trials(false);
}

#[test]
fn kill_9_during_run_pending_git_project() {
    kill_run_trials(true);
}

/// Leaves a dead session under `root` with one changed sandbox: `run` killed with its tool
/// once the tool is done.
fn dead_session(project: &Path, root: &Path, ready: &Path) {
    let script = format!("{TOOL}; touch '{}'; exec sleep 60", ready.display());
    let signals = ready.parent().unwrap();
    let _ = fs::remove_file(ready);
    let mut child = bin()
        .arg("run")
        .arg("--project")
        .arg(project)
        .arg("--root")
        .arg(root)
        .arg("--allow-write")
        .arg(signals)
        .args(["--id", "job", "--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !ready.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the tool never finished"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    kill_group(&mut child);
}

#[test]
fn kill_9_during_recovery() {
    let scenario = "kill -9 of sessions prune (recovery)";
    let mut rng = Rng::new(scenario);
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let root = tmp.path().join("root");
    let scratch = tmp.path().join("scratch");
    let ready = tmp.path().join("signals").join("ready");
    fs::create_dir_all(ready.parent().unwrap()).unwrap();
    make_project(&project, 300, true);
    let before = fingerprint(&project, true);
    // The window: one uninterrupted recovery.
    dead_session(&project, &root, &ready);
    let t = Instant::now();
    settle(&root);
    let window = t.elapsed();
    let expected = assert_pending_apply(&project, &root, &scratch);
    assert_eq!(expected.len(), 1);
    for e in patchbox::session::pending::list(&root).unwrap() {
        patchbox::session::pending::drop_pending(&root, &e.id).unwrap();
    }
    let mut failures = 0;
    for trial in 0..trials() {
        dead_session(&project, &root, &ready);
        let mut child = bin()
            .args(["sessions", "prune", "--root"])
            .arg(&root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let delay = rng.below(window.as_micros() as u64 + 1);
        std::thread::sleep(Duration::from_micros(delay));
        kill_group(&mut child);
        let checked = std::panic::catch_unwind(|| {
            settle(&root);
            let patches = assert_pending_apply(&project, &root, &scratch);
            let text = |v: &[Vec<u8>]| -> Vec<String> {
                v.iter()
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .collect()
            };
            assert!(
                patches == expected,
                "the recovered work differs or is missing: {} patch(es) {:?}",
                patches.len(),
                text(&patches)
                    .iter()
                    .map(|p| p.lines().filter(|l| l.starts_with("diff --git")).count())
                    .collect::<Vec<_>>()
            );
            assert_root_is_clean(&root);
            assert_eq!(fingerprint(&project, true), before, "the project changed");
            assert_nothing_outside(tmp.path(), &["project", "root", "scratch", "signals"]);
        });
        if checked.is_err() {
            failures += 1;
            eprintln!("{scenario}: trial {trial} failed (kill after {delay} µs)");
        }
        for e in patchbox::session::pending::list(&root).unwrap_or_default() {
            let _ = patchbox::session::pending::drop_pending(&root, &e.id);
        }
    }
    eprintln!(
        "{scenario}: {} trials in a {window:?} window, {failures} failed",
        trials()
    );
    assert_eq!(failures, 0);
}

#[test]
fn eight_concurrent_runs_and_a_prune_loop_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let root = tmp.path().join("root");
    let scratch = tmp.path().join("scratch");
    make_project(&project, 100, true);
    let before = fingerprint(&project, true);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pruner = {
        let (stop, root) = (stop.clone(), root.clone());
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let out = prune(&root);
                assert!(out.status.success() || out.status.code() == Some(2));
                n += 1;
            }
            n
        })
    };
    let runs: Vec<_> = (0..8)
        .map(|i| {
            bin()
                .arg("run")
                .arg("--project")
                .arg(&project)
                .arg("--root")
                .arg(&root)
                .args(["--pending", "--id", &format!("job-{i}")])
                .args([
                    "--",
                    "sh",
                    "-c",
                    &format!("echo job {i} >> d{}/f{i}.txt", i % 7),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for r in runs {
        let out = r.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let prunes = pruner.join().unwrap();
    settle(&root);
    let patches = assert_pending_apply(&project, &root, &scratch);
    assert_eq!(patches.len(), 8, "one pending patch per run");
    for i in 0..8 {
        let want = format!("+job {i}\n");
        assert!(
            patches
                .iter()
                .any(|p| String::from_utf8_lossy(p).contains(&want)),
            "job {i}'s work is missing"
        );
    }
    assert_root_is_clean(&root);
    assert_eq!(fingerprint(&project, true), before);
    eprintln!("8 concurrent runs beside {prunes} prunes: nothing lost");
}

/// A tmpfs of `size` mounted on `dir` for the test's duration (root only).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }

    fn resize(&self, size: &str) {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(st.success());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn enospc_during_snapshot_and_pending_write_keeps_the_work() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let root = tmp.path().join("root");
    let scratch = tmp.path().join("scratch");
    let Some(fs_root) = Tmpfs::mount(&root, "1m") else {
        eprintln!("skipped: mounting a tmpfs needs root (CAP_SYS_ADMIN)");
        return;
    };
    // The snapshot does not fit: a clear error, the project untouched, no debris.
    write(&project, "big.dat", &vec![b'x'; 3 << 20]);
    let before = fingerprint(&project, true);
    let out = bin()
        .arg("run")
        .arg("--project")
        .arg(&project)
        .arg("--root")
        .arg(&root)
        .args(["--pending", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("No space left on device"), "{err}");
    assert_eq!(fingerprint(&project, true), before);
    settle(&root);
    assert_root_is_clean(&root);

    // The sandbox fits, its patch does not: the sandbox is kept and says so; once space is
    // back, the next prune stores the work, whole.
    fs::remove_file(project.join("big.dat")).unwrap();
    write(&project, "a.txt", b"one\n");
    let before = fingerprint(&project, true);
    let out = bin()
        .arg("run")
        .arg("--project")
        .arg(&project)
        .arg("--root")
        .arg(&root)
        .args(["--pending", "--id", "full", "--"])
        .args([
            "sh",
            "-c",
            "head -c 600000 /dev/zero | tr '\\0' 'y' | fold -w 60 > out.txt",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(74), "{err}");
    assert!(err.contains("sandbox is kept"), "{err}");
    assert!(patchbox::session::pending::list(&root).unwrap().is_empty());
    fs_root.resize("16m");
    settle(&root);
    let patches = assert_pending_apply(&project, &root, &scratch);
    assert_eq!(patches.len(), 1);
    assert!(String::from_utf8_lossy(&patches[0]).contains("+yyyy"));
    assert_root_is_clean(&root);
    assert_eq!(fingerprint(&project, true), before);
    for e in patchbox::session::pending::list(&root).unwrap() {
        patchbox::session::pending::drop_pending(&root, &e.id).unwrap();
    }

    if patchbox::Isolation::default() != patchbox::Isolation::Copy {
        // Overlay isolation materializes the snapshot whole at the first create, so the
        // case below (a snapshot that copies nothing) is the copy path's alone.
        eprintln!("skipped: the finalize-out-of-space case needs copy isolation");
        return;
    }
    // Finalize runs out of space: in a clean git project the snapshot copies nothing (the
    // files are blobs of the user's repository), the sandbox fits, but the pre-image finalize
    // writes into base/ does not. The error is clear, the work stays for recovery.
    let git_project = tmp.path().join("git-project");
    let line = "0123456789".repeat(6) + "\n";
    write(&git_project, "big.txt", line.repeat(20_000).as_bytes());
    git_init(&git_project);
    git_commit_all(&git_project);
    std::thread::sleep(Duration::from_millis(20));
    common::git(&git_project, &["update-index", "--really-refresh"]);
    let before = fingerprint(&git_project, true);
    fs_root.resize("1800k");
    let out = bin()
        .arg("run")
        .arg("--project")
        .arg(&git_project)
        .arg("--root")
        .arg(&root)
        .args([
            "--pending",
            "--id",
            "fin",
            "--",
            "sh",
            "-c",
            "echo tail >> big.txt",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(
        err.contains(".scratch"),
        "the failure is finalize's pre-image: {err}"
    );
    assert_eq!(fingerprint(&git_project, true), before);
    fs_root.resize("16m");
    settle(&root);
    let patches = assert_pending_apply(&git_project, &root, &scratch);
    assert_eq!(patches.len(), 1);
    assert!(String::from_utf8_lossy(&patches[0]).contains("+tail"));
    assert_root_is_clean(&root);
}
