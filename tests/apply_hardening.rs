//! `apply` refuses what git refuses: a deletion that carries no contents.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use common::{exact_fingerprint, git_init, write};
use patchbox::apply::{apply_patch, ApplyOptions, FileStatus, Outcome};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_patchbox"))
}

/// Runs `git apply` (the oracle) on a copy of `project`: its success, and its stderr.
fn git_apply_on_copy(project: &Path, patch: &[u8], scratch: &Path) -> (bool, String) {
    let dir = scratch.join(format!("git-{}", ulid::Ulid::new()));
    fs::create_dir_all(&dir).unwrap();
    common::copy_tree(project, &dir);
    git_init(&dir);
    let pf = scratch.join(format!("p-{}.patch", ulid::Ulid::new()));
    fs::write(&pf, patch).unwrap();
    let out = Command::new("git")
        .args(["apply", "--whitespace=nowarn"])
        .arg(&pf)
        .current_dir(&dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", scratch)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// ------------------------------------------------------------------------------------------
// A deletion without contents
// ------------------------------------------------------------------------------------------

/// A deletion cut off after its `index` line (no `---`/`+++`, no hunk) names the blob of the
/// file on disk, yet carries none of its contents: git ("removal patch leaves file
/// contents") and GNU patch refuse it, and so does the library, writing nothing.
#[test]
fn deletion_cut_off_after_its_index_line_is_refused_like_git() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    write(&project, "f", b"hello\n");
    write(&project, "keep.txt", b"kept\n");
    // ce01362 is the blob id of "hello\n", e69de29 that of an empty file.
    for index in [
        "ce01362..0000000",
        "ce013625030ba8dba906f756967f9e9ca394464a..0000000000000000000000000000000000000000",
        "e69de29..0000000",
    ] {
        let patch = format!("diff --git a/f b/f\ndeleted file mode 100644\nindex {index}\n");
        let (git_ok, git_err) = git_apply_on_copy(&project, patch.as_bytes(), tmp.path());
        assert!(!git_ok, "git refuses it ({index})");
        assert!(
            git_err.contains("removal patch leaves file contents"),
            "{git_err}"
        );
        let before = exact_fingerprint(&project);
        for check in [true, false] {
            let opts = ApplyOptions {
                check,
                ..Default::default()
            };
            let r = apply_patch(&project, patch.as_bytes(), &opts).unwrap();
            assert_eq!(r.outcome, Outcome::Refused, "{index}: {r}");
            assert_eq!(r.files[0].status, FileStatus::Refused, "{index}: {r}");
            let detail = &r.files[0].detail;
            assert!(
                detail.contains("f: removal patch leaves file contents"),
                "{index}: {detail}"
            );
            assert_eq!(exact_fingerprint(&project), before, "nothing written");
        }
        // The command line: exit 1, the file named, nothing written.
        let out = bin()
            .args(["apply", "--project"])
            .arg(&project)
            .arg("--root")
            .arg(tmp.path().join("root"))
            .arg("-")
            .stdin_bytes(patch.as_bytes());
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("f: removal patch leaves file contents"),
            "{err}"
        );
        assert_eq!(fs::read(project.join("f")).unwrap(), b"hello\n");
        assert_eq!(exact_fingerprint(&project), before, "nothing written");
    }
    // Ids too short to be blob ids: git refuses the removal; here the patch is unreadable.
    let before = exact_fingerprint(&project);
    let patch = b"diff --git a/f b/f\ndeleted file mode 100644\nindex abc..000\n";
    assert!(!git_apply_on_copy(&project, patch, tmp.path()).0);
    assert!(apply_patch(&project, patch, &ApplyOptions::default()).is_err());
    assert_eq!(exact_fingerprint(&project), before, "nothing written");
}

/// An empty file has no hunk to remove: its deletion without one is what git makes, and
/// both git and the library apply it.
#[test]
fn deletion_of_an_empty_file_needs_no_hunk() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    write(&project, "e", b"");
    write(&project, "keep.txt", b"kept\n");
    let patch = b"diff --git a/e b/e\ndeleted file mode 100644\nindex e69de29..0000000\n";
    let (git_ok, git_err) = git_apply_on_copy(&project, patch, tmp.path());
    assert!(git_ok, "{git_err}");
    let r = apply_patch(&project, patch, &ApplyOptions::default()).unwrap();
    assert_eq!(r.outcome, Outcome::Applied, "{r}");
    assert!(!project.join("e").exists());
    assert!(project.join("keep.txt").exists());
    // A deletion whose hunk removes everything still applies.
    write(&project, "g", b"one\ntwo\n");
    let patch = b"diff --git a/g b/g\ndeleted file mode 100644\nindex 814f4a4..0000000\n--- a/g\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-two\n";
    let (git_ok, git_err) = git_apply_on_copy(&project, patch, tmp.path());
    assert!(git_ok, "{git_err}");
    let r = apply_patch(&project, patch, &ApplyOptions::default()).unwrap();
    assert_eq!(r.outcome, Outcome::Applied, "{r}");
    assert!(!project.join("g").exists());
}

/// `Command::output` with `data` on stdin.
trait StdinBytes {
    fn stdin_bytes(&mut self, data: &[u8]) -> Output;
}

impl StdinBytes for Command {
    fn stdin_bytes(&mut self, data: &[u8]) -> Output {
        use std::io::Write;
        let mut child = self
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(data).unwrap();
        child.wait_with_output().unwrap()
    }
}
