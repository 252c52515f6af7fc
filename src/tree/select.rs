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
//! * [`discover_repo`](crate::git::repo::discover_repo) finds the repository the way git does
//!   (walking up to a `.git` directory or `gitdir:` file, following linked worktrees and
//!   submodules to their git directory).
//! * [`read_index_and_tree`] parses `<gitdir>/index` (versions 2, 3 and 4, checksum verified)
//!   into [`IndexEntry`] values that keep the stat data, so later stages can trust unchanged
//!   tracked files without reading them, and gives the tree of the whole index when its
//!   cache-tree holds it ([`Selection::index_tree`]).
//! * The walk ([`crate::tree::walk`]) applies git's exclude rules ([`crate::git::ignore`]):
//!   `.gitignore` in every directory (deeper files win, last matching line wins within a file,
//!   `!` negations, anchors, `**`, dir-only patterns), then `$GIT_COMMON_DIR/info/exclude`, then
//!   `core.excludesFile` (or its XDG default). An excluded directory is not descended, so
//!   nothing below it can be re-included — except tracked files, which come from the index.
//! * Directories are read in parallel; only regular files are `lstat`ed (for the executable
//!   bit), nothing is opened except `.gitignore` and `.gitattributes` files, and no file
//!   content is read. An excluded directory holding tracked files is not read: its tracked
//!   entries are `lstat`ed from the index, so a tree whose rules exclude every top-level
//!   directory costs what `git status` costs there.
//! * Git attributes ([`crate::git::attributes`]) mark tracked files whose content git converts
//!   ([`Selected::converted`]): their blobs cannot stand in for the work-tree file. The
//!   `.gitattributes` files are found by the walk's listings and read once each; a tree
//!   without any, and without `core.autocrlf`, costs nothing more.
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
//!   checked. SHA-256 repositories, split and sparse indexes are refused with
//!   [`Error::Git`](crate::error::Error::Git).
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

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::fs::relpath::RelPath;
use crate::git::attributes::{read_tree_attr_file, Conversions, TreeAttrFile};
use crate::git::ignore::{as_path, Rules};
use crate::git::index::{dedup_tracked, read_index_and_tree, IndexEntry, LStat};
use crate::git::odb::ObjectStore;
use crate::git::private::{entries_digest, KnownTree};
use crate::git::repo::{canonical_project, discover_repo_with, GitRepo, SelectOptions};
pub use crate::tree::walk::Kind;
use crate::tree::walk::{
    leading_path, run_walk, DirJob, Found, GitCtx, Mode, TrackedIndex, WalkCtx, UNTRACKED,
};

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
    /// A tracked regular file whose content git converts between the work tree and the
    /// object store (`text`/`eol`/`crlf` or `core.autocrlf`, `filter`, `ident`,
    /// `working-tree-encoding`; see [`crate::git::attributes`]): its work-tree bytes may differ
    /// from its blob even when the stat data matches the index, so it must be read from the
    /// work tree. Always `false` for untracked files and symlinks.
    pub converted: bool,
}

// The selection is collected in place from the walk's findings only while it is no larger.
const _: () = assert!(std::mem::size_of::<Selected>() <= std::mem::size_of::<Found>());
const _: () = assert!(std::mem::align_of::<Selected>() == std::mem::align_of::<Found>());

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
    /// Index entries below the project that stand for no file a snapshot holds but that
    /// its tree keeps: gitlinks (submodules) and skip-worktree (sparse) paths, stage 0,
    /// paths relative to the project, sorted. Given here so that nothing after the
    /// selection reads the index again.
    pub kept_out: Vec<IndexEntry>,
    /// The tree of the user's whole index, when its cache-tree knows it, with the digest of
    /// the entries it stands for (see [`KnownTree`]); `None` for a project that is a
    /// subdirectory of its work tree, an index with conflicts or intent-to-add entries, or
    /// no valid cache-tree.
    pub index_tree: Option<KnownTree>,
}

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
/// use patchbox::git::repo::SelectOptions;
/// use patchbox::tree::select::{select_project_with, Kind};
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

    let (tracked, out, conv, kept_out, index_tree) = match &repo {
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
            (Vec::new(), run_walk(&ctx, root, 0), None, Vec::new(), None)
        }
        Some(repo) => {
            let (tracked, cached_tree) = read_index_and_tree(&repo.index_file)?;
            // Whether the cache-tree's root can stand for the index: the whole work tree,
            // one stage-0 entry per path, none that git leaves out of its trees.
            let cached_tree = cached_tree.filter(|_| {
                repo.prefix.is_none()
                    && tracked.iter().all(|e| e.stage() == 0 && !e.intent_to_add())
            });
            let tracked = dedup_tracked(tracked);
            // The digest of the index's entries is hashed on a second core while the
            // walk's lookup table is built.
            let digest = || {
                cached_tree.map(|tree| KnownTree {
                    tree,
                    digest: entries_digest(tracked.iter().map(|e| (&e.path[..], e.mode, &e.oid))),
                })
            };
            let (index_tree, lookup) = crate::cores::beside(digest, || TrackedIndex::new(&tracked));
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
            let out = run_walk(&ctx, root, tracked.len());
            let conv = load_conversions(repo, &prefix, &out.attr_dirs, &tracked);
            let kept_out = kept_out_of(&tracked, &prefix);
            (tracked, out, conv, kept_out, index_tree)
        }
    };

    // The findings already carry their index entries; the parsed index goes before they are
    // sorted, and the selection is made in the findings' own buffer (the two types have one
    // size), so one list of the per-file data is alive at a time (trees of 100k files).
    drop(tracked);
    let mut found = out.found;
    // The index is sorted by path: when every finding is tracked (a clean or modified
    // checkout, nothing new), their index positions give the path order without comparing
    // paths (78,000 of them on the Linux tree).
    if found.iter().all(|f| f.at != UNTRACKED) {
        found.sort_unstable_by_key(|f| f.at);
    } else {
        found.sort_unstable_by(|a, b| a.rel.as_bytes().cmp(b.rel.as_bytes()));
    }
    let mut entries: Vec<Selected> = found
        .into_iter()
        .map(|f| Selected {
            rel: f.rel,
            kind: f.kind,
            index: f.index,
            stat: f.stat,
            converted: false,
        })
        .collect();
    if let (Some(mut conv), Some(repo)) = (conv, &repo) {
        let mut path: Vec<u8> = match &repo.prefix {
            Some(p) => [p.as_bytes(), b"/"].concat(),
            None => Vec::new(),
        };
        let strip = path.len();
        for e in &mut entries {
            if e.index.is_some() && matches!(e.kind, Kind::File { .. }) {
                path.truncate(strip);
                path.extend_from_slice(e.rel.as_bytes());
                e.converted = conv.converts(&path);
            }
        }
    }
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
        kept_out,
        index_tree,
    })
}

/// The stage-0 entries of `tracked` below `prefix` that stand for no file of the work tree
/// but belong to the project's tree: gitlinks (submodules) and skip-worktree (sparse)
/// paths, their paths made relative to the project.
fn kept_out_of(tracked: &[IndexEntry], prefix: &[u8]) -> Vec<IndexEntry> {
    tracked
        .iter()
        .filter(|e| e.stage() == 0 && (e.is_gitlink() || e.skip_worktree()))
        .filter_map(|e| {
            let path = e.path.strip_prefix(prefix)?.to_vec();
            Some(IndexEntry { path, ..e.clone() })
        })
        .collect()
}

/// The attribute stack for the selected files, `None` when nothing can be converted (no
/// attribute lines anywhere and no `core.autocrlf`).
///
/// In-tree `.gitattributes` files are those the walk saw (`attr_dirs`) plus those of the
/// directories above the project; where the work tree has none (or a symlink, which git does
/// not follow) but the index does, the staged blob is read, as git does when checking files in.
/// Anything that cannot be read makes every file count as converted: copying a file is always
/// right, trusting its blob is not.
fn load_conversions(
    repo: &GitRepo,
    prefix: &[u8],
    attr_dirs: &[Vec<u8>],
    tracked: &[IndexEntry],
) -> Option<Conversions> {
    let mut dirs: HashSet<&[u8]> = attr_dirs.iter().map(Vec::as_slice).collect();
    // Above the project: the top of the work tree and each directory down to the project's
    // parent (the project directory itself was walked).
    let ancestors = std::iter::once(0)
        .chain(
            prefix
                .iter()
                .enumerate()
                .filter(|&(_, &b)| b == b'/')
                .map(|(i, _)| i + 1),
        )
        .filter(|&end| end < prefix.len())
        .map(|end| &prefix[..end]);
    let mut files = Vec::new();
    let mut unreadable = false;
    for dir in ancestors {
        let path = repo.work_tree.join(as_path(dir)).join(".gitattributes");
        match read_tree_attr_file(&path) {
            Ok(Some(data)) => {
                dirs.insert(dir);
                files.push(TreeAttrFile {
                    dir: dir.to_vec(),
                    data,
                });
            }
            Ok(None) => {}
            Err(_) => unreadable = true,
        }
    }
    for dir in attr_dirs {
        let path = repo.work_tree.join(as_path(dir)).join(".gitattributes");
        match read_tree_attr_file(&path) {
            Ok(Some(data)) => files.push(TreeAttrFile {
                dir: dir.clone(),
                data,
            }),
            Ok(None) => {} // replaced by a symlink or removed since the listing
            Err(_) => unreadable = true,
        }
    }
    // Tracked `.gitattributes` missing from the work tree, in or above the project.
    let mut odb: Option<Option<ObjectStore>> = None;
    for ix in tracked {
        let Some(dir) = ix.path.strip_suffix(b".gitattributes") else {
            continue;
        };
        if !(dir.is_empty() || dir.ends_with(b"/"))
            || ix.is_gitlink()
            || dirs.contains(dir)
            || !(dir.starts_with(prefix) || prefix.starts_with(dir))
        {
            continue;
        }
        let store = odb.get_or_insert_with(|| ObjectStore::open(&repo.git_dir).ok());
        match store.as_ref().map(|s| s.read_blob(&ix.oid)) {
            Some(Ok(Some(data))) => files.push(TreeAttrFile {
                dir: dir.to_vec(),
                data,
            }),
            _ => unreadable = true,
        }
    }
    let conv = if unreadable {
        Conversions::everything()
    } else {
        Conversions::load(repo, files).unwrap_or_else(|_| Conversions::everything())
    };
    conv.any().then_some(conv)
}
