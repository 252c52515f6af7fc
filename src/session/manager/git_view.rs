//! A sandbox of a git project is a git work tree: each sandbox gets a private `.git` whose
//! `HEAD` and index are the session's snapshot and whose objects are the user's, reached
//! read-only (see [`crate::git::private`] for what it holds and why).
//!
//! The private repository is made in two steps, after the sandbox's files are in place and
//! whatever made them (a copy, an overlay mount):
//!
//! 1. Once per session, at the first sandbox, [`SnapshotRepo`] is prepared from the base
//!    snapshot: blobs of the nodes the user's store does not hold (modified and untracked
//!    files, symlinks; a copied file the user's index still describes — one git converts —
//!    keeps the index's blob) and the trees and commit of the snapshot are written to the session's
//!    `base.objects/` (nothing at all for a clean checkout of the user's `HEAD`); gitlinks
//!    and skip-worktree entries of the user's index are kept as such.
//! 2. Each sandbox gets its `.git`, written only inside `d-<id>/.git` (through the session's
//!    chokepoint): the index gives an entry the stat data of the sandbox's file when that
//!    file holds the snapshot's content (the copy's manifest says which), so `git status`
//!    reads no file; a chained sandbox's files that its predecessor changed get none, so git
//!    compares them and shows them changed against the snapshot, as their patch does.
//!
//! The `.git` is never part of a patch: the sandbox listing of finalize, chaining and crash
//! recovery skips `.git` directories ([`crate::tree::snapshot::list_tree`]). It goes with the
//! sandbox on discard; `base.objects/` goes with the session. A project outside git gets no
//! `.git`; [`Options::no_git_repo`] turns the whole step off.

use std::path::Path;

use crate::fs::Timestamp;
use crate::git::index::IndexEntry;
use crate::git::oid::{ObjectId, ObjectKind};
use crate::git::private::objects::LooseWriter;
use crate::git::private::{HeldTree, SnapshotRepo, TreeEntry};
use crate::tree::diff::BaseSource;

use super::*;

/// What the private repository needs of the user's index, kept from the selection so that
/// it is not read and parsed again (8 MB for 78,000 files): the stage-0 entries of the
/// snapshot's tracked files that were copied (modified, converted, or not in the user's
/// store), and the entries that stand for no file (see [`select::Selection::kept_out`]).
pub(super) struct ViewIndex {
    pub(super) copies: std::collections::HashMap<RelPath, IndexEntry>,
    pub(super) kept_out: Vec<IndexEntry>,
    /// The index file's mtime when it was read (git's racy-entry rule compares with it).
    pub(super) mtime: Option<Timestamp>,
    /// The tree of the user's index, when its cache-tree names it and the user's store holds
    /// it: the snapshot's, when the snapshot's entries are the index's.
    pub(super) known_tree: Option<HeldTree>,
}

/// What the maker of a sandbox's files knows of their stat data, so that the private index
/// is written without an `lstat` per file.
pub(super) enum Made<'a> {
    /// A copy's manifest: an entry `same_as_base` holds its node's content.
    Entries(&'a [ManifestEntry]),
    /// Per node of the base, in its order: the stat data of the view's file holding that
    /// node's content (`None`: no such file).
    ByNode(&'a [Option<StatKey>]),
}

/// The session's prepared private repository: not asked yet, or its answer (`None`: no git
/// repository for this session's sandboxes).
pub(super) struct GitView {
    enabled: bool,
    state: Mutex<Option<Option<Arc<SnapshotRepo>>>>,
}

impl GitView {
    /// A view that prepares nothing when `enabled` is false.
    pub(super) fn new(enabled: bool) -> GitView {
        GitView {
            enabled,
            state: Mutex::new(None),
        }
    }
}

impl SandboxManager {
    /// Writes the private repository into the sandbox being made at `dir`, whose files
    /// are `made` (entries marked `same_as_base` hold the snapshot's content with that stat
    /// data; `None`: every file holds its snapshot content and is `lstat`ed, as for a fresh
    /// sandbox made without a manifest). Nothing when the project is not in git or the view
    /// is off. Call it once the sandbox's files are in place, before tools see it.
    pub(super) fn add_git_repo(
        &self,
        sbase: &SessionBase,
        dir: &StatePath,
        made: Option<Made<'_>>,
    ) -> Result<()> {
        match self.git_view_of(sbase)? {
            Some(view) => write_sandbox_repo(&view, dir, &sbase.base.nodes, made),
            None => Ok(()),
        }
    }

    /// The session's [`SnapshotRepo`], prepared by the first caller.
    pub(super) fn git_view_of(&self, sbase: &SessionBase) -> Result<Option<Arc<SnapshotRepo>>> {
        if !self.git_view.enabled {
            return Ok(None);
        }
        let mut state = self.git_view.state.lock();
        if let Some(v) = state.as_ref() {
            return Ok(v.clone());
        }
        let view = match &sbase.repo {
            Some(repo) => {
                let store = self.path_in_state_dir(Path::new(layout::GIT_OBJECTS_DIR))?;
                // Written when the session began, before the snapshot.
                let began = std::fs::metadata(self.session_dir.join(layout::META_FILE))
                    .ok()
                    .map(|m| Timestamp::mtime_of(&m));
                Some(Arc::new(prepare(
                    &sbase.base,
                    &sbase.view_index,
                    repo,
                    store,
                    began,
                )?))
            }
            None => None,
        };
        *state = Some(view.clone());
        Ok(view)
    }
}

/// Prepares the private repository of the snapshot `base` of `repo`'s project (`index`: what
/// its selection kept of the user's index), its own objects written to `store`; `began` is
/// when the session began (before the snapshot).
fn prepare(
    base: &Base,
    index: &ViewIndex,
    repo: &GitRepo,
    store: StatePath,
    began: Option<Timestamp>,
) -> Result<SnapshotRepo> {
    let odb = match &base.odb {
        Some(o) => o.clone(),
        None => Arc::new(ObjectStore::open(&repo.git_dir)?),
    };
    let writer = LooseWriter::new(store, Some(&odb));
    let indexed = began
        .map(|t| indexed_copies(base, index, t))
        .unwrap_or_default();
    let mut copied = blobs_of_copies(base, &writer, &indexed)?;
    copied.extend(indexed);
    let mut entries = Vec::with_capacity(base.nodes.len());
    for (i, (n, src)) in base.nodes.iter().zip(&base.srcs).enumerate() {
        // Only a copied node is looked up (a few among tens of thousands of blobs).
        let oid = match src {
            BaseSrc::Blob(oid, _) => *oid,
            BaseSrc::Dir => match copied.get(&i) {
                Some(oid) => *oid,
                None => writer.write(ObjectKind::Blob, &base.read(i)?)?,
            },
        };
        entries.push(TreeEntry {
            path: n.rel.clone(),
            mode: n.kind.git_mode(),
            oid,
            skip_worktree: false,
        });
    }
    // A path git's own rules refuse (`..`, an empty component) cannot be in a tree: only a
    // damaged index holds one, and it is left out.
    entries.extend(index.kept_out.iter().filter_map(|e| {
        Some(TreeEntry {
            path: RelPath::from_bytes(&e.path).ok()?,
            mode: e.mode,
            oid: e.oid,
            skip_worktree: true,
        })
    }));
    SnapshotRepo::prepare_known(repo, &odb, entries, &writer, now_secs(), index.known_tree)
}

/// Base node indices with their blob ids.
type Blobs = Vec<(usize, ObjectId)>;

/// The blob ids of the base's copied nodes (modified and untracked files, symlinks) not
/// `known` already, each written to `writer` unless the user's store has it. Reading, hashing and compressing is
/// spread over the cores: a dirty tree may have thousands.
fn blobs_of_copies(
    base: &Base,
    writer: &LooseWriter<'_>,
    known: &std::collections::HashMap<usize, ObjectId>,
) -> Result<std::collections::HashMap<usize, ObjectId>> {
    let todo: Vec<usize> = (0..base.nodes.len())
        .filter(|&i| base.srcs[i] == BaseSrc::Dir && !known.contains_key(&i))
        .collect();
    let threads = crate::cores::io_threads(todo.len(), 64, 8);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let parts: Vec<Result<Blobs>> = crate::cores::workers(threads, || {
        let mut out = Vec::new();
        loop {
            let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(&i) = todo.get(k) else {
                return Ok(out);
            };
            out.push((i, writer.write(ObjectKind::Blob, &base.read(i)?)?));
        }
    });
    let mut map = std::collections::HashMap::with_capacity(todo.len());
    for p in parts {
        map.extend(p?);
    }
    Ok(map)
}

/// Copied files (index → blob id) whose blob is the one the user's index names: the project
/// file still has the entry's stat data (by git's rule, racy entries excluded) and was last
/// changed before the session began, so the snapshot copied exactly it. For a file git
/// converts (CRLF under a `text` attribute, filters) that blob is what git makes of the
/// file, not its bytes: the private index then agrees with git, and the file is not hashed.
fn indexed_copies(
    base: &Base,
    index: &ViewIndex,
    began: Timestamp,
) -> std::collections::HashMap<usize, ObjectId> {
    let mut out = std::collections::HashMap::new();
    let (Some(project), Some(index_mtime)) = (&base.project, index.mtime) else {
        return out;
    };
    if index.copies.is_empty() {
        return out;
    }
    for (i, n) in base.nodes.iter().enumerate() {
        if base.srcs[i] != BaseSrc::Dir || n.kind == NodeKind::Symlink {
            continue;
        }
        let Some(e) = index.copies.get(&n.rel) else {
            continue;
        };
        let Ok(m) = std::fs::symlink_metadata(project.join(n.rel.as_path())) else {
            continue;
        };
        if e.mode == n.kind.git_mode()
            && e.stat_matches(&LStat::from_metadata(&m), index_mtime)
            && Timestamp::ctime_of(&m) < began
        {
            out.insert(i, e.oid);
        }
    }
    out
}

/// Writes `view` into `<sandbox>/.git`. With `known` (the stat data of the sandbox's files
/// as they were made), an entry gets stat data only when its file is marked `same_as_base`;
/// without it, every file of the sandbox must hold its snapshot content (a fresh sandbox) and
/// is `lstat`ed.
fn write_sandbox_repo(
    view: &SnapshotRepo,
    sandbox: &StatePath,
    nodes: &[Node],
    known: Option<Made<'_>>,
) -> Result<()> {
    // Every file of a sandbox was made by this process in directories it made: its device,
    // owner and group are the sandbox directory's.
    let root = state_dir::symlink_metadata(sandbox)?;
    let dot_git = sandbox.child(&RelPath::new(".git")?);
    let entries = view.entries();
    let lstat = |e: &TreeEntry, key: &StatKey| {
        use std::os::unix::fs::MetadataExt;
        (!e.skip_worktree && key.mode & 0o170000 != 0o040000).then_some(LStat {
            size: key.size,
            mtime: key.mtime,
            ctime: key.ctime,
            dev: root.dev(),
            ino: key.ino,
            uid: root.uid(),
            gid: root.gid(),
            mode: key.mode,
        })
    };
    // Each entry's stat data is taken where the maker left it, found by a position per entry
    // (not copied: 78,000 stat records would be 5 MB of fresh memory per sandbox).
    match known {
        Some(Made::Entries(made)) => {
            let mut same: Vec<&ManifestEntry> = made.iter().filter(|e| e.same_as_base).collect();
            same.sort_by(|a, b| a.rel.as_bytes().cmp(b.rel.as_bytes()));
            let pos: Vec<Option<usize>> = at_paths(entries, &same, |m| m.rel.as_bytes()).collect();
            view.write_into(&dot_git, &|i| lstat(&entries[i], &same[pos[i]?].key))
        }
        // Both lists in path order: one merge, no sort.
        Some(Made::ByNode(keys)) => {
            let pos: Vec<Option<usize>> = at_paths(entries, nodes, |n| n.rel.as_bytes()).collect();
            view.write_into(&dot_git, &|i| {
                lstat(&entries[i], keys.get(pos[i]?)?.as_ref()?)
            })
        }
        None => {
            let stats: Vec<Option<LStat>> = entries
                .iter()
                .map(|e| {
                    if e.skip_worktree {
                        return None;
                    }
                    let m = state_dir::symlink_metadata(&sandbox.child(&e.path)).ok()?;
                    Some(LStat::from_metadata(&m))
                })
                .collect();
            view.write_into(&dot_git, &|i| stats[i])
        }
    }
}

/// For each of the view's `entries`, the position in `items` of the item at its path, if
/// any: one merge of two lists in path-byte order.
fn at_paths<'a, T>(
    entries: &'a [TreeEntry],
    items: &'a [T],
    path: impl Fn(&T) -> &[u8] + 'a,
) -> impl Iterator<Item = Option<usize>> + 'a {
    let mut j = 0;
    entries.iter().map(move |e| {
        while j < items.len() && path(&items[j]) < e.path.as_bytes() {
            j += 1;
        }
        (j < items.len() && path(&items[j]) == e.path.as_bytes()).then_some(j)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .env("HOME", dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// Without a manifest (a sandbox made some other way), every file is `lstat`ed: the
    /// index is as good as with one.
    #[test]
    fn without_a_manifest_the_files_are_statted() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("p");
        std::fs::create_dir_all(project.join("d")).unwrap();
        std::fs::write(project.join("a"), "a\n").unwrap();
        std::fs::write(project.join("d/b"), "b\n").unwrap();
        git(&project, &["init", "-q"]);
        git(&project, &["add", "-A"]);
        git(&project, &["commit", "-qm", "c"]);
        std::fs::write(project.join("u"), "untracked\n").unwrap();
        let mgr = SandboxManager::with_options(
            &project,
            Options {
                root: Some(tmp.path().join("root")),
                no_prune_on_start: true,
                ..Options::default()
            },
        )
        .unwrap();
        let sb = mgr.create_sandbox("t", None).unwrap();
        let dir = mgr.path_in_state_dir(&sb.path).unwrap();
        state_dir::remove_tree(&dir.child(&RelPath::new(".git").unwrap())).unwrap();
        let sbase = mgr.ensure_base().unwrap();
        mgr.add_git_repo(&sbase, &dir, None).unwrap();
        assert_eq!(git(&sb.path, &["diff-files", "--name-only"]), "");
        assert_eq!(git(&sb.path, &["status", "--porcelain"]), "");
        assert_eq!(git(&sb.path, &["ls-files"]), "a\nd/b\nu\n");
    }
}
