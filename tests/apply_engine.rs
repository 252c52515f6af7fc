//! Tests of the apply engine (`patchbox::apply`): `git apply` as the oracle for clean patches,
//! drift (offsets, 3-way merges, conflicts), already-applied detection, atomicity (nothing
//! changes on refusal or on a failure at any write step), undo, and the traversal and symlink
//! attack corpus.

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
mod gitcmd;

use common::{exact_fingerprint, tree_view, ExactFingerprint};
use gitcmd::{git, git_apply};
use patchbox::apply::{apply_patch, undo_apply, ApplyOptions, FileStatus, Outcome};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Files and symlinks only (directories get new mtimes when entries come and go).
fn file_fingerprint(root: &Path) -> ExactFingerprint {
    exact_fingerprint(root)
        .into_iter()
        .filter(|(_, v)| v.0 & 0o170000 != 0o040000)
        .collect()
}

/// Asserts two fingerprints are equal, listing only the differing paths.
#[track_caller]
fn assert_same(a: &ExactFingerprint, b: &ExactFingerprint, what: &str) {
    if a == b {
        return;
    }
    let mut lines = Vec::new();
    for k in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
        let (x, y) = (a.get(k), b.get(k));
        if x != y {
            let show = |v: Option<&(u32, Vec<u8>, i64, i64)>| match v {
                None => "absent".to_string(),
                Some((m, c, s, ns)) => format!("mode {m:o}, {} bytes, mtime {s}.{ns:09}", c.len()),
            };
            lines.push(format!(
                "  {:?}: {} != {}",
                String::from_utf8_lossy(k),
                show(x),
                show(y)
            ));
        }
    }
    panic!("{what}: trees differ:\n{}", lines.join("\n"));
}

fn copy_tree(src: &Path, dst: &Path) {
    for e in walkdir::WalkDir::new(src).min_depth(1) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(src).unwrap();
        if rel
            .components()
            .next()
            .is_some_and(|c| c.as_os_str() == ".git")
        {
            continue;
        }
        let to = dst.join(rel);
        let m = fs::symlink_metadata(e.path()).unwrap();
        if m.file_type().is_symlink() {
            symlink(fs::read_link(e.path()).unwrap(), &to).unwrap();
        } else if m.is_dir() {
            fs::create_dir_all(&to).unwrap();
        } else {
            fs::copy(e.path(), &to).unwrap();
            fs::set_permissions(&to, fs::Permissions::from_mode(m.mode() & 0o7777)).unwrap();
        }
    }
}

fn write(root: &Path, rel: &str, data: impl AsRef<[u8]>) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, data).unwrap();
}

fn chmod(root: &Path, rel: &str, mode: u32) {
    fs::set_permissions(root.join(rel), fs::Permissions::from_mode(mode)).unwrap();
}

fn numbered(n: usize, tag: &str) -> String {
    (1..=n).map(|i| format!("{tag} line {i}\n")).collect()
}

fn pseudo_random(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u8
        })
        .collect()
}

/// A git repository with `base` committed, then changed by `change` and staged.
struct Repo {
    home: tempfile::TempDir,
    dir: tempfile::TempDir,
}

impl Repo {
    fn new(base: impl Fn(&Path)) -> Repo {
        let home = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), home.path(), &["init", "-q", "."]);
        base(dir.path());
        git(dir.path(), home.path(), &["add", "-A"]);
        git(dir.path(), home.path(), &["commit", "-qm", "base"]);
        Repo { home, dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Applies `change` to the work tree and returns `git diff --cached <args> HEAD`.
    fn diff(&self, change: impl Fn(&Path), args: &[&str]) -> Vec<u8> {
        change(self.path());
        git(self.path(), self.home.path(), &["add", "-A"]);
        let mut a = vec!["diff", "--cached"];
        a.extend_from_slice(args);
        a.push("HEAD");
        git(self.path(), self.home.path(), &a).stdout
    }
}

fn tmp_with(base: impl Fn(&Path)) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    base(d.path());
    d
}

fn opts() -> ApplyOptions {
    ApplyOptions::default()
}

// ---------------------------------------------------------------------------------------------
// A rich scenario compared with git apply
// ---------------------------------------------------------------------------------------------

fn rich_base(r: &Path) {
    write(r, "src/main.rs", numbered(30, "main"));
    write(r, "README", "readme\n");
    write(r, "docs/a b.md", "alpha\nbeta\n");
    write(r, "\u{fc}.txt", "umlaut\n");
    write(r, "old/name.txt", numbered(20, "moved"));
    write(r, "copy_src.txt", numbered(20, "copied"));
    write(r, "run.sh", "#!/bin/sh\necho hi\n");
    symlink("src", r.join("link")).unwrap();
    write(r, "bin/blob.bin", pseudo_random(6000, 7));
    write(r, "bin/small.bin", b"\x00\x01\x02");
    write(r, "tc", "typechange me\n");
    write(r, "d/x", "dir becomes file\n");
    write(r, "exec.sh", "#!/bin/sh\n");
    chmod(r, "exec.sh", 0o755);
    write(r, "keep/unchanged.txt", "same\n");
}

fn rich_change(r: &Path) {
    let mut main = numbered(30, "main");
    main = main.replace("main line 5\n", "main line FIVE\n");
    main = main.replace("main line 25\n", "main line 25\ninserted\n");
    write(r, "src/main.rs", main);
    fs::remove_file(r.join("README")).unwrap();
    write(r, "docs/a b.md", "alpha\nBETA");
    write(r, "\u{fc}.txt", "UMLAUT\n");
    fs::remove_dir_all(r.join("old")).unwrap();
    write(
        r,
        "new/name.txt",
        numbered(20, "moved").replace("moved line 10\n", "moved line ten\n"),
    );
    write(
        r,
        "copy_src.txt",
        numbered(20, "copied").replace("copied line 1\n", "copied line one\n"),
    );
    write(r, "copy_dst.txt", numbered(20, "copied"));
    chmod(r, "run.sh", 0o755);
    fs::remove_file(r.join("link")).unwrap();
    symlink("docs", r.join("link")).unwrap();
    let mut blob = pseudo_random(6000, 7);
    blob[100] ^= 0x55;
    blob.extend_from_slice(b"more");
    write(r, "bin/blob.bin", blob);
    write(r, "bin/small.bin", b"\x00\x09\x02\x07");
    write(r, "new dir/created.txt", "created\n");
    write(r, "empty", "");
    symlink("src/main.rs", r.join("newlink")).unwrap();
    fs::remove_file(r.join("tc")).unwrap();
    symlink("README.md", r.join("tc")).unwrap();
    fs::remove_dir_all(r.join("d")).unwrap();
    write(r, "d", "now a file\n");
    chmod(r, "exec.sh", 0o644);
}

#[test]
fn rich_git_patch_matches_git_apply() {
    let repo = Repo::new(rich_base);
    let patch = repo.diff(
        rich_change,
        &["--binary", "-M", "-C", "--find-copies-harder"],
    );
    let text = String::from_utf8_lossy(&patch);
    assert!(text.contains("rename from old/name.txt"), "{text}");
    assert!(text.contains("copy from copy_src.txt"), "{text}");
    assert!(text.contains("delta "), "{text}");
    assert!(text.contains("\"a/\\303\\274.txt\""), "{text}");

    let ours = tmp_with(rich_base);
    let report = apply_patch(ours.path(), &patch, &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert!(report.files.iter().all(|f| f.status == FileStatus::Applied));
    assert_eq!(tree_view(ours.path()), tree_view(repo.path()));

    let theirs = tmp_with(rich_base);
    let out = git_apply(theirs.path(), repo.home.path(), &patch);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(tree_view(ours.path()), tree_view(theirs.path()));

    // A second apply changes nothing and says so.
    let before = exact_fingerprint(ours.path());
    let again = apply_patch(ours.path(), &patch, &opts()).unwrap();
    assert_eq!(again.outcome, Outcome::AlreadyApplied, "{again}");
    assert_same(&exact_fingerprint(ours.path()), &before, "tree");
    // No staging directory left behind.
    assert!(!fs::read_dir(ours.path()).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with(".patchbox")));
}

#[test]
fn plain_git_diff_without_binary_or_renames() {
    let base = |r: &Path| {
        write(r, "a.txt", numbered(12, "a"));
        write(r, "b/c.txt", "c\n");
        write(r, "gone.txt", "bye\n");
    };
    let repo = Repo::new(base);
    let patch = repo.diff(
        |r| {
            write(r, "a.txt", numbered(12, "a").replace("a line 6\n", "six\n"));
            fs::remove_dir_all(r.join("b")).unwrap();
            write(r, "b2/c.txt", "c\n");
            fs::remove_file(r.join("gone.txt")).unwrap();
        },
        &["--no-renames"],
    );
    let ours = tmp_with(base);
    let report = apply_patch(ours.path(), &patch, &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert_eq!(tree_view(ours.path()), tree_view(repo.path()));
    // The emptied directory was removed, like git apply does.
    assert!(!ours.path().join("b").exists());
}

#[test]
fn traditional_diff_run_applies() {
    let top = tempfile::tempdir().unwrap();
    let a = top.path().join("a");
    let b = top.path().join("b");
    write(&a, "one.txt", numbered(10, "one"));
    write(&a, "sub/two.txt", "two\n");
    write(&a, "del.txt", "delete me\n");
    write(
        &b,
        "one.txt",
        numbered(10, "one").replace("one line 3\n", "THREE\n"),
    );
    write(&b, "sub/two.txt", "two\nmore");
    write(&b, "sub/new.txt", "new\n");
    let out = Command::new("diff")
        .current_dir(top.path())
        .args(["-ruN", "a", "b"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let project = tempfile::tempdir().unwrap();
    copy_tree(&a, project.path());
    let report = apply_patch(project.path(), &out.stdout, &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert_eq!(tree_view(project.path()), tree_view(&b));
}

// ---------------------------------------------------------------------------------------------
// Drift
// ---------------------------------------------------------------------------------------------

fn drift_base(r: &Path) {
    write(r, "f.txt", numbered(20, "f"));
    write(r, "other.txt", "other\n");
}

/// The patch: line 10 of f.txt changes; other.txt gains a line.
fn drift_patch() -> (Repo, Vec<u8>) {
    let repo = Repo::new(drift_base);
    let patch = repo.diff(
        |r| {
            write(
                r,
                "f.txt",
                numbered(20, "f").replace("f line 10\n", "f line TEN\n"),
            );
            write(r, "other.txt", "other\nmore\n");
        },
        &[],
    );
    (repo, patch)
}

#[test]
fn offset_when_lines_were_added_above() {
    let (_repo, patch) = drift_patch();
    let project = tmp_with(|r| {
        drift_base(r);
        write(
            r,
            "f.txt",
            format!("{}{}", numbered(5, "new"), numbered(20, "f")),
        );
    });
    let report = apply_patch(project.path(), &patch, &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert_eq!(report.files[0].status, FileStatus::Applied);
    assert!(report.files[0].detail.contains("offset +5"), "{report}");
    let f = fs::read_to_string(project.path().join("f.txt")).unwrap();
    assert!(
        f.contains("new line 5\nf line 1\n") && f.contains("f line 9\nf line TEN\nf line 11\n")
    );
}

#[test]
fn three_way_merge_with_preimage() {
    let (repo, patch) = drift_patch();
    // The user changed line 8: inside the hunk's context, so plain context matching fails.
    let drifted = |r: &Path| {
        drift_base(r);
        write(
            r,
            "f.txt",
            numbered(20, "f").replace("f line 8\n", "f line eight\n"),
        );
    };
    let pre = tmp_with(drift_base);

    // Without a pre-image: conflict, nothing written.
    let project = tmp_with(drifted);
    let before = exact_fingerprint(project.path());
    let report = apply_patch(project.path(), &patch, &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    assert_eq!(report.files[0].status, FileStatus::Conflict);
    assert_eq!(report.files[0].conflicts.len(), 1);
    assert_eq!(report.files[0].conflicts[0].hunk, 1);
    assert_eq!(report.files[1].status, FileStatus::Applied);
    assert_same(&exact_fingerprint(project.path()), &before, "tree");

    // With it: merged.
    let o = ApplyOptions {
        preimages: Some(pre.path().to_path_buf()),
        ..opts()
    };
    let report = apply_patch(project.path(), &patch, &o).unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert_eq!(report.files[0].status, FileStatus::Merged);
    let f = fs::read_to_string(project.path().join("f.txt")).unwrap();
    assert_eq!(
        f,
        numbered(20, "f")
            .replace("f line 8\n", "f line eight\n")
            .replace("f line 10\n", "f line TEN\n")
    );
    // Applying again: already applied (via the index line's blob id or the merge).
    let again = apply_patch(project.path(), &patch, &o).unwrap();
    assert_eq!(again.outcome, Outcome::AlreadyApplied, "{again}");
    drop(repo);
}

#[test]
fn overlapping_edit_is_a_conflict_and_markers_only_when_asked() {
    let (_repo, patch) = drift_patch();
    let pre = tmp_with(drift_base);
    let drifted = |r: &Path| {
        drift_base(r);
        write(
            r,
            "f.txt",
            numbered(20, "f").replace("f line 10\n", "f line 10 (mine)\n"),
        );
    };
    let project = tmp_with(drifted);
    let before = exact_fingerprint(project.path());
    let o = ApplyOptions {
        preimages: Some(pre.path().to_path_buf()),
        ..opts()
    };
    let report = apply_patch(project.path(), &patch, &o).unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    let f = &report.files[0];
    assert_eq!(f.status, FileStatus::Conflict);
    assert_eq!(f.conflicts.len(), 1);
    assert_eq!(f.conflicts[0].hunk, 1);
    assert!(f.conflicts[0].reason.contains("lines 10-10"), "{report}");
    assert!(!f.markers_written);
    assert_same(
        &exact_fingerprint(project.path()),
        &before,
        "refusal must not touch the tree",
    );
    let shown = report.to_string();
    assert!(
        shown.contains("conflict") && shown.contains("f.txt"),
        "{shown}"
    );
    assert!(shown.contains("nothing was written"), "{shown}");

    // Check mode with markers: reports, writes nothing.
    let o_markers = ApplyOptions {
        conflict_markers: true,
        ..o.clone()
    };
    let checked = apply_patch(
        project.path(),
        &patch,
        &ApplyOptions {
            check: true,
            ..o_markers.clone()
        },
    )
    .unwrap();
    assert_eq!(checked.outcome, Outcome::AppliedWithConflicts);
    assert!(!checked.wrote());
    assert_same(&exact_fingerprint(project.path()), &before, "tree");

    let report = apply_patch(project.path(), &patch, &o_markers).unwrap();
    assert_eq!(report.outcome, Outcome::AppliedWithConflicts, "{report}");
    assert!(report.files[0].markers_written);
    let f = fs::read_to_string(project.path().join("f.txt")).unwrap();
    assert!(
        f.contains(
            "<<<<<<< project\nf line 10 (mine)\n||||||| pre-image\nf line 10\n=======\nf line TEN\n>>>>>>> patch\n"
        ),
        "{f}"
    );
    assert_eq!(
        fs::read_to_string(project.path().join("other.txt")).unwrap(),
        "other\nmore\n"
    );
}

#[test]
fn wrong_preimage_is_not_used() {
    let (_repo, patch) = drift_patch();
    let pre = tmp_with(|r| {
        drift_base(r);
        write(
            r,
            "f.txt",
            numbered(20, "f").replace("f line 2\n", "something else\n"),
        );
    });
    let project = tmp_with(|r| {
        drift_base(r);
        write(
            r,
            "f.txt",
            numbered(20, "f").replace("f line 8\n", "f line eight\n"),
        );
    });
    let o = ApplyOptions {
        preimages: Some(pre.path().to_path_buf()),
        ..opts()
    };
    let report = apply_patch(project.path(), &patch, &o).unwrap();
    assert_eq!(report.files[0].status, FileStatus::Conflict, "{report}");
    assert!(
        report.files[0].detail.contains("pre-image does not match"),
        "{report}"
    );
}

#[test]
fn already_applied_detected_without_index_lines() {
    // diff -u style (no index line): detection by reverse application.
    let patch = b"--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,4 @@\n a\n b\n+x\n c\n";
    let project = tmp_with(|r| write(r, "f.txt", "a\nb\nx\nc\n"));
    let before = exact_fingerprint(project.path());
    let report = apply_patch(project.path(), patch, &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::AlreadyApplied, "{report}");
    assert_eq!(report.files[0].status, FileStatus::AlreadyApplied);
    assert_same(&exact_fingerprint(project.path()), &before, "tree");
    // Creation of an identical file, deletion of an absent one.
    let patch = b"diff --git a/n b/n\nnew file mode 100644\n--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+n\ndiff --git a/g b/g\ndeleted file mode 100644\n--- a/g\n+++ /dev/null\n@@ -1 +0,0 @@\n-g\n";
    write(project.path(), "n", "n\n");
    let report = apply_patch(project.path(), patch, &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::AlreadyApplied, "{report}");
}

#[test]
fn creation_over_different_file_and_deletion_of_changed_file_conflict() {
    let patch =
        b"diff --git a/n b/n\nnew file mode 100644\n--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+n\n";
    let project = tmp_with(|r| write(r, "n", "mine\n"));
    let report = apply_patch(project.path(), patch, &opts()).unwrap();
    assert_eq!(report.files[0].status, FileStatus::Conflict, "{report}");
    // Markers cannot express this: still refused.
    let report = apply_patch(
        project.path(),
        patch,
        &ApplyOptions {
            conflict_markers: true,
            ..opts()
        },
    )
    .unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");

    let patch = b"diff --git a/g b/g\ndeleted file mode 100644\n--- a/g\n+++ /dev/null\n@@ -1 +0,0 @@\n-g\n";
    let project = tmp_with(|r| write(r, "g", "g\nlocal addition\n"));
    let report = apply_patch(project.path(), patch, &opts()).unwrap();
    assert_eq!(report.files[0].status, FileStatus::Conflict, "{report}");
    assert!(project.path().join("g").exists());
}

#[test]
fn binary_changed_locally_is_a_conflict() {
    let base = |r: &Path| write(r, "b.bin", pseudo_random(3000, 1));
    let repo = Repo::new(base);
    let patch = repo.diff(
        |r| {
            let mut d = pseudo_random(3000, 1);
            d[5] ^= 1;
            write(r, "b.bin", d);
        },
        &["--binary"],
    );
    let project = tmp_with(|r| {
        let mut d = pseudo_random(3000, 1);
        d[2000] ^= 1;
        write(r, "b.bin", d);
    });
    let before = exact_fingerprint(project.path());
    let report = apply_patch(project.path(), &patch, &opts()).unwrap();
    assert_eq!(report.files[0].status, FileStatus::Conflict, "{report}");
    assert_same(&exact_fingerprint(project.path()), &before, "tree");
}

// ---------------------------------------------------------------------------------------------
// Atomicity
// ---------------------------------------------------------------------------------------------

#[test]
fn multi_file_conflict_leaves_tree_byte_identical() {
    let base = |r: &Path| {
        write(r, "a.txt", "a\n");
        write(r, "dir/b.txt", "b\n");
        write(r, "z.txt", numbered(5, "z"));
        chmod(r, "a.txt", 0o640);
    };
    let repo = Repo::new(base);
    let patch = repo.diff(
        |r| {
            write(r, "a.txt", "A\n");
            fs::remove_file(r.join("dir/b.txt")).unwrap();
            write(r, "new/c.txt", "c\n");
            write(r, "z.txt", numbered(5, "z").replace("z line 3\n", "Z3\n"));
        },
        &[],
    );
    let project = tmp_with(|r| {
        base(r);
        write(r, "z.txt", numbered(5, "z").replace("z line 3\n", "mine\n"));
    });
    let before = exact_fingerprint(project.path());
    let report = apply_patch(project.path(), &patch, &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    assert_eq!(report.count(FileStatus::Applied), 3);
    assert_eq!(report.count(FileStatus::Conflict), 1);
    assert_same(&exact_fingerprint(project.path()), &before, "tree");
}

#[cfg(feature = "fault-injection")]
#[test]
fn failure_at_any_write_step_rolls_back_everything() {
    let repo = Repo::new(rich_base);
    let patch = repo.diff(rich_change, &["--binary", "-M"]);
    let mut k = 1;
    loop {
        let project = tmp_with(rich_base);
        let before = exact_fingerprint(project.path());
        let o = ApplyOptions {
            fail_after_steps: Some(k),
            ..opts()
        };
        match apply_patch(project.path(), &patch, &o) {
            Err(e) => {
                assert!(e.to_string().contains("injected"), "step {k}: {e}");
                assert!(
                    !e.to_string().contains("ROLLBACK INCOMPLETE"),
                    "step {k}: {e}"
                );
                assert_same(&exact_fingerprint(project.path()), &before, "step {k}");
            }
            Ok(report) => {
                // Past the last step: the apply went through.
                assert_eq!(report.outcome, Outcome::Applied);
                assert_eq!(tree_view(project.path()), tree_view(repo.path()));
                assert!(k > 10, "only {k} steps?");
                break;
            }
        }
        k += 1;
    }
}

#[test]
fn check_mode_writes_nothing() {
    let repo = Repo::new(rich_base);
    let patch = repo.diff(rich_change, &["--binary", "-M"]);
    let project = tmp_with(rich_base);
    let before = exact_fingerprint(project.path());
    let report = apply_patch(
        project.path(),
        &patch,
        &ApplyOptions {
            check: true,
            ..opts()
        },
    )
    .unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert!(report.check_only && !report.wrote());
    assert!(report.to_string().contains("would be applied"), "{report}");
    assert_same(&exact_fingerprint(project.path()), &before, "tree");
}

// ---------------------------------------------------------------------------------------------
// Undo
// ---------------------------------------------------------------------------------------------

#[test]
fn undo_restores_contents_modes_and_mtimes() {
    let repo = Repo::new(rich_base);
    let patch = repo.diff(rich_change, &["--binary", "-M"]);
    let project = tmp_with(rich_base);
    let before_files = file_fingerprint(project.path());
    let before_view = tree_view(project.path());
    let records = tempfile::tempdir().unwrap();
    let undo = records.path().join("u1");
    let o = ApplyOptions {
        undo_dir: Some(undo.clone()),
        ..opts()
    };
    let report = apply_patch(project.path(), &patch, &o).unwrap();
    assert_eq!(report.undo_dir.as_deref(), Some(undo.as_path()));
    assert_eq!(tree_view(project.path()), tree_view(repo.path()));

    let u = undo_apply(project.path(), &undo, false).unwrap();
    assert!(!u.already_undone && u.overwritten.is_empty());
    assert!(!u.restored.is_empty());
    assert_eq!(tree_view(project.path()), before_view);
    assert_same(
        &file_fingerprint(project.path()),
        &before_files,
        "after undo",
    );
    // Twice is harmless.
    assert!(
        undo_apply(project.path(), &undo, false)
            .unwrap()
            .already_undone
    );
    assert_eq!(tree_view(project.path()), before_view);
}

#[test]
fn undo_refuses_changed_files_unless_forced() {
    let project = tmp_with(|r| {
        write(r, "a.txt", "one\n");
        write(r, "b.txt", "bee\n");
    });
    let patch = b"--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-bee\n+BEE\n";
    let records = tempfile::tempdir().unwrap();
    let undo = records.path().join("u");
    let o = ApplyOptions {
        undo_dir: Some(undo.clone()),
        ..opts()
    };
    apply_patch(project.path(), patch, &o).unwrap();
    write(project.path(), "a.txt", "user edit\n");
    let e = undo_apply(project.path(), &undo, false).unwrap_err();
    assert!(e.to_string().contains("a.txt"), "{e}");
    assert_eq!(fs::read(project.path().join("b.txt")).unwrap(), b"BEE\n");
    let u = undo_apply(project.path(), &undo, true).unwrap();
    assert_eq!(u.overwritten.len(), 1);
    assert_eq!(fs::read(project.path().join("a.txt")).unwrap(), b"one\n");
    assert_eq!(fs::read(project.path().join("b.txt")).unwrap(), b"bee\n");

    // An undo directory that is not empty is refused before anything is written.
    let before = exact_fingerprint(project.path());
    let e = apply_patch(project.path(), patch, &o).unwrap_err();
    assert!(e.to_string().contains("not empty"), "{e}");
    assert_same(&exact_fingerprint(project.path()), &before, "tree");
}

#[cfg(feature = "fault-injection")]
#[test]
fn undo_record_links_originals_but_copies_shared_files() {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    let project = tmp_with(|r| {
        write(r, "a.txt", "one\n");
        write(r, "b.txt", "shared\n");
        fs::hard_link(r.join("b.txt"), r.join("c.txt")).unwrap();
    });
    let a_ino = fs::metadata(project.path().join("a.txt")).unwrap().ino();
    let patch = b"--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-shared\n+mine\n";
    let records = tempfile::tempdir().unwrap();
    let same_fs =
        fs::metadata(records.path()).unwrap().dev() == fs::metadata(project.path()).unwrap().dev();

    // A failed apply leaves no extra link behind and removes its record.
    let failed = records.path().join("failed");
    let o = ApplyOptions {
        undo_dir: Some(failed.clone()),
        fail_after_steps: Some(3),
        ..opts()
    };
    assert!(apply_patch(project.path(), patch, &o).is_err());
    assert!(!failed.exists());
    let a = fs::metadata(project.path().join("a.txt")).unwrap();
    assert_eq!((a.ino(), a.nlink()), (a_ino, 1));
    assert_eq!(fs::read(project.path().join("a.txt")).unwrap(), b"one\n");

    let undo = records.path().join("u");
    let o = ApplyOptions {
        undo_dir: Some(undo.clone()),
        ..opts()
    };
    apply_patch(project.path(), patch, &o).unwrap();
    let kept: Vec<u64> = fs::read_dir(undo.join("blobs"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().ino())
        .collect();
    assert_eq!(kept.len(), 2);
    // On one filesystem the record keeps a.txt's original by a link, not a copy.
    assert_eq!(kept.contains(&a_ino), same_fs);
    // b.txt's original is still reachable as c.txt: the record has its own copy, so editing
    // c.txt in place cannot change what undo restores.
    fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(project.path().join("c.txt"))
        .unwrap()
        .write_all(b"edited through the other link\n")
        .unwrap();
    undo_apply(project.path(), &undo, false).unwrap();
    assert_eq!(fs::read(project.path().join("a.txt")).unwrap(), b"one\n");
    assert_eq!(fs::read(project.path().join("b.txt")).unwrap(), b"shared\n");
}

// ---------------------------------------------------------------------------------------------
// Attack corpus: traversal, .git, symlinks
// ---------------------------------------------------------------------------------------------

fn new_file_patch(name: &str) -> Vec<u8> {
    format!(
        "diff --git a/{name} b/{name}\nnew file mode 100644\n--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n+pwned\n"
    )
    .into_bytes()
}

/// A project with a valid file to patch, a symlink to a directory outside, and one to a file
/// outside; plus the outside directory.
struct Attack {
    project: tempfile::TempDir,
    outside: tempfile::TempDir,
}

impl Attack {
    fn new() -> Attack {
        let outside = tempfile::tempdir().unwrap();
        write(outside.path(), "secret.txt", "secret\n");
        let project = tmp_with(|r| {
            write(r, "ok.txt", "ok\n");
            write(r, "inside/file.txt", "inside\n");
            symlink(outside.path(), r.join("outdir")).unwrap();
            symlink(outside.path().join("secret.txt"), r.join("outfile")).unwrap();
            symlink("..", r.join("inside/up")).unwrap();
        });
        Attack { project, outside }
    }

    fn snapshot(&self) -> (ExactFingerprint, ExactFingerprint) {
        (
            exact_fingerprint(self.project.path()),
            exact_fingerprint(self.outside.path()),
        )
    }

    #[track_caller]
    fn assert_unchanged(&self, before: &(ExactFingerprint, ExactFingerprint)) {
        assert_same(
            &exact_fingerprint(self.project.path()),
            &before.0,
            "project",
        );
        assert_same(
            &exact_fingerprint(self.outside.path()),
            &before.1,
            "outside",
        );
    }
}

const OK_PATCH: &str =
    "diff --git a/ok.txt b/ok.txt\n--- a/ok.txt\n+++ b/ok.txt\n@@ -1 +1 @@\n-ok\n+changed\n";

#[test]
fn traversal_names_are_rejected_before_anything_happens() {
    let a = Attack::new();
    let before = a.snapshot();
    let cases: Vec<Vec<u8>> = vec![
        new_file_patch("../escape.txt"),
        new_file_patch("inside/../../escape.txt"),
        b"--- /dev/null\n+++ b/../../escape.txt\n@@ -0,0 +1 @@\n+x\n".to_vec(),
        b"diff --git \"a/\\056\\056/escape\" \"b/\\056\\056/escape\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/\\056\\056/escape\"\n@@ -0,0 +1 @@\n+x\n".to_vec(),
        b"diff --git a/ok.txt b/../moved\nsimilarity index 100%\nrename from ok.txt\nrename to ../moved\n".to_vec(),
        [OK_PATCH.as_bytes(), &new_file_patch("../escape.txt")].concat(),
    ];
    for c in &cases {
        let e = apply_patch(a.project.path(), c, &opts()).unwrap_err();
        assert_eq!(
            e.kind(),
            "containment",
            "{}: {e}",
            String::from_utf8_lossy(c)
        );
        a.assert_unchanged(&before);
    }
    // Absolute names with -p0.
    let e = apply_patch(
        a.project.path(),
        b"--- /dev/null\n+++ /tmp/escape\n@@ -0,0 +1 @@\n+x\n",
        &ApplyOptions { strip: 0, ..opts() },
    )
    .unwrap_err();
    assert_eq!(e.kind(), "containment");
    a.assert_unchanged(&before);
}

#[test]
fn git_internals_and_symlinked_parents_are_refused() {
    let a = Attack::new();
    fs::create_dir(a.project.path().join(".git")).unwrap();
    write(a.project.path(), ".git/config", "[core]\n");
    let before = a.snapshot();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (new_file_patch(".git/hooks/post-checkout"), ".git"),
        (
            b"--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-[core]\n+[core] hooksPath=/tmp\n"
                .to_vec(),
            ".git",
        ),
        (new_file_patch(".GIT/config"), ".git"),
        (new_file_patch("sub/.git/hooks/x"), ".git"),
        (new_file_patch("outdir/planted.txt"), "symlink"),
        (
            b"--- a/outdir/secret.txt\n+++ b/outdir/secret.txt\n@@ -1 +1 @@\n-secret\n+overwritten\n"
                .to_vec(),
            "symlink",
        ),
        (new_file_patch("inside/up/inside/x.txt"), "symlink"),
        (
            b"diff --git a/ok.txt b/outdir/ok.txt\nsimilarity index 100%\nrename from ok.txt\nrename to outdir/ok.txt\n".to_vec(),
            "symlink",
        ),
        (
            b"diff --git a/outdir/secret.txt b/stolen.txt\nsimilarity index 100%\ncopy from outdir/secret.txt\ncopy to stolen.txt\n".to_vec(),
            "symlink",
        ),
    ];
    for (c, why) in &cases {
        // Alone and mixed with a valid change: the whole patch is refused either way.
        for patch in [c.clone(), [OK_PATCH.as_bytes(), c].concat()] {
            let report = apply_patch(a.project.path(), &patch, &opts()).unwrap();
            assert_eq!(report.outcome, Outcome::Refused, "{report}");
            let refused: Vec<_> = report
                .files
                .iter()
                .filter(|f| f.status == FileStatus::Refused)
                .collect();
            assert_eq!(refused.len(), 1, "{report}");
            assert!(refused[0].detail.contains(why), "{report}");
            a.assert_unchanged(&before);
        }
    }
}

#[test]
fn symlinks_created_by_the_patch() {
    let a = Attack::new();
    let before = a.snapshot();
    // A symlink pointing outside: refused by default.
    let link_out = format!(
        "diff --git a/evil b/evil\nnew file mode 120000\n--- /dev/null\n+++ b/evil\n@@ -0,0 +1 @@\n+{}\n\\ No newline at end of file\n",
        a.outside.path().display()
    );
    let report = apply_patch(a.project.path(), link_out.as_bytes(), &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    assert!(report.files[0].detail.contains("outside"), "{report}");
    let rel_out = b"diff --git a/inside/evil b/inside/evil\nnew file mode 120000\n--- /dev/null\n+++ b/inside/evil\n@@ -0,0 +1 @@\n+../../x\n\\ No newline at end of file\n";
    let report = apply_patch(a.project.path(), rel_out, &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    a.assert_unchanged(&before);

    // A symlink into the project plus a file through it: refused (the link itself is fine).
    let through = b"diff --git a/s b/s\nnew file mode 120000\n--- /dev/null\n+++ b/s\n@@ -0,0 +1 @@\n+inside\n\\ No newline at end of file\ndiff --git a/s/x b/s/x\nnew file mode 100644\n--- /dev/null\n+++ b/s/x\n@@ -0,0 +1 @@\n+x\n";
    let report = apply_patch(a.project.path(), through, &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    assert!(
        report.files[1]
            .detail
            .contains("symlink created by the same patch"),
        "{report}"
    );
    a.assert_unchanged(&before);

    // Allowed when asked: only the link is created, nothing outside is written.
    let report = apply_patch(
        a.project.path(),
        link_out.as_bytes(),
        &ApplyOptions {
            allow_outside_symlinks: true,
            ..opts()
        },
    )
    .unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert_eq!(
        fs::read_link(a.project.path().join("evil")).unwrap(),
        a.outside.path()
    );
    assert_same(&exact_fingerprint(a.outside.path()), &before.1, "tree");
}

#[test]
fn existing_symlinks_are_replaced_never_written_through() {
    let a = Attack::new();
    let before_outside = exact_fingerprint(a.outside.path());
    let target = a.outside.path().join("secret.txt");
    let target_s = target.to_str().unwrap();

    // Patching "outfile" as a regular file: type mismatch, refused as a conflict.
    let as_file = b"diff --git a/outfile b/outfile\nindex 1111111..2222222 100644\n--- a/outfile\n+++ b/outfile\n@@ -1 +1 @@\n-secret\n+overwritten\n";
    let report = apply_patch(a.project.path(), as_file, &opts()).unwrap();
    assert_eq!(report.files[0].status, FileStatus::Conflict, "{report}");
    // Same without a mode in the patch (diff -u): the symlink's text is the target path, so
    // the context does not match either.
    let plain = b"--- a/outfile\n+++ b/outfile\n@@ -1 +1 @@\n-secret\n+overwritten\n";
    let report = apply_patch(a.project.path(), plain, &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    assert_same(
        &exact_fingerprint(a.outside.path()),
        &before_outside,
        "tree",
    );

    // Typechange symlink -> file: the link is replaced by a regular file.
    let typechange = format!(
        "diff --git a/outfile b/outfile\ndeleted file mode 120000\n--- a/outfile\n+++ /dev/null\n@@ -1 +0,0 @@\n-{target_s}\n\\ No newline at end of file\ndiff --git a/outfile b/outfile\nnew file mode 100644\n--- /dev/null\n+++ b/outfile\n@@ -0,0 +1 @@\n+now a file\n"
    );
    let report = apply_patch(a.project.path(), typechange.as_bytes(), &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    let m = fs::symlink_metadata(a.project.path().join("outfile")).unwrap();
    assert!(m.is_file());
    assert_eq!(
        fs::read(a.project.path().join("outfile")).unwrap(),
        b"now a file\n"
    );
    assert_same(
        &exact_fingerprint(a.outside.path()),
        &before_outside,
        "tree",
    );

    // Deleting a symlink removes the link, not its target.
    let outdir = a.outside.path().to_str().unwrap();
    let del = format!(
        "diff --git a/outdir b/outdir\ndeleted file mode 120000\n--- a/outdir\n+++ /dev/null\n@@ -1 +0,0 @@\n-{outdir}\n\\ No newline at end of file\n"
    );
    let report = apply_patch(a.project.path(), del.as_bytes(), &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert!(fs::symlink_metadata(a.project.path().join("outdir")).is_err());
    assert_same(
        &exact_fingerprint(a.outside.path()),
        &before_outside,
        "tree",
    );
}

#[test]
fn file_in_the_way_of_a_directory_is_a_conflict() {
    let project = tmp_with(|r| write(r, "plain", "x\n"));
    let before = exact_fingerprint(project.path());
    let report = apply_patch(project.path(), &new_file_patch("plain/child.txt"), &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    assert_same(&exact_fingerprint(project.path()), &before, "tree");
    // A directory with unrelated files in the way of a new file.
    let project = tmp_with(|r| write(r, "d/keep.txt", "keep\n"));
    let report = apply_patch(project.path(), &new_file_patch("d"), &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    assert!(report.files[0].detail.contains("in the way"), "{report}");
}

#[test]
fn garbage_and_unsupported_input() {
    let project = tmp_with(|r| write(r, "a", "a\n"));
    let e = apply_patch(project.path(), b"this is not a patch\n", &opts()).unwrap_err();
    assert_eq!(e.kind(), "patch_parse");
    let report = apply_patch(
        project.path(),
        b"diff --git a/a b/a\nindex 1111111..2222222 100644\nBinary files a/a and b/a differ\n",
        &opts(),
    )
    .unwrap();
    assert_eq!(report.files[0].status, FileStatus::Refused, "{report}");
    assert!(report.files[0].detail.contains("--binary"), "{report}");
    let missing = project.path().join("nope");
    let e = apply_patch(&missing, OK_PATCH.as_bytes(), &opts()).unwrap_err();
    assert_eq!(e.kind(), "io");
    let e = apply_patch(project.path().join("a"), OK_PATCH.as_bytes(), &opts()).unwrap_err();
    assert_eq!(e.kind(), "not_a_directory");
    // Empty patch: nothing to do.
    let r = apply_patch(project.path(), b"", &opts()).unwrap();
    assert_eq!(r.outcome, Outcome::AlreadyApplied);
    let _ = PathBuf::new();
}

#[test]
fn a_series_of_patches_in_one_input_applies_in_order() {
    let base = |r: &Path| write(r, "f.txt", numbered(10, "f"));
    let repo = Repo::new(base);
    let first = repo.diff(
        |r| write(r, "f.txt", numbered(10, "f").replace("f line 2\n", "two\n")),
        &[],
    );
    git(repo.path(), repo.home.path(), &["commit", "-qm", "one"]);
    let second = repo.diff(
        |r| {
            write(
                r,
                "f.txt",
                numbered(10, "f")
                    .replace("f line 2\n", "TWO\n")
                    .replace("f line 9\n", "nine\n"),
            )
        },
        &[],
    );
    let series = [first, second].concat();
    let project = tmp_with(base);
    let report = apply_patch(project.path(), &series, &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert_eq!(report.files.len(), 2);
    assert_eq!(tree_view(project.path()), tree_view(repo.path()));
    let again = apply_patch(project.path(), &series, &opts()).unwrap();
    assert_eq!(again.outcome, Outcome::AlreadyApplied, "{again}");
}

/// A patch using most features, mutated line by line: the engine must never panic, and when
/// it does not apply everything it must not change anything.
const FUZZ_PATCH: &str = "diff --git a/a.txt b/a.txt
index 1111111..2222222 100644
--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
diff --git a/new/n.txt b/new/n.txt
new file mode 100755
--- /dev/null
+++ b/new/n.txt
@@ -0,0 +1,2 @@
+n1
+n2
\\ No newline at end of file
diff --git a/ren.txt b/sub/ren2.txt
similarity index 100%
rename from ren.txt
rename to sub/ren2.txt
diff --git a/ln b/ln
new file mode 120000
--- /dev/null
+++ b/ln
@@ -0,0 +1 @@
+a.txt
\\ No newline at end of file
diff --git a/mode.sh b/mode.sh
old mode 100644
new mode 100755
";

fn fuzz_base(r: &Path) {
    write(r, "a.txt", "one\ntwo\nthree\n");
    write(r, "gone.txt", "gone\n");
    write(r, "ren.txt", "ren\n");
    write(r, "mode.sh", "#!/bin/sh\n");
}

#[test]
fn fuzz_patch_applies_unmutated() {
    let project = tmp_with(fuzz_base);
    let report = apply_patch(project.path(), FUZZ_PATCH.as_bytes(), &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert_eq!(
        fs::read_link(project.path().join("ln")).unwrap(),
        Path::new("a.txt")
    );
    assert_eq!(
        fs::read(project.path().join("new/n.txt")).unwrap(),
        b"n1\nn2"
    );
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Mutation {
        Delete(usize),
        Duplicate(usize),
        Replace(usize, String),
        Swap(usize, usize),
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            (0..60usize).prop_map(Mutation::Delete),
            (0..60usize).prop_map(Mutation::Duplicate),
            (
                0..60usize,
                prop_oneof![
                    Just("@@ -1,3 +2,3 @@".to_string()),
                    Just("@@ -0,0 +1 @@".to_string()),
                    Just(" two".to_string()),
                    Just("+".to_string()),
                    Just("-one".to_string()),
                    Just("new file mode 120000".to_string()),
                    Just("deleted file mode 100644".to_string()),
                    Just("rename to a.txt".to_string()),
                    Just("rename from gone.txt".to_string()),
                    Just("+++ b/a.txt".to_string()),
                    Just("--- a/ln".to_string()),
                    Just("+../../outside".to_string()),
                    Just("+/abs".to_string()),
                    Just("index 0000000..e69de29".to_string()),
                    "[ +-][a-z]{0,4}".prop_map(|s| s),
                ]
            )
                .prop_map(|(i, s)| Mutation::Replace(i, s)),
            (0..60usize, 0..60usize).prop_map(|(a, b)| Mutation::Swap(a, b)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

        #[test]
        fn mutated_patches_never_panic_or_half_apply(muts in proptest::collection::vec(mutation(), 1..4)) {
            let mut lines: Vec<String> = FUZZ_PATCH.lines().map(str::to_string).collect();
            for m in muts {
                let n = lines.len();
                if n == 0 {
                    break;
                }
                match m {
                    Mutation::Delete(i) => {
                        lines.remove(i % n);
                    }
                    Mutation::Duplicate(i) => {
                        let l = lines[i % n].clone();
                        lines.insert(i % n, l);
                    }
                    Mutation::Replace(i, s) => lines[i % n] = s,
                    Mutation::Swap(a, b) => lines.swap(a % n, b % n),
                }
            }
            let patch = lines.join("\n") + "\n";
            let project = tmp_with(fuzz_base);
            let before = exact_fingerprint(project.path());
            match apply_patch(project.path(), patch.as_bytes(), &opts()) {
                Err(_) => prop_assert!(exact_fingerprint(project.path()) == before),
                Ok(r) if !r.wrote() => prop_assert!(exact_fingerprint(project.path()) == before, "{}", r),
                Ok(r) => {
                    prop_assert!(r.is_ok());
                    // Whatever was written stays inside the project and the staging area is
                    // gone.
                    for e in fs::read_dir(project.path()).unwrap() {
                        let name = e.unwrap().file_name();
                        prop_assert!(!name.to_string_lossy().starts_with(".patchbox"));
                    }
                }
            }
        }
    }
}

#[cfg(feature = "fault-injection")]
#[test]
fn directory_and_symlink_typechanges() {
    // A directory becomes a symlink, and a symlink becomes a directory (git detects the
    // first as a rename of the symlink "v" to "s").
    let base = |r: &Path| {
        write(r, "s/x", "x\n");
        write(r, "s/y", "y\n");
        write(r, "target/t.txt", "t\n");
        symlink("target", r.join("v")).unwrap();
    };
    let repo = Repo::new(base);
    let patch = repo.diff(
        |r| {
            fs::remove_dir_all(r.join("s")).unwrap();
            symlink("target", r.join("s")).unwrap();
            fs::remove_file(r.join("v")).unwrap();
            write(r, "v/real.txt", "real\n");
        },
        &["--binary"],
    );
    let ours = tmp_with(base);
    let records = tempfile::tempdir().unwrap();
    let undo = records.path().join("u");
    let o = ApplyOptions {
        undo_dir: Some(undo.clone()),
        ..opts()
    };
    let report = apply_patch(ours.path(), &patch, &o).unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert_eq!(tree_view(ours.path()), tree_view(repo.path()));
    // git apply refuses this patch ("affected file 'v/real.txt' is beyond a symbolic link"):
    // it checks paths against the tree before the patch. We treat a symlink the same patch
    // removes as a directory to create, and every write walks the path with O_NOFOLLOW.
    let theirs = tmp_with(base);
    let out = git_apply(theirs.path(), repo.home.path(), &patch);
    assert!(!out.status.success());
    // The old target directory is untouched: nothing was written through the old link.
    assert_eq!(fs::read(ours.path().join("target/t.txt")).unwrap(), b"t\n");
    assert!(!ours.path().join("target/real.txt").exists());
    // Idempotent, and undoable.
    let again = apply_patch(ours.path(), &patch, &opts()).unwrap();
    assert_eq!(again.outcome, Outcome::AlreadyApplied, "{again}");
    undo_apply(ours.path(), &undo, false).unwrap();
    let fresh = tmp_with(base);
    assert_eq!(tree_view(ours.path()), tree_view(fresh.path()));

    // Every failure point of the write phase still rolls back completely.
    for k in 1..40 {
        let project = tmp_with(base);
        let before = exact_fingerprint(project.path());
        let o = ApplyOptions {
            fail_after_steps: Some(k),
            ..opts()
        };
        match apply_patch(project.path(), &patch, &o) {
            Err(e) => {
                assert!(
                    !e.to_string().contains("ROLLBACK INCOMPLETE"),
                    "step {k}: {e}"
                );
                assert_same(&exact_fingerprint(project.path()), &before, "rollback");
            }
            Ok(_) => break,
        }
    }
}

#[test]
fn symlink_replaced_by_directory_never_writes_through_the_old_link() {
    // The link points outside; the patch deletes it and creates a real directory there.
    let outside = tempfile::tempdir().unwrap();
    let project = tmp_with(|r| symlink(outside.path(), r.join("v")).unwrap());
    let target = outside.path().to_str().unwrap();
    let patch = format!(
        "diff --git a/v b/v\ndeleted file mode 120000\n--- a/v\n+++ /dev/null\n@@ -1 +0,0 @@\n-{target}\n\\ No newline at end of file\ndiff --git a/v/f b/v/f\nnew file mode 100644\n--- /dev/null\n+++ b/v/f\n@@ -0,0 +1 @@\n+inside\n"
    );
    let report = apply_patch(project.path(), patch.as_bytes(), &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert!(fs::symlink_metadata(project.path().join("v"))
        .unwrap()
        .is_dir());
    assert_eq!(fs::read(project.path().join("v/f")).unwrap(), b"inside\n");
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    // Without the deletion, the same creation is refused.
    let project = tmp_with(|r| symlink(outside.path(), r.join("v")).unwrap());
    let only_create = &patch[patch.find("diff --git a/v/f").unwrap()..];
    let report = apply_patch(project.path(), only_create.as_bytes(), &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
}

// ---------------------------------------------------------------------------------------------
// Never guessing: hunks anchored as git anchors them; "already applied" only for the exact
// result
// ---------------------------------------------------------------------------------------------

/// Applies `patch` to a one-file project holding `f` = `content` with `git apply` and with
/// patchbox (no pre-image) and checks they agree: where git applies, patchbox applies with
/// the same result; where git refuses, patchbox writes nothing. Returns patchbox's report.
#[track_caller]
fn same_as_git_apply(content: &str, patch: &str) -> patchbox::apply::ApplyReport {
    let home = tempfile::tempdir().unwrap();
    let theirs = tmp_with(|r| write(r, "f", content));
    let git_out = git_apply(theirs.path(), home.path(), patch.as_bytes());
    let ours = tmp_with(|r| write(r, "f", content));
    let before = exact_fingerprint(ours.path());
    let report = apply_patch(ours.path(), patch.as_bytes(), &opts()).unwrap();
    let what = format!("patch\n{patch}on {content:?}:\n{report}");
    if git_out.status.success() {
        assert_eq!(report.outcome, Outcome::Applied, "git applied it; {what}");
        assert_eq!(
            fs::read(ours.path().join("f")).unwrap(),
            fs::read(theirs.path().join("f")).unwrap(),
            "{what}"
        );
    } else {
        assert_eq!(report.outcome, Outcome::Refused, "git refused it; {what}");
        assert_same(&exact_fingerprint(ours.path()), &before, &what);
    }
    report
}

#[test]
fn zero_context_hunks_are_anchored_like_git_apply() {
    let del_last = "--- a/f\n+++ b/f\n@@ -3 +2,0 @@\n-x\n";
    // Deleting the last line "x": a look-alike "x" at the stated line (or one line below)
    // that is not the last line is not it.
    let r = same_as_git_apply("a\nb\nx\ny\n", del_last);
    assert_eq!(r.files[0].status, FileStatus::Conflict, "{r}");
    assert!(
        r.files[0].conflicts[0].reason.contains("end of the file"),
        "{r}"
    );
    same_as_git_apply("a\nb\nc\nx\nd\n", del_last);
    // At its place, or moved down by lines added above: still the last line.
    same_as_git_apply("a\nb\nx\n", del_last);
    let r = same_as_git_apply("z\na\nb\nx\n", del_last);
    assert!(r.files[0].detail.contains("offset +1"), "{r}");
    // A -U0 change in the middle of a file, or of its first line: git anchors a hunk
    // without trailing context to the end, so neither applies.
    same_as_git_apply("a\nb\nc\nd\n", "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\n+B\n");
    same_as_git_apply("a\nb\nc\nd\n", "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+A\n");
    // Appending with -U0 goes to the end of the file, as in git.
    same_as_git_apply("a\nb\n", "--- a/f\n+++ b/f\n@@ -2,0 +3 @@\n+c\n");
    same_as_git_apply("a\nb\nz\n", "--- a/f\n+++ b/f\n@@ -2,0 +3 @@\n+c\n");
    // A hunk stated at line 1 matches at the top only, context or not.
    same_as_git_apply(
        "new\na\nb\nc\nd\ne\n",
        "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n",
    );
    // Hunks with leading and trailing context keep their offsets.
    let r = same_as_git_apply(
        "new\na\nb\nc\nd\ne\n",
        "--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n",
    );
    assert!(r.files[0].detail.contains("offset +1"), "{r}");
}

#[test]
fn file_empty_at_snapshot_is_never_prepended_to() {
    use patchbox::patch::write::{write_file_diff, Side};
    use patchbox::RelPath;
    let f = RelPath::new("notes.txt").unwrap();
    let mut patch = Vec::new();
    write_file_diff(
        &mut patch,
        Some(Side {
            path: &f,
            mode: 0o100644,
            data: b"",
        }),
        Some(Side {
            path: &f,
            mode: 0o100644,
            data: b"from the sandbox\n",
        }),
    );
    assert!(
        String::from_utf8_lossy(&patch).contains("@@ -0,0 +1 @@"),
        "{}",
        String::from_utf8_lossy(&patch)
    );
    let home = tempfile::tempdir().unwrap();
    let user = |r: &Path| write(r, "notes.txt", "written by the user since\n");

    // The user wrote to the file since the snapshot: git refuses, and so does patchbox.
    let theirs = tmp_with(user);
    assert!(!git_apply(theirs.path(), home.path(), &patch)
        .status
        .success());
    let project = tmp_with(user);
    let before = exact_fingerprint(project.path());
    let report = apply_patch(project.path(), &patch, &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    assert_eq!(report.files[0].status, FileStatus::Conflict, "{report}");
    assert_same(&exact_fingerprint(project.path()), &before, "refused");

    // With the (empty) pre-image it is a 3-way case where both sides wrote: a conflict,
    // with markers holding both texts when asked.
    let base = tmp_with(|r| write(r, "notes.txt", ""));
    let with_base = ApplyOptions {
        preimages: Some(base.path().to_path_buf()),
        ..opts()
    };
    let report = apply_patch(project.path(), &patch, &with_base).unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    assert_eq!(report.files[0].status, FileStatus::Conflict, "{report}");
    assert!(report.files[0].detail.contains("3-way"), "{report}");
    assert_same(&exact_fingerprint(project.path()), &before, "refused");
    let marked = ApplyOptions {
        conflict_markers: true,
        ..with_base
    };
    let report = apply_patch(project.path(), &patch, &marked).unwrap();
    assert_eq!(report.outcome, Outcome::AppliedWithConflicts, "{report}");
    let text = fs::read_to_string(project.path().join("notes.txt")).unwrap();
    assert!(
        text.contains("<<<<<<< project\nwritten by the user since\n")
            && text.contains("=======\nfrom the sandbox\n>>>>>>> patch\n"),
        "{text}"
    );

    // Still empty: applied, as git applies it. Holding exactly the result: already applied.
    let project = tmp_with(|r| write(r, "notes.txt", ""));
    let theirs = tmp_with(|r| write(r, "notes.txt", ""));
    assert!(git_apply(theirs.path(), home.path(), &patch)
        .status
        .success());
    let report = apply_patch(project.path(), &patch, &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert_eq!(
        fs::read(project.path().join("notes.txt")).unwrap(),
        fs::read(theirs.path().join("notes.txt")).unwrap()
    );
    let report = apply_patch(project.path(), &patch, &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::AlreadyApplied, "{report}");
}

#[test]
fn already_applied_means_the_exact_result_not_a_look_alike() {
    let lines: String = (1..=12).map(|i| format!("l{i}\n")).collect();
    let patch = "--- a/f\n+++ b/f\n@@ -4,6 +4,7 @@\n l4\n l5\n l6\n+x\n l7\n l8\n l9\n";
    // Never patched: the user deleted "l5" and pasted the patched block further down. The
    // new side matches there (an offset), but the file is not the patch's result.
    let pasted = "l4\nl5\nl6\nx\nl7\nl8\nl9\n";
    let never = format!("{}{}", lines.replace("l5\n", ""), pasted);
    let r = same_as_git_apply(&never, patch);
    assert_eq!(r.files[0].status, FileStatus::Conflict, "{r}");
    // The patch's result at the stated lines: already applied.
    let result = lines.replace("l6\n", "l6\nx\n");
    let project = tmp_with(|r| write(r, "f", &result));
    let report = apply_patch(project.path(), patch.as_bytes(), &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::AlreadyApplied, "{report}");
}

// ---------------------------------------------------------------------------------------------
// Paths git refuses, refused at least as strictly
// ---------------------------------------------------------------------------------------------

/// Applies `patch` to a fresh project (with a `.git` directory and `f` = "f\n") with git and
/// with patchbox; patchbox must refuse it and name `why` in the refused file's detail.
#[track_caller]
fn refused_naming(patch: &[u8], why: &str, git_refuses: bool) {
    let base = |r: &Path| {
        write(r, "f", "f\n");
        write(r, ".git/config", "[core]\n");
    };
    let home = tempfile::tempdir().unwrap();
    let theirs = tmp_with(base);
    let git_out = git_apply(theirs.path(), home.path(), patch);
    let text = String::from_utf8_lossy(patch);
    assert_eq!(!git_out.status.success(), git_refuses, "git on\n{text}");
    let ours = tmp_with(base);
    let before = exact_fingerprint(ours.path());
    let report = apply_patch(ours.path(), patch, &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{text}\n{report}");
    let refused: Vec<_> = report
        .files
        .iter()
        .filter(|f| f.status == FileStatus::Refused)
        .collect();
    assert_eq!(refused.len(), 1, "{report}");
    assert!(refused[0].detail.contains(why), "{text}\n{report}");
    assert_same(&exact_fingerprint(ours.path()), &before, &text);
}

#[test]
fn git_aliases_on_other_file_systems_are_refused() {
    let quoted = |name: &str| {
        format!(
            "diff --git \"a/{name}\" \"b/{name}\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/{name}\"\n@@ -0,0 +1 @@\n+pwned\n"
        )
        .into_bytes()
    };
    // NTFS aliases of .git: git refuses them on every system (core.protectNTFS).
    for name in [
        ".git./config",
        ".GIT. ./config",
        "GIT~1/config",
        "git~1/hooks/x",
    ] {
        refused_naming(&new_file_patch(name), "NTFS reads as '.git'", true);
    }
    refused_naming(&quoted(".git /config"), "NTFS reads as '.git'", true);
    refused_naming(
        &quoted(".git::$INDEX_ALLOCATION/config"),
        "NTFS reads as '.git'",
        true,
    );
    refused_naming(&quoted("sub\\\\.git\\\\config"), "after a backslash", true);
    // HFS+ ignores U+200C and friends: git refuses these only where it protects HFS
    // (macOS); the project chokepoint refuses them everywhere.
    refused_naming(
        &quoted(".g\\342\\200\\214it/config"),
        "HFS+ reads as '.git'",
        false,
    );
    refused_naming(
        &quoted("\\357\\273\\277.GIT/hooks/x"),
        "HFS+ reads as '.git'",
        false,
    );
    // A symlink named .gitmodules (git reads that file).
    refused_naming(
        b"diff --git a/.gitmodules b/.gitmodules\nnew file mode 120000\n--- /dev/null\n+++ b/.gitmodules\n@@ -0,0 +1 @@\n+f\n\\ No newline at end of file\n",
        "'.gitmodules'",
        true,
    );
    // Names that only look similar are fine.
    for name in [".github/x", ".gitignore", "git~2", "x.git/y"] {
        let project = tempfile::tempdir().unwrap();
        let report = apply_patch(project.path(), &new_file_patch(name), &opts()).unwrap();
        assert_eq!(report.outcome, Outcome::Applied, "{name}: {report}");
    }
}

#[test]
fn type_changes_within_one_file_patch_are_refused() {
    // A mode-only change from a file to a symlink (its contents would become the target).
    let to_link = b"diff --git a/f b/f\nold mode 100644\nnew mode 120000\n";
    refused_naming(to_link, "does not match old mode", true);
    // The same with a rename, and a symlink to a file.
    refused_naming(
        b"diff --git a/f b/g\nold mode 100644\nnew mode 120000\nsimilarity index 100%\nrename from f\nrename to g\n",
        "does not match old mode",
        true,
    );
    // Only the new mode given: the type comes from the project (a file here).
    refused_naming(
        b"diff --git a/f b/f\nnew mode 120000\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-f\n+g\n",
        "change of file type",
        true,
    );
    // A symlink made a file.
    let base = |r: &Path| symlink("target", r.join("l")).unwrap();
    let project = tmp_with(base);
    let report = apply_patch(
        project.path(),
        b"diff --git a/l b/l\nold mode 120000\nnew mode 100644\n",
        &opts(),
    )
    .unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    assert!(fs::symlink_metadata(project.path().join("l"))
        .unwrap()
        .file_type()
        .is_symlink());
}

// ---------------------------------------------------------------------------------------------
// Depth
// ---------------------------------------------------------------------------------------------

/// Reads `rel` below `root` one component at a time (a path past PATH_MAX cannot be opened
/// whole).
fn read_deep(root: &Path, rel: &str) -> std::io::Result<Vec<u8>> {
    use rustix::fs::{openat, Mode, OFlags};
    let mut dir = rustix::fs::open(root, OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty())?;
    let comps: Vec<&str> = rel.split('/').collect();
    for c in &comps[..comps.len() - 1] {
        dir = openat(
            &dir,
            *c,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW,
            Mode::empty(),
        )?;
    }
    let f = openat(
        &dir,
        comps[comps.len() - 1],
        OFlags::RDONLY | OFlags::NOFOLLOW,
        Mode::empty(),
    )?;
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut fs::File::from(f), &mut out)?;
    Ok(out)
}

#[test]
fn a_path_4000_components_deep_applies() {
    // Past PATH_MAX (4096 bytes on Linux): only a descriptor walk reaches it. The test
    // writes once and then only plans.
    let depth = 4000;
    let deep = |name: &str| format!("{}{name}", "d/".repeat(depth - 1));
    let (f, g) = (deep("f"), deep("g"));
    assert!(f.len() > 4096, "deeper than PATH_MAX");
    let create = format!(
        "diff --git a/{f} b/{f}\nnew file mode 100644\n--- /dev/null\n+++ b/{f}\n@@ -0,0 +1,2 @@\n+deep\n+down\n\
         diff --git a/{g} b/{g}\nnew file mode 100755\n--- /dev/null\n+++ b/{g}\n@@ -0,0 +1 @@\n+g\n"
    );
    let project = tempfile::tempdir().unwrap();
    let report = apply_patch(project.path(), create.as_bytes(), &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert_eq!(read_deep(project.path(), &f).unwrap(), b"deep\ndown\n");
    assert_eq!(read_deep(project.path(), &g).unwrap(), b"g\n");
    let again = apply_patch(project.path(), create.as_bytes(), &opts()).unwrap();
    assert_eq!(again.outcome, Outcome::AlreadyApplied, "{again}");
    // Planning reads the deep file: a change applies (checked, not written), a stale one
    // conflicts.
    let check = ApplyOptions {
        check: true,
        ..opts()
    };
    let change = |old: &str| {
        format!("diff --git a/{f} b/{f}\n--- a/{f}\n+++ b/{f}\n@@ -1,2 +1,2 @@\n deep\n-{old}\n+under\n")
    };
    let report = apply_patch(project.path(), change("down").as_bytes(), &check).unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    let report = apply_patch(project.path(), change("up").as_bytes(), &check).unwrap();
    assert_eq!(report.files[0].status, FileStatus::Conflict, "{report}");
    // The chokepoint still refuses what it must at that depth.
    let mut bad = "d/".repeat(depth - 2);
    bad.push_str(".git./x");
    let report = apply_patch(project.path(), &new_file_patch(&bad), &opts()).unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    assert!(report.files[0].detail.contains("NTFS"), "{report}");
}

// ---------------------------------------------------------------------------------------------
// A path named by more than one file patch, and a lone 'new mode' line, against git apply
// ---------------------------------------------------------------------------------------------

/// Applies `patch` with git (to a copy) and with patchbox (to `base`'s tree); returns git's
/// output, patchbox's report and both trees.
fn both_apply(
    base: impl Fn(&Path),
    patch: &[u8],
) -> (
    std::process::Output,
    patchbox::apply::ApplyReport,
    tempfile::TempDir,
    tempfile::TempDir,
) {
    let home = tempfile::tempdir().unwrap();
    let ours = tmp_with(&base);
    let theirs = tmp_with(&base);
    let out = git_apply(theirs.path(), home.path(), patch);
    let report = apply_patch(ours.path(), patch, &opts()).unwrap();
    (out, report, ours, theirs)
}

/// Both refuse `patch` on `base` (git with a message containing `msg`); the tree is untouched.
fn both_refuse(base: impl Fn(&Path), patch: &[u8], msg: &str) {
    let (out, report, ours, _) = both_apply(&base, patch);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(msg), "git: {err}");
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    assert_eq!(tree_view(ours.path()), tree_view(tmp_with(&base).path()));
}

/// Both apply `patch` on `base` with the same result.
fn both_agree(base: impl Fn(&Path), patch: &[u8]) {
    let (out, report, ours, theirs) = both_apply(base, patch);
    assert!(
        out.status.success(),
        "git: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert_eq!(tree_view(ours.path()), tree_view(theirs.path()));
}

const DELETE_F: &str = "diff --git a/f b/f\ndeleted file mode 100644\nindex 7898192..0000000\n--- a/f\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n";
const CREATE_F: &str = "diff --git a/f b/f\nnew file mode 100644\nindex 0000000..6178079\n--- /dev/null\n+++ b/f\n@@ -0,0 +1 @@\n+b\n";
const MODIFY_F: &str =
    "diff --git a/f b/f\nindex 7898192..6178079 100644\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n";

#[test]
fn repeated_deletion_or_creation_is_refused_as_git_does() {
    let base = |r: &Path| write(r, "f", "a\n");
    // The same deletion twice.
    both_refuse(
        base,
        DELETE_F.repeat(2).as_bytes(),
        "has been renamed/deleted",
    );
    // A modification of a deleted path.
    both_refuse(
        base,
        format!("{DELETE_F}{MODIFY_F}").as_bytes(),
        "has been renamed/deleted",
    );
    // Deleted, created, created again.
    both_refuse(
        base,
        format!("{DELETE_F}{CREATE_F}{CREATE_F}").as_bytes(),
        "already exists in working directory",
    );
    // A creation of a path an earlier section modified.
    both_refuse(
        base,
        format!("{MODIFY_F}{CREATE_F}").as_bytes(),
        "already exists in working directory",
    );
    // Allowed: a deletion then a creation of the same path (git's type changes).
    both_agree(base, format!("{DELETE_F}{CREATE_F}").as_bytes());
}

#[test]
fn repeated_text_or_binary_section_is_refused_as_git_does() {
    let base = |r: &Path| write(r, "f", "a\n");
    // A text section twice: the second applies to the result of the first and fails.
    both_refuse(base, MODIFY_F.repeat(2).as_bytes(), "patch failed");
    // A series (the second continues the first) applies, as in git.
    let then = "diff --git a/f b/f\nindex 6178079..f2ad6c7 100644\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-b\n+c\n";
    both_agree(base, format!("{MODIFY_F}{then}").as_bytes());
    // A binary section twice.
    let bin_base = |r: &Path| write(r, "b.bin", pseudo_random(300, 3));
    let repo = Repo::new(bin_base);
    let patch = repo.diff(|r| write(r, "b.bin", pseudo_random(300, 4)), &["--binary"]);
    assert!(String::from_utf8_lossy(&patch).contains("GIT binary patch"));
    both_agree(bin_base, &patch);
    both_refuse(
        bin_base,
        &patch.repeat(2),
        "does not match the current contents",
    );
}

#[test]
fn lone_new_mode_line_sets_the_mode_as_git_does() {
    // No 'old mode' line: git takes the old mode from the file and applies the new one.
    let base = |r: &Path| write(r, "f", "a\n");
    let patch = b"diff --git a/f b/f\nnew mode 100755\nindex 7898192..6178079\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n";
    let (out, report, ours, theirs) = both_apply(base, patch);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    let mode = |d: &tempfile::TempDir| fs::metadata(d.path().join("f")).unwrap().mode() & 0o111;
    assert_eq!(mode(&theirs), 0o111);
    assert_eq!(mode(&ours), mode(&theirs));
    assert_eq!(tree_view(ours.path()), tree_view(theirs.path()));
}

#[test]
fn equal_mode_lines_set_the_mode_as_git_does() {
    // Explicit, equal 'old mode'/'new mode' lines on a file whose exec bit differs: git warns
    // ("has type 100644, expected 100755") and gives the file the 'new mode'. An 'index'
    // line's mode alone does not: the file keeps its own (the second half).
    let mode =
        |d: &tempfile::TempDir, p: &str| fs::metadata(d.path().join(p)).unwrap().mode() & 0o111;
    for (exec_before, m) in [(false, "100755"), (true, "100644")] {
        let base = move |r: &Path| {
            write(r, "f", "a\n");
            if exec_before {
                fs::set_permissions(r.join("f"), fs::Permissions::from_mode(0o755)).unwrap();
            }
        };
        let patch = format!(
            "diff --git a/f b/g\nold mode {m}\nnew mode {m}\nsimilarity index 50%\nrename from f\nrename to g\nindex 7898192..6178079\n--- a/f\n+++ b/g\n@@ -1 +1 @@\n-a\n+b\n"
        );
        let (out, report, ours, theirs) = both_apply(base, patch.as_bytes());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(report.outcome, Outcome::Applied, "{report}");
        let want = if exec_before { 0 } else { 0o111 };
        assert_eq!(mode(&theirs, "g"), want, "git, {m}");
        assert_eq!(mode(&ours, "g"), want, "patchbox, {m}");
        assert_eq!(tree_view(ours.path()), tree_view(theirs.path()));

        let patch = format!(
            "diff --git a/f b/f\nindex 7898192..6178079 {m}\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n"
        );
        let (out, report, ours, theirs) = both_apply(base, patch.as_bytes());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(report.outcome, Outcome::Applied, "{report}");
        let keep = if exec_before { 0o111 } else { 0 };
        assert_eq!(mode(&theirs, "f"), keep, "git, index {m}");
        assert_eq!(mode(&ours, "f"), keep, "patchbox, index {m}");
        assert_eq!(tree_view(ours.path()), tree_view(theirs.path()));
    }
}

#[test]
fn rename_of_a_file_modified_earlier_in_the_patch_keeps_that_result_as_git_does() {
    // A section modifies f, a later one renames f to g. The rename reads the original tree
    // (git's previous_patch ignores renames), and git's write phases remove the old paths
    // and then write every new one: f keeps the modification, g gets the original.
    let base = |r: &Path| write(r, "f", "a\n");
    let patch = b"diff --git a/f b/f\nindex 7898192..6178079 100644\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/f b/g\nsimilarity index 100%\nrename from f\nrename to g\n";
    let (out, report, ours, theirs) = both_apply(base, patch);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert_eq!(fs::read(theirs.path().join("f")).unwrap(), b"b\n");
    assert_eq!(fs::read(theirs.path().join("g")).unwrap(), b"a\n");
    assert_eq!(fs::read(ours.path().join("f")).unwrap(), b"b\n");
    assert_eq!(fs::read(ours.path().join("g")).unwrap(), b"a\n");
    assert_eq!(tree_view(ours.path()), tree_view(theirs.path()));
}

#[test]
fn rename_of_a_file_already_at_its_result_moves_it_where_git_refuses() {
    // Justified difference (`git: patch failed + already applied`): the file already holds
    // the rename's result (its blob id is the index line's new id); git's hunk fails on it,
    // patchbox moves it unchanged and says why.
    let base = |r: &Path| write(r, "f", "b\n");
    let patch = b"diff --git a/f b/g\nsimilarity index 50%\nrename from f\nrename to g\nindex 7898192..6178079\n--- a/f\n+++ b/g\n@@ -1 +1 @@\n-a\n+b\n";
    let (out, report, ours, theirs) = both_apply(base, patch);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("patch failed: f:1"),
        "git: {err}"
    );
    assert!(theirs.path().join("f").exists());
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert!(report.files[0].detail.contains("already"), "{report}");
    assert!(!ours.path().join("f").exists());
    assert_eq!(fs::read(ours.path().join("g")).unwrap(), b"b\n");
}

#[test]
fn copy_onto_its_own_source_is_refused_as_git_does() {
    // `copy to d//f` names `d/f`, the source: git says "already exists in working directory".
    let base = |r: &Path| write(r, "d/f", "a\n");
    for to in ["d/f", "d//f"] {
        let patch =
            format!("diff --git a/d/f b/d/f\nsimilarity index 100%\ncopy from d/f\ncopy to {to}\n");
        both_refuse(
            base,
            patch.as_bytes(),
            "already exists in working directory",
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Truncated patches, modes, names and binary ids as strict as git apply
// ---------------------------------------------------------------------------------------------

/// git refuses `patch` on `base` (its message contains `git_msg`; with `git_exit_0` git only
/// prints the error, skips that file and exits 0, as it does for a corrupt binary hunk);
/// patchbox refuses it (a parse error containing `pb_msg`, or a refused report) and leaves
/// the tree untouched.
#[track_caller]
fn git_refuses_patchbox_too(
    base: impl Fn(&Path),
    patch: &[u8],
    git_msg: &str,
    git_exit_0: bool,
    pb_msg: &str,
) {
    let home = tempfile::tempdir().unwrap();
    let theirs = tmp_with(&base);
    let out = git_apply(theirs.path(), home.path(), patch);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(git_msg), "git: {err}");
    assert_eq!(out.status.success(), git_exit_0, "git: {err}");
    let ours = tmp_with(&base);
    let before = tree_view(ours.path());
    match apply_patch(ours.path(), patch, &opts()) {
        Err(e) => assert!(e.to_string().contains(pb_msg), "patchbox: {e}"),
        Ok(r) => {
            assert_eq!(r.outcome, Outcome::Refused, "{r}");
            assert!(r.to_string().contains(pb_msg), "{r}");
        }
    }
    assert_eq!(tree_view(ours.path()), before);
}

#[test]
fn truncated_patches_are_refused_as_git_does() {
    let base = |r: &Path| {
        write(r, "f", "a\nb\n");
        write(r, "d/b.txt", "line 37\nc\na\n");
    };
    // Cut inside the last hunk line while the counts still add up (`+same` cut to `+s`):
    // applying it would write `s`, which the author never wrote.
    let p = b"diff --git a/d/b.txt b/d/b.txt\nindex a4d774a..b3f11c6 100644\n--- a/d/b.txt\n+++ b/d/b.txt\n@@ -1,3 +1,4 @@\n line 37\n c\n a\n+s";
    git_refuses_patchbox_too(base, p, "corrupt patch at line 9", false, "truncated");
    // Cut inside a hunk header, and a hunk left without any change.
    let p = b"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@";
    git_refuses_patchbox_too(base, p, "corrupt patch at line 4", false, "truncated");
    let p = b"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n b\n";
    git_refuses_patchbox_too(base, p, "corrupt patch", false, "corrupt patch");
    // A header's last line without its newline is not part of the header (git stops
    // there): a cut `new mode` line leaves a section without change, a cut `new file mode`
    // line no patch at all.
    let p = b"diff --git a/f b/f\nold mode 100644\nnew mode 100755";
    git_refuses_patchbox_too(
        base,
        p,
        "patch with only garbage",
        false,
        "without any change",
    );
    let p = b"diff --git a/c b/c\nnew file mode 100644";
    git_refuses_patchbox_too(
        base,
        p,
        "No valid patches in input",
        false,
        "extended header",
    );
    // A cut `copy to` line: git copies to the name on the complete `copy to` line before it
    // (here a name with a spliced `diff --git` in it), and so does patchbox.
    let p = b"diff --git a/f b/g\nsimilarity index 100%\ncopy from f\ncopy to g h\nsimilarity index 100%\ncopy from f\ncopy to g";
    let (out, report, ours, theirs) = both_apply(base, p);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert!(ours.path().join("g h").exists());
    assert_eq!(tree_view(ours.path()), tree_view(theirs.path()));
    // A binary hunk cut before its closing blank line: git prints "corrupt binary patch",
    // drops that file and exits 0; patchbox refuses the patch.
    let bin_base = |r: &Path| write(r, "b.bin", pseudo_random(300, 3));
    let repo = Repo::new(bin_base);
    let full = repo.diff(|r| fs::remove_file(r.join("b.bin")).unwrap(), &["--binary"]);
    let text = String::from_utf8(full.clone()).unwrap();
    let cut = text.find("\n\nliteral ").expect("a reverse hunk") + 1;
    git_refuses_patchbox_too(
        bin_base,
        &full[..cut],
        "corrupt binary patch",
        false,
        "truncated",
    );
    both_agree(bin_base, &full);
}

#[test]
fn mode_lines_are_read_as_git_reads_them() {
    let base = |r: &Path| write(r, "f", "a\nb\n");
    let hunk = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n";
    // The last of `old mode` and the `index` line's mode is the old mode (git's
    // gitdiff_oldmode): here a symlink's, so a regular `new mode` is a change of type.
    let p = format!(
        "diff --git a/f b/f\nold mode 100755\nnew mode 100644\nindex 422c2b7..de98044 120000\n{hunk}"
    );
    git_refuses_patchbox_too(
        base,
        p.as_bytes(),
        "f: wrong type",
        false,
        "does not match old mode",
    );
    // `old mode` disagreeing with a later `index` mode in type (the reproducer of
    // `new mode of P does not match old mode`).
    let p = format!(
        "diff --git a/f b/f\nold mode 100600\nnew mode 120000\nindex 422c2b7..de98044 100755\n{hunk}"
    );
    git_refuses_patchbox_too(
        base,
        p.as_bytes(),
        "does not match old mode",
        false,
        "does not match old mode",
    );
    // A creation with `old mode`/`new mode` lines: git 2.39 takes the last `new mode`
    // (here 160000, so it makes an empty submodule directory where the author wrote a
    // file); patchbox refuses the inconsistent header.
    let p = b"diff --git a/g b/g\nnew file mode 100755\nold mode 120000\nnew mode 160000\nindex 0000000..6a73333\n--- /dev/null\n+++ b/g\n@@ -0,0 +1 @@\n+x\n";
    let home = tempfile::tempdir().unwrap();
    let theirs = tmp_with(base);
    assert!(git_apply(theirs.path(), home.path(), p).status.success());
    assert!(theirs.path().join("g").is_dir());
    let ours = tmp_with(base);
    let e = apply_patch(ours.path(), p, &opts()).unwrap_err();
    assert!(e.to_string().contains("inconsistent header lines"), "{e}");
    assert!(!ours.path().join("g").exists());
}

#[test]
fn noncanonical_names_are_refused_as_git_does() {
    let base = |r: &Path| write(r, "d/b.txt", "x\n");
    // `//` in the `diff --git` line's names: git does not squash it there.
    let p = b"diff --git a/d//b.txt b/d//b.txt\nold mode 100644\nnew mode 100755\n";
    git_refuses_patchbox_too(base, p, "invalid path 'd//b.txt'", false, "invalid path");
    let p = b"diff --git a/d//c.txt b/d//c.txt\nnew file mode 100644\nindex 0000000..e69de29\n";
    git_refuses_patchbox_too(base, p, "invalid path 'd//c.txt'", false, "invalid path");
    // A `.` component.
    let p = b"diff --git a/d/./b.txt b/d/./b.txt\nold mode 100644\nnew mode 100755\n";
    git_refuses_patchbox_too(base, p, "invalid path 'd/./b.txt'", false, "'.' component");
    // A quoted second name in a traditional diff is taken as it is, even when the first
    // name is a prefix of it (git's find_name_gnu): here a path below a file.
    let base = |r: &Path| write(r, "t", "a\n");
    let p = b"--- \"a/t\"\n+++ \"b/t/in.txt\"\n@@ -1 +1,2 @@\n a\n+b\n";
    git_refuses_patchbox_too(base, p, "t/in.txt", false, "t/in.txt");
}

#[test]
fn binary_patches_need_a_full_index_line_as_in_git() {
    let base = |r: &Path| write(r, "b.bin", pseudo_random(300, 3));
    let repo = Repo::new(base);
    // The `index` line with abbreviated ids (as `git diff` without `--binary` writes them).
    let abbreviate = |p: &[u8]| -> Vec<u8> {
        String::from_utf8(p.to_vec())
            .unwrap()
            .lines()
            .map(|l| match l.strip_prefix("index ") {
                Some(ids) => {
                    let (a, b) = ids.split_once("..").unwrap();
                    let (b, mode) = b.split_once(' ').unwrap_or((b, ""));
                    format!("index {}..{} {mode}\n", &a[..7], &b[..7]).replace(" \n", "\n")
                }
                None => format!("{l}\n"),
            })
            .collect::<String>()
            .into_bytes()
    };
    let strip_index = |p: &[u8]| -> Vec<u8> {
        String::from_utf8(p.to_vec())
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("index "))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
            .into_bytes()
    };
    // A modification: the reverse literal matches the file, but nothing else ties the data
    // to it.
    let modify = repo.diff(|r| write(r, "b.bin", pseudo_random(300, 4)), &["--binary"]);
    both_agree(base, &modify);
    git_refuses_patchbox_too(
        base,
        &abbreviate(&modify),
        "without full index line",
        false,
        "without full index line",
    );
    // A deletion: its forward `literal 0` would "delete" any contents.
    let delete = repo.diff(|r| fs::remove_file(r.join("b.bin")).unwrap(), &["--binary"]);
    git_refuses_patchbox_too(
        base,
        &abbreviate(&delete),
        "without full index line",
        false,
        "without full index line",
    );
    // A `diff --git` line directly followed by the binary patch (no header line): git skips
    // the line and reads the rest as garbage; patchbox refuses it.
    let bare = strip_index(&modify);
    let e = apply_patch(tmp_with(base).path(), &bare, &opts()).unwrap_err();
    assert!(e.to_string().contains("extended header"), "{e}");
    let only_line = b"diff --git a/b.bin b/b.bin\nGIT binary patch\nliteral 0\nHcmV?d00001\n\n";
    let e = apply_patch(tmp_with(base).path(), only_line, &opts()).unwrap_err();
    assert!(e.to_string().contains("extended header"), "{e}");
}

#[test]
fn check_mode_predicts_file_patches_that_cancel_out() {
    // A deletion, then a rename of the path onto itself (git reads a rename's source from
    // the project, not from the earlier patch): nothing changes, and check mode says so.
    let base = |r: &Path| write(r, "f", "a\n");
    let p = format!(
        "{DELETE_F}diff --git a/f b/f\nsimilarity index 100%\nrename from f\nrename to f\n"
    );
    let dir = tmp_with(base);
    let check = apply_patch(
        dir.path(),
        p.as_bytes(),
        &ApplyOptions {
            check: true,
            ..opts()
        },
    )
    .unwrap();
    let real = apply_patch(dir.path(), p.as_bytes(), &opts()).unwrap();
    assert_eq!(check.outcome, Outcome::AlreadyApplied, "{check}");
    assert_eq!(real.outcome, Outcome::AlreadyApplied, "{real}");
    assert_eq!(fs::read(dir.path().join("f")).unwrap(), b"a\n");
}

#[test]
fn cr_in_binary_data_is_refused_as_git_does() {
    // A CRLF-converted binary hunk (the separator, or a data line): git calls it corrupt,
    // stops reading the patch there and applies only what came before (exit 0 when that is
    // something); patchbox refuses the whole patch.
    let base = |r: &Path| {
        write(r, "b.bin", pseudo_random(300, 3));
        write(r, "a.txt", "a\n");
    };
    let repo = Repo::new(base);
    let patch = repo.diff(
        |r| {
            write(r, "a.txt", "b\n");
            write(r, "b.bin", pseudo_random(300, 4));
        },
        &["--binary"],
    );
    both_agree(base, &patch);
    let text = String::from_utf8(patch).unwrap();
    let separator = text.replacen("\n\nliteral ", "\n\r\nliteral ", 1);
    let data_line = {
        let at = text.find("GIT binary patch\n").unwrap();
        let eol = at + text[at..].find("\nz").unwrap() + 1;
        let end = eol + text[eol..].find('\n').unwrap();
        format!("{}\r{}", &text[..end], &text[end..])
    };
    for p in [separator, data_line] {
        git_refuses_patchbox_too(
            base,
            p.as_bytes(),
            "corrupt binary patch",
            true,
            "corrupt binary patch",
        );
    }
}

#[test]
fn dev_null_names_need_new_or_deleted_file_mode_as_in_git() {
    let base = |r: &Path| write(r, "f", "a\n");
    // A deletion without `deleted file mode`: git "renames" f to a file named dev/null.
    let p =
        b"diff --git a/f b/f\nindex 7898192..0000000\n--- a/f\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n";
    let home = tempfile::tempdir().unwrap();
    let theirs = tmp_with(base);
    assert!(git_apply(theirs.path(), home.path(), p).status.success());
    assert!(theirs.path().join("dev/null").is_file());
    let ours = tmp_with(base);
    let e = apply_patch(ours.path(), p, &opts()).unwrap_err();
    assert!(e.to_string().contains("without 'deleted file mode'"), "{e}");
    assert_eq!(tree_view(ours.path()), tree_view(tmp_with(base).path()));
    // A creation without `new file mode`: git looks for dev/null.
    let p =
        b"diff --git a/g b/g\nindex 0000000..6178079\n--- /dev/null\n+++ b/g\n@@ -0,0 +1 @@\n+b\n";
    git_refuses_patchbox_too(
        base,
        p,
        "dev/null: No such file or directory",
        false,
        "without 'new file mode'",
    );
    // A creation whose `diff --git` line names no file to check the `+++` name against.
    let p = b"diff --git a/ b/\nnew file mode 100644\nindex 0000000..6178079\n--- /dev/null\n+++ b/g\n@@ -0,0 +1 @@\n+b\n";
    git_refuses_patchbox_too(
        base,
        p,
        "inconsistent new filename",
        false,
        "inconsistent file name",
    );
}

#[test]
fn rename_onto_itself_leaves_the_path_deleted_for_later_sections_as_in_git() {
    // git marks a rename's source deleted even when the rename puts the file back under the
    // same name: a later deletion of the path is refused ("has been renamed/deleted").
    let base = |r: &Path| write(r, "f", "a\n");
    let rename = "diff --git a/f b/f\nsimilarity index 100%\nrename from f\nrename to f\n";
    both_refuse(
        base,
        format!("{DELETE_F}{rename}{DELETE_F}").as_bytes(),
        "has been renamed/deleted",
    );
}

// ---------------------------------------------------------------------------------------------
// A project on an overlay (an engine applying into a sandbox): files replaced in place are
// swapped with their staged contents (`RENAME_EXCHANGE`), which overlay filesystems must do
// too, or refuse so the engine falls back to two renames
// ---------------------------------------------------------------------------------------------

/// Mounts `d/m` as an overlay of a small tree in `d/l` (with `fuse-overlayfs` when `fuse`,
/// else the kernel's), or says why not.
fn mount_overlay(d: &Path, fuse: bool) -> Result<PathBuf, String> {
    let (lower, upper, work, mnt) = (d.join("l"), d.join("u"), d.join("w"), d.join("m"));
    for p in [&lower, &upper, &work, &mnt] {
        fs::create_dir_all(p).unwrap();
    }
    fs::write(lower.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    fs::create_dir_all(lower.join("sub")).unwrap();
    fs::write(lower.join("sub/b.txt"), "b\n").unwrap();
    let opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        upper.display(),
        work.display()
    );
    let st = if fuse {
        Command::new("fuse-overlayfs")
            .args(["-o", &opts])
            .arg(&mnt)
            .output()
    } else {
        Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o", &opts])
            .arg(&mnt)
            .output()
    };
    match st {
        Ok(o) if o.status.success() => Ok(mnt),
        Ok(o) => Err(String::from_utf8_lossy(&o.stderr).trim().to_string()),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn applying_into_an_overlay_replaces_and_undoes_files_in_place() {
    for fuse in [false, true] {
        let name = if fuse {
            "fuse-overlayfs"
        } else {
            "kernel overlay"
        };
        let d = tempfile::tempdir().unwrap();
        let mnt = match mount_overlay(d.path(), fuse) {
            Ok(m) => m,
            Err(why) => {
                eprintln!("skipped ({name}): cannot mount: {why}");
                continue;
            }
        };
        let patch = b"--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n\
--- a/sub/b.txt\n+++ b/sub/b.txt\n@@ -1 +1 @@\n-b\n+B\n";
        let before = file_fingerprint(&mnt);
        let undo = d.path().join("undo");
        let res = apply_patch(
            &mnt,
            patch,
            &ApplyOptions {
                undo_dir: Some(undo.clone()),
                ..ApplyOptions::default()
            },
        );
        let after_a = fs::read_to_string(mnt.join("a.txt"));
        let after_b = fs::read_to_string(mnt.join("sub/b.txt"));
        let debris: Vec<_> = fs::read_dir(&mnt)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".patchbox-"))
            .collect();
        let undone = res
            .as_ref()
            .ok()
            .map(|_| undo_apply(&mnt, &undo, false).map(|_| file_fingerprint(&mnt)));
        let umount = if fuse { "fusermount" } else { "umount" };
        let mut c = Command::new(umount);
        if fuse {
            c.arg("-u");
        }
        assert!(c.arg(&mnt).status().unwrap().success(), "{name}: unmount");
        let r = res.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(r.outcome, Outcome::Applied, "{name}");
        assert_eq!(after_a.unwrap(), "one\nTWO\nthree\n", "{name}");
        assert_eq!(after_b.unwrap(), "B\n", "{name}");
        assert!(debris.is_empty(), "{name}: {debris:?}");
        let undone = undone
            .unwrap()
            .unwrap_or_else(|e| panic!("{name}: undo: {e}"));
        assert_same(&before, &undone, name);
    }
}
