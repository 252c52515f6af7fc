//! A patch checked now and written later (`check_patch` + `CheckedApply::apply`, what the plan
//! layer's `commit_all` does): the write gives what `git apply` gives on the project as it is
//! at write time, whatever the user changed in between. The kept plan is only a shortcut; a
//! file edited, created or read (a copy's source) since the check is planned again, and a
//! conflicting edit refuses the patch with nothing written.

use std::fs;
use std::path::Path;

mod common;

use common::{content_view, git_apply_copy, write};
use patchbox::apply::{apply_patch, check_patch, undo_apply, ApplyOptions, Outcome};

/// Twelve numbered lines.
fn lines(tag: &str) -> String {
    (1..=12).map(|i| format!("{tag} line {i}\n")).collect()
}

/// A project with `a.txt`, `b.txt` and `sub/c.txt`.
fn project(dir: &Path) {
    write(dir, "a.txt", lines("a").as_bytes());
    write(dir, "b.txt", lines("b").as_bytes());
    write(dir, "sub/c.txt", lines("c").as_bytes());
}

/// Changes line 2 of `a.txt`, deletes `b.txt`, creates `new/d.txt`.
const PATCH: &str = "diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 a line 1
-a line 2
+a line 2, patched
 a line 3
diff --git a/b.txt b/b.txt
deleted file mode 100644
--- a/b.txt
+++ /dev/null
@@ -1,12 +0,0 @@
-b line 1
-b line 2
-b line 3
-b line 4
-b line 5
-b line 6
-b line 7
-b line 8
-b line 9
-b line 10
-b line 11
-b line 12
diff --git a/new/d.txt b/new/d.txt
new file mode 100644
--- /dev/null
+++ b/new/d.txt
@@ -0,0 +1 @@
+d
";

/// Copies `sub/c.txt` to `sub/e.txt`, changing its first line.
const COPY: &str = "diff --git a/sub/c.txt b/sub/e.txt
similarity index 90%
copy from sub/c.txt
copy to sub/e.txt
--- a/sub/c.txt
+++ b/sub/e.txt
@@ -1,2 +1,2 @@
-c line 1
+e line 1
 c line 2
";

/// Replaces line 10 of the file at `rel` (a change the user makes between check and write).
fn edit_line_10(dir: &Path, rel: &str, tag: &str) {
    let p = dir.join(rel);
    let text = fs::read_to_string(&p).unwrap();
    let edited = text.replace(
        &format!("{tag} line 10\n"),
        &format!("{tag} line 10, edited by the user meanwhile\n"),
    );
    assert_ne!(text, edited);
    fs::write(&p, edited).unwrap();
}

/// The project, checked with `patch`, then changed by `meanwhile`, then written: must equal
/// `git apply` of the patch on the changed project.
fn check_edit_write(patch: &str, meanwhile: impl Fn(&Path)) {
    let t = tempfile::tempdir().unwrap();
    let proj = t.path().join("p");
    project(&proj);
    let checked = check_patch(&proj, patch.as_bytes(), &ApplyOptions::default()).unwrap();
    assert_eq!(checked.report().outcome, Outcome::Applied);
    assert!(checked.report().check_only);
    meanwhile(&proj);
    let expected = git_apply_copy(&proj, patch.as_bytes(), t.path());
    let report = checked.apply(&ApplyOptions::default()).unwrap();
    assert_eq!(report.outcome, Outcome::Applied, "{report}");
    assert!(report.wrote() && !report.check_only);
    assert_eq!(content_view(&proj), content_view(&expected));
}

#[test]
fn a_checked_patch_writes_what_git_apply_writes() {
    check_edit_write(PATCH, |_| {});
    check_edit_write(COPY, |_| {});
}

#[test]
fn a_file_the_patch_changes_edited_after_the_check_keeps_both_edits() {
    check_edit_write(PATCH, |p| edit_line_10(p, "a.txt", "a"));
}

#[test]
fn a_copy_source_edited_after_the_check_is_read_again() {
    // The copy's source is only read, never written: a stale plan would copy the old text.
    check_edit_write(COPY, |p| edit_line_10(p, "sub/c.txt", "c"));
}

#[test]
fn a_conflicting_edit_after_the_check_refuses_and_writes_nothing() {
    let t = tempfile::tempdir().unwrap();
    let proj = t.path().join("p");
    project(&proj);
    let checked = check_patch(&proj, PATCH.as_bytes(), &ApplyOptions::default()).unwrap();
    assert_eq!(checked.report().outcome, Outcome::Applied);
    let p = proj.join("a.txt");
    fs::write(
        &p,
        fs::read_to_string(&p)
            .unwrap()
            .replace("a line 2\n", "mine\n"),
    )
    .unwrap();
    // What git says of the project as it is now.
    let pf = t.path().join("p.patch");
    fs::write(&pf, PATCH).unwrap();
    let git = std::process::Command::new("git")
        .args(["apply", "--check"])
        .arg(&pf)
        .current_dir(&proj)
        .env("HOME", t.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(!git.status.success(), "git refuses it too");
    let before = content_view(&proj);
    let report = checked.apply(&ApplyOptions::default()).unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    assert!(!report.wrote());
    assert_eq!(content_view(&proj), before);
}

#[test]
fn a_file_created_where_the_patch_creates_one_is_not_overwritten() {
    let t = tempfile::tempdir().unwrap();
    let proj = t.path().join("p");
    project(&proj);
    let checked = check_patch(&proj, PATCH.as_bytes(), &ApplyOptions::default()).unwrap();
    write(&proj, "new/d.txt", b"the user's own d\n");
    let before = content_view(&proj);
    let report = checked.apply(&ApplyOptions::default()).unwrap();
    assert_eq!(report.outcome, Outcome::Refused, "{report}");
    assert_eq!(content_view(&proj), before);
}

#[test]
fn the_write_keeps_an_undo_record_that_undoes_it() {
    let t = tempfile::tempdir().unwrap();
    let proj = t.path().join("p");
    project(&proj);
    let before = content_view(&proj);
    let checked = check_patch(&proj, PATCH.as_bytes(), &ApplyOptions::default()).unwrap();
    let undo = t.path().join("undo");
    let opts = ApplyOptions {
        undo_dir: Some(undo.clone()),
        ..ApplyOptions::default()
    };
    let report = checked.apply(&opts).unwrap();
    assert!(report.wrote());
    assert_eq!(report.undo_dir.as_deref(), Some(undo.as_path()));
    // A second apply of the same patch finds it applied.
    let again = apply_patch(&proj, PATCH.as_bytes(), &ApplyOptions::default()).unwrap();
    assert_eq!(again.outcome, Outcome::AlreadyApplied);
    undo_apply(&proj, &undo, false).unwrap();
    assert_eq!(content_view(&proj), before);
}

#[test]
fn a_patch_already_in_place_at_write_time_writes_nothing() {
    let t = tempfile::tempdir().unwrap();
    let proj = t.path().join("p");
    project(&proj);
    let checked = check_patch(&proj, PATCH.as_bytes(), &ApplyOptions::default()).unwrap();
    // Someone else applies it first.
    apply_patch(&proj, PATCH.as_bytes(), &ApplyOptions::default()).unwrap();
    let after = content_view(&proj);
    let report = checked.apply(&ApplyOptions::default()).unwrap();
    assert_eq!(report.outcome, Outcome::AlreadyApplied, "{report}");
    assert!(!report.wrote());
    assert_eq!(content_view(&proj), after);
}
