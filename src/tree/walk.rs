//! The parallel directory walk that selects a project's files (the selection above it owns
//! the options and the result).
//!
//! Directories are read by a small pool of threads sharing a job stack; only regular files are
//! `lstat`ed (for the executable bit), nothing is opened except `.gitignore` files, and no file
//! content is read. Directories holding a `.gitattributes` are noted for the caller. In a git
//! work tree each entry is looked up in the index (tracked files are always taken) and
//! otherwise tested against the exclude rules; an excluded directory is not descended unless it
//! holds tracked files, and then it is not read at all: its tracked entries, a sorted run of
//! the index, are `lstat`ed one by one, as `git status` does.

use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::fs::path_hash::PathMap;
use crate::fs::relpath::RelPath;
use crate::fs::Timestamp;
use crate::git::ignore::{
    as_path, chain_iter, excluded_by, is_dot_git, load_gitignore_file, Level, Rules,
};
use crate::git::index::{IndexEntry, LStat};
use crate::git::repo::{is_git_dir, read_gitfile};
use rustix::fs::{AtFlags, OFlags};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Not a git project: everything except `.git`.
    All,
    /// Tracked files plus untracked files that are not excluded.
    Untracked,
    /// Inside an excluded directory that holds tracked files: only those.
    TrackedOnly,
}

pub(crate) struct DirJob {
    pub(crate) abs: PathBuf,
    /// Work-tree-relative path of the directory with a trailing `/` (empty for the top);
    /// project-relative outside git.
    pub(crate) rel: Vec<u8>,
    pub(crate) mode: Mode,
    pub(crate) levels: Option<Arc<Level>>,
    /// An untracked directory: if it holds a repository, report it instead of listing it.
    pub(crate) check_nested: bool,
}

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

/// The tracked paths, for O(1) lookups during the walk.
pub(crate) struct TrackedIndex<'a> {
    entries: &'a [IndexEntry],
    /// Work-tree-relative path → position in `entries`.
    files: PathMap<'a, usize>,
    /// Every directory with tracked entries below it (no trailing slash).
    dirs: PathMap<'a, ()>,
}

impl<'a> TrackedIndex<'a> {
    pub(crate) fn new(entries: &'a [IndexEntry]) -> Self {
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

pub(crate) struct GitCtx<'a> {
    pub(crate) tracked: &'a TrackedIndex<'a>,
    pub(crate) rules: &'a Rules,
    pub(crate) ignore_case: bool,
}

impl GitCtx<'_> {
    fn excluded(&self, levels: Option<&Arc<Level>>, path: &[u8], is_dir: bool) -> bool {
        excluded_by(chain_iter(levels), self.rules, path, is_dir)
    }
}

pub(crate) struct WalkCtx<'a> {
    pub(crate) git: Option<GitCtx<'a>>,
    pub(crate) exclude: &'a [PathBuf],
    /// Bytes to strip from a job's `rel` to get the project-relative path.
    pub(crate) strip: usize,
}

/// One selected path as the walk finds it. It has the selection's fields (its index entry
/// already copied, without the path) so that the selection is made from the walk's own
/// buffer, in place: on a tree of 100k files a second list of them is tens of megabytes.
pub(crate) struct Found {
    /// Project-relative; built in the workers so the conversion runs in parallel.
    pub(crate) rel: RelPath,
    pub(crate) kind: Kind,
    /// The path's index entry (its `path` left empty), `None` when untracked.
    pub(crate) index: Option<IndexEntry>,
    pub(crate) stat: Option<LStat>,
    /// The entry's position in the (sorted, deduplicated) index, [`UNTRACKED`] when none:
    /// tracked findings are put in path order by it, without comparing paths.
    pub(crate) at: u32,
}

/// [`Found::at`] of an untracked finding.
pub(crate) const UNTRACKED: u32 = u32::MAX;

#[derive(Default)]
pub(crate) struct WalkOut {
    pub(crate) found: Vec<Found>,
    pub(crate) skipped: Vec<(Vec<u8>, &'static str)>,
    /// Directories (work-tree-relative, trailing `/`, empty for the top) holding a regular
    /// `.gitattributes` file; noticed in the listing, not read (git only).
    pub(crate) attr_dirs: Vec<Vec<u8>>,
}

/// Mode and ignore levels at the project directory, walking down from the work tree top the
/// way git's `treat_leading_path` does.
pub(crate) fn leading_path(
    git: &GitCtx,
    work_tree: &Path,
    prefix: &[u8],
) -> (Mode, Option<Arc<Level>>) {
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
    if let (Some(git), Mode::TrackedOnly) = (&ctx.git, job.mode) {
        return process_tracked_dir(ctx, git, job, out, push);
    }
    let strip_slash = |r: &[u8]| r.strip_suffix(b"/").unwrap_or(r).to_vec();
    let rd = match fs::read_dir(&job.abs) {
        Ok(rd) => rd,
        Err(_) => {
            out.skipped
                .push((proj_rel(ctx, &strip_slash(&job.rel)), "unreadable"));
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
                    .push((proj_rel(ctx, &strip_slash(&job.rel)), "unreadable"));
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
            .push((proj_rel(ctx, &strip_slash(&job.rel)), "nested repository"));
        return;
    }
    if ctx.git.is_some()
        && ents.iter().any(|(e, n)| {
            n.as_bytes() == b".gitattributes" && e.file_type().is_ok_and(|t| t.is_file())
        })
    {
        // In every mode: git reads the attributes of ignored directories too.
        out.attr_dirs.push(job.rel.clone());
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
                    out.skipped.push((proj_rel(ctx, &rel), "submodule"));
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
                out.skipped.push((proj_rel(ctx, &rel), "submodule"));
            }
            Some(i) => emit(
                ctx,
                &e,
                &ft,
                rel,
                git.tracked.entries.get(i).map(|e| (i, e)),
                out,
            ),
            None => {
                if job.mode == Mode::TrackedOnly || git.excluded(levels.as_ref(), &rel, false) {
                    continue;
                }
                emit(ctx, &e, &ft, rel, None, out);
            }
        }
    }
}

/// An excluded directory holding tracked files, listed from the index instead of the disk.
///
/// Only tracked paths can be taken below an excluded directory, so its listing would only be
/// filtered down to them: `lstat` each tracked entry the directory holds directly and descend
/// into the subdirectories that hold tracked entries, as `git status` does (it reads no
/// excluded directory). On a tree whose ignore rules exclude the top-level directories (a
/// `/*` line, as packaging trees have) this replaces every directory listing with the stats
/// git performs anyway. What the listing noticed is kept: a regular `.gitattributes` (its
/// rules apply whether or not it is tracked), a gitlink reported as a submodule, and a
/// directory or symlink where a tracked file was, or a file or symlink where a tracked
/// directory was, taken as absent (a symlinked directory is never followed).
fn process_tracked_dir(
    ctx: &WalkCtx,
    git: &GitCtx,
    job: DirJob,
    out: &mut WalkOut,
    push: &mut Vec<DirJob>,
) {
    let entries = git.tracked.entries;
    // `dedup_tracked` sorts the index by path bytes: the entries below `rel` are one run.
    let lo = entries.partition_point(|e| e.path.as_slice() < job.rel.as_slice());
    let n = entries[lo..].partition_point(|e| e.path.starts_with(&job.rel));
    let below = &entries[lo..lo + n];
    let base = job.rel.len();
    // The index is read, not trusted: a name the listing could not have produced (empty, `.`,
    // `..`, `.git`) is never joined onto a path.
    let listable = |name: &[u8]| {
        !(name.is_empty() || name == b"." || name == b".." || is_dot_git(name, git.ignore_case))
    };
    // Every `lstat` below is made from this directory's descriptor: the kernel resolves one
    // name, not the whole path again per file (a third of the walk's system time on the
    // Linux tree). Without it (the directory went away meanwhile) paths are used.
    let dir = rustix::fs::open(
        &job.abs,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .ok();
    let at = Lstat {
        dir: dir.as_ref(),
        abs: &job.abs,
    };
    if at.of(b".gitattributes").is_ok_and(|m| m.is_file()) {
        out.attr_dirs.push(job.rel.clone());
    }
    let mut i = 0;
    while i < below.len() {
        let entry = &below[i];
        let tail = &entry.path[base..];
        let Some(slash) = tail.iter().position(|&b| b == b'/') else {
            // A tracked path directly in this directory.
            if listable(tail) {
                tracked_file(ctx, &at, base, (lo + i, entry), out);
            }
            i += 1;
            continue;
        };
        // A subdirectory holding tracked entries: all of them form the next run.
        let dir = &entry.path[..base + slash + 1];
        let run = below[i..].partition_point(|e| e.path.starts_with(dir));
        i += run;
        if !listable(&tail[..slash]) {
            continue;
        }
        let abs = job.abs.join(as_path(&tail[..slash]));
        if ctx.exclude.contains(&abs) {
            continue;
        }
        match at.of(&tail[..slash]) {
            Ok(m) if m.is_dir() => push.push(DirJob {
                abs,
                rel: dir.to_vec(),
                mode: Mode::TrackedOnly,
                levels: None,
                check_nested: false,
            }),
            Ok(_) => {} // a file or symlink where the tracked directory was: not followed
            Err(err) if gone(&err) => {}
            Err(_) => {
                let rel = &dir[..dir.len() - 1];
                out.skipped.push((proj_rel(ctx, rel), "unreadable"));
            }
        }
    }
}

/// `lstat`s names in one directory: from its descriptor when it could be opened, else by
/// joining them onto its path.
struct Lstat<'a> {
    dir: Option<&'a rustix::fd::OwnedFd>,
    abs: &'a Path,
}

impl Lstat<'_> {
    /// The `lstat` of `name`, a single component (never followed when a symlink).
    fn of(&self, name: &[u8]) -> io::Result<Stat> {
        match self.dir {
            Some(d) => rustix::fs::statat(d, name, AtFlags::SYMLINK_NOFOLLOW)
                .map(|st| Stat::from_raw(&st))
                .map_err(io::Error::from),
            None => fs::symlink_metadata(self.abs.join(as_path(name))).map(Stat::of),
        }
    }
}

/// What the walk keeps of an `lstat`: git's stat fields, `st_mode` among them.
struct Stat(LStat);

impl Stat {
    fn of(m: fs::Metadata) -> Stat {
        Stat(LStat::from_metadata(&m))
    }

    fn from_raw(st: &rustix::fs::Stat) -> Stat {
        // The kernel's fields, widened or reinterpreted as `std::fs::Metadata` does.
        #[allow(clippy::unnecessary_cast)]
        Stat(LStat {
            size: st.st_size as u64,
            mtime: Timestamp::new(st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: Timestamp::new(st.st_ctime as i64, st.st_ctime_nsec as i64),
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            uid: st.st_uid,
            gid: st.st_gid,
            mode: st.st_mode as u32,
        })
    }

    fn file_type(&self) -> rustix::fs::FileType {
        rustix::fs::FileType::from_raw_mode(self.0.mode as rustix::fs::RawMode)
    }

    fn is_dir(&self) -> bool {
        self.file_type() == rustix::fs::FileType::Directory
    }

    fn is_file(&self) -> bool {
        self.file_type() == rustix::fs::FileType::RegularFile
    }

    /// Why a node that is neither a file, a symlink nor a directory is skipped.
    fn kind_reason(&self) -> &'static str {
        use rustix::fs::FileType as T;
        match self.file_type() {
            T::Fifo => "fifo",
            T::Socket => "socket",
            T::BlockDevice | T::CharacterDevice => "device",
            _ => "unknown file type",
        }
    }
}

/// Whether an `lstat` error means the path is not there (or a component is not a directory).
fn gone(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// `rel` (work-tree-relative) made project-relative.
fn proj_rel(ctx: &WalkCtx, rel: &[u8]) -> Vec<u8> {
    rel.get(ctx.strip..).unwrap_or(&[]).to_vec()
}

/// Records the tracked `entry` (in the directory `dir_abs` whose work-tree-relative path is
/// `entry.path[..base]`, reached through `at`) from its `lstat`.
fn tracked_file(
    ctx: &WalkCtx,
    at: &Lstat,
    base: usize,
    (pos, entry): (usize, &IndexEntry),
    out: &mut WalkOut,
) {
    let path = entry.path.as_slice();
    let meta = at.of(&path[base..]);
    if entry.is_gitlink() {
        match meta {
            Ok(_) => out.skipped.push((proj_rel(ctx, path), "submodule")),
            Err(err) if gone(&err) => {}
            Err(_) => out.skipped.push((proj_rel(ctx, path), "unreadable")),
        }
        return;
    }
    if meta.as_ref().is_ok_and(|m| m.is_dir()) {
        return; // a directory where the tracked file was: the listing would not take it either
    }
    record(ctx, path, Some((pos, entry)), meta, out);
}

/// Records a non-directory entry of a listing: a symlink as it is, a file from its `lstat`
/// (for the exec bit and the stat data), anything else as a skip.
fn emit(
    ctx: &WalkCtx,
    e: &fs::DirEntry,
    ft: &fs::FileType,
    rel: Vec<u8>,
    index: Option<(usize, &IndexEntry)>,
    out: &mut WalkOut,
) {
    if ft.is_symlink() {
        // The listing's type is enough for a symlink: no `lstat`.
        if let Ok(rp) = RelPath::from_bytes(&rel[ctx.strip.min(rel.len())..]) {
            out.found.push(Found {
                rel: rp,
                kind: Kind::Symlink,
                index: index.map(|(_, e)| e.without_path()),
                stat: None,
                at: position(index),
            });
        }
    } else if ft.is_file() {
        record(ctx, &rel, index, e.metadata().map(Stat::of), out);
    } else {
        out.skipped
            .push((proj_rel(ctx, &rel), file_kind_reason(ft)));
    }
}

/// Records the work-tree-relative `rel` from its `lstat` result: a regular file with its stat
/// data, a symlink, a skip for anything else or an unreadable path; nothing when it is gone.
fn record(
    ctx: &WalkCtx,
    rel: &[u8],
    index: Option<(usize, &IndexEntry)>,
    meta: io::Result<Stat>,
    out: &mut WalkOut,
) {
    let m = match meta {
        Ok(m) => m,
        Err(err) if gone(&err) => return, // vanished
        Err(_) => {
            out.skipped.push((proj_rel(ctx, rel), "unreadable"));
            return;
        }
    };
    let ft = m.file_type();
    if !(ft.is_file() || ft.is_symlink()) {
        out.skipped.push((proj_rel(ctx, rel), m.kind_reason()));
        return;
    }
    let Ok(rp) = RelPath::from_bytes(&rel[ctx.strip.min(rel.len())..]) else {
        return; // neither a listing nor a checked index name yields "", "." or ".."
    };
    out.found.push(if ft.is_file() {
        Found {
            rel: rp,
            kind: Kind::File {
                executable: m.0.mode & 0o100 != 0,
            },
            index: index.map(|(_, e)| e.without_path()),
            stat: Some(m.0),
            at: position(index),
        }
    } else {
        Found {
            rel: rp,
            kind: Kind::Symlink,
            index: index.map(|(_, e)| e.without_path()),
            stat: None,
            at: position(index),
        }
    });
}

/// [`Found::at`] of a finding with this index entry (an index too large for a `u32`
/// position, never seen, is ordered by path like an untracked one).
fn position(index: Option<(usize, &IndexEntry)>) -> u32 {
    index
        .and_then(|(i, _)| u32::try_from(i).ok())
        .filter(|&i| i != UNTRACKED)
        .unwrap_or(UNTRACKED)
}

struct Queue {
    jobs: Vec<DirJob>,
    active: usize,
}

/// How many findings a worker gathers before it moves them into the shared list.
const FLUSH_AT: usize = 256;

/// Walks from `root` on up to 8 threads. `expected`: how many findings there will likely be
/// (the number of tracked files): the list is made that large once, so that it is neither
/// grown nor merged while every finding is held (trees of 100k files); room not used costs
/// address space only.
pub(crate) fn run_walk(ctx: &WalkCtx, root: DirJob, expected: usize) -> WalkOut {
    let threads = crate::cores::count().min(8);
    if threads == 1 {
        let mut out = WalkOut {
            found: Vec::with_capacity(expected),
            ..WalkOut::default()
        };
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
    let found = Mutex::new(Vec::with_capacity(expected));
    let flush = |local: &mut Vec<Found>| {
        found
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .append(local);
    };
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
                flush(&mut out.found);
                return out;
            };
            process_dir(ctx, job, &mut out, &mut pushed);
            if out.found.len() >= FLUSH_AT {
                flush(&mut out.found);
            }
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
    // This thread is one of the workers; a worker that cannot be made leaves the others
    // more to do, as the queue is shared.
    let mut all = WalkOut::default();
    for mut o in crate::cores::workers(threads, worker) {
        all.skipped.append(&mut o.skipped);
        all.attr_dirs.append(&mut o.attr_dirs);
    }
    all.found = found.into_inner().unwrap_or_else(PoisonError::into_inner);
    all
}
