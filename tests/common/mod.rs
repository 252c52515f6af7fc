//! Helpers shared by the integration tests: temporary projects, tree fingerprints, git.
#![allow(dead_code)]

pub mod btrfs;
pub mod overlay;
pub mod weed;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Everything a user would notice about a tree: per path, type, mode, content, mtime.
pub type Fingerprint = BTreeMap<Vec<u8>, (String, u32, Vec<u8>, i64, i64)>;

/// Fingerprints `root`, including `.git` when `with_git`.
pub fn fingerprint(root: &Path, with_git: bool) -> Fingerprint {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root).follow_links(false) {
        let e = e.unwrap();
        if e.depth() == 0 {
            continue;
        }
        let rel = e.path().strip_prefix(root).unwrap();
        if !with_git && rel.components().any(|c| c.as_os_str() == ".git") {
            continue;
        }
        let m = fs::symlink_metadata(e.path()).unwrap();
        let (kind, content) = if m.file_type().is_symlink() {
            (
                "link",
                fs::read_link(e.path())
                    .unwrap()
                    .as_os_str()
                    .as_bytes()
                    .to_vec(),
            )
        } else if m.is_dir() {
            ("dir", Vec::new())
        } else if m.is_file() {
            ("file", fs::read(e.path()).unwrap())
        } else {
            ("special", Vec::new())
        };
        let mtime = if m.is_dir() {
            (0, 0)
        } else {
            (m.mtime(), m.mtime_nsec())
        };
        out.insert(
            rel.as_os_str().as_bytes().to_vec(),
            (kind.to_string(), m.mode(), content, mtime.0, mtime.1),
        );
    }
    out
}

/// Content-only view of a tree: per path, (type, exec bit, content). For comparing a
/// patched copy against a sandbox.
pub fn content_view(root: &Path) -> BTreeMap<Vec<u8>, (String, bool, Vec<u8>)> {
    fingerprint(root, false)
        .into_iter()
        .filter(|(_, v)| v.0 != "dir")
        .map(|(k, v)| (k, (v.0, v.1 & 0o100 != 0, v.2)))
        .collect()
}

pub fn write(root: &Path, rel: &str, data: &[u8]) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, data).unwrap();
}

pub fn chmod(root: &Path, rel: &str, mode: u32) {
    fs::set_permissions(root.join(rel), fs::Permissions::from_mode(mode)).unwrap();
}

/// Runs git with a neutral environment (no user config).
pub fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    let home = dir.join(".git-test-home-unused");
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "core.autocrlf=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", &home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn git_init(dir: &Path) {
    git(dir, &["init", "-q"]);
}

pub fn git_commit_all(dir: &Path) {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "c", "--allow-empty"]);
}

/// Copies a tree (without `.git`) with `cp -a`.
pub fn copy_tree(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
    let g = to.join(".git");
    if g.exists() {
        fs::remove_dir_all(g).unwrap();
    }
}

/// Applies `patch` with `git apply` in a fresh copy of `base` and returns the copy.
pub fn git_apply_copy(base: &Path, patch: &[u8], scratch: &Path) -> PathBuf {
    let dir = scratch.join(format!("gitapply-{}", ulid::Ulid::new()));
    fs::create_dir_all(&dir).unwrap();
    copy_tree(base, &dir);
    git_init(&dir);
    let pf = scratch.join(format!("p-{}.patch", ulid::Ulid::new()));
    fs::write(&pf, patch).unwrap();
    git(
        &dir,
        &["apply", "--whitespace=nowarn", pf.to_str().unwrap()],
    );
    fs::remove_dir_all(dir.join(".git")).unwrap();
    dir
}

/// Applies `patch` with GNU `patch -p1` in a fresh copy of `base` and returns the copy.
pub fn patch_p1_copy(base: &Path, patch: &[u8], scratch: &Path) -> PathBuf {
    let dir = scratch.join(format!("patchp1-{}", ulid::Ulid::new()));
    fs::create_dir_all(&dir).unwrap();
    copy_tree(base, &dir);
    let pf = scratch.join(format!("p-{}.patch", ulid::Ulid::new()));
    fs::write(&pf, patch).unwrap();
    let out = Command::new("patch")
        .args(["-p1", "--quiet", "--batch", "-i"])
        .arg(&pf)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "patch -p1 failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// What a patch can change, per path (excluding `.git`), directories included: type ('f', 'l'
/// or 'd'), any exec bit, and contents (a symlink's target). Unlike [`content_view`], an
/// empty directory left behind shows.
pub type TreeView = BTreeMap<Vec<u8>, (char, bool, Vec<u8>)>;

/// The [`TreeView`] of the tree at `root`.
pub fn tree_view(root: &Path) -> TreeView {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root).min_depth(1) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(root).unwrap();
        if rel
            .components()
            .next()
            .is_some_and(|c| c.as_os_str() == ".git")
        {
            continue;
        }
        let m = fs::symlink_metadata(e.path()).unwrap();
        let key = rel.as_os_str().as_bytes().to_vec();
        if m.file_type().is_symlink() {
            let t = fs::read_link(e.path()).unwrap();
            out.insert(key, ('l', false, t.as_os_str().as_bytes().to_vec()));
        } else if m.is_file() {
            out.insert(
                key,
                ('f', m.mode() & 0o111 != 0, fs::read(e.path()).unwrap()),
            );
        } else if m.is_dir() {
            out.insert(key, ('d', false, Vec::new()));
        }
    }
    out
}

/// Per path below the root (`.git` left out): type, full permission bits (directories' too)
/// and contents (a symlink's target) — what an apply or its undo must restore exactly.
pub type ModeView = BTreeMap<Vec<u8>, (char, u32, Vec<u8>)>;

/// The [`ModeView`] of the tree at `root`.
pub fn mode_view(root: &Path) -> ModeView {
    let mut out = ModeView::new();
    for e in walkdir::WalkDir::new(root).min_depth(1) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(root).unwrap();
        if rel.starts_with(".git") {
            continue;
        }
        let m = fs::symlink_metadata(e.path()).unwrap();
        let key = rel.as_os_str().as_bytes().to_vec();
        let v = if m.file_type().is_symlink() {
            let t = fs::read_link(e.path()).unwrap();
            ('l', 0, t.as_os_str().as_bytes().to_vec())
        } else if m.is_dir() {
            ('d', m.mode() & 0o7777, Vec::new())
        } else {
            ('f', m.mode() & 0o7777, fs::read(e.path()).unwrap())
        };
        out.insert(key, v);
    }
    out
}

/// Everything observable, per path (the root and `.git` included): full mode, contents (a
/// symlink's target), mtime. Equal before and after means nothing was touched.
pub type ExactFingerprint = BTreeMap<Vec<u8>, (u32, Vec<u8>, i64, i64)>;

/// The [`ExactFingerprint`] of the tree at `root`.
pub fn exact_fingerprint(root: &Path) -> ExactFingerprint {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(root).unwrap();
        let m = fs::symlink_metadata(e.path()).unwrap();
        let content = if m.file_type().is_symlink() {
            fs::read_link(e.path())
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec()
        } else if m.is_file() {
            fs::read(e.path()).unwrap()
        } else {
            Vec::new()
        };
        out.insert(
            rel.as_os_str().as_bytes().to_vec(),
            (m.mode(), content, m.mtime(), m.mtime_nsec()),
        );
    }
    out
}

/// Trials per scenario of the kill harnesses (`tests/crash.rs`, `tests/apply_crash.rs`):
/// `PATCHBOX_CRASH_TRIALS`, 12 by default (the CI form; the long form is 100+).
pub fn trials() -> usize {
    std::env::var("PATCHBOX_CRASH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

/// A small deterministic generator (xorshift64*) for the kill harnesses, seeded from the
/// clock or from `PATCHBOX_CRASH_SEED`; the seed is printed so a failing run can be replayed.
pub struct Rng(u64);

impl Rng {
    /// A generator for `scenario`, printing its seed.
    pub fn new(scenario: &str) -> Rng {
        let seed = std::env::var("PATCHBOX_CRASH_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            })
            | 1;
        eprintln!("{scenario}: seed {seed} (PATCHBOX_CRASH_SEED replays it)");
        Rng(seed)
    }

    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

/// Prunes `root` once no process holds a session's lock any more. A session this process
/// released can still look live for a moment: a child that another test's thread forks
/// holds a copy of the lock's descriptor until it execs (`flock` locks follow descriptors).
pub fn prune_once_released(root: &Path) -> patchbox::session::recover::PruneReport {
    for _ in 0..100 {
        let report = patchbox::session::recover::prune(root).unwrap();
        if report.live.is_empty() {
            return report;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("a session under {} stayed live", root.display());
}

/// `commit_all`'s outcome with a sandbox-level failure — returned as the one failed
/// [`CommitResult`](patchbox::plan::CommitResult), as the plan executors' documentation says —
/// read as the [`SandboxError::AtomicCommit`](patchbox::plan::SandboxError::AtomicCommit) the
/// other failures raise, so one assertion covers both (the failed result's own shape is
/// checked by `plan_core`'s `a_sandbox_level_failure_is_the_one_failed_result`).
pub fn as_failure(
    r: Result<Vec<patchbox::plan::CommitResult>, patchbox::plan::SandboxError>,
) -> Result<Vec<patchbox::plan::CommitResult>, patchbox::plan::SandboxError> {
    let results = r?;
    let Some(f) = results.iter().find(|r| !r.success) else {
        return Ok(results);
    };
    assert_eq!(
        results.len(),
        1,
        "a failure is the one failed result: {results:?}"
    );
    let plan_id = f.metadata.get("plan_id").cloned().unwrap_or_default();
    let undone = f
        .metadata
        .get("rolled_back_ids")
        .cloned()
        .unwrap_or_default();
    Err(patchbox::plan::SandboxError::AtomicCommit {
        plan_id,
        reason: f.error.clone().unwrap_or_default(),
        rolled_back_ids: undone
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        failed_rollback_ids: Vec::new(),
        failed_sandbox_id: Some(f.sandbox_id.clone()),
    })
}
