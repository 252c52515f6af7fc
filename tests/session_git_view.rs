//! A sandbox of a git project is a work tree of a private repository: git itself is the
//! oracle. `git status`, `diff`, `log`, `grep` and `blame` inside fresh and chained sandboxes
//! show the delegation's changes against the snapshot; what git writes there never reaches
//! the user's repository; the `.git` is in no patch and goes with the sandbox.

mod common;
mod gitcmd;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use common::{chmod, prune_once_released, write};
use patchbox::{Options, SandboxManager};

struct Env {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    root: PathBuf,
    home: PathBuf,
}

fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let root = tmp.path().join("sandboxes");
    let home = tmp.path().join("home");
    fs::create_dir_all(&project).unwrap();
    fs::create_dir_all(&home).unwrap();
    Env {
        _tmp: tmp,
        project,
        root,
        home,
    }
}

/// Runs git in `dir` (isolated from the real configuration) and returns its stdout.
fn git(e: &Env, dir: &Path, args: &[&str]) -> String {
    String::from_utf8(gitcmd::git(dir, &e.home, args).stdout).unwrap()
}

fn lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(str::to_string).collect();
    v.sort();
    v
}

/// A project with two commits, then the user's own uncommitted work: an unstaged edit, a
/// staged edit, an untracked file, an ignored file.
fn dirty_project(e: &Env) {
    let p = &e.project;
    write(p, "a.txt", b"one\ntwo\nthree\n");
    write(p, "dir/b.txt", b"beta\n");
    write(p, "run.sh", b"#!/bin/sh\necho hi\n");
    chmod(p, "run.sh", 0o755);
    std::os::unix::fs::symlink("a.txt", p.join("link")).unwrap();
    write(p, ".gitignore", b"*.log\n");
    git(e, p, &["init", "-q"]);
    git(e, p, &["add", "-A"]);
    git(e, p, &["commit", "-q", "-m", "first"]);
    write(p, "a.txt", b"one\ntwo\nthree\nfour\n");
    git(e, p, &["commit", "-q", "-am", "second"]);
    // The user's uncommitted work.
    write(p, "a.txt", b"zero\none\ntwo\nthree\nfour\n");
    write(p, "dir/b.txt", b"beta staged\n");
    git(e, p, &["add", "dir/b.txt"]);
    write(p, "notes.md", b"untracked notes\n");
    write(p, "build.log", b"ignored\n");
}

fn clean_project(e: &Env) {
    let p = &e.project;
    write(p, "a.txt", b"alpha\n");
    write(p, "dir/b.txt", b"beta\n");
    git(e, p, &["init", "-q"]);
    git(e, p, &["add", "-A"]);
    git(e, p, &["commit", "-q", "-m", "only"]);
}

fn manager(e: &Env) -> SandboxManager {
    manager_with(e, Options::default())
}

fn manager_with(e: &Env, o: Options) -> SandboxManager {
    manager_at(e, &e.project, o)
}

/// A manager of `project` (the project or another directory) under the test's root.
fn manager_at(e: &Env, project: &Path, o: Options) -> SandboxManager {
    SandboxManager::with_options(
        project,
        Options {
            root: Some(e.root.clone()),
            no_prune_on_start: true,
            ..o
        },
    )
    .unwrap()
}

/// Everything of the user's repository that a tool could change: every file under `.git`
/// with its content (and the objects directory's listing with it).
fn repo_bytes(project: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let git_dir = project.join(".git");
    walkdir::WalkDir::new(&git_dir)
        .into_iter()
        .map(|d| d.unwrap())
        .map(|d| {
            let rel = d.path().strip_prefix(&git_dir).unwrap().to_path_buf();
            let data = if d.file_type().is_file() {
                fs::read(d.path()).unwrap()
            } else {
                Vec::new()
            };
            (rel, data)
        })
        .collect()
}

/// `git status --porcelain` in the sandbox, as the set of lines a patch's paths predict.
fn predicted_status(res: &patchbox::SandboxResult) -> Vec<String> {
    let mut v = Vec::new();
    for p in &res.added {
        v.push(format!("?? {}", p.display()));
    }
    for p in &res.modified {
        v.push(format!(" M {}", p.display()));
    }
    for p in &res.deleted {
        v.push(format!(" D {}", p.display()));
    }
    v.sort();
    v
}

fn user_head(e: &Env) -> String {
    git(e, &e.project, &["rev-parse", "HEAD"])
        .trim()
        .to_string()
}

#[test]
fn a_fresh_sandbox_shows_the_delegations_changes_against_the_snapshot() {
    let e = env();
    dirty_project(&e);
    let before = repo_bytes(&e.project);
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("t", None).unwrap();
    let d = &sb.path;

    // The snapshot as it was: nothing to report, no file stat-dirty (git reads none).
    assert_eq!(git(&e, d, &["status", "--porcelain"]), "");
    assert_eq!(git(&e, d, &["diff-files", "--name-only"]), "");
    assert_eq!(
        git(&e, d, &["status", "--branch", "--porcelain"])
            .lines()
            .next(),
        Some("## main"),
        "on the user's branch"
    );
    // HEAD is a snapshot commit on top of the user's HEAD, holding the user's uncommitted
    // work (the staged and the unstaged edit, the untracked file) but not the ignored file.
    assert_eq!(git(&e, d, &["rev-parse", "HEAD^"]).trim(), user_head(&e));
    assert_eq!(
        lines(&git(&e, d, &["diff", "--name-status", "HEAD^", "HEAD"])),
        ["A\tnotes.md", "M\ta.txt", "M\tdir/b.txt"]
    );
    assert_eq!(
        git(&e, d, &["log", "--format=%s"])
            .lines()
            .collect::<Vec<_>>(),
        [
            "patchbox snapshot: the project as the session found it",
            "second",
            "first"
        ]
    );

    // The delegation works.
    write(d, "a.txt", b"zero\none\nTWO\nthree\nfour\n");
    fs::remove_file(d.join("dir/b.txt")).unwrap();
    write(d, "new.txt", b"brand new\n");
    write(d, "notes.md", b"untracked notes\nmore\n");
    chmod(d, "run.sh", 0o644);

    let res = mgr.finalize_sandbox(&sb).unwrap();
    assert_eq!(
        lines(&git(&e, d, &["status", "--porcelain"])),
        predicted_status(&res)
    );
    // `git diff` is the delegation's edits only, not the user's "zero" line.
    let diff = git(&e, d, &["diff", "a.txt"]);
    assert!(diff.contains("-two\n+TWO\n"), "{diff}");
    assert!(!diff.contains("+zero"), "{diff}");
    assert!(git(&e, d, &["diff", "run.sh"]).contains("old mode 100755\nnew mode 100644"));
    // git grep sees the work tree.
    assert_eq!(git(&e, d, &["grep", "-n", "TWO"]).trim(), "a.txt:3:TWO");
    // git blame: the user's committed lines to their commits, their uncommitted line to the
    // snapshot, the delegation's line not committed yet.
    let blame = git(&e, d, &["blame", "--porcelain", "a.txt"]);
    let summaries: Vec<&str> = blame
        .lines()
        .filter_map(|l| l.strip_prefix("summary "))
        .collect();
    assert!(summaries.contains(&"first"), "{blame}");
    assert!(summaries.contains(&"second"), "{blame}");
    assert!(
        summaries.contains(&"patchbox snapshot: the project as the session found it"),
        "{blame}"
    );
    assert!(
        summaries.contains(&"Version of a.txt from a.txt"),
        "{blame}"
    );

    // The patch has no .git and the user's repository accepts it.
    let patch = res.patch_text();
    assert!(!patch.contains(".git/"), "{patch}");
    let mut apply = gitcmd::git_cmd(&e.project, &e.home, &["apply", "--check", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    apply.stdin.take().unwrap().write_all(&res.patch).unwrap();
    assert!(apply.wait().unwrap().success());
    assert_eq!(repo_bytes(&e.project), before);
}

#[test]
fn a_chained_sandbox_shows_the_cumulative_changes_against_the_snapshot() {
    let e = env();
    dirty_project(&e);
    let mgr = manager(&e);
    let first = mgr.create_sandbox("first", None).unwrap();
    write(&first.path, "a.txt", b"changed by the first\n");
    write(&first.path, "c.txt", b"added by the first\n");
    fs::remove_file(first.path.join("notes.md")).unwrap();
    // The first delegation commits privately: the chained sandbox starts from its files,
    // not from its repository.
    git(&e, &first.path, &["add", "-A"]);
    git(&e, &first.path, &["commit", "-q", "-m", "first's own"]);

    let second = mgr.create_sandbox("second", Some(&first)).unwrap();
    let d = &second.path;
    assert_eq!(
        git(&e, d, &["log", "-1", "--format=%s"]).trim(),
        "patchbox snapshot: the project as the session found it"
    );
    // Only the predecessor's files are stat-dirty; git compares them and finds them changed.
    assert_eq!(
        lines(&git(&e, d, &["diff-files", "--name-only"])),
        ["a.txt", "notes.md"]
    );
    write(d, "dir/b.txt", b"changed by the second\n");
    let res = mgr.finalize_sandbox(&second).unwrap();
    assert_eq!(
        res.files_touched,
        ["a.txt", "c.txt", "dir/b.txt", "notes.md"].map(PathBuf::from)
    );
    assert_eq!(
        lines(&git(&e, d, &["status", "--porcelain"])),
        predicted_status(&res)
    );
}

#[test]
fn what_git_writes_in_a_sandbox_never_reaches_the_users_repository() {
    let e = env();
    dirty_project(&e);
    git(&e, &e.project, &["tag", "v1", "HEAD~1"]);
    let before = repo_bytes(&e.project);
    let head_before = user_head(&e);
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("t", None).unwrap();
    let d = &sb.path;
    // The user's tags are visible.
    assert_eq!(
        git(&e, d, &["rev-parse", "v1"]).trim(),
        git(&e, &e.project, &["rev-parse", "v1"]).trim()
    );
    write(d, "a.txt", b"committed in the sandbox\n");
    git(&e, d, &["add", "-A"]);
    git(&e, d, &["commit", "-q", "-m", "private"]);
    git(&e, d, &["tag", "-a", "-m", "t", "private-tag"]);
    git(&e, d, &["branch", "side"]);
    write(d, "a.txt", b"stashed\n");
    git(&e, d, &["stash", "-q"]);
    write(d, "x.txt", b"staged only\n");
    git(&e, d, &["add", "x.txt"]);
    git(&e, d, &["gc", "-q"]);
    git(&e, d, &["notes", "add", "-m", "n"]);
    assert_eq!(git(&e, d, &["log", "-1", "--format=%s"]).trim(), "private");

    assert_eq!(
        repo_bytes(&e.project),
        before,
        "the user's .git is byte-identical"
    );
    assert_eq!(user_head(&e), head_before);
    // The patch is still the work tree against the snapshot, commits or not.
    let res = mgr.finalize_sandbox(&sb).unwrap();
    assert_eq!(
        res.files_touched,
        ["a.txt", "x.txt"].map(PathBuf::from),
        "{}",
        res.patch_text()
    );
    assert!(!res.patch_text().contains(".git"));
    mgr.discard_sandbox(&sb).unwrap();
    assert!(!sb.path.exists());
    let session = mgr.session_base().to_path_buf();
    drop(mgr);
    assert!(
        !session.exists(),
        "the session, base.objects included, is gone"
    );
    assert_eq!(repo_bytes(&e.project), before);
}

#[test]
fn a_clean_checkout_is_the_users_head_and_writes_no_objects() {
    let e = env();
    clean_project(&e);
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("t", None).unwrap();
    assert_eq!(
        git(&e, &sb.path, &["rev-parse", "HEAD"]).trim(),
        user_head(&e)
    );
    assert_eq!(git(&e, &sb.path, &["status", "--porcelain"]), "");
    assert!(!mgr.session_base().join("base.objects").exists());
    // Detached user HEAD: detached private HEAD.
    git(&e, &e.project, &["checkout", "-q", "--detach"]);
    let mgr2 = manager(&e);
    let sb2 = mgr2.create_sandbox("t", None).unwrap();
    let head = fs::read_to_string(sb2.path.join(".git/HEAD")).unwrap();
    assert_eq!(head.trim(), user_head(&e));
}

#[test]
fn the_git_repository_goes_into_no_patch_pending_or_recovered() {
    let e = env();
    dirty_project(&e);
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("t", None).unwrap();
    write(&sb.path, "a.txt", b"edited\n");
    git(&e, &sb.path, &["commit", "-q", "-am", "private"]);
    // Dropped with the sandbox open: its work is stored as an abandoned pending patch.
    drop(mgr);
    let pending = patchbox::session::pending::list(&e.root).unwrap();
    assert_eq!(pending.len(), 1);
    let patch = fs::read_to_string(&pending[0].patch_path).unwrap();
    assert!(patch.contains("+edited"), "{patch}");
    assert!(!patch.contains(".git"), "{patch}");

    // A crash: the kept session is recovered by the next start's prune.
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("u", None).unwrap();
    write(&sb.path, "dir/b.txt", b"recovered\n");
    git(&e, &sb.path, &["add", "-A"]);
    let kept = mgr.keep();
    let report = prune_once_released(&e.root);
    assert_eq!(report.recovered.len(), 1, "{report:?}");
    let patch = fs::read_to_string(&report.recovered[0]).unwrap();
    assert!(patch.contains("+recovered"), "{patch}");
    assert!(!patch.contains(".git"), "{patch}");
    assert!(kept.join("d-u").symlink_metadata().is_err());
    assert!(
        !kept.join("base.objects").exists(),
        "the snapshot objects go with the session"
    );
}

#[test]
fn no_git_repository_outside_git_or_when_opted_out() {
    let e = env();
    write(&e.project, "a.txt", b"alpha\n");
    // A ceiling above the project would not stop our discovery; the temp dir is not in git.
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("t", None).unwrap();
    assert!(!sb.path.join(".git").exists());

    let e = env();
    clean_project(&e);
    let mgr = manager_with(
        &e,
        Options {
            no_git_repo: true,
            ..Options::default()
        },
    );
    let sb = mgr.create_sandbox("t", None).unwrap();
    assert!(!sb.path.join(".git").exists());
    assert!(sb.path.join("a.txt").exists());
}

/// Stages a gitlink (a submodule entry) at `path` of the project, naming the user's `HEAD`.
fn add_gitlink(e: &Env, path: &str) {
    let head = user_head(e);
    git(
        e,
        &e.project,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{head},{path}"),
        ],
    );
}

#[test]
fn submodules_and_subdirectory_projects_keep_a_clean_status() {
    let e = env();
    clean_project(&e);
    // A gitlink (a submodule whose directory the snapshot does not hold).
    add_gitlink(&e, "sub/module");
    git(&e, &e.project, &["commit", "-q", "-m", "submodule"]);
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("t", None).unwrap();
    assert_eq!(git(&e, &sb.path, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&e, &sb.path, &["rev-parse", "HEAD"]).trim(),
        user_head(&e)
    );
    drop(mgr);

    // The project is a subdirectory of its work tree: its own snapshot, paths relative to it.
    let sub = e.project.join("dir");
    let mgr = manager_at(&e, &sub, Options::default());
    let sb = mgr.create_sandbox("t", None).unwrap();
    assert_eq!(git(&e, &sb.path, &["status", "--porcelain"]), "");
    assert_eq!(git(&e, &sb.path, &["ls-files"]), "b.txt\n");
    write(&sb.path, "b.txt", b"edited\n");
    assert_eq!(git(&e, &sb.path, &["status", "--porcelain"]), " M b.txt\n");
}

/// Below a project that is a subdirectory of its work tree, a submodule and a sparse
/// (skip-worktree) file stay in the sandbox's index and tree, each at its path relative to
/// the project: `git status` is clean there, and `git ls-files` lists both; entries outside
/// the project are not carried.
#[test]
fn submodules_and_sparse_files_below_a_subdirectory_project_are_kept() {
    let e = env();
    clean_project(&e);
    write(&e.project, "dir/sparse.txt", b"not checked out\n");
    write(&e.project, "outside.txt", b"outside\n");
    git(&e, &e.project, &["add", "-A"]);
    for gitlink in ["dir/sub/module", "top-module"] {
        add_gitlink(&e, gitlink);
    }
    git(&e, &e.project, &["commit", "-q", "-m", "gitlinks"]);
    for path in ["dir/sparse.txt", "outside.txt"] {
        git(&e, &e.project, &["update-index", "--skip-worktree", path]);
        fs::remove_file(e.project.join(path)).unwrap();
    }
    // Submodules not checked out: empty directories, as `git clone` leaves them.
    fs::create_dir_all(e.project.join("dir/sub/module")).unwrap();
    fs::create_dir_all(e.project.join("top-module")).unwrap();
    assert_eq!(git(&e, &e.project, &["status", "--porcelain"]), "");

    let mgr = manager_at(&e, &e.project.join("dir"), Options::default());
    let sb = mgr.create_sandbox("t", None).unwrap();
    assert_eq!(git(&e, &sb.path, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&e, &sb.path, &["ls-files", "--stage"])
            .lines()
            .map(|l| l.split_whitespace().next_back().unwrap_or_default())
            .collect::<Vec<_>>(),
        ["b.txt", "sparse.txt", "sub/module"]
    );
    assert_eq!(
        git(&e, &sb.path, &["ls-files", "-t", "sparse.txt"]),
        "S sparse.txt\n"
    );
    assert!(!sb.path.join("sparse.txt").exists());
}

#[test]
fn a_linked_worktree_of_the_user_is_snapshotted_from_its_own_head() {
    let e = env();
    clean_project(&e);
    let wt = e._tmp.path().join("linked");
    git(
        &e,
        &e.project,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "feature",
            wt.to_str().unwrap(),
        ],
    );
    write(&wt, "a.txt", b"on the feature\n");
    git(&e, &wt, &["commit", "-q", "-am", "feature work"]);
    let before = repo_bytes(&e.project);
    let mgr = manager_at(&e, &wt, Options::default());
    let sb = mgr.create_sandbox("t", None).unwrap();
    assert_eq!(
        git(&e, &sb.path, &["status", "--branch", "--porcelain"]),
        "## feature\n"
    );
    assert_eq!(
        git(&e, &sb.path, &["log", "-1", "--format=%s"]).trim(),
        "feature work"
    );
    assert!(fs::metadata(sb.path.join(".git")).unwrap().is_dir());
    git(
        &e,
        &sb.path,
        &["commit", "-q", "--allow-empty", "-m", "private"],
    );
    assert_eq!(repo_bytes(&e.project), before);
}

#[test]
fn a_confined_tool_commits_in_its_sandbox() {
    let e = env();
    dirty_project(&e);
    let before = repo_bytes(&e.project);
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("t", None).unwrap();
    write(&sb.path, "a.txt", b"edited by a confined tool\n");
    // Through `command`: Landlock (where the kernel has it) lets the tool write only in its
    // sandbox; git, reading the user's objects through the alternates, commits privately.
    for args in [
        &["add", "-A"][..],
        &["commit", "-q", "-m", "confined"][..],
        &["tag", "confined-tag"][..],
    ] {
        let out = mgr
            .command(&sb, "git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .env("HOME", &e.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?} ({:?}): {}",
            mgr.confinement(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(
        git(&e, &sb.path, &["log", "-1", "--format=%s"]).trim(),
        "confined"
    );
    assert_eq!(repo_bytes(&e.project), before);
}

#[test]
fn a_file_git_converts_keeps_the_users_blob() {
    let e = env();
    let p = &e.project;
    write(p, ".gitattributes", b"*.txt text eol=crlf\n");
    write(p, "a.txt", b"one\ntwo\n");
    git(&e, p, &["init", "-q"]);
    git(&e, p, &["add", "-A"]);
    git(&e, p, &["commit", "-q", "-m", "crlf"]);
    fs::remove_file(p.join("a.txt")).unwrap();
    git(&e, p, &["checkout", "a.txt"]);
    assert_eq!(fs::read(p.join("a.txt")).unwrap(), b"one\r\ntwo\r\n");
    // The index strictly newer than the file, the session strictly newer than both (clock
    // ticks, not timing: nothing is asserted about durations).
    std::thread::sleep(std::time::Duration::from_millis(20));
    git(&e, p, &["update-index", "--really-refresh"]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("t", None).unwrap();
    let d = &sb.path;
    // The snapshot is the user's HEAD: the work-tree CRLF file is the LF blob git made of it.
    assert_eq!(git(&e, d, &["rev-parse", "HEAD"]).trim(), user_head(&e));
    assert_eq!(git(&e, d, &["status", "--porcelain"]), "");
    // Touched with the same bytes: git converts it again and finds it unchanged.
    write(d, "a.txt", b"one\r\ntwo\r\n");
    assert_eq!(git(&e, d, &["status", "--porcelain"]), "");
    write(d, "a.txt", b"one\r\nTWO\r\n");
    assert_eq!(git(&e, d, &["status", "--porcelain"]), " M a.txt\n");
    assert!(git(&e, d, &["diff"]).contains("-two\n+TWO\n"));
}

/// The selection's view of the index's cache-tree against git's own: `git ls-files -s` for
/// the entries, `git write-tree` (or `HEAD^{tree}`) for the tree.
fn index_tree_of(e: &Env) -> Option<(String, [u8; 20])> {
    let sel = patchbox::tree::select::select_project(&e.project, &[]).unwrap();
    sel.index_tree.map(|k| (k.tree.to_string(), k.digest))
}

/// [`patchbox::git::private::entries_digest`] of the index as `git ls-files -s` lists it.
fn digest_of_ls_files(e: &Env) -> [u8; 20] {
    let out = git(e, &e.project, &["ls-files", "-s"]);
    let rows: Vec<(Vec<u8>, u32, patchbox::git::oid::ObjectId)> = out
        .lines()
        .map(|l| {
            let (meta, path) = l.split_once('\t').unwrap();
            let mut f = meta.split(' ');
            let mode = u32::from_str_radix(f.next().unwrap(), 8).unwrap();
            let oid = f.next().unwrap().parse().unwrap();
            (path.as_bytes().to_vec(), mode, oid)
        })
        .collect();
    patchbox::git::private::entries_digest(rows.iter().map(|(p, m, o)| (&p[..], *m, o)))
}

#[test]
fn the_index_cache_tree_is_read_as_git_keeps_it() {
    let e = env();
    clean_project(&e);
    // git checks out and commits with a complete cache-tree.
    let head_tree = git(&e, &e.project, &["rev-parse", "HEAD^{tree}"]);
    assert_eq!(
        index_tree_of(&e),
        Some((head_tree.trim().to_string(), digest_of_ls_files(&e)))
    );
    // A staged change invalidates the root, until git writes the index's tree.
    write(&e.project, "dir/b.txt", b"beta staged\n");
    git(&e, &e.project, &["add", "dir/b.txt"]);
    assert_eq!(index_tree_of(&e), None);
    let written = git(&e, &e.project, &["write-tree"]);
    assert_ne!(written, head_tree);
    assert_eq!(
        index_tree_of(&e),
        Some((written.trim().to_string(), digest_of_ls_files(&e)))
    );
    // git leaves an intent-to-add entry out of its trees: the root is not taken then.
    write(&e.project, "new.txt", b"new\n");
    git(&e, &e.project, &["add", "-N", "new.txt"]);
    git(&e, &e.project, &["write-tree"]);
    assert_eq!(index_tree_of(&e), None);
}

#[test]
fn a_snapshot_equal_to_the_index_has_the_index_tree() {
    let e = env();
    clean_project(&e);
    write(&e.project, "dir/b.txt", b"beta staged\n");
    git(&e, &e.project, &["add", "dir/b.txt"]);
    let written = git(&e, &e.project, &["write-tree"]);
    assert!(index_tree_of(&e).is_some());
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("t", None).unwrap();
    // The snapshot commit stands on the user's HEAD with the index's tree.
    assert_eq!(git(&e, &sb.path, &["rev-parse", "HEAD^{tree}"]), written);
    assert_eq!(
        git(&e, &sb.path, &["rev-parse", "HEAD~1"]).trim(),
        user_head(&e)
    );
    assert_eq!(git(&e, &sb.path, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&e, &sb.path, &["diff", "--name-only", "HEAD~1", "HEAD"]),
        "dir/b.txt\n"
    );
    // A file changed after the index was written: the snapshot's own tree, not the index's.
    write(&e.project, "a.txt", b"alpha, unstaged\n");
    let mgr2 = manager(&e);
    let sb2 = mgr2.create_sandbox("t", None).unwrap();
    assert_ne!(git(&e, &sb2.path, &["rev-parse", "HEAD^{tree}"]), written);
    assert_eq!(
        fs::read(sb2.path.join("a.txt")).unwrap(),
        b"alpha, unstaged\n"
    );
    assert_eq!(git(&e, &sb2.path, &["status", "--porcelain"]), "");
    assert_eq!(
        lines(&git(
            &e,
            &sb2.path,
            &["diff", "--name-only", "HEAD~1", "HEAD"]
        )),
        ["a.txt", "dir/b.txt"]
    );
}

#[test]
fn a_partial_clone_missing_a_blob_its_tree_reaches_is_snapshotted_from_the_files() {
    let e = env();
    clean_project(&e);
    // A partial clone fetches blobs when needed: the user's store may lack one that its
    // (complete) index tree reaches. Here a.txt's blob is gone from the store.
    let blob = git(&e, &e.project, &["rev-parse", ":a.txt"]);
    let blob = blob.trim();
    fs::remove_file(
        e.project
            .join(".git/objects")
            .join(&blob[..2])
            .join(&blob[2..]),
    )
    .unwrap();
    git(
        &e,
        &e.project,
        &["config", "core.repositoryFormatVersion", "1"],
    );
    git(
        &e,
        &e.project,
        &["config", "extensions.partialClone", "origin"],
    );
    assert!(index_tree_of(&e).is_some());
    let mgr = manager(&e);
    let sb = mgr.create_sandbox("t", None).unwrap();
    assert_eq!(fs::read(sb.path.join("a.txt")).unwrap(), b"alpha\n");
    write(&sb.path, "a.txt", b"alpha, edited\n");
    // The user changes the file meanwhile: the patch's pre-image is the snapshot's, which
    // the store cannot give.
    write(&e.project, "a.txt", b"alpha, changed by the user\n");
    let res = mgr.finalize_sandbox(&sb).unwrap();
    let patch = String::from_utf8(res.patch).unwrap();
    assert!(patch.contains("-alpha\n+alpha, edited\n"), "{patch}");
}
