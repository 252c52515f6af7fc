//! The apply side under kill -9: `patchbox apply` of a 200-file patch, and `patchbox apply
//! --undo` of it, killed at a random moment; then the next command (`recover`, `apply
//! --undo` or `apply` again, chosen at random) must leave the project byte-identical —
//! contents, modes, symlinks, directories, no extra files — to exactly the tree before or
//! exactly the tree after, with no `.patchbox-*` debris; after a `recover`, the undo record
//! must still do its job (an apply that was completed undoes to exactly before).
//!
//! Short form (CI): 12 trials per scenario. Long form, by hand:
//! `PATCHBOX_CRASH_TRIALS=100 cargo test --release --test apply_crash -- --nocapture`; the
//! seed is printed and `PATCHBOX_CRASH_SEED` replays it.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_patchbox"))
}

/// 200 files in 10 directories, a few executables and symlinks.
fn base(r: &Path) {
    for i in 0..200 {
        let mut text = String::new();
        for l in 0..12 {
            text.push_str(&format!("file {i} line {l}\n"));
        }
        write(r, &format!("d{}/f{i}.txt", i % 10), text.as_bytes());
    }
    for i in 0..5 {
        chmod(r, &format!("d{}/f{i}.txt", i % 10), 0o755);
        std::os::unix::fs::symlink(format!("f{i}.txt"), r.join(format!("d{}/l{i}", i % 10)))
            .unwrap();
    }
    write(r, "only/one.txt", b"its directory goes with it\n");
}

/// Edits 150 files, deletes 20, renames 10, creates 30 (some in new directories), changes
/// modes and symlinks.
fn change(r: &Path) {
    for i in 0..150 {
        let p = r.join(format!("d{}/f{i}.txt", i % 10));
        let t = fs::read_to_string(&p)
            .unwrap()
            .replace(" line 5\n", " line 5 edited\n");
        fs::write(&p, t).unwrap();
    }
    for i in 150..170 {
        fs::remove_file(r.join(format!("d{}/f{i}.txt", i % 10))).unwrap();
    }
    for i in 170..180 {
        fs::rename(
            r.join(format!("d{}/f{i}.txt", i % 10)),
            r.join(format!("d{}/renamed{i}.txt", (i + 3) % 10)),
        )
        .unwrap();
    }
    for i in 0..30 {
        write(
            r,
            &format!("new{}/sub/n{i}.txt", i % 3),
            format!("created {i}\n").as_bytes(),
        );
    }
    for i in 5..10 {
        chmod(r, &format!("d{}/f{i}.txt", i % 10), 0o755);
    }
    chmod(r, "d0/f0.txt", 0o644);
    for i in 0..5 {
        let l = r.join(format!("d{}/l{i}", i % 10));
        fs::remove_file(&l).unwrap();
        std::os::unix::fs::symlink(format!("f{}.txt", i + 10), l).unwrap();
    }
    fs::remove_dir_all(r.join("only")).unwrap();
}

fn make_patch(dir: &Path) -> Vec<u8> {
    fs::create_dir_all(dir).unwrap();
    base(dir);
    git_init(dir);
    git_commit_all(dir);
    change(dir);
    git(dir, &["add", "-A"]);
    let patch = git(dir, &["diff", "--cached", "--binary", "-M", "HEAD"]).stdout;
    assert!(count(&patch) >= 200, "{} file patches", count(&patch));
    patch
}

fn count(patch: &[u8]) -> usize {
    patch
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"diff --git "))
        .count()
}

fn kill_group(child: &mut std::process::Child) {
    // SAFETY: signalling a process group we created.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
}

struct Setup {
    tmp: tempfile::TempDir,
    patch_file: std::path::PathBuf,
    before: ModeView,
    after: ModeView,
}

impl Setup {
    fn new() -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let patch = make_patch(&tmp.path().join("gen"));
        let patch_file = tmp.path().join("p.patch");
        fs::write(&patch_file, &patch).unwrap();
        let template = tmp.path().join("template");
        base(&template);
        let before = mode_view(&template);
        let s = Setup {
            tmp,
            patch_file,
            before,
            after: ModeView::new(),
        };
        s.reset();
        let out = s.cmd(&["apply"], true);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let after = mode_view(&s.project());
        assert_ne!(after, s.before);
        Setup { after, ..s }
    }

    fn project(&self) -> std::path::PathBuf {
        self.tmp.path().join("project")
    }

    fn root(&self) -> std::path::PathBuf {
        self.tmp.path().join("root")
    }

    /// The project back to the tree before, and an empty sandbox root.
    fn reset(&self) {
        for d in [self.project(), self.root()] {
            if d.exists() {
                fs::remove_dir_all(&d).unwrap();
            }
        }
        fs::create_dir_all(self.project()).unwrap();
        copy_tree(&self.tmp.path().join("template"), &self.project());
        assert_eq!(mode_view(&self.project()), self.before);
    }

    fn command(&self, args: &[&str], patch: bool) -> Command {
        let mut c = bin();
        c.args(args)
            .arg("--project")
            .arg(self.project())
            .arg("--root")
            .arg(self.root());
        if patch {
            c.arg(&self.patch_file);
        }
        c
    }

    fn cmd(&self, args: &[&str], patch: bool) -> Output {
        self.command(args, patch).output().unwrap()
    }

    fn spawn(&self, args: &[&str], patch: bool) -> std::process::Child {
        self.command(args, patch)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap()
    }

    fn no_debris(&self) {
        for e in walkdir::WalkDir::new(self.project()) {
            let e = e.unwrap();
            let n = e.file_name().to_string_lossy();
            assert!(
                !n.starts_with(".patchbox-"),
                "debris: {}",
                e.path().display()
            );
        }
    }

    fn state(&self) -> &'static str {
        self.no_debris();
        let now = mode_view(&self.project());
        if now == self.before {
            "before"
        } else if now == self.after {
            "after"
        } else {
            let diff: Vec<String> = now
                .keys()
                .chain(self.before.keys())
                .filter(|k| now.get(*k) != self.before.get(*k) && now.get(*k) != self.after.get(*k))
                .take(5)
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect();
            panic!("neither before nor after; e.g. {diff:?}");
        }
    }

    fn ok(&self, out: &Output, what: &str) {
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The next command after a kill; returns the state it left ("before" or "after").
    fn next_command(&self, which: u64) -> &'static str {
        match which {
            // recover: either; then the undo record must do its job.
            0 => {
                let out = self.cmd(&["recover"], false);
                self.ok(&out, "recover");
                let state = self.state();
                let undo = self.cmd(&["apply", "--undo"], false);
                if state == "after" {
                    self.ok(&undo, "undo after recovery");
                    assert_eq!(self.state(), "before", "undo after recovery");
                } else {
                    let err = String::from_utf8_lossy(&undo.stderr);
                    assert!(
                        undo.status.code() == Some(1) && err.contains("no apply to undo"),
                        "undo with nothing to undo: {err}"
                    );
                    assert_eq!(self.state(), "before");
                }
                state
            }
            // apply --undo: before, whatever the kill interrupted.
            1 => {
                let out = self.cmd(&["apply", "--undo"], false);
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(
                    out.status.success() || err.contains("no apply to undo"),
                    "undo: {err}"
                );
                let s = self.state();
                assert_eq!(s, "before", "after apply --undo");
                s
            }
            // apply again: after.
            _ => {
                let out = self.cmd(&["apply"], true);
                self.ok(&out, "apply again");
                let s = self.state();
                assert_eq!(s, "after", "after apply again");
                s
            }
        }
    }
}

fn kill_trials(undo: bool) {
    let scenario = if undo {
        "kill -9 of apply --undo (200 files)"
    } else {
        "kill -9 of apply (200-file patch)"
    };
    let mut rng = Rng::new(scenario);
    let s = Setup::new();
    // The window: one uninterrupted run of the command killed.
    s.reset();
    if undo {
        s.ok(&s.cmd(&["apply"], true), "apply");
    }
    let t = Instant::now();
    let out = if undo {
        s.cmd(&["apply", "--undo"], false)
    } else {
        s.cmd(&["apply"], true)
    };
    let window = t.elapsed();
    s.ok(&out, "uninterrupted run");
    let mut ended: BTreeMap<&str, usize> = BTreeMap::new();
    let mut debris = 0;
    let mut failures = 0;
    for trial in 0..trials() {
        s.reset();
        if undo {
            s.ok(&s.cmd(&["apply"], true), "apply");
        }
        let mut child = if undo {
            s.spawn(&["apply", "--undo"], false)
        } else {
            s.spawn(&["apply"], true)
        };
        let delay = rng.below(window.as_micros() as u64 + 1);
        std::thread::sleep(Duration::from_micros(delay));
        kill_group(&mut child);
        let which = rng.below(3);
        let checked = std::panic::catch_unwind(|| {
            let left = fs::read_dir(s.project()).unwrap().any(|e| {
                e.unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".patchbox-")
            });
            (left, s.next_command(which))
        });
        match checked {
            Ok((left, state)) => {
                debris += usize::from(left);
                let next = ["recover", "apply --undo", "apply"][which as usize];
                *ended
                    .entry(if which == 0 { state } else { next })
                    .or_default() += 1;
            }
            Err(_) => {
                failures += 1;
                eprintln!("{scenario}: trial {trial} failed (kill after {delay} µs, next command {which})");
            }
        }
    }
    eprintln!(
        "{scenario}: {} trials in a {window:?} window; {debris} kills left a staging directory; \
         after `recover`: {} before, {} after; next command `apply --undo`: {}, `apply`: {}; \
         {failures} failed",
        trials(),
        ended.get("before").unwrap_or(&0),
        ended.get("after").unwrap_or(&0),
        ended.get("apply --undo").unwrap_or(&0),
        ended.get("apply").unwrap_or(&0),
    );
    assert_eq!(failures, 0);
}

#[test]
fn kill_9_during_apply() {
    kill_trials(false);
}

#[test]
fn kill_9_during_undo() {
    kill_trials(true);
}
