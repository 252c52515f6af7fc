//! The `git_worktree` plan strategy against real repositories: create, edit, diff, commit
//! (clean, dirty, moved HEAD, conflicts), rollback, cleanup, submodules, linked worktrees,
//! concurrency, reopen after a crash. Everything lives in temporary directories; the git the
//! library runs sees a temporary HOME and no system configuration.

mod common;
mod gitcmd;

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use common::{fingerprint, mode_view};
use patchbox::plan::{DiffOp, PlanManager, SandboxError, Status, Strategy};
use tempfile::TempDir;

/// Points HOME (and XDG_CONFIG_HOME) of this process, hence of the library's git, at an
/// empty directory, once, before any test runs git.
fn isolate() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let home = std::env::temp_dir().join(format!("patchbox-gwt-home-{}", std::process::id()));
        fs::create_dir_all(&home).unwrap();
        // Every test calls this first; the others wait in `get_or_init`, so no thread runs
        // git while the environment changes.
        std::env::set_var("HOME", &home);
        std::env::set_var("XDG_CONFIG_HOME", &home);
        std::env::set_var("GIT_CONFIG_NOSYSTEM", "1");
        std::env::remove_var("GIT_DIR");
        std::env::remove_var("GIT_WORK_TREE");
        home
    })
}

struct Fixture {
    _tmp: TempDir,
    root: PathBuf,
    repo: PathBuf,
    home: PathBuf,
}

fn git(f: &Fixture, dir: &Path, args: &[&str]) -> String {
    let out = gitcmd::git(dir, &f.home, args);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn git_ok(f: &Fixture, dir: &Path, args: &[&str]) -> bool {
    gitcmd::git_cmd(dir, &f.home, args)
        .output()
        .unwrap()
        .status
        .success()
}

/// A repository with text, executable, symlink, nested and ignored files, one commit.
fn fixture() -> Fixture {
    let home = isolate().to_path_buf();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let repo = tmp.path().join("repo");
    fs::create_dir_all(&root).unwrap();
    fs::create_dir_all(&repo).unwrap();
    let f = Fixture {
        _tmp: tmp,
        root,
        repo: fs::canonicalize(&repo).unwrap(),
        home,
    };
    git(&f, &f.repo, &["init", "-q"]);
    common::write(&f.repo, "a.txt", b"alpha\n");
    common::write(&f.repo, "b.txt", b"beta\n");
    common::write(&f.repo, "old.txt", b"old\n");
    common::write(&f.repo, "script.sh", b"#!/bin/sh\necho hi\n");
    common::write(&f.repo, "sub/deep.txt", b"deep\n");
    common::write(&f.repo, "bin.dat", &[0u8, 1, 2, 255, 0, 9]);
    common::write(&f.repo, ".gitignore", b"*.log\n");
    symlink("a.txt", f.repo.join("link")).unwrap();
    git(&f, &f.repo, &["add", "-A"]);
    git(&f, &f.repo, &["commit", "-q", "-m", "initial"]);
    f
}

fn head(f: &Fixture) -> String {
    git(f, &f.repo, &["rev-parse", "HEAD"])
}

/// The user's index, as git lists it.
fn index_of(f: &Fixture) -> String {
    git(f, &f.repo, &["ls-files", "-s"])
}

/// What the user would notice: files (with mtimes), HEAD, the index.
fn user_state(f: &Fixture) -> (common::Fingerprint, String, String) {
    (fingerprint(&f.repo, false), head(f), index_of(f))
}

fn assert_no_sandbox_refs(f: &Fixture) {
    let refs = git(f, &f.repo, &["for-each-ref", "--format=%(refname)"]);
    assert!(!refs.contains("patchbox"), "refs left: {refs}");
    let wts = git(f, &f.repo, &["worktree", "list", "--porcelain"]);
    assert!(
        !wts.contains(f.root.to_str().unwrap()),
        "worktree left: {wts}"
    );
    let admin = f.repo.join(".git/worktrees");
    let left: Vec<_> = fs::read_dir(&admin)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        left.iter()
            .all(|n| n.to_string_lossy().starts_with("other")),
        "worktree admin dirs left: {left:?}"
    );
}

fn files_of(e: &SandboxError) -> Vec<String> {
    match e {
        SandboxError::Commit { files, .. } | SandboxError::Rollback { files, .. } => files.clone(),
        _ => panic!("not a commit/rollback error: {e}"),
    }
}

#[test]
fn create_edit_diff_commit_rollback_cleanup() {
    let f = fixture();
    let before = mode_view(&f.repo);
    let base = head(&f);
    let mgr = PlanManager::open(&f.root).unwrap();
    let sb = mgr
        .get_or_create_sandbox("plan-1", "repo", &f.repo, Strategy::GitWorktree)
        .unwrap();
    let ctx = sb.context().unwrap();
    assert_eq!(ctx.metadata["git.base"], base);
    assert_eq!(
        ctx.metadata["git.branch"],
        format!("patchbox/plan-1/{}", sb.sandbox_id())
    );
    assert_eq!(ctx.metadata["git.repo"], f.repo.to_str().unwrap());
    let root = fs::canonicalize(&f.root).unwrap();
    assert!(
        ctx.sandbox_path.starts_with(&root),
        "{:?}",
        ctx.sandbox_path
    );
    assert!(!ctx.sandbox_path.starts_with(&f.repo));
    // The branch starts at the original's HEAD.
    assert_eq!(
        git(&f, &ctx.sandbox_path, &["rev-parse", "HEAD"]),
        base,
        "worktree HEAD"
    );

    // Edit: modify, add (nested), delete, chmod, retarget a symlink, an ignored file.
    let p = |r: &str| sb.get_path(Path::new(r)).unwrap();
    fs::write(p("a.txt"), b"alpha two\n").unwrap();
    fs::create_dir_all(p("new")).unwrap();
    fs::write(p("new/n.txt"), b"new\n").unwrap();
    fs::remove_file(p("old.txt")).unwrap();
    fs::set_permissions(p("script.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::remove_file(p("link")).unwrap();
    symlink("b.txt", p("link")).unwrap();
    fs::write(p("bin.dat"), [9u8, 0, 0, 1]).unwrap();
    fs::write(p("debug.log"), b"ignored\n").unwrap();
    assert_eq!(sb.status(), Status::Active);
    // The user's tree is untouched.
    assert_eq!(mode_view(&f.repo), before);

    let d = sb.diff().unwrap();
    let paths: Vec<(&str, DiffOp)> = d
        .entries
        .iter()
        .map(|e| (e.path.as_str(), e.operation))
        .collect();
    assert_eq!(
        paths,
        vec![
            ("a.txt", DiffOp::Modified),
            ("bin.dat", DiffOp::Modified),
            ("link", DiffOp::Modified),
            ("new/n.txt", DiffOp::Added),
            ("old.txt", DiffOp::Deleted),
            ("script.sh", DiffOp::Modified),
        ]
    );
    let a = &d.entries[0];
    assert_eq!(a.before.as_deref(), Some(&b"alpha\n"[..]));
    assert_eq!(a.after.as_deref(), Some(&b"alpha two\n"[..]));
    assert_eq!(d.entries[2].after.as_deref(), Some(&b"b.txt"[..]));
    assert_eq!(d.entries[3].before, None);
    assert_eq!(d.entries[4].after, None);
    // The patch applies to a copy of the original and gives the sandbox.
    let scratch = tempfile::tempdir().unwrap();
    let copy = scratch.path().join("copy");
    fs::create_dir(&copy).unwrap();
    common::copy_tree(&f.repo, &copy);
    let out = gitcmd::git_apply(&copy, &f.home, &d.patch);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut want = mode_view(&ctx.sandbox_path);
    want.remove(&b"debug.log"[..]);
    assert_eq!(mode_view(&copy), want);

    sb.check_commit().unwrap();
    let r = sb.commit(Some("sandbox edits")).unwrap();
    assert!(r.success);
    assert_eq!(sb.status(), Status::Committed);
    let cref = r.commit_ref.clone().unwrap();
    assert_eq!(head(&f), cref);
    assert_eq!(git(&f, &f.repo, &["rev-parse", "HEAD^"]), base);
    assert_eq!(
        git(&f, &f.repo, &["log", "-1", "--format=%s"]),
        "sandbox edits"
    );
    assert_eq!(r.added_files, vec!["new/n.txt"]);
    assert_eq!(r.deleted_files, vec!["old.txt"]);
    // The user's tree is the sandbox's (the ignored file stays in the sandbox), byte for
    // byte, modes and symlinks included; index and files agree with HEAD.
    assert_eq!(mode_view(&f.repo), want);
    assert_eq!(git(&f, &f.repo, &["status", "--porcelain"]), "");

    // Rollback after commit: a revert; the tree is the original again.
    sb.rollback().unwrap();
    assert_eq!(sb.status(), Status::RolledBack);
    assert_eq!(mode_view(&f.repo), before);
    assert_eq!(git(&f, &f.repo, &["status", "--porcelain"]), "");
    assert_eq!(git(&f, &f.repo, &["rev-parse", "HEAD^"]), cref);

    // Cleanup leaves nothing behind.
    mgr.cleanup_all("plan-1").unwrap();
    assert_eq!(sb.status(), Status::CleanedUp);
    assert!(!ctx.sandbox_path.exists());
    assert_no_sandbox_refs(&f);
    assert_eq!(mode_view(&f.repo), before);
}

#[test]
fn rollback_of_an_active_sandbox_resets_its_worktree() {
    let f = fixture();
    let mgr = PlanManager::open(&f.root).unwrap();
    let sb = mgr
        .get_or_create_sandbox("p", "repo", &f.repo, Strategy::GitWorktree)
        .unwrap();
    let path = sb.get_path(Path::new("a.txt")).unwrap();
    fs::write(&path, b"changed\n").unwrap();
    fs::write(sb.get_path(Path::new("x.log")).unwrap(), b"x").unwrap();
    sb.rollback().unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"alpha\n");
    assert!(!sb.get_path(Path::new("x.log")).unwrap().exists());
    assert!(sb.diff().unwrap().entries.is_empty());
    sb.cleanup().unwrap();
    assert_no_sandbox_refs(&f);
}

#[test]
fn not_a_repository_is_a_creation_error() {
    isolate();
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain");
    fs::create_dir(&plain).unwrap();
    let mgr = PlanManager::open(tmp.path().join("root")).unwrap();
    let e = mgr
        .get_or_create_sandbox("p", "plain", &plain, Strategy::GitWorktree)
        .err()
        .unwrap();
    assert_eq!(e.kind(), "creation");
    assert!(e.to_string().contains("not inside a git work tree"), "{e}");
    // Nothing left of it.
    let plan_dir = tmp.path().join("root/plans/plan-p");
    let left: Vec<_> = fs::read_dir(&plan_dir)
        .map(|d| d.filter_map(|e| e.ok()).collect())
        .unwrap_or_default();
    assert!(left.is_empty());
}

#[test]
fn commit_with_a_dirty_user_tree() {
    let f = fixture();
    let mgr = PlanManager::open(&f.root).unwrap();
    let s1 = mgr
        .get_or_create_sandbox("p1", "repo", &f.repo, Strategy::GitWorktree)
        .unwrap();
    fs::write(s1.get_path(Path::new("a.txt")).unwrap(), b"from sandbox\n").unwrap();
    // The user's uncommitted work: an unstaged edit, a staged edit, an untracked file.
    common::write(&f.repo, "b.txt", b"user beta\n");
    common::write(&f.repo, "sub/deep.txt", b"user deep\n");
    git(&f, &f.repo, &["add", "sub/deep.txt"]);
    common::write(&f.repo, "mine.txt", b"untracked\n");
    let r = s1.commit(None).unwrap();
    assert_eq!(head(&f), r.commit_ref.unwrap());
    assert_eq!(fs::read(f.repo.join("a.txt")).unwrap(), b"from sandbox\n");
    assert_eq!(fs::read(f.repo.join("b.txt")).unwrap(), b"user beta\n");
    assert_eq!(
        fs::read(f.repo.join("sub/deep.txt")).unwrap(),
        b"user deep\n"
    );
    assert_eq!(fs::read(f.repo.join("mine.txt")).unwrap(), b"untracked\n");
    let status =
        String::from_utf8(gitcmd::git(&f.repo, &f.home, &["status", "--porcelain"]).stdout)
            .unwrap();
    assert!(status.contains(" M b.txt\n"), "{status}");
    assert!(status.contains("M  sub/deep.txt"), "{status}");
    assert!(status.contains("?? mine.txt"), "{status}");

    // A sandbox touching the user's dirty files is refused, naming them; nothing changes.
    let s2 = mgr
        .get_or_create_sandbox("p2", "repo", &f.repo, Strategy::GitWorktree)
        .unwrap();
    fs::write(s2.get_path(Path::new("b.txt")).unwrap(), b"s2\n").unwrap();
    fs::write(s2.get_path(Path::new("sub/deep.txt")).unwrap(), b"s2\n").unwrap();
    fs::write(s2.get_path(Path::new("mine.txt")).unwrap(), b"s2\n").unwrap();
    fs::write(s2.get_path(Path::new("old.txt")).unwrap(), b"s2 fine\n").unwrap();
    let before = user_state(&f);
    let e = s2.check_commit().unwrap_err();
    assert_eq!(e.kind(), "commit");
    let e = s2.commit(None).unwrap_err();
    assert_eq!(e.kind(), "commit");
    assert_eq!(
        files_of(&e),
        vec!["b.txt", "mine.txt", "sub/deep.txt"],
        "{e}"
    );
    assert_eq!(user_state(&f), before);
    assert_eq!(s2.status(), Status::Active);
    mgr.cleanup_all("p1").unwrap();
    mgr.cleanup_all("p2").unwrap();
    assert_no_sandbox_refs(&f);
    assert_eq!(fs::read(f.repo.join("b.txt")).unwrap(), b"user beta\n");
}

#[test]
fn user_head_moved_merges_or_refuses_a_conflict() {
    let f = fixture();
    let mgr = PlanManager::open(&f.root).unwrap();
    let s1 = mgr
        .get_or_create_sandbox("p1", "repo", &f.repo, Strategy::GitWorktree)
        .unwrap();
    let s2 = mgr
        .get_or_create_sandbox("p2", "repo", &f.repo, Strategy::GitWorktree)
        .unwrap();
    fs::write(s1.get_path(Path::new("a.txt")).unwrap(), b"s1\n").unwrap();
    fs::write(s2.get_path(Path::new("b.txt")).unwrap(), b"s2\n").unwrap();
    // The user commits elsewhere meanwhile.
    common::write(&f.repo, "old.txt", b"user moved on\n");
    git(&f, &f.repo, &["commit", "-q", "-am", "user work"]);
    let user_commit = head(&f);
    let r = s1.commit(None).unwrap();
    let m = r.commit_ref.unwrap();
    assert_eq!(head(&f), m);
    let parents = git(&f, &f.repo, &["rev-list", "--parents", "-n1", "HEAD"]);
    assert!(parents.contains(&user_commit), "{parents}");
    assert_eq!(fs::read(f.repo.join("a.txt")).unwrap(), b"s1\n");
    assert_eq!(
        fs::read(f.repo.join("old.txt")).unwrap(),
        b"user moved on\n"
    );
    assert_eq!(git(&f, &f.repo, &["status", "--porcelain"]), "");

    // The user changes b.txt in a commit: s2's edit of b.txt conflicts.
    common::write(&f.repo, "b.txt", b"user beta\n");
    git(&f, &f.repo, &["commit", "-q", "-am", "user b"]);
    common::write(&f.repo, "a.txt", b"uncommitted user a\n");
    let before = user_state(&f);
    let e = s2.commit(None).unwrap_err();
    assert_eq!(e.kind(), "commit");
    assert_eq!(files_of(&e), vec!["b.txt"], "{e}");
    assert_eq!(user_state(&f), before);
    assert_eq!(s2.status(), Status::Active);
    // Rollback of s1's merge is refused while the user has uncommitted edits of a.txt.
    let e = s1.rollback().unwrap_err();
    assert_eq!(e.kind(), "rollback");
    assert_eq!(files_of(&e), vec!["a.txt"], "{e}");
    assert_eq!(user_state(&f), before);
    mgr.cleanup_all("p1").unwrap();
    mgr.cleanup_all("p2").unwrap();
    assert_no_sandbox_refs(&f);
}

#[test]
fn rollback_after_commit_refused_when_the_branch_changed_the_files() {
    let f = fixture();
    let mgr = PlanManager::open(&f.root).unwrap();
    let sb = mgr
        .get_or_create_sandbox("p", "repo", &f.repo, Strategy::GitWorktree)
        .unwrap();
    fs::write(sb.get_path(Path::new("a.txt")).unwrap(), b"sandbox\n").unwrap();
    sb.commit(None).unwrap();
    common::write(&f.repo, "a.txt", b"user after\n");
    git(&f, &f.repo, &["commit", "-q", "-am", "user after"]);
    let before = user_state(&f);
    let e = sb.rollback().unwrap_err();
    assert_eq!(files_of(&e), vec!["a.txt"], "{e}");
    assert_eq!(sb.status(), Status::Committed);
    assert_eq!(user_state(&f), before);
    sb.cleanup().unwrap();
    assert_no_sandbox_refs(&f);
}

#[test]
fn subdirectory_resource() {
    let f = fixture();
    let mgr = PlanManager::open(&f.root).unwrap();
    let sb = mgr
        .get_or_create_sandbox("p", "sub", f.repo.join("sub"), Strategy::GitWorktree)
        .unwrap();
    let ctx = sb.context().unwrap();
    assert!(
        ctx.sandbox_path.ends_with("tree/sub"),
        "{:?}",
        ctx.sandbox_path
    );
    fs::write(sb.get_path(Path::new("deep.txt")).unwrap(), b"deeper\n").unwrap();
    fs::write(sb.get_path(Path::new("more.txt")).unwrap(), b"more\n").unwrap();
    let d = sb.diff().unwrap();
    assert_eq!(d.paths(DiffOp::Modified), vec!["deep.txt"]);
    assert_eq!(d.paths(DiffOp::Added), vec!["more.txt"]);
    sb.commit(None).unwrap();
    assert_eq!(fs::read(f.repo.join("sub/deep.txt")).unwrap(), b"deeper\n");
    assert_eq!(fs::read(f.repo.join("sub/more.txt")).unwrap(), b"more\n");
    sb.cleanup().unwrap();
    assert_no_sandbox_refs(&f);
}

#[test]
fn detached_head_commit_is_refused() {
    let f = fixture();
    git(&f, &f.repo, &["checkout", "-q", "--detach"]);
    let mgr = PlanManager::open(&f.root).unwrap();
    let sb = mgr
        .get_or_create_sandbox("p", "repo", &f.repo, Strategy::GitWorktree)
        .unwrap();
    fs::write(sb.get_path(Path::new("a.txt")).unwrap(), b"x\n").unwrap();
    let before = user_state(&f);
    let e = sb.commit(None).unwrap_err();
    assert_eq!(e.kind(), "commit");
    assert!(e.to_string().contains("detached"), "{e}");
    assert_eq!(user_state(&f), before);
    sb.cleanup().unwrap();
    assert_no_sandbox_refs(&f);
}

#[test]
fn repository_with_a_submodule() {
    let f = fixture();
    let lib = f._tmp.path().join("lib");
    fs::create_dir(&lib).unwrap();
    git(&f, &lib, &["init", "-q"]);
    common::write(&lib, "lib.txt", b"lib\n");
    git(&f, &lib, &["add", "-A"]);
    git(&f, &lib, &["commit", "-q", "-m", "lib"]);
    git(
        &f,
        &f.repo,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            lib.to_str().unwrap(),
            "vendor/lib",
        ],
    );
    git(&f, &f.repo, &["commit", "-q", "-m", "add submodule"]);
    // The submodule's origin disappears: initialising must not need it.
    fs::rename(&lib, f._tmp.path().join("lib-gone")).unwrap();

    let mgr = PlanManager::open(&f.root).unwrap();
    let sb = mgr
        .get_or_create_sandbox("p", "repo", &f.repo, Strategy::GitWorktree)
        .unwrap();
    assert_eq!(
        fs::read(sb.get_path(Path::new("vendor/lib/lib.txt")).unwrap()).unwrap(),
        b"lib\n"
    );
    fs::write(sb.get_path(Path::new("a.txt")).unwrap(), b"with sub\n").unwrap();
    // Inside the submodule: out of scope (neither diffed nor committed).
    fs::write(
        sb.get_path(Path::new("vendor/lib/lib.txt")).unwrap(),
        b"x\n",
    )
    .unwrap();
    let d = sb.diff().unwrap();
    assert_eq!(d.paths(DiffOp::Modified), vec!["a.txt"]);
    assert_eq!(d.entries.len(), 1);
    sb.commit(None).unwrap();
    assert_eq!(fs::read(f.repo.join("a.txt")).unwrap(), b"with sub\n");
    assert_eq!(
        fs::read(f.repo.join("vendor/lib/lib.txt")).unwrap(),
        b"lib\n"
    );
    mgr.cleanup_all("p").unwrap();
    assert_no_sandbox_refs(&f);
    let modules = f.repo.join(".git/worktrees");
    assert!(!modules.exists() || fs::read_dir(&modules).unwrap().next().is_none());
}

#[test]
fn repository_with_an_existing_linked_worktree() {
    let f = fixture();
    let other = f._tmp.path().join("other");
    git(
        &f,
        &f.repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "other",
            other.to_str().unwrap(),
        ],
    );
    let mgr = PlanManager::open(&f.root).unwrap();
    // A sandbox of the main tree and one of the linked tree.
    let s1 = mgr
        .get_or_create_sandbox("p", "main", &f.repo, Strategy::GitWorktree)
        .unwrap();
    let s2 = mgr
        .get_or_create_sandbox("p", "other", &other, Strategy::GitWorktree)
        .unwrap();
    assert_eq!(
        s2.context().unwrap().metadata["git.original_branch"],
        "refs/heads/other"
    );
    fs::write(s1.get_path(Path::new("a.txt")).unwrap(), b"main\n").unwrap();
    fs::write(s2.get_path(Path::new("a.txt")).unwrap(), b"other\n").unwrap();
    let rs = mgr.commit_all("p").unwrap();
    assert_eq!(rs.len(), 2);
    assert_eq!(fs::read(f.repo.join("a.txt")).unwrap(), b"main\n");
    assert_eq!(fs::read(other.join("a.txt")).unwrap(), b"other\n");
    mgr.cleanup_all("p").unwrap();
    assert_no_sandbox_refs(&f);
    let wts = git(&f, &f.repo, &["worktree", "list", "--porcelain"]);
    assert!(wts.contains(other.to_str().unwrap()), "{wts}");
    assert_eq!(wts.matches("worktree ").count(), 2, "{wts}");
}

#[test]
fn four_sandboxes_commit_concurrently() {
    let f = fixture();
    let mgr = Arc::new(PlanManager::open(&f.root).unwrap());
    let mut sbs = Vec::new();
    for i in 0..4 {
        let sb = mgr
            .get_or_create_sandbox(&format!("plan-{i}"), "repo", &f.repo, Strategy::GitWorktree)
            .unwrap();
        fs::write(
            sb.get_path(Path::new(&format!("f{i}.txt"))).unwrap(),
            format!("file {i}\n"),
        )
        .unwrap();
        fs::write(sb.get_path(Path::new("sub/deep.txt")).unwrap(), b"deep\n").unwrap();
        sbs.push(sb);
    }
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let mgr = mgr.clone();
            std::thread::spawn(move || mgr.commit_all(&format!("plan-{i}")))
        })
        .collect();
    for t in threads {
        let r = t.join().unwrap();
        let r = r.unwrap_or_else(|e| panic!("commit failed: {e}"));
        assert!(r[0].success);
    }
    let log = git(&f, &f.repo, &["log", "--format=%s", "--name-only"]);
    for i in 0..4 {
        assert_eq!(
            fs::read(f.repo.join(format!("f{i}.txt"))).unwrap(),
            format!("file {i}\n").as_bytes()
        );
        assert!(log.contains(&format!("plan plan-{i}")), "{log}");
        assert!(log.contains(&format!("f{i}.txt")), "{log}");
    }
    assert_eq!(git(&f, &f.repo, &["status", "--porcelain"]), "");
    for i in 0..4 {
        mgr.cleanup_all(&format!("plan-{i}")).unwrap();
    }
    assert_no_sandbox_refs(&f);
}

#[test]
fn reopened_manager_finds_the_sandbox_and_settles_an_interrupted_commit() {
    let f = fixture();
    let (id, dir) = {
        let mgr = PlanManager::open(&f.root).unwrap();
        let sb = mgr
            .get_or_create_sandbox("p", "repo", &f.repo, Strategy::GitWorktree)
            .unwrap();
        fs::write(sb.get_path(Path::new("a.txt")).unwrap(), b"kept\n").unwrap();
        let dir = sb
            .context()
            .unwrap()
            .sandbox_path
            .parent()
            .unwrap()
            .to_path_buf();
        (sb.sandbox_id().to_string(), dir)
        // Dropped with uncommitted changes: kept.
    };
    let state = dir.join("state.json");
    let commit_ref = {
        let mgr = PlanManager::open(&f.root).unwrap();
        let sb = mgr.get_sandbox("p", "repo").unwrap();
        assert_eq!(sb.sandbox_id(), id);
        assert_eq!(sb.status(), Status::Active);
        assert_eq!(sb.diff().unwrap().paths(DiffOp::Modified), vec!["a.txt"]);
        let r = sb.commit(None).unwrap();
        let saved = fs::read(&state).unwrap();
        // Simulate a crash after the user's branch moved, before the state said so.
        let mut v: serde_json::Value = serde_json::from_slice(&saved).unwrap();
        v["status"] = "active".into();
        v["commit_ref"] = serde_json::Value::Null;
        v["commit_in_flight"] = r.commit_ref.clone().unwrap().into();
        std::mem::forget(mgr); // a crash: no drop-time cleanup
        fs::write(&state, serde_json::to_vec(&v).unwrap()).unwrap();
        r.commit_ref.unwrap()
    };
    {
        let mgr = PlanManager::open(&f.root).unwrap();
        let sb = mgr.get_sandbox("p", "repo").unwrap();
        assert_eq!(sb.status(), Status::Committed);
        let v: serde_json::Value = serde_json::from_slice(&fs::read(&state).unwrap()).unwrap();
        assert_eq!(v["commit_ref"], commit_ref.as_str());
        assert!(v["commit_in_flight"].is_null());
        // A rollback (revert) that reached the branch before the crash.
        sb.rollback().unwrap();
        let revert = head(&f);
        let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&state).unwrap()).unwrap();
        v["status"] = "committed".into();
        v["commit_ref"] = commit_ref.as_str().into();
        v["metadata"]["git.revert_in_flight"] = revert.as_str().into();
        std::mem::forget(mgr);
        fs::write(&state, serde_json::to_vec(&v).unwrap()).unwrap();
    }
    {
        let mgr = PlanManager::open(&f.root).unwrap();
        let sb = mgr.get_sandbox("p", "repo").unwrap();
        assert_eq!(sb.status(), Status::RolledBack);
        let v: serde_json::Value = serde_json::from_slice(&fs::read(&state).unwrap()).unwrap();
        assert!(v["commit_ref"].is_null());
        assert!(v["metadata"].get("git.revert_in_flight").is_none());
        // An in-flight commit that never reached the branch: not landed.
        let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&state).unwrap()).unwrap();
        v["status"] = "active".into();
        let stray = git(
            &f,
            &f.repo,
            &[
                "commit-tree",
                "-m",
                "never landed",
                &format!("{commit_ref}^{{tree}}"),
            ],
        );
        v["commit_in_flight"] = stray.into();
        std::mem::forget(mgr);
        fs::write(&state, serde_json::to_vec(&v).unwrap()).unwrap();
    }
    let mgr = PlanManager::open(&f.root).unwrap();
    let sb = mgr.get_sandbox("p", "repo").unwrap();
    assert_eq!(sb.status(), Status::Active);
    let v: serde_json::Value = serde_json::from_slice(&fs::read(&state).unwrap()).unwrap();
    assert!(v["commit_in_flight"].is_null());
    assert!(v["commit_ref"].is_null());
    mgr.cleanup_all("p").unwrap();
    assert_no_sandbox_refs(&f);
    assert!(git_ok(&f, &f.repo, &["rev-parse", "--verify", "HEAD"]));
}

#[test]
fn a_root_inside_the_users_tree_is_refused() {
    let f = fixture();
    let inner = f.repo.join(".sandbox-root");
    let mgr = PlanManager::open(&inner).unwrap();
    let e = mgr
        .get_or_create_sandbox("p", "repo", &f.repo, Strategy::GitWorktree)
        .err()
        .unwrap();
    assert_eq!(e.kind(), "creation");
    assert!(e.to_string().contains("inside the user's work tree"), "{e}");
    assert_no_sandbox_refs(&f);
}

#[test]
fn commits_made_by_the_actor_in_the_worktree_are_squashed() {
    let f = fixture();
    let mgr = PlanManager::open(&f.root).unwrap();
    let sb = mgr
        .get_or_create_sandbox("p", "repo", &f.repo, Strategy::GitWorktree)
        .unwrap();
    let tree = sb.get_path(Path::new("")).unwrap();
    fs::write(tree.join("a.txt"), b"actor 1\n").unwrap();
    git(&f, &tree, &["commit", "-q", "-am", "actor 1"]);
    fs::write(tree.join("b.txt"), b"actor 2\n").unwrap();
    let d = sb.diff().unwrap();
    assert_eq!(d.paths(DiffOp::Modified), vec!["a.txt", "b.txt"]);
    let base = head(&f);
    let r = sb.commit(Some("one commit")).unwrap();
    assert_eq!(git(&f, &f.repo, &["rev-parse", "HEAD^"]), base);
    assert_eq!(r.commit_ref.unwrap(), head(&f));
    assert_eq!(fs::read(f.repo.join("a.txt")).unwrap(), b"actor 1\n");
    assert_eq!(fs::read(f.repo.join("b.txt")).unwrap(), b"actor 2\n");
    sb.cleanup().unwrap();
    assert_no_sandbox_refs(&f);
}

#[test]
fn a_user_who_switched_branches_is_refused() {
    let f = fixture();
    let mgr = PlanManager::open(&f.root).unwrap();
    let sb = mgr
        .get_or_create_sandbox("p", "repo", &f.repo, Strategy::GitWorktree)
        .unwrap();
    fs::write(sb.get_path(Path::new("a.txt")).unwrap(), b"x\n").unwrap();
    git(&f, &f.repo, &["checkout", "-q", "-b", "elsewhere"]);
    let before = user_state(&f);
    let e = sb.check_commit().unwrap_err();
    assert!(e.to_string().contains("switch back"), "{e}");
    let e = sb.commit(None).unwrap_err();
    assert_eq!(e.kind(), "commit");
    assert_eq!(user_state(&f), before);
    assert_eq!(sb.status(), Status::Active);
    sb.cleanup().unwrap();
    assert_no_sandbox_refs(&f);
}

#[test]
fn a_same_size_edit_right_after_create_is_seen() {
    // Racy git: the edit lands in the same second as the checkout and keeps the size; the
    // diff must not trust the index's stat data blindly.
    let f = fixture();
    let mgr = PlanManager::open(&f.root).unwrap();
    for i in 0..5 {
        let plan = format!("p{i}");
        let sb = mgr
            .get_or_create_sandbox(&plan, "repo", &f.repo, Strategy::GitWorktree)
            .unwrap();
        fs::write(sb.get_path(Path::new("a.txt")).unwrap(), b"ALPHA\n").unwrap();
        if i < 2 {
            // The next second: a copied index would now look newer than the edit.
            std::thread::sleep(std::time::Duration::from_millis(1100));
        }
        assert_eq!(sb.diff().unwrap().paths(DiffOp::Modified), vec!["a.txt"]);
        mgr.cleanup_all(&plan).unwrap();
    }
    assert_no_sandbox_refs(&f);
}

#[test]
fn a_repository_resource_defaults_to_git_worktree_and_is_shared_by_its_directories() {
    use patchbox::plan::{Resource, ResourceKind, ResourceRegistry};
    let f = fixture();
    let mut reg = ResourceRegistry::new();
    reg.add(Resource::new("repo", ResourceKind::GitRepository, &f.repo))
        .unwrap();
    reg.add(Resource::new("sub", ResourceKind::Directory, f.repo.join("sub")).with_parent("repo"))
        .unwrap();
    let mgr = PlanManager::open(&f.root).unwrap();
    let sub = mgr
        .get_or_create_sandbox_for_resource("p", reg.get("sub").unwrap(), &reg)
        .unwrap();
    assert_eq!(sub.sandbox.strategy(), Strategy::GitWorktree);
    fs::write(sub.get_path("deep.txt").unwrap(), b"via sub\n").unwrap();
    let top = mgr
        .get_or_create_sandbox_for_resource("p", reg.get("repo").unwrap(), &reg)
        .unwrap();
    assert_eq!(top.sandbox.sandbox_id(), sub.sandbox.sandbox_id());
    assert_eq!(
        top.sandbox.diff().unwrap().paths(DiffOp::Modified),
        vec!["sub/deep.txt"]
    );
    mgr.commit_all("p").unwrap();
    assert_eq!(fs::read(f.repo.join("sub/deep.txt")).unwrap(), b"via sub\n");
    mgr.cleanup_all("p").unwrap();
    assert_no_sandbox_refs(&f);
}

/// A commit that moved the user's branch but could not write its `Committed` state is
/// reported as failed and is `Committed` all the same: its rollback brings the branch back.
#[test]
fn a_landed_commit_whose_state_cannot_be_written_is_committed_and_rolls_back() {
    let f = fixture();
    let before = user_state(&f);
    let mgr = PlanManager::open(&f.root).unwrap();
    let sb = mgr
        .get_or_create_sandbox("p", "repo", &f.repo, Strategy::GitWorktree)
        .unwrap();
    fs::write(sb.get_path(Path::new("a.txt")).unwrap(), b"changed\n").unwrap();
    patchbox::plan::record::fail_next_committed_state_write(sb.sandbox_id());
    let e = sb.commit(None).unwrap_err();
    assert!(e.to_string().contains("injected failure"), "{e}");
    assert_eq!(sb.status(), Status::Committed);
    assert_eq!(fs::read(f.repo.join("a.txt")).unwrap(), b"changed\n");
    sb.rollback().unwrap();
    assert_eq!(fs::read(f.repo.join("a.txt")).unwrap(), b"alpha\n");
    // A revert commit on top (the branch never moves backwards): the tree is as before.
    assert_eq!(
        git(&f, &f.repo, &["rev-parse", "HEAD^{tree}"]),
        git(
            &f,
            &f.repo,
            &["rev-parse", &format!("{}^{{tree}}", before.1)]
        )
    );
    sb.cleanup().unwrap();
}

/// A panic after the commit moved the user's branch, before the status said so: the panic
/// reaches the caller, the sandbox is settled as `Committed` (the branch did move), and
/// its rollback brings the files back. In `commit_all` the plan is rolled back whole.
#[test]
fn a_commit_that_panics_after_landing_is_settled() {
    let f = fixture();
    let mgr = PlanManager::open(&f.root).unwrap();
    let sb = mgr
        .get_or_create_sandbox("p", "repo", &f.repo, Strategy::GitWorktree)
        .unwrap();
    fs::write(sb.get_path(Path::new("a.txt")).unwrap(), b"changed\n").unwrap();
    patchbox::plan::record::panic_after_next_landing(sb.sandbox_id());
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sb.commit(None)));
    assert!(caught.is_err(), "the injected panic reaches the caller");
    assert_eq!(sb.status(), Status::Committed);
    assert_eq!(fs::read(f.repo.join("a.txt")).unwrap(), b"changed\n");
    sb.rollback().unwrap();
    assert_eq!(fs::read(f.repo.join("a.txt")).unwrap(), b"alpha\n");

    // In commit_all: the plan is rolled back, this sandbox too. (A rolled-back sandbox is
    // active again on its next use, its changes kept.)
    sb.get_path(Path::new("")).unwrap();
    assert_eq!(sb.status(), Status::Active);
    patchbox::plan::record::panic_after_next_landing(sb.sandbox_id());
    match mgr.commit_all("p") {
        Err(SandboxError::AtomicCommit {
            rolled_back_ids, ..
        }) => assert_eq!(rolled_back_ids, vec![sb.sandbox_id().to_string()]),
        other => panic!("expected AtomicCommit, got {other:?}"),
    }
    assert_eq!(fs::read(f.repo.join("a.txt")).unwrap(), b"alpha\n");
    mgr.cleanup_all("p").unwrap();
    assert_no_sandbox_refs(&f);
}

/// A sandbox that adds symlinks pointing outside the resource (absolute elsewhere, `..`
/// climbing out, `..` climbing out through a symlink that itself points inside, a file
/// turned into a link to `/etc/passwd`, a link retargeted out) is refused at check and at
/// commit, before anything is written, naming the links (repository paths); `commit_all`
/// refuses the whole plan. For a subdirectory resource, the rest of the repository is
/// outside. Symlinks pointing inside stay allowed and commit.
#[test]
fn symlinks_pointing_outside_the_resource_are_refused_before_anything_is_written() {
    let f = fixture();
    let outside = tempfile::tempdir().unwrap();
    let mgr = PlanManager::open(&f.root).unwrap();
    let sb = mgr
        .get_or_create_sandbox("p", "repo", &f.repo, Strategy::GitWorktree)
        .unwrap();
    let tree = sb.get_path(Path::new("")).unwrap();
    symlink(outside.path().join("x"), tree.join("abs-out")).unwrap();
    symlink("../../escape", tree.join("sub/up-out")).unwrap();
    symlink("..", tree.join("sub/hop")).unwrap();
    symlink("hop/..", tree.join("sub/via-hop")).unwrap();
    fs::remove_file(tree.join("a.txt")).unwrap();
    symlink("/etc/passwd", tree.join("a.txt")).unwrap();
    fs::remove_file(tree.join("link")).unwrap();
    symlink("../elsewhere", tree.join("link")).unwrap();
    symlink("sub/deep.txt", tree.join("in-rel")).unwrap();
    symlink(f.repo.join("b.txt"), tree.join("in-abs")).unwrap();
    let sub = mgr
        .get_or_create_sandbox("q", "sub", f.repo.join("sub"), Strategy::GitWorktree)
        .unwrap();
    let sub_tree = sub.get_path(Path::new("")).unwrap();
    symlink("../a.txt", sub_tree.join("up")).unwrap();
    symlink(f.repo.join("b.txt"), sub_tree.join("abs")).unwrap();
    symlink("deep.txt", sub_tree.join("in")).unwrap();
    let before = user_state(&f);

    let refused = |e: &SandboxError, id: &str, want: &[&str]| {
        assert!(e.to_string().contains("points outside the resource"), "{e}");
        assert!(matches!(e, SandboxError::Commit { sandbox_id, .. } if sandbox_id == id));
        let mut files = files_of(e);
        files.sort();
        assert_eq!(files, want);
    };
    let out = ["a.txt", "abs-out", "link", "sub/up-out", "sub/via-hop"];
    refused(&sb.check_commit().unwrap_err(), sb.sandbox_id(), &out);
    match common::as_failure(mgr.commit_all("p")) {
        Err(SandboxError::AtomicCommit {
            reason,
            rolled_back_ids,
            failed_sandbox_id,
            ..
        }) => {
            assert!(reason.contains("points outside the resource"), "{reason}");
            assert!(rolled_back_ids.is_empty());
            assert_eq!(failed_sandbox_id.as_deref(), Some(sb.sandbox_id()));
        }
        other => panic!("{other:?}"),
    }
    refused(&sb.commit(None).unwrap_err(), sb.sandbox_id(), &out);
    refused(
        &sub.check_commit().unwrap_err(),
        sub.sandbox_id(),
        &["sub/abs", "sub/up"],
    );
    refused(
        &sub.commit(None).unwrap_err(),
        sub.sandbox_id(),
        &["sub/abs", "sub/up"],
    );
    assert_eq!(user_state(&f), before);
    assert_eq!(sb.status(), Status::Active);
    assert_eq!(sub.status(), Status::Active);
    sub.cleanup().unwrap();

    for l in ["abs-out", "sub/up-out", "sub/via-hop", "a.txt", "link"] {
        fs::remove_file(tree.join(l)).unwrap();
    }
    fs::write(tree.join("a.txt"), b"A\n").unwrap();
    symlink("a.txt", tree.join("link")).unwrap();
    mgr.commit_all("p").unwrap();
    let link = |rel: &str| fs::read_link(f.repo.join(rel)).unwrap();
    assert_eq!(link("in-rel"), Path::new("sub/deep.txt"));
    assert_eq!(link("in-abs"), f.repo.join("b.txt"));
    assert_eq!(link("sub/hop"), Path::new(".."));
    assert_eq!(fs::read(f.repo.join("a.txt")).unwrap(), b"A\n");
    sb.cleanup().unwrap();
    assert_no_sandbox_refs(&f);
}
