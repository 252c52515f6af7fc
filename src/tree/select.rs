//! Which files a snapshot holds.
//!
//! A snapshot must contain what the user thinks of as "the project": in a git work tree that is
//! exactly the set `git ls-files --cached --others --exclude-standard` prints, i.e. every
//! tracked file (even one that matches an ignore rule or lies in an ignored directory) plus every
//! untracked file that no ignore rule excludes. Build output, `node_modules/`, `target/` and the
//! like stay out of the sandbox; a tracked file that happens to match `*.log` stays in. Outside
//! git the whole tree is taken, minus `.git` directories.
//!
//! Everything here is native — no `git` subprocess, so it works where no git binary is
//! installed and costs no process start-up:
//!
//! * [`discover_repo`] finds the repository the way git does (walking up to a `.git` directory
//!   or `gitdir:` file, following linked worktrees and submodules to their git directory).
//! * [`read_index`] parses `<gitdir>/index` (versions 2, 3 and 4, checksum verified) into
//!   [`IndexEntry`] values that keep the stat data, so later stages can trust unchanged tracked
//!   files without reading them.
//! * The walk applies git's exclude rules: `.gitignore` in every directory (deeper files win,
//!   last matching line wins within a file, `!` negations, anchors, `**`, dir-only patterns),
//!   then `$GIT_COMMON_DIR/info/exclude`, then `core.excludesFile` (or its XDG default). An
//!   excluded directory is not descended, so nothing below it can be re-included — except
//!   tracked files, which come from the index. The patterns themselves are compiled by the
//!   `ignore` crate's [`GitignoreBuilder`]; precedence and directory pruning are done here.
//! * Directories are read in parallel; only regular files are `lstat`ed (for the executable
//!   bit), nothing is opened except `.gitignore` files, and no file content is read.
//!
//! Things git itself would not list are reported in [`Selection::skipped`] rather than failing:
//! FIFOs, sockets and devices, unreadable directories, nested repositories (git prints them as
//! `sub/`) and submodules (gitlinks). Tracked files missing from the work tree are simply
//! absent; an unmerged path (conflict stages 1–3) is listed once.
//!
//! Where this differs from git (all rare; `tests/select_oracle.rs` checks the rest against git):
//!
//! * Configuration: `include.path` is followed, `includeIf`, `~user/` and `%(prefix)/` paths
//!   are not. `GIT_DIR`, `GIT_WORK_TREE`, `core.worktree` and bare repositories are not
//!   supported (discovery looks for `.git` only), and `safe.directory` ownership is not
//!   checked. SHA-256 repositories, split and sparse indexes are refused with [`Error::Git`].
//! * Patterns: lines that are not UTF-8 are dropped (globs are `str`); a backslash inside a
//!   bracket expression is taken literally; `core.ignoreCase` applies to patterns only, not to
//!   index lookups.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("a.txt"), "hi").unwrap();
//! std::fs::create_dir(dir.path().join("empty")).unwrap();
//! let sel = patchbox::tree::select::select_project(dir.path(), &[]).unwrap();
//! let names: Vec<_> = sel.entries.iter().map(|e| e.rel.to_string()).collect();
//! assert_eq!(names, ["a.txt"]); // empty directories are not entries
//! ```

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use sha1::{Digest, Sha1};

use crate::error::{Error, Result};
use crate::fs::relpath::RelPath;

// ---------------------------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------------------------

/// What a selected path is on disk. Directories are never entries; symlinks are never followed.
///
/// ```
/// use patchbox::tree::select::Kind;
/// let k = Kind::File { executable: true };
/// assert_ne!(k, Kind::Symlink);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A regular file; `executable` is the owner's execute bit, as git records it.
    File {
        /// Whether the owner execute bit (`0o100`) is set.
        executable: bool,
    },
    /// A symbolic link (its target is not looked at).
    Symlink,
}

/// One entry of the git index, as stored on disk.
///
/// The stat fields are the (32-bit truncated) values git recorded when it last refreshed the
/// entry; comparing them with a fresh `lstat` tells whether the file may have changed.
///
/// ```
/// use patchbox::tree::select::IndexEntry;
/// let e = IndexEntry { path: b"src/lib.rs".to_vec(), mode: 0o100644, ..Default::default() };
/// assert_eq!(e.stage(), 0);
/// assert!(!e.is_gitlink());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexEntry {
    /// Path relative to the work tree root, `/`-separated, raw bytes.
    pub path: Vec<u8>,
    /// Git mode: `0o100644`, `0o100755`, `0o120000` (symlink) or `0o160000` (gitlink).
    pub mode: u32,
    /// The object id (SHA-1) of the blob (or commit, for a gitlink).
    pub oid: [u8; 20],
    /// Change time (seconds, nanoseconds).
    pub ctime: (u32, u32),
    /// Modification time (seconds, nanoseconds).
    pub mtime: (u32, u32),
    /// Device number.
    pub dev: u32,
    /// Inode number.
    pub ino: u32,
    /// Owner user id.
    pub uid: u32,
    /// Owner group id.
    pub gid: u32,
    /// File size (truncated to 32 bits).
    pub size: u32,
    /// The raw 16-bit flags word (assume-valid `0x8000`, extended `0x4000`, stage `0x3000`,
    /// name length `0x0fff`).
    pub flags: u16,
    /// The extended flags word of version 3+ entries (skip-worktree `0x4000`, intent-to-add
    /// `0x2000`); 0 when absent.
    pub extended_flags: u16,
}

impl IndexEntry {
    /// Merge stage: 0 for a normal entry, 1–3 for the sides of an unresolved conflict.
    pub fn stage(&self) -> u8 {
        ((self.flags >> 12) & 3) as u8
    }

    /// True for a submodule commit (mode `160000`).
    pub fn is_gitlink(&self) -> bool {
        self.mode & 0o170000 == 0o160000
    }

    /// True for a symlink entry (mode `120000`).
    pub fn is_symlink(&self) -> bool {
        self.mode & 0o170000 == 0o120000
    }

    /// The assume-valid ("assume unchanged") bit.
    pub fn assume_valid(&self) -> bool {
        self.flags & 0x8000 != 0
    }

    /// The skip-worktree bit (sparse checkout).
    pub fn skip_worktree(&self) -> bool {
        self.extended_flags & 0x4000 != 0
    }

    /// The intent-to-add bit (`git add -N`).
    pub fn intent_to_add(&self) -> bool {
        self.extended_flags & 0x2000 != 0
    }
}

/// A file or symlink that belongs in the snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selected {
    /// Path relative to the project directory.
    pub rel: RelPath,
    /// What it is on disk.
    pub kind: Kind,
    /// The index entry for tracked files, `None` for untracked ones. For an unmerged path this
    /// is one of its conflict stages (stage 2, "ours", when present). Its `path` is left
    /// empty: it is `rel` (relative to the repository rather than the project).
    pub index: Option<IndexEntry>,
    /// The `lstat` data of a regular file as seen by the walk (`None` for symlinks).
    pub stat: Option<LStat>,
}

/// The `lstat` fields git records in its index, at full width.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LStat {
    /// Size in bytes.
    pub size: u64,
    /// Modification time (seconds, nanoseconds).
    pub mtime: (i64, i64),
    /// Change time (seconds, nanoseconds).
    pub ctime: (i64, i64),
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// `st_mode`.
    pub mode: u32,
}

impl LStat {
    /// Reads the fields from (l)stat metadata.
    pub fn from_metadata(m: &fs::Metadata) -> LStat {
        LStat {
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            dev: m.dev(),
            ino: m.ino(),
            uid: m.uid(),
            gid: m.gid(),
            mode: m.mode(),
        }
    }
}

impl IndexEntry {
    /// True when a regular file with stat data `st` certainly has this entry's content, by
    /// git's own rule: every recorded stat field equal (as 32-bit values), the same exec
    /// bit, and the entry not "racy" — its mtime and ctime strictly older than the index file's
    /// `index_mtime`, since an edit in the same second as the index write would not show.
    /// Entries flagged assume-valid, skip-worktree or intent-to-add, and conflict stages,
    /// are never trusted.
    pub fn stat_matches(&self, st: &LStat, index_mtime: (i64, i64)) -> bool {
        let exec = st.mode & 0o100 != 0;
        let mode_ok = match self.mode {
            0o100644 => !exec,
            0o100755 => exec,
            _ => false,
        };
        mode_ok
            && self.stage() == 0
            && !self.assume_valid()
            && !self.skip_worktree()
            && !self.intent_to_add()
            && st.mode & 0o170000 == 0o100000
            && self.size == st.size as u32
            && self.mtime == (st.mtime.0 as u32, st.mtime.1 as u32)
            && self.ctime == (st.ctime.0 as u32, st.ctime.1 as u32)
            && self.ino == st.ino as u32
            && self.dev == st.dev as u32
            && self.uid == st.uid
            && self.gid == st.gid
            && (self.mtime.0 as i64, self.mtime.1 as i64) < index_mtime
            && (self.ctime.0 as i64, self.ctime.1 as i64) < index_mtime
    }
}

/// A path that was left out although git would not have ignored it, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// Path relative to the project directory.
    pub rel: RelPath,
    /// `"fifo"`, `"socket"`, `"device"`, `"nested repository"`, `"submodule"`, `"unreadable"`,
    /// or `"unknown file type"`.
    pub reason: &'static str,
}

/// The result of [`select_project`].
#[derive(Clone, Debug)]
pub struct Selection {
    /// Files and symlinks to snapshot, sorted by path bytes (git's order).
    pub entries: Vec<Selected>,
    /// Paths left out, sorted by path bytes.
    pub skipped: Vec<Skipped>,
    /// The repository the project belongs to, if any.
    pub git: Option<GitRepo>,
}

/// A discovered git repository, as seen from the project directory.
///
/// ```
/// use patchbox::tree::select::{discover_repo_with, SelectOptions};
/// let dir = tempfile::tempdir().unwrap();
/// // Not inside a repository: the ceiling keeps the search from going above the temp dir.
/// let parent = std::fs::canonicalize(dir.path().parent().unwrap()).unwrap();
/// let opts = SelectOptions { ceiling_dirs: vec![parent], ..Default::default() };
/// assert!(discover_repo_with(dir.path(), &opts).unwrap().is_none());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GitRepo {
    /// The git directory of this work tree (`.git`, or `.git/worktrees/<name>` for a linked
    /// worktree, or `.git/modules/<name>` for a submodule). The index lives here.
    pub git_dir: PathBuf,
    /// The common git directory (config, `info/exclude`, objects). Equal to `git_dir` except
    /// for linked worktrees.
    pub common_dir: PathBuf,
    /// The top of the work tree (canonical path).
    pub work_tree: PathBuf,
    /// The project directory relative to `work_tree`; `None` when the project is the top.
    pub prefix: Option<RelPath>,
    /// The index file (`<git_dir>/index`).
    pub index_file: PathBuf,
    /// The global excludes file: `core.excludesFile` if configured (resolved against the work
    /// tree when relative), else `$XDG_CONFIG_HOME/git/ignore` / `~/.config/git/ignore`.
    pub excludes_file: Option<PathBuf>,
    /// `core.ignoreCase`: match ignore patterns case-insensitively.
    pub ignore_case: bool,
}

/// Where to find git's user and system configuration.
///
/// [`select_project`] uses [`SelectOptions::from_env`]; tests and embedders that must not look
/// at the real home directory build one explicitly. `Default` means: no home, no global or
/// system configuration, no ceiling directories.
///
/// ```
/// use patchbox::tree::select::SelectOptions;
/// let opts = SelectOptions { home: Some("/tmp/fake-home".into()), ..Default::default() };
/// assert!(opts.xdg_config_home.is_none());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SelectOptions {
    /// `$HOME`: `~/.gitconfig`, `~/.config/git/…` and `~/` in config paths.
    pub home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME` (when unset, `$HOME/.config` is used, as git does).
    pub xdg_config_home: Option<PathBuf>,
    /// `$GIT_CONFIG_GLOBAL`: replaces `~/.gitconfig` and the XDG config file.
    pub global_config: Option<PathBuf>,
    /// The system config file (`/etc/gitconfig`), `None` for `GIT_CONFIG_NOSYSTEM`.
    pub system_config: Option<PathBuf>,
    /// `$GIT_CEILING_DIRECTORIES` (canonical paths): discovery does not go up into these
    /// (the start directory itself is always examined).
    pub ceiling_dirs: Vec<PathBuf>,
    /// `$GIT_DISCOVERY_ACROSS_FILESYSTEM`: keep looking for `.git` above a mount point.
    pub across_filesystems: bool,
}

impl SelectOptions {
    /// Reads the options from the process environment the way git does: `HOME`,
    /// `XDG_CONFIG_HOME`, `GIT_CONFIG_GLOBAL`, `GIT_CONFIG_NOSYSTEM` / `GIT_CONFIG_SYSTEM`,
    /// `GIT_CEILING_DIRECTORIES`, `GIT_DISCOVERY_ACROSS_FILESYSTEM`.
    pub fn from_env() -> SelectOptions {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let nosystem = var("GIT_CONFIG_NOSYSTEM")
            .and_then(|v| parse_bool(Some(v.as_bytes())))
            .unwrap_or(false);
        let system_config = if nosystem {
            None
        } else {
            Some(
                var("GIT_CONFIG_SYSTEM")
                    .map_or_else(|| PathBuf::from("/etc/gitconfig"), PathBuf::from),
            )
        };
        let ceiling_dirs = var("GIT_CEILING_DIRECTORIES")
            .map(|v| {
                v.as_bytes()
                    .split(|&b| b == b':')
                    .filter(|s| !s.is_empty() && s[0] == b'/')
                    .map(|s| {
                        let p = Path::new(OsStr::from_bytes(s));
                        fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
                    })
                    .collect()
            })
            .unwrap_or_default();
        SelectOptions {
            home: var("HOME").map(PathBuf::from),
            xdg_config_home: var("XDG_CONFIG_HOME").map(PathBuf::from),
            global_config: var("GIT_CONFIG_GLOBAL").map(PathBuf::from),
            system_config,
            ceiling_dirs,
            across_filesystems: var("GIT_DISCOVERY_ACROSS_FILESYSTEM")
                .and_then(|v| parse_bool(Some(v.as_bytes())))
                .unwrap_or(false),
        }
    }

    fn xdg_git_dir(&self) -> Option<PathBuf> {
        match (&self.xdg_config_home, &self.home) {
            (Some(x), _) => Some(x.join("git")),
            (None, Some(h)) => Some(h.join(".config").join("git")),
            (None, None) => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------

/// Lists the files and symlinks of `project` that a snapshot holds, with git's configuration
/// taken from the environment ([`SelectOptions::from_env`]).
///
/// `exclude`: absolute directories never to enter (e.g. the sandbox root when it lies inside
/// the project). Errors: the project is not a directory, or the repository's index or config
/// cannot be understood.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::create_dir(dir.path().join("out")).unwrap();
/// std::fs::write(dir.path().join("out/x"), "").unwrap();
/// std::fs::write(dir.path().join("y"), "").unwrap();
/// let sel = patchbox::tree::select::select_project(dir.path(), &[dir.path().join("out")]).unwrap();
/// assert_eq!(sel.entries.len(), 1);
/// assert_eq!(sel.entries[0].rel.as_bytes(), b"y");
/// ```
pub fn select_project(project: &Path, exclude: &[PathBuf]) -> Result<Selection> {
    select_project_with(project, exclude, &SelectOptions::from_env())
}

/// [`select_project`] with explicit locations for git's user and system configuration.
///
/// ```
/// use patchbox::tree::select::{select_project_with, SelectOptions, Kind};
/// let dir = tempfile::tempdir().unwrap();
/// std::os::unix::fs::symlink("nowhere", dir.path().join("link")).unwrap();
/// let sel = select_project_with(dir.path(), &[], &SelectOptions::default()).unwrap();
/// assert_eq!(sel.entries[0].kind, Kind::Symlink);
/// ```
pub fn select_project_with(
    project: &Path,
    exclude: &[PathBuf],
    opts: &SelectOptions,
) -> Result<Selection> {
    let project = canonical_project(project)?;
    let repo = discover_repo_with(&project, opts)?;
    let exclude: Vec<PathBuf> = exclude
        .iter()
        .map(|p| {
            let p = if p.is_absolute() {
                p.clone()
            } else {
                project.join(p)
            };
            fs::canonicalize(&p).unwrap_or(p)
        })
        .collect();

    let (tracked, out) = match &repo {
        None => {
            let ctx = WalkCtx {
                git: None,
                exclude: &exclude,
                strip: 0,
            };
            let root = DirJob {
                abs: project.clone(),
                rel: Vec::new(),
                mode: Mode::All,
                levels: None,
                check_nested: false,
            };
            (Vec::new(), run_walk(&ctx, root))
        }
        Some(repo) => {
            let tracked = dedup_tracked(read_index(&repo.index_file)?);
            let lookup = TrackedIndex::new(&tracked);
            let rules = Rules::load(repo)?;
            let prefix: Vec<u8> = match &repo.prefix {
                Some(p) => {
                    let mut v = p.as_bytes().to_vec();
                    v.push(b'/');
                    v
                }
                None => Vec::new(),
            };
            let git = GitCtx {
                tracked: &lookup,
                rules: &rules,
                ignore_case: repo.ignore_case,
            };
            let (mode, levels) = leading_path(&git, &repo.work_tree, &prefix);
            let ctx = WalkCtx {
                git: Some(git),
                exclude: &exclude,
                strip: prefix.len(),
            };
            let root = DirJob {
                abs: project.clone(),
                rel: prefix.clone(),
                mode,
                levels,
                check_nested: false,
            };
            let out = run_walk(&ctx, root);
            (tracked, out)
        }
    };

    // Sorting the walk's findings in place and moving each tracked entry into its finding
    // keeps one copy of the per-file data alive at a time (this runs on trees of 100k files).
    let mut found = out.found;
    found.sort_unstable_by(|a, b| a.rel.as_bytes().cmp(b.rel.as_bytes()));
    let mut tracked: Vec<Option<IndexEntry>> = tracked.into_iter().map(Some).collect();
    let entries: Vec<Selected> = found
        .into_iter()
        .map(|f| {
            let index = f
                .idx
                .and_then(|i| tracked.get_mut(i)?.take())
                .map(|mut ix| {
                    // The path is `rel` again (relative to the repository): drop the copy.
                    ix.path = Vec::new();
                    ix
                });
            Selected {
                rel: f.rel,
                kind: f.kind,
                index,
                stat: f.stat,
            }
        })
        .collect();
    drop(tracked);
    let mut skipped = Vec::with_capacity(out.skipped.len());
    for (rel, why) in out.skipped {
        if let Ok(rel) = RelPath::from_bytes(&rel) {
            skipped.push(Skipped { rel, reason: why });
        }
    }
    skipped.sort_by(|a, b| a.rel.as_bytes().cmp(b.rel.as_bytes()));
    Ok(Selection {
        entries,
        skipped,
        git: repo,
    })
}

/// Finds the git repository containing `project`, with git's configuration taken from the
/// environment. `Ok(None)` outside git.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let r = patchbox::tree::select::discover_repo(dir.path());
/// assert!(r.is_ok());
/// ```
pub fn discover_repo(project: &Path) -> Result<Option<GitRepo>> {
    discover_repo_with(project, &SelectOptions::from_env())
}

/// Finds the git repository containing `project` as git would from that directory: the
/// nearest ancestor (or itself) holding a `.git` directory that is a repository, or a
/// `.git` file (`gitdir: <path>`) pointing to one. Stops at ceiling directories and, unless
/// [`SelectOptions::across_filesystems`], at mount points. Reads the repository, global and
/// system configuration for `core.excludesFile` and `core.ignoreCase`.
///
/// Errors: a `.git` file that does not point to a repository, a malformed config file, or a
/// SHA-256 repository (not supported).
///
/// ```
/// use patchbox::tree::select::{discover_repo_with, SelectOptions};
/// let dir = tempfile::tempdir().unwrap();
/// let git = dir.path().join(".git");
/// for d in ["objects", "refs"] { std::fs::create_dir_all(git.join(d)).unwrap(); }
/// std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
/// std::fs::create_dir(dir.path().join("sub")).unwrap();
/// let repo = discover_repo_with(&dir.path().join("sub"), &SelectOptions::default())
///     .unwrap()
///     .unwrap();
/// assert_eq!(repo.prefix.unwrap().as_bytes(), b"sub");
/// ```
pub fn discover_repo_with(project: &Path, opts: &SelectOptions) -> Result<Option<GitRepo>> {
    let project = canonical_project(project)?;
    let start_dev = fs::metadata(&project)
        .map_err(|e| Error::io("stat project", &project, e))?
        .dev();
    let mut dir: &Path = &project;
    loop {
        let dotgit = dir.join(".git");
        if let Ok(m) = fs::metadata(&dotgit) {
            if m.is_dir() {
                if is_git_dir(&dotgit) {
                    return open_repo(dir, &dotgit, &project, opts).map(Some);
                }
            } else if m.is_file() {
                let target = read_gitfile(&dotgit)?;
                if !is_git_dir(&target) {
                    return Err(Error::Git {
                        path: dotgit,
                        reason: format!("not a git repository: {}", target.display()),
                    });
                }
                return open_repo(dir, &target, &project, opts).map(Some);
            }
        }
        let Some(parent) = dir.parent() else {
            return Ok(None);
        };
        if opts.ceiling_dirs.iter().any(|c| c == parent) {
            return Ok(None);
        }
        if !opts.across_filesystems {
            match fs::metadata(parent) {
                Ok(m) if m.dev() == start_dev => {}
                _ => return Ok(None),
            }
        }
        dir = parent;
    }
}

fn canonical_project(project: &Path) -> Result<PathBuf> {
    match fs::metadata(project) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(Error::NotADirectory {
                path: project.to_path_buf(),
            })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Error::NotADirectory {
                path: project.to_path_buf(),
            })
        }
        Err(e) => return Err(Error::io("stat project", project, e)),
    }
    fs::canonicalize(project).map_err(|e| Error::io("resolve project path", project, e))
}

/// Git's `is_git_directory`: a valid `HEAD`, and `objects/` and `refs/` in the common dir.
fn is_git_dir(dir: &Path) -> bool {
    let head_ok = match fs::symlink_metadata(dir.join("HEAD")) {
        Ok(m) if m.file_type().is_symlink() => true,
        Ok(m) if m.is_file() => {
            let mut buf = [0u8; 64];
            match fs::File::open(dir.join("HEAD")).and_then(|mut f| f.read(&mut buf)) {
                Ok(n) => {
                    let b = &buf[..n];
                    b.starts_with(b"ref:") || (n >= 40 && b[..40].iter().all(u8::is_ascii_hexdigit))
                }
                Err(_) => false,
            }
        }
        _ => false,
    };
    if !head_ok {
        return false;
    }
    let common = common_dir_of(dir);
    common.join("objects").is_dir() && common.join("refs").is_dir()
}

fn common_dir_of(git_dir: &Path) -> PathBuf {
    match fs::read(git_dir.join("commondir")) {
        Ok(b) => {
            let t = trim_ascii(&b);
            if t.is_empty() {
                return git_dir.to_path_buf();
            }
            let p = Path::new(OsStr::from_bytes(t));
            let p = if p.is_absolute() {
                p.to_path_buf()
            } else {
                git_dir.join(p)
            };
            fs::canonicalize(&p).unwrap_or(p)
        }
        Err(_) => git_dir.to_path_buf(),
    }
}

/// Reads a `.git` file: `gitdir: <path>`, relative to the file's directory.
fn read_gitfile(file: &Path) -> Result<PathBuf> {
    let data = fs::read(file).map_err(|e| Error::io("read .git file", file, e))?;
    let line = data.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Some(rest) = line.strip_prefix(b"gitdir:") else {
        return Err(Error::Git {
            path: file.to_path_buf(),
            reason: "invalid gitfile format (expected \"gitdir: <path>\")".into(),
        });
    };
    let rest = trim_ascii(rest);
    if rest.is_empty() {
        return Err(Error::Git {
            path: file.to_path_buf(),
            reason: "no path in gitfile".into(),
        });
    }
    let p = Path::new(OsStr::from_bytes(rest));
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        file.parent().unwrap_or(Path::new("/")).join(p)
    };
    Ok(fs::canonicalize(&p).unwrap_or(p))
}

fn open_repo(
    work_tree: &Path,
    git_dir: &Path,
    project: &Path,
    opts: &SelectOptions,
) -> Result<GitRepo> {
    let git_dir = fs::canonicalize(git_dir).unwrap_or_else(|_| git_dir.to_path_buf());
    let common_dir = common_dir_of(&git_dir);
    let prefix = match project.strip_prefix(work_tree) {
        Ok(p) if !p.as_os_str().is_empty() => Some(RelPath::new(p)?),
        _ => None,
    };

    let home = opts.home.as_deref();
    let mut cfg = ConfigVals::default();
    if let Some(sys) = &opts.system_config {
        read_config_file(sys, home, &mut cfg, 0)?;
    }
    match &opts.global_config {
        Some(g) => read_config_file(g, home, &mut cfg, 0)?,
        None => {
            if let Some(x) = opts.xdg_git_dir() {
                read_config_file(&x.join("config"), home, &mut cfg, 0)?;
            }
            if let Some(h) = home {
                read_config_file(&h.join(".gitconfig"), home, &mut cfg, 0)?;
            }
        }
    }
    read_config_file(&common_dir.join("config"), home, &mut cfg, 0)?;
    if cfg.worktree_config == Some(true) {
        read_config_file(&git_dir.join("config.worktree"), home, &mut cfg, 0)?;
    }
    if let Some(fmt) = &cfg.object_format {
        if !fmt.eq_ignore_ascii_case("sha1") {
            return Err(Error::Git {
                path: common_dir.join("config"),
                reason: format!("object format {fmt:?} is not supported (only sha1)"),
            });
        }
    }
    let excludes_file = match cfg.excludes_file {
        Some(Some(p)) if p.is_absolute() => Some(p),
        Some(Some(p)) => Some(work_tree.join(p)),
        Some(None) => None,
        None => opts.xdg_git_dir().map(|d| d.join("ignore")),
    };
    Ok(GitRepo {
        index_file: git_dir.join("index"),
        git_dir,
        common_dir,
        work_tree: work_tree.to_path_buf(),
        prefix,
        excludes_file,
        ignore_case: cfg.ignore_case.unwrap_or(false),
    })
}

// ---------------------------------------------------------------------------------------------
// The index
// ---------------------------------------------------------------------------------------------

/// Reads a git index file (versions 2, 3 and 4) and returns all its entries in file order
/// (sorted by path, then stage). A missing file is an empty index.
///
/// The trailing SHA-1 checksum is verified (an all-zero trailer, written with
/// `index.skipHash`, is accepted). Optional extensions (`TREE`, `REUC`, `UNTR`, …) are skipped;
/// a split index (`link`) or sparse index (`sdir`) is refused with [`Error::Git`], as is any
/// corruption.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// // Missing index: nothing tracked.
/// assert!(patchbox::tree::select::read_index(&dir.path().join("index")).unwrap().is_empty());
/// // Garbage: an error, never a panic.
/// std::fs::write(dir.path().join("bad"), b"DIRC\0\0\0\x02junk").unwrap();
/// assert!(patchbox::tree::select::read_index(&dir.path().join("bad")).is_err());
/// ```
pub fn read_index(index_file: &Path) -> Result<Vec<IndexEntry>> {
    let data = match fs::read(index_file) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("read git index", index_file, e)),
    };
    parse_index(&data).map_err(|reason| Error::Git {
        path: index_file.to_path_buf(),
        reason,
    })
}

fn be32(d: &[u8], at: usize) -> std::result::Result<u32, String> {
    d.get(at..at + 4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| "truncated index".to_string())
}

fn be16(d: &[u8], at: usize) -> std::result::Result<u16, String> {
    d.get(at..at + 2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
        .ok_or_else(|| "truncated index".to_string())
}

/// Git's offset varint (used by index v4 path compression).
fn decode_varint(d: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    let mut c = *d.get(i)?;
    i += 1;
    let mut val = u64::from(c & 0x7f);
    while c & 0x80 != 0 {
        val = val.checked_add(1)?;
        if val > (u64::MAX >> 7) {
            return None;
        }
        c = *d.get(i)?;
        i += 1;
        val = (val << 7) + u64::from(c & 0x7f);
    }
    Some((usize::try_from(val).ok()?, i))
}

fn parse_index(data: &[u8]) -> std::result::Result<Vec<IndexEntry>, String> {
    if data.len() < 12 + 20 {
        return Err("index file too short".into());
    }
    if &data[..4] != b"DIRC" {
        return Err("bad index signature (expected DIRC)".into());
    }
    let version = be32(data, 4)?;
    if !(2..=4).contains(&version) {
        return Err(format!("unsupported index version {version}"));
    }
    let count = be32(data, 8)? as usize;
    let body_end = data.len() - 20;
    let trailer = &data[body_end..];
    if trailer.iter().any(|&b| b != 0) {
        let digest = Sha1::digest(&data[..body_end]);
        if digest.as_slice() != trailer {
            return Err("index checksum mismatch (file is corrupt)".into());
        }
    }
    let body = &data[..body_end];
    // 62 bytes is the smallest possible entry; don't trust `count` for the allocation.
    let mut entries = Vec::with_capacity(count.min(body.len() / 62 + 1));
    let mut pos = 12usize;
    let mut prev: Vec<u8> = Vec::new();
    for i in 0..count {
        let start = pos;
        if body.len() < start + 62 {
            return Err(format!("truncated index entry {i}"));
        }
        let w = |k: usize| be32(body, start + 4 * k);
        let mut oid = [0u8; 20];
        oid.copy_from_slice(&body[start + 40..start + 60]);
        let flags = be16(body, start + 60)?;
        let mut e = IndexEntry {
            path: Vec::new(),
            ctime: (w(0)?, w(1)?),
            mtime: (w(2)?, w(3)?),
            dev: w(4)?,
            ino: w(5)?,
            mode: w(6)?,
            uid: w(7)?,
            gid: w(8)?,
            size: w(9)?,
            oid,
            flags,
            extended_flags: 0,
        };
        pos = start + 62;
        if flags & 0x4000 != 0 {
            if version < 3 {
                return Err(format!("entry {i} has extended flags in a version 2 index"));
            }
            let ext = be16(body, pos)?;
            if ext & !0x6000 != 0 {
                return Err(format!("entry {i} has unknown extended flags {ext:#06x}"));
            }
            e.extended_flags = ext;
            pos += 2;
        }
        if version == 4 {
            let (strip, n) = body
                .get(pos..)
                .and_then(decode_varint)
                .ok_or_else(|| format!("bad path compression in entry {i}"))?;
            pos += n;
            if strip > prev.len() {
                return Err(format!("bad path compression in entry {i}"));
            }
            let rest = body.get(pos..).unwrap_or(&[]);
            let nul = rest
                .iter()
                .position(|&b| b == 0)
                .ok_or_else(|| format!("unterminated path in entry {i}"))?;
            let mut path = Vec::with_capacity(prev.len() - strip + nul);
            path.extend_from_slice(&prev[..prev.len() - strip]);
            path.extend_from_slice(&rest[..nul]);
            pos += nul + 1;
            prev.clone_from(&path);
            e.path = path;
        } else {
            let namelen = usize::from(flags & 0x0fff);
            let rest = body.get(pos..).unwrap_or(&[]);
            let name_len = if namelen < 0x0fff {
                if rest.len() <= namelen || rest[..namelen].contains(&0) {
                    return Err(format!("bad path in entry {i}"));
                }
                namelen
            } else {
                rest.iter()
                    .position(|&b| b == 0)
                    .ok_or_else(|| format!("unterminated path in entry {i}"))?
            };
            e.path = rest[..name_len].to_vec();
            let ondisk = pos - start + name_len;
            pos = start + ((ondisk + 8) & !7);
            if pos > body.len() {
                return Err(format!("truncated index entry {i}"));
            }
        }
        entries.push(e);
    }
    // Extensions.
    while pos < body.len() {
        let sig = body
            .get(pos..pos + 4)
            .ok_or_else(|| "truncated index extension".to_string())?;
        let size = be32(body, pos + 4)? as usize;
        pos += 8;
        if size > body.len() - pos {
            return Err("truncated index extension".into());
        }
        match sig {
            b"link" => {
                return Err(
                    "split index (link extension) is not supported; run `git update-index --no-split-index`"
                        .into(),
                )
            }
            b"sdir" => {
                return Err(
                    "sparse index (sdir extension) is not supported; run `git sparse-checkout disable` or set index.sparse=false"
                        .into(),
                )
            }
            s if s[0].is_ascii_uppercase() => {}
            s => {
                return Err(format!(
                    "unknown required index extension {:?}",
                    String::from_utf8_lossy(s)
                ))
            }
        }
        pos += size;
    }
    // Checked only now: a split index has nameless entries, but was refused above.
    if let Some(i) = entries.iter().position(|e| e.path.is_empty()) {
        return Err(format!("empty path in entry {i}"));
    }
    Ok(entries)
}

/// One entry per path, sorted: stage 0 if present, else stage 2 ("ours"), else the first.
fn dedup_tracked(mut entries: Vec<IndexEntry>) -> Vec<IndexEntry> {
    if !entries.windows(2).all(|w| w[0].path <= w[1].path) {
        entries.sort_by(|a, b| a.path.cmp(&b.path).then(a.stage().cmp(&b.stage())));
    }
    let mut out: Vec<IndexEntry> = Vec::with_capacity(entries.len());
    for e in entries {
        match out.last_mut() {
            Some(last) if last.path == e.path => {
                let rank = |s: u8| match s {
                    0 => 0,
                    2 => 1,
                    _ => 2,
                };
                if rank(e.stage()) < rank(last.stage()) {
                    *last = e;
                }
            }
            _ => out.push(e),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

#[derive(Default, Debug)]
struct ConfigVals {
    /// `Some(None)`: set, but to something unusable (no global excludes then).
    excludes_file: Option<Option<PathBuf>>,
    ignore_case: Option<bool>,
    object_format: Option<String>,
    worktree_config: Option<bool>,
}

fn read_config_file(
    path: &Path,
    home: Option<&Path>,
    cfg: &mut ConfigVals,
    depth: u32,
) -> Result<()> {
    let data = match fs::read(path) {
        Ok(d) => d,
        // Missing or unreadable config: git skips a missing one; be lenient with the rest.
        Err(_) => return Ok(()),
    };
    parse_config(&data, path, home, cfg, depth)
}

fn parse_bool(v: Option<&[u8]>) -> Option<bool> {
    let Some(v) = v else { return Some(true) };
    let s = String::from_utf8_lossy(v).to_ascii_lowercase();
    match s.as_str() {
        "true" | "yes" | "on" => Some(true),
        "false" | "no" | "off" | "" => Some(false),
        _ => s.parse::<i64>().ok().map(|n| n != 0),
    }
}

/// Git's `interpolate_path` for the cases that matter: `~/…` and absolute/relative paths.
fn expand_path(v: &[u8], home: Option<&Path>) -> Option<PathBuf> {
    if v == b"~" {
        return home.map(Path::to_path_buf);
    }
    if let Some(rest) = v.strip_prefix(b"~/") {
        return home.map(|h| h.join(OsStr::from_bytes(rest)));
    }
    if v.starts_with(b"~") || v.starts_with(b"%(prefix)/") {
        return None; // ~user and runtime-prefix paths are not supported.
    }
    Some(PathBuf::from(OsStr::from_bytes(v)))
}

struct CfgCursor<'a> {
    d: &'a [u8],
    p: usize,
}

impl CfgCursor<'_> {
    /// Next character with `\r\n` folded to `\n`; `None` at end of input.
    fn next(&mut self) -> Option<u8> {
        let c = *self.d.get(self.p)?;
        self.p += 1;
        if c == b'\r' && self.d.get(self.p) == Some(&b'\n') {
            self.p += 1;
            return Some(b'\n');
        }
        Some(c)
    }
    fn peek(&self) -> Option<u8> {
        self.d.get(self.p).copied()
    }
    fn line(&self) -> usize {
        1 + self.d[..self.p.min(self.d.len())]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
    }

    /// Git's `parse_value`: quotes, escapes, comments, continuation lines.
    fn value(&mut self) -> Option<Vec<u8>> {
        let (mut quote, mut comment, mut space) = (false, false, 0usize);
        let mut out = Vec::new();
        loop {
            let c = self.next().unwrap_or(b'\n');
            if c == b'\n' {
                return if quote { None } else { Some(out) };
            }
            if comment {
                continue;
            }
            if c.is_ascii_whitespace() && !quote {
                if !out.is_empty() {
                    space += 1;
                }
                continue;
            }
            if !quote && (c == b';' || c == b'#') {
                comment = true;
                continue;
            }
            out.extend(std::iter::repeat_n(b' ', space));
            space = 0;
            if c == b'\\' {
                let e = match self.next().unwrap_or(b'\n') {
                    b'\n' => continue,
                    b't' => b'\t',
                    b'b' => 8,
                    b'n' => b'\n',
                    b'\\' => b'\\',
                    b'"' => b'"',
                    _ => return None,
                };
                out.push(e);
                continue;
            }
            if c == b'"' {
                quote = !quote;
                continue;
            }
            out.push(c);
        }
    }
}

fn parse_config(
    data: &[u8],
    path: &Path,
    home: Option<&Path>,
    cfg: &mut ConfigVals,
    depth: u32,
) -> Result<()> {
    let mut cur = CfgCursor {
        d: data.strip_prefix(b"\xef\xbb\xbf").unwrap_or(data),
        p: 0,
    };
    let bad = |cur: &CfgCursor| Error::Git {
        path: path.to_path_buf(),
        reason: format!("bad config line {}", cur.line()),
    };
    let mut section: Vec<u8> = Vec::new();
    let mut subsection: Option<Vec<u8>> = None;
    loop {
        let Some(c) = cur.next() else { return Ok(()) };
        if c.is_ascii_whitespace() {
            continue;
        }
        if c == b'#' || c == b';' {
            while let Some(c) = cur.next() {
                if c == b'\n' {
                    break;
                }
            }
            continue;
        }
        if c == b'[' {
            let start = cur.p;
            while cur
                .peek()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.')
            {
                cur.p += 1;
            }
            let name = data_lower(&cur.d[start..cur.p]);
            match cur.next() {
                Some(b']') => {
                    // Legacy `[section.sub]` form.
                    match name.iter().position(|&b| b == b'.') {
                        Some(dot) => {
                            section = name[..dot].to_vec();
                            subsection = Some(name[dot + 1..].to_vec());
                        }
                        None => {
                            section = name;
                            subsection = None;
                        }
                    }
                }
                Some(b' ') | Some(b'\t') => {
                    while matches!(cur.peek(), Some(b' ') | Some(b'\t')) {
                        cur.p += 1;
                    }
                    if cur.next() != Some(b'"') {
                        return Err(bad(&cur));
                    }
                    let mut sub = Vec::new();
                    loop {
                        match cur.next() {
                            None | Some(b'\n') => return Err(bad(&cur)),
                            Some(b'"') => break,
                            Some(b'\\') => match cur.next() {
                                None | Some(b'\n') => return Err(bad(&cur)),
                                Some(c) => sub.push(c),
                            },
                            Some(c) => sub.push(c),
                        }
                    }
                    if cur.next() != Some(b']') {
                        return Err(bad(&cur));
                    }
                    section = name;
                    subsection = Some(sub);
                }
                _ => return Err(bad(&cur)),
            }
            continue;
        }
        if !c.is_ascii_alphabetic() {
            return Err(bad(&cur));
        }
        let start = cur.p - 1;
        while cur
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'-')
        {
            cur.p += 1;
        }
        let key = data_lower(&cur.d[start..cur.p]);
        while matches!(cur.peek(), Some(b' ') | Some(b'\t')) {
            cur.p += 1;
        }
        let value = match cur.next() {
            None | Some(b'\n') => None,
            Some(b'=') => Some(cur.value().ok_or_else(|| bad(&cur))?),
            Some(_) => return Err(bad(&cur)),
        };
        match (section.as_slice(), subsection.is_some(), key.as_slice()) {
            (b"core", false, b"excludesfile") => {
                if let Some(v) = value {
                    cfg.excludes_file = Some(expand_path(&v, home));
                }
            }
            (b"core", false, b"ignorecase") => {
                if let Some(b) = parse_bool(value.as_deref()) {
                    cfg.ignore_case = Some(b);
                }
            }
            (b"extensions", false, b"objectformat") => {
                if let Some(v) = value {
                    cfg.object_format = Some(String::from_utf8_lossy(&v).into_owned());
                }
            }
            (b"extensions", false, b"worktreeconfig") => {
                if let Some(b) = parse_bool(value.as_deref()) {
                    cfg.worktree_config = Some(b);
                }
            }
            (b"include", false, b"path") if depth < 10 => {
                if let Some(p) = value.and_then(|v| expand_path(&v, home)) {
                    let p = if p.is_absolute() {
                        p
                    } else {
                        path.parent().unwrap_or(Path::new("/")).join(p)
                    };
                    read_config_file(&p, home, cfg, depth + 1)?;
                }
            }
            _ => {}
        }
    }
}

fn data_lower(b: &[u8]) -> Vec<u8> {
    b.to_ascii_lowercase()
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &b[start..end]
}

// ---------------------------------------------------------------------------------------------
// Ignore rules
// ---------------------------------------------------------------------------------------------

/// Rewrites one gitignore line so that globset reads it as git's wildmatch would: braces are
/// literal in git (globset treats `{a,b}` as alternation). `None` for lines that are not UTF-8
/// (globset patterns are `str`; such lines are dropped).
fn translate_line(line: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(line).ok()?;
    if !s.contains(['{', '}']) {
        return Some(s.to_string());
    }
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len() + 4);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                out.push(c);
                if let Some(&n) = chars.get(i + 1) {
                    out.push(n);
                    i += 1;
                }
            }
            '[' => {
                // Copy a bracket expression verbatim if it is closed.
                let mut j = i + 1;
                if matches!(chars.get(j), Some('!') | Some('^')) {
                    j += 1;
                }
                if chars.get(j) == Some(&']') {
                    j += 1;
                }
                while j < chars.len() && chars[j] != ']' {
                    j += 1;
                }
                if j < chars.len() {
                    out.extend(&chars[i..=j]);
                    i = j;
                } else {
                    out.push('[');
                }
            }
            '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
        i += 1;
    }
    Some(out)
}

/// Builds a matcher from gitignore text. Paths are matched relative to the file's directory.
fn build_gitignore(data: &[u8], ignore_case: bool) -> Option<Gitignore> {
    let data = data.strip_prefix(b"\xef\xbb\xbf").unwrap_or(data);
    let mut b = GitignoreBuilder::new("");
    // Never fails (the Result is historical).
    let _ = b.case_insensitive(ignore_case);
    let mut any = false;
    for line in data.split(|&c| c == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        if let Some(l) = translate_line(line) {
            // An invalid glob (e.g. a reversed range) never matches in git either: drop it.
            if b.add_line(None, &l).is_ok() {
                any = true;
            }
        }
    }
    if !any {
        return None;
    }
    b.build().ok().filter(|g| !g.is_empty())
}

/// Reads a gitignore file; `nofollow` refuses symlinks (git does for in-tree `.gitignore`).
fn load_gitignore_file(path: &Path, nofollow: bool, ignore_case: bool) -> Option<Gitignore> {
    let mut o = fs::OpenOptions::new();
    o.read(true);
    if nofollow {
        o.custom_flags(libc::O_NOFOLLOW);
    }
    let mut f = o.open(path).ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut data = Vec::new();
    f.read_to_end(&mut data).ok()?;
    build_gitignore(&data, ignore_case)
}

/// The repository-wide exclude sources, lowest precedence: `info/exclude`, then the global
/// excludes file. Both match paths relative to the work tree.
#[derive(Debug, Default)]
struct Rules {
    info_exclude: Option<Gitignore>,
    global: Option<Gitignore>,
}

impl Rules {
    fn load(repo: &GitRepo) -> Result<Rules> {
        Ok(Rules {
            info_exclude: load_gitignore_file(
                &repo.common_dir.join("info").join("exclude"),
                false,
                repo.ignore_case,
            ),
            global: repo
                .excludes_file
                .as_deref()
                .and_then(|p| load_gitignore_file(p, false, repo.ignore_case)),
        })
    }
}

fn as_path(b: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(b))
}

/// One per-directory `.gitignore`, linked to its parent directory's level.
#[derive(Debug)]
struct Level {
    gi: Gitignore,
    /// Length of the directory's work-tree-relative prefix (with its trailing `/`).
    base: usize,
    parent: Option<Arc<Level>>,
}

fn decide(m: Match<&ignore::gitignore::Glob>) -> Option<bool> {
    match m {
        Match::None => None,
        Match::Ignore(_) => Some(true),
        Match::Whitelist(_) => Some(false),
    }
}

/// Git's `last_matching_pattern`: per-directory files from the deepest up, then info/exclude,
/// then the global file; the first source with a matching line decides.
fn excluded_by<'a>(
    levels: impl Iterator<Item = (&'a Gitignore, usize)>,
    rules: &Rules,
    path: &[u8],
    is_dir: bool,
) -> bool {
    for (gi, base) in levels {
        if let Some(d) = path
            .get(base..)
            .and_then(|p| decide(gi.matched(as_path(p), is_dir)))
        {
            return d;
        }
    }
    for gi in [&rules.info_exclude, &rules.global].into_iter().flatten() {
        if let Some(d) = decide(gi.matched(as_path(path), is_dir)) {
            return d;
        }
    }
    false
}

fn chain_iter(mut cur: Option<&Arc<Level>>) -> impl Iterator<Item = (&Gitignore, usize)> {
    std::iter::from_fn(move || {
        let l = cur?;
        cur = l.parent.as_ref();
        Some((&l.gi, l.base))
    })
}

fn is_dot_git(name: &[u8], ignore_case: bool) -> bool {
    if ignore_case {
        name.eq_ignore_ascii_case(b".git")
    } else {
        name == b".git"
    }
}

/// Ignore rules for new files appearing in a copy of the project (a sandbox): `.gitignore`
/// files read from `tree_root` (the copy) for the project's own directories, from the real work
/// tree for the directories above the project, plus `info/exclude` and `core.excludesFile` of
/// the project's repository.
///
/// `.gitignore` files are read lazily, once per directory; build a new `IgnoreRules` to see
/// later edits. Outside git nothing is ignored except paths inside a `.git` directory.
///
/// ```
/// use patchbox::tree::select::IgnoreRules;
/// use patchbox::RelPath;
/// let dir = tempfile::tempdir().unwrap();
/// let rules = IgnoreRules::load(dir.path(), None).unwrap();
/// assert!(!rules.is_ignored(&RelPath::new("a.o").unwrap(), false));
/// assert!(rules.is_ignored(&RelPath::new(".git/config").unwrap(), false));
/// ```
#[derive(Debug)]
pub struct IgnoreRules {
    git: bool,
    tree_root: PathBuf,
    work_tree: PathBuf,
    /// The project's work-tree-relative prefix with trailing `/`, or empty.
    prefix: Vec<u8>,
    ignore_case: bool,
    rules: Rules,
    /// Per-directory matchers, keyed by work-tree-relative dir prefix (`""`, `"a/"`, …).
    cache: RwLock<HashMap<Vec<u8>, Option<Arc<Gitignore>>>>,
}

impl IgnoreRules {
    /// Loads the rules for a copy of the project rooted at `tree_root`. The project's place in
    /// the repository is `repo.prefix`; `None` for `repo` means not a git project.
    pub fn load(tree_root: &Path, repo: Option<&GitRepo>) -> Result<IgnoreRules> {
        Self::load_with_prefix(tree_root, repo, repo.and_then(|r| r.prefix.as_ref()))
    }

    /// Like [`IgnoreRules::load`] with an explicit project prefix (the project directory
    /// relative to the work tree, `None` for the top).
    ///
    /// ```
    /// use patchbox::tree::select::{IgnoreRules, GitRepo};
    /// use patchbox::RelPath;
    /// let wt = tempfile::tempdir().unwrap();
    /// let copy = tempfile::tempdir().unwrap();
    /// std::fs::create_dir(wt.path().join("sub")).unwrap();
    /// std::fs::write(wt.path().join(".gitignore"), "*.o\n/top-only\n").unwrap();
    /// std::fs::write(copy.path().join(".gitignore"), "!keep.o\n").unwrap();
    /// let repo = GitRepo {
    ///     git_dir: wt.path().join(".git"),
    ///     common_dir: wt.path().join(".git"),
    ///     work_tree: wt.path().to_path_buf(),
    ///     prefix: None,
    ///     index_file: wt.path().join(".git/index"),
    ///     excludes_file: None,
    ///     ignore_case: false,
    /// };
    /// let sub = RelPath::new("sub").unwrap();
    /// let rules = IgnoreRules::load_with_prefix(copy.path(), Some(&repo), Some(&sub)).unwrap();
    /// assert!(rules.is_ignored(&RelPath::new("x/a.o").unwrap(), false));
    /// assert!(!rules.is_ignored(&RelPath::new("keep.o").unwrap(), false));
    /// assert!(!rules.is_ignored(&RelPath::new("top-only").unwrap(), false));
    /// ```
    pub fn load_with_prefix(
        tree_root: &Path,
        repo: Option<&GitRepo>,
        project_prefix: Option<&RelPath>,
    ) -> Result<IgnoreRules> {
        let Some(repo) = repo else {
            return Ok(IgnoreRules {
                git: false,
                tree_root: tree_root.to_path_buf(),
                work_tree: tree_root.to_path_buf(),
                prefix: Vec::new(),
                ignore_case: false,
                rules: Rules::default(),
                cache: RwLock::new(HashMap::new()),
            });
        };
        let mut prefix = Vec::new();
        if let Some(p) = project_prefix {
            prefix.extend_from_slice(p.as_bytes());
            prefix.push(b'/');
        }
        let mut cache = HashMap::new();
        // Directories above the project: their .gitignore comes from the real work tree.
        for (i, &b) in prefix.iter().enumerate() {
            if i == 0 || b == b'/' {
                let dir = if i == 0 { &prefix[..0] } else { &prefix[..=i] };
                if dir.len() < prefix.len() {
                    let f = repo.work_tree.join(as_path(dir)).join(".gitignore");
                    let gi = load_gitignore_file(&f, true, repo.ignore_case).map(Arc::new);
                    cache.insert(dir.to_vec(), gi);
                }
            }
        }
        Ok(IgnoreRules {
            git: true,
            tree_root: tree_root.to_path_buf(),
            work_tree: repo.work_tree.clone(),
            prefix,
            ignore_case: repo.ignore_case,
            rules: Rules::load(repo)?,
            cache: RwLock::new(cache),
        })
    }

    fn level(&self, dir: &[u8]) -> Option<Arc<Gitignore>> {
        {
            let c = self.cache.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(v) = c.get(dir) {
                return v.clone();
            }
        }
        let file = if dir.len() < self.prefix.len() {
            self.work_tree.join(as_path(dir)).join(".gitignore")
        } else {
            self.tree_root
                .join(as_path(&dir[self.prefix.len()..]))
                .join(".gitignore")
        };
        let gi = load_gitignore_file(&file, true, self.ignore_case).map(Arc::new);
        self.cache
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(dir.to_vec(), gi.clone());
        gi
    }

    /// True if `rel` (relative to the tree root) or any directory above it is excluded by the
    /// rules, i.e. git would not list it as untracked. Paths in a `.git` directory are always
    /// ignored. Whether the path is tracked is not considered.
    pub fn is_ignored(&self, rel: &RelPath, is_dir: bool) -> bool {
        let rb = rel.as_bytes();
        if rb
            .split(|&b| b == b'/')
            .any(|c| is_dot_git(c, self.ignore_case))
        {
            return true;
        }
        if !self.git {
            return false;
        }
        let mut full = self.prefix.clone();
        full.extend_from_slice(rb);
        let mut levels: Vec<(Arc<Gitignore>, usize)> = Vec::new();
        if let Some(g) = self.level(b"") {
            levels.push((g, 0));
        }
        for (i, &b) in full.iter().enumerate() {
            if b != b'/' {
                continue;
            }
            let dir = &full[..i];
            let iter = levels.iter().rev().map(|(g, base)| (&**g, *base));
            if excluded_by(iter, &self.rules, dir, true) {
                return true;
            }
            if let Some(g) = self.level(&full[..=i]) {
                levels.push((g, i + 1));
            }
        }
        let iter = levels.iter().rev().map(|(g, base)| (&**g, *base));
        excluded_by(iter, &self.rules, &full, is_dir)
    }
}

// ---------------------------------------------------------------------------------------------
// The walk
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Not a git project: everything except `.git`.
    All,
    /// Tracked files plus untracked files that are not excluded.
    Untracked,
    /// Inside an excluded directory that holds tracked files: only those.
    TrackedOnly,
}

struct DirJob {
    abs: PathBuf,
    /// Work-tree-relative path of the directory with a trailing `/` (empty for the top);
    /// project-relative outside git.
    rel: Vec<u8>,
    mode: Mode,
    levels: Option<Arc<Level>>,
    /// An untracked directory: if it holds a repository, report it instead of listing it.
    check_nested: bool,
}

/// A fast non-cryptographic hasher (FxHash's mixing) for path keys; hash flooding is not a
/// concern for paths from the user's own index.
#[derive(Default)]
struct PathHasher(u64);

impl std::hash::Hasher for PathHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut h = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            h = (h.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
        self.0 = h;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type PathMap<'a, V> = HashMap<&'a [u8], V, std::hash::BuildHasherDefault<PathHasher>>;

/// The tracked paths, for O(1) lookups during the walk.
struct TrackedIndex<'a> {
    entries: &'a [IndexEntry],
    /// Work-tree-relative path → position in `entries`.
    files: PathMap<'a, usize>,
    /// Every directory with tracked entries below it (no trailing slash).
    dirs: PathMap<'a, ()>,
}

impl<'a> TrackedIndex<'a> {
    fn new(entries: &'a [IndexEntry]) -> Self {
        let mut files = PathMap::with_capacity_and_hasher(entries.len(), Default::default());
        let mut dirs = PathMap::with_capacity_and_hasher(entries.len() / 8, Default::default());
        for (i, e) in entries.iter().enumerate() {
            files.insert(e.path.as_slice(), i);
            // Deepest parent first: once one is known, all above it are too.
            for (pos, _) in e.path.iter().enumerate().rev().filter(|(_, &b)| b == b'/') {
                if dirs.insert(&e.path[..pos], ()).is_some() {
                    break;
                }
            }
        }
        TrackedIndex {
            entries,
            files,
            dirs,
        }
    }
}

struct GitCtx<'a> {
    tracked: &'a TrackedIndex<'a>,
    rules: &'a Rules,
    ignore_case: bool,
}

impl GitCtx<'_> {
    fn excluded(&self, levels: Option<&Arc<Level>>, path: &[u8], is_dir: bool) -> bool {
        excluded_by(chain_iter(levels), self.rules, path, is_dir)
    }
}

struct WalkCtx<'a> {
    git: Option<GitCtx<'a>>,
    exclude: &'a [PathBuf],
    /// Bytes to strip from a job's `rel` to get the project-relative path.
    strip: usize,
}

struct Found {
    /// Project-relative; built in the workers so the conversion runs in parallel.
    rel: RelPath,
    kind: Kind,
    idx: Option<usize>,
    stat: Option<LStat>,
}

#[derive(Default)]
struct WalkOut {
    found: Vec<Found>,
    skipped: Vec<(Vec<u8>, &'static str)>,
}

/// Mode and ignore levels at the project directory, walking down from the work tree top the
/// way git's `treat_leading_path` does.
fn leading_path(git: &GitCtx, work_tree: &Path, prefix: &[u8]) -> (Mode, Option<Arc<Level>>) {
    let mut mode = Mode::Untracked;
    let mut levels: Option<Arc<Level>> = None;
    let mut dir_start = 0;
    for (i, &b) in prefix.iter().enumerate() {
        if b != b'/' {
            continue;
        }
        // Load the .gitignore of the directory that contains this component.
        if mode == Mode::Untracked {
            let f = work_tree
                .join(as_path(&prefix[..dir_start]))
                .join(".gitignore");
            if let Some(gi) = load_gitignore_file(&f, true, git.ignore_case) {
                levels = Some(Arc::new(Level {
                    gi,
                    base: dir_start,
                    parent: levels,
                }));
            }
        }
        let dir = &prefix[..i];
        let excluded = mode == Mode::TrackedOnly || git.excluded(levels.as_ref(), dir, true);
        if excluded {
            mode = Mode::TrackedOnly;
        }
        dir_start = i + 1;
    }
    (mode, levels)
}

fn file_kind_reason(ft: &fs::FileType) -> &'static str {
    if ft.is_fifo() {
        "fifo"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_block_device() || ft.is_char_device() {
        "device"
    } else {
        "unknown file type"
    }
}

/// Does this directory listing hold a `.git` that makes the directory a repository?
fn holds_repo(abs: &Path) -> bool {
    let dotgit = abs.join(".git");
    match fs::metadata(&dotgit) {
        Ok(m) if m.is_dir() => is_git_dir(&dotgit),
        Ok(m) if m.is_file() => read_gitfile(&dotgit).is_ok_and(|t| is_git_dir(&t)),
        _ => false,
    }
}

fn process_dir(ctx: &WalkCtx, job: DirJob, out: &mut WalkOut, push: &mut Vec<DirJob>) {
    let proj_rel = |rel: &[u8]| rel.get(ctx.strip..).unwrap_or(&[]).to_vec();
    let strip_slash = |r: &[u8]| r.strip_suffix(b"/").unwrap_or(r).to_vec();
    let rd = match fs::read_dir(&job.abs) {
        Ok(rd) => rd,
        Err(_) => {
            out.skipped
                .push((proj_rel(&strip_slash(&job.rel)), "unreadable"));
            return;
        }
    };
    let mut ents = Vec::new();
    for e in rd {
        match e {
            Ok(e) => {
                let name = e.file_name();
                ents.push((e, name));
            }
            Err(_) => {
                out.skipped
                    .push((proj_rel(&strip_slash(&job.rel)), "unreadable"));
                return;
            }
        }
    }
    let ignore_case = ctx.git.as_ref().is_some_and(|g| g.ignore_case);
    if job.check_nested
        && ents
            .iter()
            .any(|(_, n)| is_dot_git(n.as_bytes(), ignore_case))
        && holds_repo(&job.abs)
    {
        out.skipped
            .push((proj_rel(&strip_slash(&job.rel)), "nested repository"));
        return;
    }
    let mut levels = job.levels;
    if let (Some(git), Mode::Untracked) = (&ctx.git, job.mode) {
        let has_gitignore = ents.iter().any(|(e, n)| {
            n.as_bytes() == b".gitignore" && e.file_type().is_ok_and(|t| t.is_file())
        });
        if has_gitignore {
            if let Some(gi) =
                load_gitignore_file(&job.abs.join(".gitignore"), true, git.ignore_case)
            {
                levels = Some(Arc::new(Level {
                    gi,
                    base: job.rel.len(),
                    parent: levels,
                }));
            }
        }
    }
    for (e, name) in ents {
        let nb = name.as_bytes();
        if is_dot_git(nb, ignore_case) {
            continue;
        }
        let Ok(ft) = e.file_type() else {
            continue; // vanished
        };
        let mut rel = Vec::with_capacity(job.rel.len() + nb.len() + 1);
        rel.extend_from_slice(&job.rel);
        rel.extend_from_slice(nb);
        let git = match &ctx.git {
            None => {
                if ft.is_dir() {
                    let abs = job.abs.join(&name);
                    if ctx.exclude.contains(&abs) {
                        continue;
                    }
                    rel.push(b'/');
                    push.push(DirJob {
                        abs,
                        rel,
                        mode: Mode::All,
                        levels: None,
                        check_nested: false,
                    });
                } else {
                    emit(ctx, &e, &ft, rel, None, out);
                }
                continue;
            }
            Some(g) => g,
        };
        let hit = git.tracked.files.get(rel.as_slice()).copied();
        if ft.is_dir() {
            let abs = job.abs.join(&name);
            if ctx.exclude.contains(&abs) {
                continue;
            }
            if let Some(i) = hit {
                if git
                    .tracked
                    .entries
                    .get(i)
                    .is_some_and(IndexEntry::is_gitlink)
                {
                    out.skipped.push((proj_rel(&rel), "submodule"));
                    continue;
                }
            }
            let mut dir_slash = rel.clone();
            dir_slash.push(b'/');
            let has_tracked = git.tracked.dirs.contains_key(rel.as_slice());
            let excluded =
                || job.mode == Mode::TrackedOnly || git.excluded(levels.as_ref(), &rel, true);
            let (mode, check_nested) = if has_tracked {
                (
                    if excluded() {
                        Mode::TrackedOnly
                    } else {
                        Mode::Untracked
                    },
                    false,
                )
            } else if excluded() {
                continue;
            } else {
                (Mode::Untracked, true)
            };
            push.push(DirJob {
                abs,
                rel: dir_slash,
                mode,
                levels: if mode == Mode::Untracked {
                    levels.clone()
                } else {
                    None
                },
                check_nested,
            });
            continue;
        }
        match hit {
            Some(i)
                if git
                    .tracked
                    .entries
                    .get(i)
                    .is_some_and(IndexEntry::is_gitlink) =>
            {
                out.skipped.push((proj_rel(&rel), "submodule"));
            }
            Some(i) => emit(ctx, &e, &ft, rel, Some(i), out),
            None => {
                if job.mode == Mode::TrackedOnly || git.excluded(levels.as_ref(), &rel, false) {
                    continue;
                }
                emit(ctx, &e, &ft, rel, None, out);
            }
        }
    }
}

/// Records a non-directory entry: a file (lstat for the exec bit), a symlink, or a skip.
fn emit(
    ctx: &WalkCtx,
    e: &fs::DirEntry,
    ft: &fs::FileType,
    mut rel: Vec<u8>,
    idx: Option<usize>,
    out: &mut WalkOut,
) {
    rel.drain(..ctx.strip.min(rel.len()));
    let Ok(rp) = RelPath::from_bytes(&rel) else {
        return; // readdir never yields "", "." or ".."
    };
    if ft.is_symlink() {
        out.found.push(Found {
            rel: rp,
            kind: Kind::Symlink,
            idx,
            stat: None,
        });
    } else if ft.is_file() {
        match e.metadata() {
            Ok(m) if m.is_file() => out.found.push(Found {
                rel: rp,
                kind: Kind::File {
                    executable: m.mode() & 0o100 != 0,
                },
                idx,
                stat: Some(LStat::from_metadata(&m)),
            }),
            Ok(m) if m.file_type().is_symlink() => out.found.push(Found {
                rel: rp,
                kind: Kind::Symlink,
                idx,
                stat: None,
            }),
            Ok(m) => out.skipped.push((rel, file_kind_reason(&m.file_type()))),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {} // vanished
            Err(_) => out.skipped.push((rel, "unreadable")),
        }
    } else {
        out.skipped.push((rel, file_kind_reason(ft)));
    }
}

struct Queue {
    jobs: Vec<DirJob>,
    active: usize,
}

fn run_walk(ctx: &WalkCtx, root: DirJob) -> WalkOut {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8);
    if threads == 1 {
        let mut out = WalkOut::default();
        let mut stack = vec![root];
        while let Some(job) = stack.pop() {
            process_dir(ctx, job, &mut out, &mut stack);
        }
        return out;
    }
    let queue = Mutex::new(Queue {
        jobs: vec![root],
        active: 0,
    });
    let cv = Condvar::new();
    let worker = || {
        let mut out = WalkOut::default();
        let mut pushed = Vec::new();
        loop {
            let job = {
                let mut q = queue.lock().unwrap_or_else(PoisonError::into_inner);
                loop {
                    if let Some(j) = q.jobs.pop() {
                        q.active += 1;
                        break Some(j);
                    }
                    if q.active == 0 {
                        break None;
                    }
                    q = cv.wait(q).unwrap_or_else(PoisonError::into_inner);
                }
            };
            let Some(job) = job else {
                cv.notify_all();
                return out;
            };
            process_dir(ctx, job, &mut out, &mut pushed);
            let mut q = queue.lock().unwrap_or_else(PoisonError::into_inner);
            q.active -= 1;
            let n = pushed.len();
            q.jobs.append(&mut pushed);
            if n > 1 || (q.active == 0 && q.jobs.is_empty()) {
                cv.notify_all();
            } else if n == 1 {
                cv.notify_one();
            }
        }
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|_| s.spawn(worker)).collect();
        let mut all = WalkOut::default();
        for h in handles {
            match h.join() {
                Ok(mut o) => {
                    all.found.append(&mut o.found);
                    all.skipped.append(&mut o.skipped);
                }
                Err(p) => std::panic::resume_unwind(p),
            }
        }
        all
    })
}

// ---------------------------------------------------------------------------------------------
// Unit tests
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn entry_bytes(path: &[u8], mode: u32, ext: Option<u16>) -> Vec<u8> {
        let mut v = Vec::new();
        for x in [1u32, 2, 3, 4, 5, 6, mode, 7, 8, 9] {
            v.extend_from_slice(&x.to_be_bytes());
        }
        v.extend_from_slice(&[0xab; 20]);
        let mut flags = path.len().min(0xfff) as u16;
        if ext.is_some() {
            flags |= 0x4000;
        }
        v.extend_from_slice(&flags.to_be_bytes());
        if let Some(x) = ext {
            v.extend_from_slice(&x.to_be_bytes());
        }
        v
    }

    fn finish(mut v: Vec<u8>) -> Vec<u8> {
        let d = Sha1::digest(&v);
        v.extend_from_slice(&d);
        v
    }

    fn header(version: u32, n: u32) -> Vec<u8> {
        let mut v = b"DIRC".to_vec();
        v.extend_from_slice(&version.to_be_bytes());
        v.extend_from_slice(&n.to_be_bytes());
        v
    }

    fn v2_entry(path: &[u8], ext: Option<u16>) -> Vec<u8> {
        let mut e = entry_bytes(path, 0o100644, ext);
        e.extend_from_slice(path);
        let len = e.len();
        e.resize((len + 8) & !7, 0);
        e
    }

    #[test]
    fn parses_v2_and_v3() {
        let mut v = header(3, 2);
        v.extend(v2_entry(b"a/b", None));
        v.extend(v2_entry(b"c", Some(0x4000)));
        let es = parse_index(&finish(v)).unwrap();
        assert_eq!(es.len(), 2);
        assert_eq!(es[0].path, b"a/b");
        assert_eq!(es[0].ctime, (1, 2));
        assert_eq!(es[0].size, 9);
        assert_eq!(es[0].mode, 0o100644);
        assert!(es[1].skip_worktree());
    }

    #[test]
    fn parses_long_names() {
        // Name length 0xfff means "4095 or more": the name runs to its NUL.
        let long = vec![b'n'; 5000];
        let mut v = header(2, 2);
        v.extend(v2_entry(&long, None));
        v.extend(v2_entry(b"z", None));
        let es = parse_index(&finish(v)).unwrap();
        assert_eq!(es[0].path, long);
        assert_eq!(es[1].path, b"z");
    }

    #[test]
    fn parses_v4_prefix_compression() {
        let mut v = header(4, 3);
        for (strip, suffix) in [(0u8, &b"dir/aaa"[..]), (3, b"bbb"), (7, b"x")] {
            v.extend(entry_bytes(b"", 0o100644, None));
            v.push(strip);
            v.extend_from_slice(suffix);
            v.push(0);
        }
        let es = parse_index(&finish(v)).unwrap();
        let paths: Vec<_> = es.iter().map(|e| e.path.clone()).collect();
        assert_eq!(
            paths,
            [b"dir/aaa".to_vec(), b"dir/bbb".to_vec(), b"x".to_vec()]
        );
    }

    #[test]
    fn rejects_corruption_without_panicking() {
        let mut v = header(2, 1);
        v.extend(v2_entry(b"file", None));
        let good = finish(v);
        assert!(parse_index(&good).is_ok());
        // Every truncation and every single-byte flip must be an error, not a panic.
        for n in 0..good.len() {
            assert!(parse_index(&good[..n]).is_err());
        }
        for i in 0..good.len() - 20 {
            let mut b = good.clone();
            b[i] ^= 0x40;
            assert!(parse_index(&b).is_err());
        }
        // Bogus entry counts with a valid checksum.
        let mut v = header(4, u32::MAX);
        v.extend(entry_bytes(b"", 0, None));
        v.extend_from_slice(&[0xff; 12]);
        assert!(parse_index(&finish(v)).is_err());
    }

    #[test]
    fn refuses_split_and_sparse() {
        for sig in [b"link", b"sdir"] {
            let mut v = header(2, 0);
            v.extend_from_slice(sig);
            v.extend_from_slice(&0u32.to_be_bytes());
            let e = parse_index(&finish(v)).unwrap_err();
            assert!(e.contains("not supported"), "{e}");
        }
        let mut v = header(2, 0);
        v.extend_from_slice(b"TREE");
        v.extend_from_slice(&1u32.to_be_bytes());
        v.push(0);
        assert!(parse_index(&finish(v)).is_ok());
    }

    #[test]
    fn varint_matches_git() {
        assert_eq!(decode_varint(&[0x05]), Some((5, 1)));
        assert_eq!(decode_varint(&[0x80, 0x00]), Some((128, 2)));
        assert_eq!(decode_varint(&[0x80]), None);
        assert_eq!(decode_varint(&[0xff; 20]), None);
    }

    #[test]
    fn config_values() {
        let text = b"[core]\n\texcludesFile = \"~/my ignore\" ; comment\n\tignorecase\n[Extensions]\nobjectFormat=sha1\n[remote \"o\\\"x\"]\nurl = a\n";
        let mut cfg = ConfigVals::default();
        parse_config(text, Path::new("/c"), Some(Path::new("/h")), &mut cfg, 0).unwrap();
        assert_eq!(cfg.excludes_file, Some(Some(PathBuf::from("/h/my ignore"))));
        assert_eq!(cfg.ignore_case, Some(true));
        assert_eq!(cfg.object_format.as_deref(), Some("sha1"));
        let mut cfg = ConfigVals::default();
        assert!(parse_config(b"[core\n", Path::new("/c"), None, &mut cfg, 0).is_err());
        assert!(parse_config(b"x = \"open\n", Path::new("/c"), None, &mut cfg, 0).is_err());
        parse_config(
            b"[core]\nexcludesfile = a\\\n b\n",
            Path::new("/c"),
            None,
            &mut cfg,
            0,
        )
        .unwrap();
        assert_eq!(cfg.excludes_file, Some(Some(PathBuf::from("a b"))));
    }

    #[test]
    fn braces_are_literal() {
        assert_eq!(translate_line(b"*.{o,a}").as_deref(), Some("*.\\{o,a\\}"));
        assert_eq!(translate_line(b"[{]x").as_deref(), Some("[{]x"));
        assert_eq!(translate_line(b"\\{").as_deref(), Some("\\{"));
        let gi = build_gitignore(b"*.{o,a}\n", false).unwrap();
        assert!(gi.matched(Path::new("x.{o,a}"), false).is_ignore());
        assert!(gi.matched(Path::new("x.o"), false).is_none());
    }
}
