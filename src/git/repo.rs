//! Repository discovery: from a project directory, find the git repository the way git does
//! ([`discover_repo`]) — walking up to a `.git` directory or `gitdir:` file, following linked
//! worktrees and submodules to their git directory, stopping at ceiling directories and mount
//! points — and read from its configuration what selection needs (`core.excludesFile`,
//! `core.ignoreCase`, `core.attributesFile`, `core.autocrlf`, `extensions.objectFormat`). [`SelectOptions`] says where git's user and
//! system configuration live.
//!
//! `GIT_DIR`, `GIT_WORK_TREE`, `core.worktree` and bare repositories are not supported
//! (discovery looks for `.git` only), and `safe.directory` ownership is not checked. SHA-256
//! repositories are refused with [`Error::Git`].

use std::ffi::OsStr;
use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fs::relpath::RelPath;
use crate::git::config::{parse_bool, read_config_file, ConfigVals};

/// A discovered git repository, as seen from the project directory.
///
/// ```
/// use patchbox::git::repo::{discover_repo_with, SelectOptions};
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
    /// The global attributes file: `core.attributesFile` if configured (resolved against the
    /// work tree when relative), else `$XDG_CONFIG_HOME/git/attributes` /
    /// `~/.config/git/attributes`.
    pub attributes_file: Option<PathBuf>,
    /// The system attributes file ([`SelectOptions::system_attributes`]).
    pub system_attributes: Option<PathBuf>,
    /// `core.autocrlf` is `true` or `input`: files git takes for text are converted on
    /// check-in, so their work-tree bytes may differ from their blobs.
    pub autocrlf: bool,
    /// A partial clone (`extensions.partialClone`, or a remote marked `promisor`): its
    /// store may lack objects its own trees reach, fetched when needed.
    pub promisor: bool,
}

/// Where to find git's user and system configuration.
///
/// [`select_project`](crate::tree::select::select_project) uses [`SelectOptions::from_env`];
/// tests and embedders that must not look at the real home directory build one explicitly.
/// `Default` means: no home, no global or system configuration, no ceiling directories.
///
/// ```
/// use patchbox::git::repo::SelectOptions;
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
    /// The system attributes file (`/etc/gitattributes`), `None` for `GIT_ATTR_NOSYSTEM`.
    pub system_attributes: Option<PathBuf>,
    /// `$GIT_CEILING_DIRECTORIES` (canonical paths): discovery does not go up into these
    /// (the start directory itself is always examined).
    pub ceiling_dirs: Vec<PathBuf>,
    /// `$GIT_DISCOVERY_ACROSS_FILESYSTEM`: keep looking for `.git` above a mount point.
    pub across_filesystems: bool,
}

impl SelectOptions {
    /// Reads the options from the process environment the way git does: `HOME`,
    /// `XDG_CONFIG_HOME`, `GIT_CONFIG_GLOBAL`, `GIT_CONFIG_NOSYSTEM` / `GIT_CONFIG_SYSTEM`,
    /// `GIT_ATTR_NOSYSTEM`, `GIT_CEILING_DIRECTORIES`, `GIT_DISCOVERY_ACROSS_FILESYSTEM`.
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
        let attr_nosystem = var("GIT_ATTR_NOSYSTEM")
            .and_then(|v| parse_bool(Some(v.as_bytes())))
            .unwrap_or(false);
        let system_attributes = (!attr_nosystem).then(|| PathBuf::from("/etc/gitattributes"));
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
            system_attributes,
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

/// Finds the git repository containing `project`, with git's configuration taken from the
/// environment. `Ok(None)` outside git.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let r = patchbox::git::repo::discover_repo(dir.path());
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
/// use patchbox::git::repo::{discover_repo_with, SelectOptions};
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

pub(crate) fn canonical_project(project: &Path) -> Result<PathBuf> {
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
pub(crate) fn is_git_dir(dir: &Path) -> bool {
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
pub(crate) fn read_gitfile(file: &Path) -> Result<PathBuf> {
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
    let attributes_file = match cfg.attributes_file {
        Some(Some(p)) if p.is_absolute() => Some(p),
        Some(Some(p)) => Some(work_tree.join(p)),
        Some(None) => None,
        None => opts.xdg_git_dir().map(|d| d.join("attributes")),
    };
    Ok(GitRepo {
        index_file: git_dir.join("index"),
        git_dir,
        common_dir,
        work_tree: work_tree.to_path_buf(),
        prefix,
        excludes_file,
        ignore_case: cfg.ignore_case.unwrap_or(false),
        attributes_file,
        system_attributes: opts.system_attributes.clone(),
        autocrlf: cfg.autocrlf.unwrap_or(false),
        promisor: cfg.promisor,
    })
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
