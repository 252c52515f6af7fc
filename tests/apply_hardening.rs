//! `apply` refuses what git refuses and stays correct under concurrency: a deletion that
//! carries no contents, paths the library reserves for itself, two applies (and two undos)
//! of one project at once, `run --out` onto a symlink, and a very deep path.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{exact_fingerprint, git_init, mode_view, write};
use patchbox::apply::store::UndoStore;
use patchbox::apply::{apply_patch, undo_apply, ApplyOptions, FileStatus, Outcome};

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

// ------------------------------------------------------------------------------------------
// Reserved names
// ------------------------------------------------------------------------------------------

/// Patches that name a staging directory (`.patchbox-txn-*`) on either side, each with the
/// path that must be named in the refusal.
fn reserved_patches() -> Vec<(&'static str, String)> {
    let stage = ".patchbox-txn-01J00000000000000000000000.1.2";
    vec![
        (
            "rename into a staging directory",
            format!(
                "diff --git a/a.txt b/{stage}/a.txt\nsimilarity index 100%\nrename from a.txt\nrename to {stage}/a.txt\n"
            ),
        ),
        (
            "copy into a staging directory",
            format!(
                "diff --git a/a.txt b/{stage}/a.txt\nsimilarity index 100%\ncopy from a.txt\ncopy to {stage}/a.txt\n"
            ),
        ),
        (
            "creation in a staging directory",
            format!(
                "diff --git a/{stage}/n b/{stage}/n\nnew file mode 100644\n--- /dev/null\n+++ b/{stage}/n\n@@ -0,0 +1 @@\n+n\n"
            ),
        ),
        (
            "creation of a staging directory's name as a file",
            "diff --git a/.patchbox-txn-x b/.patchbox-txn-x\nnew file mode 100644\n--- /dev/null\n+++ b/.patchbox-txn-x\n@@ -0,0 +1 @@\n+n\n".to_string(),
        ),
        (
            "rename out of a staging directory",
            format!(
                "diff --git a/{stage}/a.txt b/a2.txt\nsimilarity index 100%\nrename from {stage}/a.txt\nrename to a2.txt\n"
            ),
        ),
        (
            "deletion in a staging directory",
            format!(
                "diff --git a/{stage}/a.txt b/{stage}/a.txt\ndeleted file mode 100644\n--- a/{stage}/a.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n"
            ),
        ),
        (
            "a staging directory's name below the root, in another case",
            "diff --git a/a.txt b/sub/.PATCHBOX-TXN-y/a.txt\nsimilarity index 100%\nrename from a.txt\nrename to sub/.PATCHBOX-TXN-y/a.txt\n".to_string(),
        ),
    ]
}

/// A patch naming the library's staging directory on either side (rename or copy from or
/// to, creation, deletion) is refused with that path named, and nothing is written. Were a
/// file renamed into one, the next apply's or undo's recovery would delete it as debris.
#[test]
fn paths_reserved_for_the_library_are_refused_on_either_side() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    write(&project, "a.txt", b"a\n");
    for (what, patch) in reserved_patches() {
        let before = exact_fingerprint(&project);
        for check in [true, false] {
            let opts = ApplyOptions {
                check,
                ..Default::default()
            };
            let r = apply_patch(&project, patch.as_bytes(), &opts).unwrap();
            assert_eq!(r.outcome, Outcome::Refused, "{what}: {r}");
            let f = &r.files[0];
            assert_eq!(f.status, FileStatus::Refused, "{what}: {r}");
            assert!(
                f.detail.contains(".patchbox-txn-") || f.detail.contains(".PATCHBOX-TXN-"),
                "{what}: {}",
                f.detail
            );
            assert!(f.detail.contains("reserves"), "{what}: {}", f.detail);
            assert_eq!(
                exact_fingerprint(&project),
                before,
                "{what}: nothing written"
            );
        }
    }
    // Through the store, as `patchbox apply` does: refused; the undo that follows finds
    // nothing to undo and the user's file is where it was.
    let root = tmp.path().join("root");
    let store = UndoStore::new(&root);
    let (_, rename) = &reserved_patches()[0];
    let r = store
        .apply(&project, rename.as_bytes(), &ApplyOptions::default())
        .unwrap();
    assert_eq!(r.outcome, Outcome::Refused, "{r}");
    assert!(store.undo_last(&project, false).is_err());
    assert_eq!(fs::read(project.join("a.txt")).unwrap(), b"a\n");
    assert_eq!(
        fs::read_dir(&project).unwrap().count(),
        1,
        "only a.txt in the project"
    );
}

// ------------------------------------------------------------------------------------------
// Concurrency
// ------------------------------------------------------------------------------------------

/// Twenty numbered lines.
fn lines(tag: &str) -> String {
    (1..=20).map(|i| format!("{tag} line {i}\n")).collect()
}

/// A patch changing line `n` of `shared.txt` (to `tag`) and creating `<tag>.txt`.
fn edit_patch(n: usize, tag: &str) -> String {
    let ctx = |i: usize| format!(" s line {i}\n");
    let mut hunk = String::new();
    for i in n - 3..n {
        hunk.push_str(&ctx(i));
    }
    hunk.push_str(&format!("-s line {n}\n+s line {n}, {tag}\n"));
    for i in n + 1..=n + 3 {
        hunk.push_str(&ctx(i));
    }
    format!(
        "diff --git a/shared.txt b/shared.txt\n--- a/shared.txt\n+++ b/shared.txt\n@@ -{s},7 +{s},7 @@\n{hunk}diff --git a/{tag}.txt b/{tag}.txt\nnew file mode 100644\n--- /dev/null\n+++ b/{tag}.txt\n@@ -0,0 +1 @@\n+{tag}\n",
        s = n - 3
    )
}

fn apply_cli(project: &Path, root: &Path, patch: &Path) -> std::process::Child {
    bin()
        .args(["apply", "--project"])
        .arg(project)
        .arg("--root")
        .arg(root)
        .arg(patch)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn undo_cli(project: &Path, root: &Path) -> std::process::Child {
    bin()
        .args(["apply", "--undo", "--project"])
        .arg(project)
        .arg("--root")
        .arg(root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Two `patchbox apply` processes started at once on one project, both changing
/// `shared.txt` (different lines): they take turns, so both apply (the second on top of the
/// first), and two `patchbox apply --undo` processes started at once take them back newest
/// first, leaving the project byte for byte as it was. Twenty rounds.
#[test]
fn concurrent_applies_land_in_turn_and_concurrent_undos_restore_the_project() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let root = tmp.path().join("root");
    write(&project, "shared.txt", lines("s").as_bytes());
    write(&project, "other.txt", b"other\n");
    let pa = tmp.path().join("a.patch");
    let pb = tmp.path().join("b.patch");
    fs::write(&pa, edit_patch(4, "a")).unwrap();
    fs::write(&pb, edit_patch(9, "b")).unwrap();
    let mut both = lines("s");
    both = both.replace("s line 4\n", "s line 4, a\n");
    both = both.replace("s line 9\n", "s line 9, b\n");
    let original = exact_fingerprint(&project);
    let original_view = mode_view(&project);
    for round in 0..20 {
        let (a, b) = if round % 2 == 0 {
            (&pa, &pb)
        } else {
            (&pb, &pa)
        };
        let ca = apply_cli(&project, &root, a);
        let cb = apply_cli(&project, &root, b);
        for c in [ca, cb] {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "round {round}: {}", show(&out));
        }
        assert_eq!(
            fs::read_to_string(project.join("shared.txt")).unwrap(),
            both,
            "round {round}: both applied"
        );
        let ua = undo_cli(&project, &root);
        let ub = undo_cli(&project, &root);
        for c in [ua, ub] {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "round {round}: {}", show(&out));
        }
        assert_eq!(mode_view(&project), original_view, "round {round}");
        assert_eq!(exact_fingerprint(&project), original, "round {round}");
    }
    // No staging directory and no lock file in the project.
    let mut names: Vec<_> = fs::read_dir(&project)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["other.txt", "shared.txt"]);
}

/// The same through the library, from threads: every apply through the store lands whole
/// and in turn, and undoing the newest record as many times restores the project.
#[test]
fn concurrent_store_applies_from_threads_undo_newest_first() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let root = tmp.path().join("root");
    write(&project, "shared.txt", lines("s").as_bytes());
    let original = exact_fingerprint(&project);
    let patches: Vec<String> = [(4, "a"), (9, "b"), (14, "c")]
        .iter()
        .map(|(n, t)| edit_patch(*n, t))
        .collect();
    for round in 0..10 {
        std::thread::scope(|s| {
            for p in &patches {
                let (project, root) = (&project, &root);
                s.spawn(move || {
                    let r = UndoStore::new(root)
                        .apply(project, p.as_bytes(), &ApplyOptions::default())
                        .unwrap();
                    assert_eq!(r.outcome, Outcome::Applied, "round {round}: {r}");
                });
            }
        });
        std::thread::scope(|s| {
            for _ in &patches {
                let (project, root) = (&project, &root);
                s.spawn(move || {
                    UndoStore::new(root).undo_last(project, false).unwrap();
                });
            }
        });
        assert_eq!(exact_fingerprint(&project), original, "round {round}");
    }
}

fn show(out: &Output) -> String {
    format!(
        "{:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

// ------------------------------------------------------------------------------------------
// run --out through a symlink
// ------------------------------------------------------------------------------------------

/// `run --out LINK` writes the patch to the file the symlink leads to (atomically, beside
/// it) and leaves the link a link; a link to a link, and a dangling one, too.
#[test]
fn run_out_writes_through_a_symlink() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let root = tmp.path().join("root");
    write(&project, "a.txt", b"one\n");
    let targets = tmp.path().join("targets");
    fs::create_dir_all(&targets).unwrap();
    let target = targets.join("out.patch");
    fs::write(&target, b"old\n").unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o640)).unwrap();
    let links = tmp.path().join("links");
    fs::create_dir_all(&links).unwrap();
    let link = links.join("link.patch");
    std::os::unix::fs::symlink("../targets/out.patch", &link).unwrap();
    let link2 = links.join("link2.patch");
    std::os::unix::fs::symlink("link.patch", &link2).unwrap();
    let dangling = links.join("dangling.patch");
    std::os::unix::fs::symlink(targets.join("new.patch"), &dangling).unwrap();

    let run = |out: &Path, tag: &str| {
        let o = bin()
            .arg("run")
            .arg("--project")
            .arg(&project)
            .arg("--root")
            .arg(&root)
            .arg("--no-confine")
            .arg("--out")
            .arg(out)
            .args(["--", "sh", "-c", &format!("echo {tag} >> a.txt")])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
    };
    run(&link, "x");
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let written = fs::read_to_string(&target).unwrap();
    assert!(written.contains("+x"), "{written}");
    assert_eq!(
        fs::metadata(&target).unwrap().permissions().mode() & 0o7777,
        0o640,
        "the target keeps its mode"
    );
    run(&link2, "y");
    assert!(fs::symlink_metadata(&link2)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(fs::read_to_string(&target).unwrap().contains("+y"));
    run(&dangling, "z");
    assert!(fs::symlink_metadata(&dangling)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(fs::read_to_string(targets.join("new.patch"))
        .unwrap()
        .contains("+z"));
    // Nothing left beside the links or the targets but what the test made.
    let names = |d: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = fs::read_dir(d)
            .unwrap()
            .map(|e| PathBuf::from(e.unwrap().file_name()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        names(&links),
        ["dangling.patch", "link.patch", "link2.patch"].map(PathBuf::from)
    );
    assert_eq!(
        names(&targets),
        ["new.patch", "out.patch"].map(PathBuf::from)
    );
}

// ------------------------------------------------------------------------------------------
// A deep path
// ------------------------------------------------------------------------------------------

/// A file 2,400 directories deep is created, and undone, like any other (each directory
/// created once, the undo record naming them all). The record lists the 2,400 directories
/// it created each relative to the one before: tens of kilobytes, where each named in full
/// made 11.5 MB.
#[test]
fn a_path_thousands_of_directories_deep_applies_and_undoes() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    fs::create_dir_all(&project).unwrap();
    write(&project, "top.txt", b"top\n");
    let deep: String = vec!["d"; 2400].join("/") + "/f";
    let patch = format!(
        "diff --git a/{deep} b/{deep}\nnew file mode 100644\n--- /dev/null\n+++ b/{deep}\n@@ -0,0 +1 @@\n+deep\n"
    );
    let before = exact_fingerprint(&project);
    let undo = tmp.path().join("undo");
    let opts = ApplyOptions {
        undo_dir: Some(undo.clone()),
        ..Default::default()
    };
    let r = apply_patch(&project, patch.as_bytes(), &opts).unwrap();
    assert_eq!(r.outcome, Outcome::Applied, "{r}");
    // Read back one directory at a time (the whole path is longer than PATH_MAX).
    let mut dir = fs::File::open(&project).unwrap();
    use std::os::fd::AsFd;
    for _ in 0..2400 {
        let fd = rustix::fs::openat(
            dir.as_fd(),
            "d",
            rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::NOFOLLOW,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        dir = fs::File::from(fd);
    }
    let fd = rustix::fs::openat(
        dir.as_fd(),
        "f",
        rustix::fs::OFlags::RDONLY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut fs::File::from(fd), &mut text).unwrap();
    assert_eq!(text, "deep\n");
    // Applying it again changes nothing.
    let again = apply_patch(&project, patch.as_bytes(), &ApplyOptions::default()).unwrap();
    assert_eq!(again.outcome, Outcome::AlreadyApplied, "{again}");
    let record = fs::read_to_string(undo.join("record")).unwrap();
    assert_eq!(
        record.lines().filter(|l| l.starts_with("mkdir ")).count(),
        2400
    );
    assert!(record.len() < 100_000, "{} bytes", record.len());
    undo_apply(&project, &undo, false).unwrap();
    assert_eq!(exact_fingerprint(&project), before);
}

/// A change deep inside a deep existing tree, with new directories below its bottom and
/// beside its middle, is undone to the project as it was, byte for byte: contents, modes
/// and every directory's mtime. The record lists the 1,000 existing directories, and the
/// created ones as two chains, each relative to the line before.
#[test]
fn a_change_deep_inside_a_deep_tree_undoes_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let chain = |n: usize| vec!["e"; n].join("/");
    let bottom = chain(1000);
    write(&project, &format!("{bottom}/old.txt"), b"old\n");
    write(&project, &format!("{}/keep.txt", chain(500)), b"keep\n");
    let below = format!("{bottom}/{}/f", vec!["n"; 1400].join("/"));
    let beside = format!("{}/s/t/g", chain(500));
    let old = format!("{bottom}/old.txt");
    let patch = format!(
        "diff --git a/{old} b/{old}\n--- a/{old}\n+++ b/{old}\n@@ -1 +1 @@\n-old\n+new\n\
         diff --git a/{below} b/{below}\nnew file mode 100644\n--- /dev/null\n+++ b/{below}\n@@ -0,0 +1 @@\n+below\n\
         diff --git a/{beside} b/{beside}\nnew file mode 100644\n--- /dev/null\n+++ b/{beside}\n@@ -0,0 +1 @@\n+beside\n"
    );
    // Directory mtimes a second in the past: an undo that left one as the apply set it
    // would show.
    let past = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
    for n in 1..=1000 {
        let d = fs::File::open(project.join(chain(n))).unwrap();
        d.set_modified(past).unwrap();
    }
    let before = exact_fingerprint(&project);
    let undo = tmp.path().join("undo");
    let opts = ApplyOptions {
        undo_dir: Some(undo.clone()),
        ..Default::default()
    };
    let r = apply_patch(&project, patch.as_bytes(), &opts).unwrap();
    assert_eq!(r.outcome, Outcome::Applied, "{r}");
    assert_eq!(fs::read(project.join(&old)).unwrap(), b"new\n");
    assert_eq!(fs::read(project.join(&beside)).unwrap(), b"beside\n");
    let record = fs::read_to_string(undo.join("record")).unwrap();
    let lines = |kind: &str| record.lines().filter(|l| l.starts_with(kind)).count();
    assert_eq!(lines("dir "), 1000);
    assert_eq!(lines("mkdir "), 1400 + 2);
    undo_apply(&project, &undo, false).unwrap();
    assert_eq!(exact_fingerprint(&project), before);
}

/// A record of the earlier layout (every path in full, `patchbox-undo 2`) is still undone:
/// the same apply's record, rewritten that way.
#[test]
fn undo_records_with_every_path_in_full_are_still_undone() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    write(&project, "x/y/z/old.txt", b"old\n");
    write(&project, "x/y/keep.txt", b"keep\n");
    let before = exact_fingerprint(&project);
    let patch = "diff --git a/x/y/z/old.txt b/x/y/z/old.txt
--- a/x/y/z/old.txt
+++ b/x/y/z/old.txt
@@ -1 +1 @@
-old
+new
diff --git a/x/y/z/n/m/new.txt b/x/y/z/n/m/new.txt
new file mode 100644
--- /dev/null
+++ b/x/y/z/n/m/new.txt
@@ -0,0 +1 @@
+new
";
    let undo = tmp.path().join("undo");
    let opts = ApplyOptions {
        undo_dir: Some(undo.clone()),
        ..Default::default()
    };
    assert_eq!(
        apply_patch(&project, patch.as_bytes(), &opts)
            .unwrap()
            .outcome,
        Outcome::Applied
    );
    let record = fs::read_to_string(undo.join("record")).unwrap();
    assert!(record.starts_with("patchbox-undo 3\n"), "{record}");
    assert!(
        record.contains(" +"),
        "paths relative to the line before: {record}"
    );
    // Every `dir` and `mkdir` path written in full again.
    let mut full = String::from("patchbox-undo 2\n");
    let mut prev: std::collections::HashMap<&str, Vec<u8>> = Default::default();
    for line in record.lines().skip(1) {
        let f: Vec<&str> = line.split(' ').collect();
        if !matches!(f[0], "dir" | "mkdir") {
            full.push_str(line);
            full.push('\n');
            continue;
        }
        let p = match f[1].strip_prefix('+') {
            None => unhex(f[1]),
            Some(rel) => {
                let (n, rest) = rel.split_once(':').unwrap();
                let mut b = prev[f[0]][..n.parse::<usize>().unwrap()].to_vec();
                if !rest.is_empty() {
                    b.push(b'/');
                    b.extend(unhex(rest));
                }
                b
            }
        };
        let mut g = f.clone();
        let hexed: String = p.iter().map(|b| format!("{b:02x}")).collect();
        g[1] = &hexed;
        full.push_str(&g.join(" "));
        full.push('\n');
        prev.insert(f[0], p);
    }
    assert!(!full.contains(" +"), "{full}");
    assert!(full.contains(&format!(
        "mkdir {}\n",
        b"x/y/z/n/m"
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )));
    fs::write(undo.join("record"), full).unwrap();
    undo_apply(&project, &undo, false).unwrap();
    assert_eq!(exact_fingerprint(&project), before);
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
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
