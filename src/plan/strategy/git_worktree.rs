//! `git_worktree`: the sandbox is a linked worktree of the resource's repository, on a branch
//! of its own, kept under the library's root; a commit is a git commit that reaches the
//! user's branch by fast-forward only, so the user's uncommitted work is never discarded.
//!
//! ```text
//! <plan dir>/<sandbox id>/
//!   state.json    the lifecycle record
//!   tree/         the linked worktree (branch patchbox/<plan>/<sandbox id>), what get_path
//!                 points into (or its subdirectory when the resource is one)
//!   scratch.index a temporary index: diff and commit stage the worktree here
//! <plans dir>/git-locks/<hash>.lock   flock per repository (its common git dir)
//! ```
//!
//! The worktree starts at the original's `HEAD` commit (`git.base`). Every git call runs the
//! git CLI with the repository-locating variables removed (`GIT_DIR`, `GIT_WORK_TREE`,
//! `GIT_INDEX_FILE`, …), `LC_ALL=C`, no prompts, and a fallback identity when none is
//! configured. Git operations on one repository are serialized: a process-wide lock keyed
//! by the canonical common git dir, plus an `flock` under the plans directory.
//!
//! **Diff**: every non-ignored file of the resource's part of the worktree is staged into
//! `scratch.index` (`git add -A`), which is compared with the base commit; the patch is
//! `git diff --binary`.
//!
//! **Commit**: the staged tree becomes a commit `C` (parent: the base) on the sandbox branch.
//! If the user's branch is still at the base, the target is `C`; if it moved, the target is
//! a merge commit of the branch tip and `C` computed by `git merge-tree --write-tree` (git
//! 2.38+) without touching the user's tree — a conflict refuses, naming the files, with
//! nothing changed. Files the target changes that are dirty in the user's tree (modified,
//! staged, untracked or ignored in the way) refuse the commit, named. Otherwise the target
//! is recorded as in flight, then `git merge --ff-only <target>` runs in the user's tree: it
//! updates the user's index and files and advances the branch, and refuses (never
//! overwrites) when local changes are in the way. `commit_ref` is the target.
//!
//! **Rollback** from `Committed`: a revert commit whose tree is the branch tip with the
//! committed paths set back to the target's first parent, reached by fast-forward in the
//! same way; refused, naming the files, when the branch or the user's tree changed them
//! since. From `Active`: `git reset --hard <base>` and `git clean -fdx` in the worktree only.
//!
//! **Cleanup**: `git worktree remove --force`, `git branch -D`, `git worktree prune`.
//!
//! **Limits** (documented choices):
//! - A detached `HEAD` in the original may be sandboxed, but its commit is refused: commits
//!   land on a branch. So is a commit after the user switched to another branch.
//! - Submodules checked out in the original are initialised in the worktree from the
//!   original's checkouts (`protocol.file.allow=always`, no network). Changes inside a
//!   submodule are out of scope: they are neither in the diff nor committed.
//! - Crash: the target of a commit (`commit_in_flight`) and of a revert
//!   (`git.revert_in_flight` in the metadata) is persisted before the user's branch is
//!   touched; reopening settles it by asking whether it is an ancestor of the user's branch.
//!   A crash inside `merge --ff-only`, after it updated the user's files and before it moved
//!   the branch, leaves those changes in the user's tree as uncommitted changes (nothing
//!   lost); the commit is then reported as not landed.
//! - The user's branch is never moved backwards: a rollback after commit is a revert commit
//!   (history keeps both), never a reset.
//! - Files named in errors are paths of the repository (not of the resource).
//! - The `flock` lives under the plans directory, so it serializes the processes sharing
//!   one root; nothing is written into the user's `.git` for locking. Git's own
//!   `index.lock` still guards against any other git running in the user's tree.
//! - User hooks: sandbox commits are made with `commit-tree` (no hooks); the fast-forward in
//!   the user's tree runs their `post-merge` hook as any `git merge` would.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};

use super::{creation_err, sandbox_path_of, Env};
use crate::plan::error::SandboxError;
use crate::plan::model::{CommitResult, DiffEntry, DiffOp, SandboxContext, SandboxDiff, Strategy};
use crate::plan::record::{Lifecycle, Record, State};
use crate::plan::sandbox::Sandbox;
use crate::plan::status::Status;

const TREE: &str = "tree";
const SCRATCH_INDEX: &str = "scratch.index";
const LOCKS_DIR: &str = "git-locks";
const GITLINK: &str = "160000";
/// Metadata key of a revert commit started and not known to have reached the user's branch.
const REVERT_IN_FLIGHT: &str = "git.revert_in_flight";

/// Environment variables that point git at another repository, index or configuration;
/// removed from every git call.
const GIT_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_QUARANTINE_PATH",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_SHALLOW_FILE",
    "GIT_REPLACE_REF_BASE",
    "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS",
    "GIT_ICASE_PATHSPECS",
];

/// What a git call produced.
struct GitOut {
    ok: bool,
    stdout: Vec<u8>,
    stderr: String,
}

/// One git call: `git <args>` in `dir`, with an optional index and standard input.
#[derive(Clone, Copy)]
struct Git<'a> {
    dir: &'a Path,
    index: Option<&'a Path>,
    stdin: Option<&'a [u8]>,
}

impl<'a> Git<'a> {
    fn at(dir: &'a Path) -> Self {
        Git {
            dir,
            index: None,
            stdin: None,
        }
    }

    fn index(mut self, index: &'a Path) -> Self {
        self.index = Some(index);
        self
    }

    fn input(mut self, data: &'a [u8]) -> Self {
        self.stdin = Some(data);
        self
    }

    /// Runs it; a git that cannot be started is an error, a failing git is `ok == false`.
    fn run(&self, args: &[&str]) -> Result<GitOut, String> {
        let mut c = Command::new("git");
        c.current_dir(self.dir);
        for v in GIT_ENV {
            c.env_remove(v);
        }
        c.env("LC_ALL", "C")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_EDITOR", "true")
            .env("GIT_MERGE_AUTOEDIT", "no")
            .env("GIT_LITERAL_PATHSPECS", "1");
        if let Some(i) = self.index {
            c.env("GIT_INDEX_FILE", i);
        }
        c.args([
            "-c",
            "gc.auto=0",
            "-c",
            "commit.gpgSign=false",
            "-c",
            "core.quotePath=false",
        ]);
        c.args(args)
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c
            .spawn()
            .map_err(|e| format!("cannot run git {}: {e}", args.join(" ")))?;
        if let (Some(data), Some(mut pipe)) = (self.stdin, child.stdin.take()) {
            use std::io::Write;
            // Written from a thread: git may fill stdout before reading all its input.
            let data = data.to_vec();
            let writer = std::thread::spawn(move || pipe.write_all(&data));
            let out = child
                .wait_with_output()
                .map_err(|e| format!("git {}: {e}", args.join(" ")))?;
            let _ = writer.join();
            return Ok(GitOut {
                ok: out.status.success(),
                stdout: out.stdout,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("git {}: {e}", args.join(" ")))?;
        Ok(GitOut {
            ok: out.status.success(),
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }

    /// Runs it and requires success; the error names the command, the directory and
    /// git's stderr.
    fn ok(&self, args: &[&str]) -> Result<Vec<u8>, String> {
        let out = self.run(args)?;
        if out.ok {
            Ok(out.stdout)
        } else {
            Err(format!(
                "git {} (in {}) failed: {}",
                args.join(" "),
                self.dir.display(),
                out.stderr
            ))
        }
    }

    /// [`Git::ok`] with stdout as one trimmed line.
    fn line(&self, args: &[&str]) -> Result<String, String> {
        self.ok(args)
            .map(|o| String::from_utf8_lossy(&o).trim().to_string())
    }
}

/// `-c user.name=… -c user.email=…` when the repository has no identity configured.
fn identity_args(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for (key, fallback) in [
        ("user.name", "patchbox"),
        ("user.email", "patchbox@localhost"),
    ] {
        let set = Git::at(dir)
            .run(&["config", "--get", key])
            .is_ok_and(|o| o.ok && !o.stdout.trim_ascii().is_empty());
        if !set {
            out.push("-c".to_string());
            out.push(format!("{key}={fallback}"));
        }
    }
    out
}

/// The process-wide locks, one per repository (canonical common git dir).
fn repo_locks() -> &'static parking_lot::Mutex<HashMap<PathBuf, Arc<parking_lot::Mutex<()>>>> {
    static LOCKS: OnceLock<parking_lot::Mutex<HashMap<PathBuf, Arc<parking_lot::Mutex<()>>>>> =
        OnceLock::new();
    LOCKS.get_or_init(Default::default)
}

/// Runs `f` holding the repository's locks: the process-wide one, then an `flock` on
/// `<plans dir>/git-locks/<sha1 of the common dir>.lock` for other processes.
fn with_repo_lock<R>(
    plans_dir: &Path,
    common_dir: &Path,
    f: impl FnOnce() -> Result<R, SandboxError>,
) -> Result<R, SandboxError> {
    use sha1::{Digest, Sha1};
    let key = std::fs::canonicalize(common_dir).unwrap_or_else(|_| common_dir.to_path_buf());
    let m = repo_locks().lock().entry(key.clone()).or_default().clone();
    let _held = m.lock();
    let dir = plans_dir.join(LOCKS_DIR);
    let lower = |what: &str, e: std::io::Error, p: &Path| {
        SandboxError::from_lower(None, what, crate::Error::io("lock", p, e))
    };
    std::fs::create_dir_all(&dir).map_err(|e| lower("create the git lock directory", e, &dir))?;
    let digest = Sha1::digest(key.as_os_str().as_encoded_bytes());
    let name: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let p = dir.join(format!("{name}.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&p)
        .map_err(|e| lower("open the repository lock", e, &p))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| lower("lock the repository", e.into(), &p))?;
    let r = f();
    drop(file);
    r
}

/// Splits NUL-separated git output into strings.
/// A `--raw` mode field as a number; none for `000000` (the side does not exist).
fn git_mode(m: &str) -> Option<u32> {
    u32::from_str_radix(m, 8).ok().filter(|&m| m != 0)
}

fn nul_fields(out: &[u8]) -> Vec<String> {
    out.split(|&b| b == 0)
        .filter(|f| !f.is_empty())
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect()
}

/// One entry of `git diff --raw -z --no-abbrev`.
struct RawEntry {
    old_mode: String,
    new_mode: String,
    old_oid: String,
    new_oid: String,
    status: char,
    path: String,
    /// The path exactly as git wrote it (not necessarily UTF-8).
    path_bytes: Vec<u8>,
}

fn parse_raw(out: &[u8]) -> Vec<RawEntry> {
    let fields: Vec<&[u8]> = out.split(|&b| b == 0).collect();
    let mut v = Vec::new();
    let mut i = 0;
    while i + 1 < fields.len() {
        let head = String::from_utf8_lossy(fields[i]);
        let Some(head) = head.strip_prefix(':') else {
            i += 1;
            continue;
        };
        let parts: Vec<&str> = head.split(' ').collect();
        if parts.len() >= 5 {
            v.push(RawEntry {
                old_mode: parts[0].to_string(),
                new_mode: parts[1].to_string(),
                old_oid: parts[2].to_string(),
                new_oid: parts[3].to_string(),
                status: parts[4].chars().next().unwrap_or('M'),
                path: String::from_utf8_lossy(fields[i + 1]).into_owned(),
                path_bytes: fields[i + 1].to_vec(),
            });
        }
        i += 2;
    }
    v
}

/// The contents of blobs, by `git cat-file --batch`.
fn read_blobs(dir: &Path, oids: &[String]) -> Result<HashMap<String, Vec<u8>>, String> {
    let mut out = HashMap::new();
    if oids.is_empty() {
        return Ok(out);
    }
    let input: String = oids.iter().map(|o| format!("{o}\n")).collect();
    let data = Git::at(dir)
        .input(input.as_bytes())
        .ok(&["cat-file", "--batch"])?;
    let mut rest = &data[..];
    for oid in oids {
        let nl = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or("truncated cat-file output")?;
        let header = String::from_utf8_lossy(&rest[..nl]).into_owned();
        rest = &rest[nl + 1..];
        let size: usize = header
            .split(' ')
            .nth(2)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("object {oid}: {header}"))?;
        if rest.len() < size + 1 {
            return Err(format!("object {oid}: truncated"));
        }
        out.insert(oid.clone(), rest[..size].to_vec());
        rest = &rest[size + 1..];
    }
    Ok(out)
}

/// A `git_worktree` sandbox.
pub struct GitWorktree {
    lc: Lifecycle,
    env: Arc<Env>,
    resource_id: String,
    original: PathBuf,
}

/// The repository facts a record keeps in its metadata.
struct Repo {
    /// The user's work tree (top level).
    top: PathBuf,
    /// The common git dir (the lock key).
    common: PathBuf,
    /// The resource's path inside the repository ("" for the top level).
    prefix: String,
    /// The start commit.
    base: String,
    /// The sandbox branch (`patchbox/<plan>/<id>`).
    branch: String,
    /// The user's branch (`refs/heads/…`), empty when `HEAD` was detached.
    original_branch: String,
    /// The worktree.
    tree: PathBuf,
}

impl Repo {
    fn from_record(r: &Record, dir: &Path) -> Result<Repo, SandboxError> {
        let get = |k: &str| {
            r.metadata.get(k).cloned().ok_or_else(|| {
                SandboxError::sandbox(Some(&r.sandbox_id), format!("sandbox state lacks {k:?}"))
            })
        };
        Ok(Repo {
            top: PathBuf::from(get("git.repo")?),
            common: PathBuf::from(get("git.common_dir")?),
            prefix: get("git.prefix")?,
            base: get("git.base")?,
            branch: get("git.branch")?,
            original_branch: get("git.original_branch")?,
            tree: dir.join(TREE),
        })
    }

    /// The resource's directory in the worktree.
    fn sub(&self) -> PathBuf {
        if self.prefix.is_empty() {
            self.tree.clone()
        } else {
            self.tree.join(&self.prefix)
        }
    }

    /// A repository path relative to the resource (`None` outside it).
    fn rel<'p>(&self, path: &'p str) -> Option<&'p str> {
        if self.prefix.is_empty() {
            Some(path)
        } else {
            path.strip_prefix(self.prefix.as_str())
                .and_then(|p| p.strip_prefix('/'))
        }
    }
}

/// Where a commit would go, computed without writing to the user's tree or refs.
struct Plan {
    /// The sandbox's commit (parent: the base); `None` when there is nothing to commit.
    commit: Option<String>,
    /// What the user's branch fast-forwards to.
    target: Option<String>,
}

impl GitWorktree {
    /// A pending sandbox for `original`.
    pub fn new(env: Arc<Env>, plan_dir: &Path, resource_id: &str, original: &Path) -> Self {
        GitWorktree {
            lc: Lifecycle::pending(Strategy::GitWorktree, plan_dir),
            env,
            resource_id: resource_id.to_string(),
            original: original.to_path_buf(),
        }
    }

    /// A sandbox found on disk; a commit interrupted by a crash is settled here: it landed
    /// when its target is on the user's branch.
    pub fn open(env: Arc<Env>, record: Record, dir: PathBuf) -> Result<Self, SandboxError> {
        let sb = GitWorktree {
            resource_id: record.resource_id.clone(),
            original: record.original_path.clone(),
            lc: Lifecycle::loaded(record, dir),
            env,
        };
        {
            let mut st = sb.lc.lock();
            sb.reconcile(&mut st)?;
        }
        Ok(sb)
    }

    fn set_revert_in_flight(&self, st: &mut State, v: Option<String>) -> Result<(), SandboxError> {
        if let Some(r) = st.record.as_mut() {
            match v {
                Some(v) => r.metadata.insert(REVERT_IN_FLIGHT.into(), v),
                None => r.metadata.remove(REVERT_IN_FLIGHT),
            };
        }
        self.lc.persist(st)
    }

    /// Whether `commit` is on the user's branch.
    fn landed(repo: &Repo, commit: &str) -> bool {
        !repo.original_branch.is_empty()
            && Git::at(&repo.top)
                .run(&["merge-base", "--is-ancestor", commit, &repo.original_branch])
                .is_ok_and(|o| o.ok)
    }

    fn reconcile(&self, st: &mut State) -> Result<(), SandboxError> {
        let revert = st
            .record
            .as_ref()
            .and_then(|r| r.metadata.get(REVERT_IN_FLIGHT).cloned());
        if let Some(revert) = revert {
            let repo = self.repo(st)?;
            let landed = Self::landed(&repo, &revert);
            if let Some(r) = st.record.as_mut() {
                r.metadata.remove(REVERT_IN_FLIGHT);
                if landed {
                    r.commit_ref = None;
                }
            }
            if landed && st.status == Status::Committed {
                self.lc.advance(st, Status::RolledBack)?;
            } else {
                self.lc.persist(st)?;
            }
        }
        let Some(target) = st.record.as_ref().and_then(|r| r.commit_in_flight.clone()) else {
            return Ok(());
        };
        let repo = self.repo(st)?;
        let landed = Self::landed(&repo, &target);
        if let Some(r) = st.record.as_mut() {
            r.commit_in_flight = None;
            if landed {
                r.commit_ref = Some(target);
            }
        }
        if landed && st.status != Status::Committed {
            self.lc.advance(st, Status::Committed)
        } else {
            self.lc.persist(st)
        }
    }

    fn repo(&self, st: &State) -> Result<Repo, SandboxError> {
        let r = st
            .record
            .as_ref()
            .ok_or_else(|| SandboxError::sandbox(Some(self.lc.id()), "sandbox has no context"))?;
        Repo::from_record(r, self.lc.dir())
    }

    fn err(&self, what: &str, e: String) -> SandboxError {
        SandboxError::sandbox(Some(self.lc.id()), format!("{what}: {e}"))
    }

    fn commit_err(&self, reason: impl Into<String>, files: Vec<String>) -> SandboxError {
        SandboxError::Commit {
            sandbox_id: self.lc.id().to_string(),
            reason: reason.into(),
            files,
            source: None,
        }
    }

    fn rollback_err(&self, reason: impl Into<String>, files: Vec<String>) -> SandboxError {
        SandboxError::Rollback {
            sandbox_id: self.lc.id().to_string(),
            reason: reason.into(),
            files,
            source: None,
        }
    }

    fn locked<R>(
        &self,
        repo: &Repo,
        f: impl FnOnce() -> Result<R, SandboxError>,
    ) -> Result<R, SandboxError> {
        with_repo_lock(&self.env.plans_dir, &repo.common, f)
            .map_err(|e| e.for_sandbox(self.lc.id()))
    }

    // ---- create ----

    fn make(&self, plan_id: &str) -> Result<Record, String> {
        let original = std::fs::canonicalize(&self.original)
            .map_err(|e| format!("{}: {e}", self.original.display()))?;
        let g = Git::at(&original);
        let inside = g.run(&["rev-parse", "--is-inside-work-tree"])?;
        if !inside.ok || inside.stdout.trim_ascii() != b"true" {
            return Err(format!(
                "{} is not inside a git work tree{}",
                original.display(),
                if inside.stderr.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", inside.stderr)
                }
            ));
        }
        let top = PathBuf::from(g.line(&["rev-parse", "--show-toplevel"])?);
        let top = std::fs::canonicalize(&top).map_err(|e| format!("{}: {e}", top.display()))?;
        let common =
            PathBuf::from(g.line(&["rev-parse", "--path-format=absolute", "--git-common-dir"])?);
        let common = std::fs::canonicalize(&common).unwrap_or(common);
        let prefix = original
            .strip_prefix(&top)
            .map_err(|_| format!("{} is not under {}", original.display(), top.display()))?
            .to_str()
            .ok_or("the resource path is not UTF-8")?
            .to_string();
        let base = g
            .line(&["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
            .map_err(|_| format!("the repository at {} has no commit yet", top.display()))?;
        let original_branch = g.run(&["symbolic-ref", "-q", "HEAD"]).map(|o| {
            if o.ok {
                String::from_utf8_lossy(&o.stdout).trim().to_string()
            } else {
                String::new()
            }
        })?;
        let plan_dir = self.lc.dir().parent().unwrap_or(Path::new("/"));
        std::fs::create_dir_all(plan_dir).map_err(|e| format!("{}: {e}", plan_dir.display()))?;
        let plan_real =
            std::fs::canonicalize(plan_dir).map_err(|e| format!("{}: {e}", plan_dir.display()))?;
        if plan_real.starts_with(&top) {
            return Err(format!(
                "the sandbox directory {} lies inside the user's work tree {}; choose a root outside it",
                plan_real.display(),
                top.display()
            ));
        }
        std::fs::create_dir(self.lc.dir())
            .map_err(|e| format!("{}: {e}", self.lc.dir().display()))?;
        let branch = format!("patchbox/{plan_id}/{}", self.lc.id());
        let repo = Repo {
            top,
            common,
            prefix,
            base,
            branch,
            original_branch,
            tree: plan_real.join(self.lc.id()).join(TREE),
        };
        let added = self.locked(&repo, || {
            let tree = repo.tree.to_string_lossy().into_owned();
            Git::at(&repo.top)
                .ok(&[
                    "worktree",
                    "add",
                    "--quiet",
                    "-b",
                    &repo.branch,
                    &tree,
                    &repo.base,
                ])
                .map_err(|e| self.err("add the worktree", e))?;
            self.init_submodules(&repo)
                .map_err(|e| self.err("initialise submodules", e))
        });
        if let Err(e) = added {
            let _ = self.locked(&repo, || {
                self.remove_worktree(&repo);
                Ok(())
            });
            return Err(e.to_string());
        }
        let mut metadata = BTreeMap::new();
        metadata.insert("strategy".into(), "git_worktree".into());
        metadata.insert("git.repo".into(), repo.top.to_string_lossy().into_owned());
        metadata.insert(
            "git.common_dir".into(),
            repo.common.to_string_lossy().into_owned(),
        );
        metadata.insert("git.branch".into(), repo.branch.clone());
        metadata.insert("git.base".into(), repo.base.clone());
        metadata.insert("git.prefix".into(), repo.prefix.clone());
        metadata.insert("git.original_branch".into(), repo.original_branch.clone());
        Ok(Record::new(
            self.lc.id(),
            plan_id,
            &self.resource_id,
            Strategy::GitWorktree,
            &original,
            &repo.sub(),
            metadata,
        ))
    }

    /// Initialises in the worktree the submodules checked out in the original, cloning from
    /// the original's checkouts (no network).
    fn init_submodules(&self, repo: &Repo) -> Result<(), String> {
        if !repo.top.join(".gitmodules").exists() {
            return Ok(());
        }
        let status = Git::at(&repo.top).ok(&["submodule", "status"])?;
        let name_out = Git::at(&repo.top).run(&[
            "config",
            "-f",
            ".gitmodules",
            "--get-regexp",
            r"^submodule\..*\.path$",
        ])?;
        let names = String::from_utf8_lossy(&name_out.stdout).into_owned();
        for line in String::from_utf8_lossy(&status).lines() {
            // " <oid> <path> (<describe>)"; '-' = not initialised.
            if line.starts_with('-') || line.len() < 2 {
                continue;
            }
            let Some(path) = line[1..].split(' ').nth(1) else {
                continue;
            };
            let name = names
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(' ')?;
                    (v == path).then(|| {
                        k.trim_start_matches("submodule.")
                            .trim_end_matches(".path")
                            .to_string()
                    })
                })
                .unwrap_or_else(|| path.to_string());
            let url = repo.top.join(path).to_string_lossy().into_owned();
            Git::at(&repo.tree).ok(&[
                "-c",
                "protocol.file.allow=always",
                "-c",
                &format!("submodule.{name}.url={url}"),
                "submodule",
                "update",
                "--init",
                "--quiet",
                "--",
                path,
            ])?;
        }
        Ok(())
    }

    /// Removes the worktree and its branch (best effort: each step runs even when an
    /// earlier one failed). Returns what failed.
    fn remove_worktree(&self, repo: &Repo) -> Vec<String> {
        let mut failed = Vec::new();
        // The user's work tree may be gone; the repository itself may be gone too (then
        // only the sandbox's files remain to remove).
        let at = if repo.top.is_dir() {
            &repo.top
        } else if repo.common.is_dir() {
            &repo.common
        } else {
            if let Err(e) = super::remove_dir(&repo.tree) {
                failed.push(e.to_string());
            }
            return failed;
        };
        let g = Git::at(at);
        let tree = repo.tree.to_string_lossy().into_owned();
        if repo.tree.exists() {
            if let Err(e) = g.ok(&["worktree", "remove", "--force", "--force", &tree]) {
                // Worktrees holding submodules cannot be removed by git: remove the files,
                // then prune the administrative entry.
                if let Err(e2) = super::remove_dir(&repo.tree) {
                    failed.push(format!("{e}; {e2}"));
                }
            }
        }
        if let Err(e) = g.ok(&["worktree", "prune"]) {
            failed.push(e);
        }
        let exists = g
            .run(&[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/heads/{}", repo.branch),
            ])
            .is_ok_and(|o| o.ok);
        if exists {
            if let Err(e) = g.ok(&["branch", "-D", "--quiet", &repo.branch]) {
                failed.push(e);
            }
        }
        failed
    }

    // ---- diff ----

    /// Stages the resource's part of the worktree into the scratch index (submodule
    /// pointers kept at the base) and returns the index path.
    fn stage(&self, repo: &Repo) -> Result<PathBuf, String> {
        let index = self.lc.dir().join(SCRATCH_INDEX);
        let admin = Git::at(&repo.tree).line(&["rev-parse", "--absolute-git-dir"])?;
        let real = Path::new(&admin).join("index");
        let _ = std::fs::remove_file(&index);
        if real.exists() {
            std::fs::copy(&real, &index).map_err(|e| format!("copy {}: {e}", real.display()))?;
            // The copy keeps the index's mtime: git's racy-clean detection compares file
            // mtimes with it, and a newer copy would make a same-size edit made in the same
            // second as the checkout look unchanged.
            let mtime = std::fs::metadata(&real)
                .and_then(|m| m.modified())
                .map_err(|e| format!("stat {}: {e}", real.display()))?;
            std::fs::File::options()
                .write(true)
                .open(&index)
                .and_then(|f| f.set_modified(mtime))
                .map_err(|e| format!("set mtime of {}: {e}", index.display()))?;
        }
        let sub = repo.sub();
        let g = Git::at(&sub).index(&index);
        if !sub.exists() {
            // The actor removed the whole resource directory.
            Git::at(&repo.tree).index(&index).ok(&[
                "rm",
                "-r",
                "-q",
                "--cached",
                "--ignore-unmatch",
                "--",
                &repo.prefix,
            ])?;
        } else {
            g.ok(&["add", "-A", "--", "."])?;
        }
        let raw = Git::at(&repo.tree).index(&index).ok(&[
            "diff",
            "--cached",
            "--raw",
            "-z",
            "--no-abbrev",
            "--no-renames",
            "--ignore-submodules=none",
            &repo.base,
        ])?;
        let links: Vec<String> = parse_raw(&raw)
            .into_iter()
            .filter(|e| e.old_mode == GITLINK || e.new_mode == GITLINK)
            .map(|e| e.path)
            .collect();
        if !links.is_empty() {
            let mut args = vec!["reset", "-q", repo.base.as_str(), "--"];
            args.extend(links.iter().map(String::as_str));
            // `reset` exits 1 when it "unstaged" paths; only stderr tells a failure.
            let out = Git::at(&repo.tree).index(&index).run(&args)?;
            if !out.ok && !out.stderr.is_empty() {
                return Err(format!("git reset of submodule pointers: {}", out.stderr));
            }
        }
        Ok(index)
    }

    fn diff_now(&self, repo: &Repo) -> Result<SandboxDiff, SandboxError> {
        let index = self
            .stage(repo)
            .map_err(|e| self.err("stage the worktree", e))?;
        let sub = repo.sub();
        let dir = if sub.exists() { &sub } else { &repo.tree };
        let g = Git::at(dir).index(&index);
        let scope: &[&str] = if sub.exists() {
            &["--relative"]
        } else {
            &["--", &repo.prefix]
        };
        let mut raw_args = vec![
            "diff",
            "--cached",
            "--raw",
            "-z",
            "--no-abbrev",
            "--no-renames",
            "--ignore-submodules=all",
            &repo.base,
        ];
        raw_args.extend_from_slice(scope);
        let raw = g.ok(&raw_args).map_err(|e| self.err("diff", e))?;
        let mut patch_args = vec![
            "diff",
            "--cached",
            "--binary",
            "--no-renames",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--ignore-submodules=all",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            &repo.base,
        ];
        patch_args.extend_from_slice(scope);
        let patch = g.ok(&patch_args).map_err(|e| self.err("diff", e))?;
        let entries: Vec<RawEntry> = parse_raw(&raw)
            .into_iter()
            .filter(|e| e.old_mode != GITLINK && e.new_mode != GITLINK)
            .collect();
        let zero = |o: &str| o.bytes().all(|b| b == b'0');
        let oids: Vec<String> = entries
            .iter()
            .flat_map(|e| [e.old_oid.clone(), e.new_oid.clone()])
            .filter(|o| !zero(o))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let blobs = read_blobs(&repo.tree, &oids).map_err(|e| self.err("read blobs", e))?;
        let mut out = Vec::new();
        for e in entries {
            let path = if sub.exists() {
                e.path.clone()
            } else {
                match repo.rel(&e.path) {
                    Some(p) => p.to_string(),
                    None => continue,
                }
            };
            let blob = |o: &str| (!zero(o)).then(|| blobs.get(o).cloned().unwrap_or_default());
            out.push(DiffEntry {
                path,
                operation: match e.status {
                    'A' => DiffOp::Added,
                    'D' => DiffOp::Deleted,
                    _ => DiffOp::Modified,
                },
                before: blob(&e.old_oid),
                after: blob(&e.new_oid),
                before_mode: git_mode(&e.old_mode),
                after_mode: git_mode(&e.new_mode),
            });
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(SandboxDiff {
            entries: out,
            patch,
        })
    }

    // ---- commit ----

    /// The user's branch, checked: still checked out in the original and not detached.
    fn user_branch(&self, repo: &Repo) -> Result<(String, String), String> {
        if repo.original_branch.is_empty() {
            return Err(format!(
                "the original's HEAD was detached when the sandbox was made; git_worktree commits onto a branch (check one out in {} and make a new sandbox)",
                repo.top.display()
            ));
        }
        let now = Git::at(&repo.top)
            .run(&["symbolic-ref", "-q", "HEAD"])
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())?;
        if now != repo.original_branch {
            return Err(format!(
                "the original's HEAD is now {} (was {}); switch back to commit",
                if now.is_empty() { "detached" } else { &now },
                repo.original_branch
            ));
        }
        let tip = Git::at(&repo.top).line(&[
            "rev-parse",
            "--verify",
            &format!("{}^{{commit}}", repo.original_branch),
        ])?;
        Ok((repo.original_branch.clone(), tip))
    }

    /// Files changed between `from` and `to` (repository paths).
    fn touched(&self, repo: &Repo, from: &str, to: &str) -> Result<Vec<String>, String> {
        let out = Git::at(&repo.top).ok(&[
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--name-only",
            from,
            to,
        ])?;
        Ok(nul_fields(&out))
    }

    /// Of `paths`, those dirty in the user's tree: modified, staged, untracked, or present
    /// (even ignored) where `tip` has nothing.
    fn dirty(&self, repo: &Repo, tip: &str, paths: &[String]) -> Result<Vec<String>, String> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let status = Git::at(&repo.top).ok(&[
            "status",
            "--porcelain=v1",
            "-z",
            "--no-renames",
            "--untracked-files=all",
            "--ignore-submodules=all",
        ])?;
        let dirty: BTreeSet<String> = nul_fields(&status)
            .into_iter()
            .filter_map(|e| e.get(3..).map(str::to_string))
            .collect();
        let in_tip: BTreeSet<String> =
            nul_fields(&Git::at(&repo.top).ok(&["ls-tree", "-r", "-z", "--name-only", tip])?)
                .into_iter()
                .collect();
        let mut out: Vec<String> = paths
            .iter()
            .filter(|p| {
                dirty.contains(*p)
                    || (!in_tip.contains(*p) && std::fs::symlink_metadata(repo.top.join(p)).is_ok())
            })
            .cloned()
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Computes the commit and its target; writes only objects.
    fn plan_commit(&self, repo: &Repo, message: &str) -> Result<Plan, SandboxError> {
        let index = self
            .stage(repo)
            .map_err(|e| self.commit_err(format!("cannot stage the worktree: {e}"), vec![]))?;
        let g = Git::at(&repo.tree).index(&index);
        let tree = g
            .line(&["write-tree"])
            .map_err(|e| self.commit_err(e, vec![]))?;
        let base_tree = Git::at(&repo.tree)
            .line(&["rev-parse", &format!("{}^{{tree}}", repo.base)])
            .map_err(|e| self.commit_err(e, vec![]))?;
        if tree == base_tree {
            return Ok(Plan {
                commit: None,
                target: None,
            });
        }
        let ident = identity_args(&repo.top);
        let mut args: Vec<&str> = ident.iter().map(String::as_str).collect();
        args.extend(["commit-tree", &tree, "-p", &repo.base, "-m", message]);
        let commit = Git::at(&repo.tree)
            .line(&args)
            .map_err(|e| self.commit_err(e, vec![]))?;
        let (_, tip) = self
            .user_branch(repo)
            .map_err(|e| self.commit_err(e, vec![]))?;
        let target = if tip == repo.base {
            commit.clone()
        } else {
            let out = Git::at(&repo.top)
                .run(&[
                    "merge-tree",
                    "--write-tree",
                    "--name-only",
                    "-z",
                    &tip,
                    &commit,
                ])
                .map_err(|e| self.commit_err(e, vec![]))?;
            let fields: Vec<&[u8]> = out.stdout.split(|&b| b == 0).collect();
            if !out.ok {
                if fields.len() > 1 && !out.stdout.is_empty() {
                    let mut files: Vec<String> = fields[1..]
                        .iter()
                        .take_while(|f| !f.is_empty())
                        .map(|f| String::from_utf8_lossy(f).into_owned())
                        .collect();
                    files.sort();
                    files.dedup();
                    return Err(self.commit_err(
                        "the user's branch changed where the sandbox did (merge conflict); nothing was changed",
                        files,
                    ));
                }
                return Err(self.commit_err(
                    format!(
                        "git merge-tree failed (git 2.38 or later is needed): {}",
                        out.stderr
                    ),
                    vec![],
                ));
            }
            let merged = fields
                .first()
                .map(|f| String::from_utf8_lossy(f).trim().to_string())
                .unwrap_or_default();
            let mut args: Vec<&str> = ident.iter().map(String::as_str).collect();
            let msg = format!("{message}\n\nMerge of sandbox branch {}", repo.branch);
            args.extend([
                "commit-tree",
                &merged,
                "-p",
                &tip,
                "-p",
                &commit,
                "-m",
                &msg,
            ]);
            Git::at(&repo.top)
                .line(&args)
                .map_err(|e| self.commit_err(e, vec![]))?
        };
        let touched = self
            .touched(repo, &tip, &target)
            .map_err(|e| self.commit_err(e, vec![]))?;
        let dirty = self
            .dirty(repo, &tip, &touched)
            .map_err(|e| self.commit_err(e, vec![]))?;
        if !dirty.is_empty() {
            return Err(self.commit_err(
                "the user's tree has uncommitted changes in files the commit changes; nothing was changed",
                dirty,
            ));
        }
        Ok(Plan {
            commit: Some(commit),
            target: Some(target),
        })
    }

    /// Fast-forwards the user's branch (with its index and files) to `target`.
    fn fast_forward(&self, repo: &Repo, target: &str) -> Result<(), String> {
        Git::at(&repo.top)
            .ok(&[
                "-c",
                "merge.autoStash=false",
                "merge",
                "--ff-only",
                "--quiet",
                "--no-edit",
                target,
            ])
            .map(|_| ())
    }

    fn message(&self, st: &State, message: Option<&str>) -> String {
        let plan = st.record.as_ref().map(|r| r.plan_id.as_str()).unwrap_or("");
        message.map(str::to_string).unwrap_or_else(|| {
            format!(
                "patchbox: plan {plan}, resource {}, sandbox {}",
                self.resource_id,
                self.lc.id()
            )
        })
    }

    // ---- rollback ----

    fn undo_commit(&self, st: &mut State) -> Result<(), SandboxError> {
        let repo = self.repo(st)?;
        let Some(x) = st.record.as_ref().and_then(|r| r.commit_ref.clone()) else {
            if let Some(r) = st.record.as_mut() {
                r.commit_ref = None;
            }
            return self.lc.advance(st, Status::RolledBack);
        };
        self.locked(&repo, || {
            let (_, tip) = self
                .user_branch(&repo)
                .map_err(|e| self.rollback_err(e, vec![]))?;
            let parent = Git::at(&repo.top)
                .line(&["rev-parse", "--verify", &format!("{x}^1")])
                .map_err(|e| self.rollback_err(e, vec![]))?;
            let paths = self
                .touched(&repo, &parent, &x)
                .map_err(|e| self.rollback_err(e, vec![]))?;
            let touched: BTreeSet<&String> = paths.iter().collect();
            let changed: Vec<String> = self
                .touched(&repo, &x, &tip)
                .map_err(|e| self.rollback_err(e, vec![]))?
                .into_iter()
                .filter(|p| touched.contains(p))
                .collect();
            if !changed.is_empty() {
                return Err(self.rollback_err(
                    format!("the user's branch changed files of commit {x} since"),
                    changed,
                ));
            }
            let dirty = self
                .dirty(&repo, &tip, &paths)
                .map_err(|e| self.rollback_err(e, vec![]))?;
            if !dirty.is_empty() {
                return Err(self.rollback_err(
                    format!("the user's tree has uncommitted changes in files of commit {x}"),
                    dirty,
                ));
            }
            // The revert tree: the tip with the commit's paths as they were before it.
            let index = self.lc.dir().join(SCRATCH_INDEX);
            let _ = std::fs::remove_file(&index);
            let g = Git::at(&repo.top).index(&index);
            let fail = |e: String| self.rollback_err(e, vec![]);
            g.ok(&["read-tree", &tip]).map_err(fail)?;
            let raw = Git::at(&repo.top)
                .ok(&[
                    "diff-tree",
                    "-r",
                    "-z",
                    "--no-abbrev",
                    "--no-renames",
                    &x,
                    &parent,
                ])
                .map_err(fail)?;
            let mut info = Vec::new();
            for e in parse_raw(&raw) {
                let head = if e.new_oid.bytes().all(|b| b == b'0') {
                    format!("0 {} 0\t", e.old_oid)
                } else {
                    format!("{} {} 0\t", e.new_mode, e.new_oid)
                };
                info.extend_from_slice(head.as_bytes());
                info.extend_from_slice(&e.path_bytes);
                info.push(0);
            }
            g.input(&info)
                .ok(&["update-index", "-z", "--index-info"])
                .map_err(fail)?;
            let tree = g.line(&["write-tree"]).map_err(fail)?;
            let ident = identity_args(&repo.top);
            let msg = format!("Revert patchbox sandbox {} (commit {x})", self.lc.id());
            let mut args: Vec<&str> = ident.iter().map(String::as_str).collect();
            args.extend(["commit-tree", &tree, "-p", &tip, "-m", &msg]);
            let revert = Git::at(&repo.top).line(&args).map_err(fail)?;
            // Recorded first, so a reopen after a crash learns whether the revert landed.
            self.set_revert_in_flight(st, Some(revert.clone()))?;
            let moved = self.fast_forward(&repo, &revert);
            if let Err(e) = moved {
                let _ = self.set_revert_in_flight(st, None);
                return Err(self.rollback_err(
                    format!("the revert cannot be brought to the user's branch: {e}"),
                    paths.clone(),
                ));
            }
            Ok(())
        })?;
        if let Some(r) = st.record.as_mut() {
            r.metadata.remove(REVERT_IN_FLIGHT);
        }
        if let Some(r) = st.record.as_mut() {
            r.commit_ref = None;
        }
        self.lc.advance(st, Status::RolledBack)
    }
}

impl Sandbox for GitWorktree {
    fn sandbox_id(&self) -> &str {
        self.lc.id()
    }

    fn strategy(&self) -> Strategy {
        Strategy::GitWorktree
    }

    fn status(&self) -> Status {
        self.lc.status()
    }

    fn context(&self) -> Option<SandboxContext> {
        self.lc.context()
    }

    fn create(&self, plan_id: &str) -> Result<SandboxContext, SandboxError> {
        let mut st = self.lc.lock();
        self.lc.check(st.status, Status::Created)?;
        match self.make(plan_id) {
            Ok(record) => {
                st.record = Some(record);
                if let Err(e) = self.lc.advance(&mut st, Status::Created) {
                    if let Ok(repo) = self.repo(&st) {
                        let _ = self.locked(&repo, || {
                            self.remove_worktree(&repo);
                            Ok(())
                        });
                    }
                    st.record = None;
                    let _ = super::remove_dir(self.lc.dir());
                    return Err(creation_err(
                        &self.resource_id,
                        "cannot record its state",
                        e,
                    ));
                }
                st.record.as_ref().map(Record::context).ok_or_else(|| {
                    SandboxError::sandbox(Some(self.lc.id()), "sandbox has no context")
                })
            }
            Err(reason) => {
                let _ = super::remove_dir(self.lc.dir());
                Err(SandboxError::Creation {
                    resource_id: self.resource_id.clone(),
                    reason,
                    source: None,
                })
            }
        }
    }

    fn get_path(&self, rel: &Path) -> Result<PathBuf, SandboxError> {
        let mut st = self.lc.lock();
        super::activate_for_path(&self.lc, &mut st)?;
        sandbox_path_of(&self.lc, &st, rel)
    }

    fn diff(&self) -> Result<SandboxDiff, SandboxError> {
        let st = self.lc.lock();
        super::require_created(&self.lc, &st)?;
        let repo = self.repo(&st)?;
        self.locked(&repo, || self.diff_now(&repo))
    }

    fn check_commit(&self) -> Result<(), SandboxError> {
        let st = self.lc.lock();
        let target = if st.status == Status::Created {
            Status::Active
        } else {
            Status::Committed
        };
        self.lc.check(st.status, target)?;
        let repo = self.repo(&st)?;
        let msg = self.message(&st, None);
        self.locked(&repo, || self.plan_commit(&repo, &msg).map(|_| ()))
    }

    fn commit(&self, message: Option<&str>) -> Result<CommitResult, SandboxError> {
        let mut st = self.lc.lock();
        if st.status == Status::Created {
            self.lc.advance(&mut st, Status::Active)?;
        }
        self.lc.check(st.status, Status::Committed)?;
        let repo = self.repo(&st)?;
        let msg = self.message(&st, message);
        let (diff, plan) = self.locked(&repo, || {
            let diff = self.diff_now(&repo)?;
            let plan = self.plan_commit(&repo, &msg)?;
            let (Some(commit), Some(target)) = (plan.commit.as_ref(), plan.target.as_ref())
            else {
                return Ok((diff, plan));
            };
            // The sandbox branch holds the commit; its index follows (files untouched).
            Git::at(&repo.tree)
                .ok(&["reset", "-q", commit])
                .map_err(|e| self.commit_err(e, vec![]))?;
            if let Some(r) = st.record.as_mut() {
                r.commit_in_flight = Some(target.clone());
            }
            self.lc.persist(&st)?;
            if let Err(e) = self.fast_forward(&repo, target) {
                if let Some(r) = st.record.as_mut() {
                    r.commit_in_flight = None;
                }
                let _ = self.lc.persist(&st);
                return Err(self.commit_err(
                    format!("the commit cannot be brought to the user's branch; nothing was changed: {e}"),
                    vec![],
                ));
            }
            Ok((diff, plan))
        })?;
        if let Some(r) = st.record.as_mut() {
            r.commit_in_flight = None;
            r.commit_ref = plan.target.clone();
        }
        self.lc.advance(&mut st, Status::Committed)?;
        let mut result = super::through_apply::result(self.lc.id(), plan.target.clone(), &diff);
        result
            .metadata
            .insert("git.branch".into(), repo.branch.clone());
        if let Some(c) = plan.commit {
            result.metadata.insert("git.commit".into(), c);
        }
        Ok(result)
    }

    fn rollback(&self) -> Result<(), SandboxError> {
        let mut st = self.lc.lock();
        match st.status {
            Status::Committed => self.undo_commit(&mut st),
            _ => {
                self.lc.check(st.status, Status::RolledBack)?;
                let repo = self.repo(&st)?;
                self.locked(&repo, || {
                    let g = Git::at(&repo.tree);
                    g.ok(&["reset", "-q", "--hard", &repo.base])
                        .and_then(|_| g.ok(&["clean", "-q", "-f", "-d", "-x"]))
                        .map(|_| ())
                        .map_err(|e| {
                            self.rollback_err(format!("cannot reset the worktree: {e}"), vec![])
                        })
                })?;
                self.lc.advance(&mut st, Status::RolledBack)
            }
        }
    }

    fn cleanup(&self) -> Result<(), SandboxError> {
        let mut st = self.lc.lock();
        let repo = match st.status {
            Status::Pending | Status::CleanedUp => None,
            _ => Some(self.repo(&st)?),
        };
        super::cleanup_dir(&self.lc, &mut st, || {
            let Some(repo) = repo else { return Ok(()) };
            let failed = self.locked(&repo, || Ok(self.remove_worktree(&repo)))?;
            if failed.is_empty() {
                Ok(())
            } else {
                Err(SandboxError::sandbox(
                    Some(self.lc.id()),
                    format!("cannot remove the worktree: {}", failed.join("; ")),
                ))
            }
        })
    }
}
