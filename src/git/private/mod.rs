//! A sandbox's private git repository: the `.git` that makes a sandbox of a git project a work
//! tree of its own, so `git status`, `git diff`, `git log`, `git grep` and `git blame` work in
//! it and show what the delegation changed — while nothing a tool does with git there
//! (commit, add, tag, stash, gc) can reach the user's repository.
//!
//! The rest of [`crate::git`] only reads; this module writes, and only into directories of
//! the library's session: a session-wide objects directory (the snapshot's own objects) and
//! each sandbox's `.git`. The user's repository is reached read-only, through
//! `objects/info/alternates`.
//!
//! # What the private repository holds
//!
//! * **`HEAD` is the snapshot.** The snapshot is the project as the session found it,
//!   uncommitted changes and untracked (not ignored) files included. When that equals the
//!   user's `HEAD` commit, the private `HEAD` is that commit. Otherwise it is a *snapshot
//!   commit* of patchbox whose tree is the snapshot and whose parent is the user's `HEAD`
//!   commit. So `git diff HEAD` and `git status` in a sandbox show exactly the
//!   delegation's changes — the same set its patch holds — and not the user's own
//!   uncommitted work, which `git show HEAD` shows instead; `git log` and `git blame` see the
//!   user's history below it. When the project is a subdirectory of its work tree, the
//!   snapshot commit has no parent (the user's commits are of the whole tree); so it has
//!   when the user's `HEAD` cannot be read (a reftable repository, a broken ref), and the
//!   private `HEAD` is then detached.
//! * **The index is the snapshot's**, each entry with the stat data of the sandbox file it
//!   describes when that file is known to hold the snapshot's content ([`index_write`]), so
//!   git does not rehash a large tree.
//! * **`HEAD` is on the user's branch** (same name; `git status` says "On branch main"),
//!   or detached when the user's is. The user's branches, tags, remote-tracking branches and
//!   notes are copied as they were into `packed-refs` (read by [`crate::git::refs`]), so
//!   `git log origin/main..` works; `refs/stash` is not copied.
//! * **Objects**: `objects/info/alternates` lists the session's snapshot objects, then every
//!   objects directory of the user's store (its own alternates included). Git writes new
//!   objects only into the repository's own `objects/`, so commits, tags and stashes made in
//!   a sandbox stay there and go with it.
//! * **Configuration is minimal**: the repository format, `core.ignoreCase`, the user's
//!   `core.excludesFile` and `core.attributesFile` as absolute paths, the user's
//!   `info/exclude` (so git's untracked files are the ones a patch would carry), `gc.auto=0`.
//!   Nothing of the user's repository configuration is copied, so its hooks (its `hooks/`
//!   and any repository `core.hooksPath`) never run in a sandbox; the user's global and
//!   system configuration apply as in any repository. A shallow clone's `shallow` file is
//!   copied, so `git log` stops where the user's does.
//! * **Blobs are the snapshot's.** The caller gives each entry's blob: for the session
//!   manager, the user's blob when the user's index describes the file as the snapshot
//!   holds it (also for a file git converts on check-in, a CRLF file under a `text`
//!   attribute, say), else the hash of the snapshot's bytes. A converted file changed since
//!   the user's index saw it is thus recorded as its bytes, not as the blob git would make:
//!   once touched, git in the sandbox may show its line endings as changed. Patches are not
//!   affected.
//! * **Gitlinks and sparse entries** (submodules and skip-worktree paths, which a snapshot
//!   does not hold) stay in the tree and index with the skip-worktree bit, so `git status`
//!   does not report them deleted.
//!
//! Git may refresh the modification time of a user's pack or loose object when a tool in a
//! sandbox writes an object the user's store already has (its "freshening"); contents, refs,
//! index and configuration of the user's repository never change, and a confined tool
//! cannot even do that (git then writes the object privately).
//!
//! ```
//! use patchbox::git::oid::ObjectId;
//! use patchbox::git::private::TreeEntry;
//! let path = patchbox::RelPath::new("README").unwrap();
//! let e = TreeEntry { path, mode: 0o100644, oid: ObjectId::default(), skip_worktree: false };
//! assert!(!e.skip_worktree);
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::fs::relpath::RelPath;
use crate::fs::state_dir::{self, StatePath};
use crate::git::index::LStat;
use crate::git::odb::ObjectStore;
use crate::git::oid::{ObjectId, ObjectKind};
use crate::git::refs::{read_head, read_refs, Head};
use crate::git::repo::GitRepo;

pub mod index_write;
pub mod objects;

use objects::{commit_bytes, commit_tree, write_trees, LooseWriter};

/// One path of a snapshot, as its tree and index hold it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeEntry {
    /// The path relative to the sandbox. A [`RelPath`] shares its bytes: a snapshot's
    /// entries take the paths of its nodes without copying 78,000 of them.
    pub path: RelPath,
    /// Git mode: `0o100644`, `0o100755`, `0o120000` or `0o160000`.
    pub mode: u32,
    /// The blob (or, for a gitlink, commit) id.
    pub oid: ObjectId,
    /// Not in the sandbox (a submodule, a sparse path): git leaves its file alone.
    pub skip_worktree: bool,
}

/// The tree of the user's whole index as git's cache-tree records it, with a digest of the
/// entries it stands for ([`entries_digest`]): a snapshot whose entries have that digest
/// has that tree, already in the user's store, and none of its trees is written again (on
/// a clean checkout of 78,000 files, some 5,000 trees hashed and looked up for nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownTree {
    /// The root tree id the index's cache-tree holds.
    pub tree: ObjectId,
    /// [`entries_digest`] of the index entries the tree was made of.
    pub digest: [u8; 20],
}

impl KnownTree {
    /// This tree, once `store` is seen to hold it: only then may a snapshot take it as its
    /// own (a cache-tree may name a tree that was never written, or was pruned).
    pub fn held_by(self, store: &ObjectStore) -> Option<HeldTree> {
        store.contains(&self.tree).then_some(HeldTree(self))
    }
}

/// A [`KnownTree`] the user's object store was seen to hold ([`KnownTree::held_by`]): what
/// [`SnapshotRepo::prepare_known`] takes, so that the store is asked once per session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldTree(KnownTree);

impl HeldTree {
    /// The tree and its digest.
    pub fn known(&self) -> &KnownTree {
        &self.0
    }
}

/// A SHA-1 over each entry's path (its length first), git mode and id, in the given order:
/// equal digests mean equal lists of entries, so equal trees.
///
/// ```
/// use patchbox::git::oid::ObjectId;
/// use patchbox::git::private::entries_digest;
/// let id = ObjectId::default();
/// let a = entries_digest([(&b"a"[..], 0o100644, &id)]);
/// assert_eq!(a, entries_digest([(&b"a"[..], 0o100644, &id)]));
/// assert_ne!(a, entries_digest([(&b"a"[..], 0o100755, &id)]));
/// ```
pub fn entries_digest<'a>(
    entries: impl IntoIterator<Item = (&'a [u8], u32, &'a ObjectId)>,
) -> [u8; 20] {
    let mut d = crate::git::list_digest::ListDigest::new();
    for (path, mode, oid) in entries {
        d.record(|r| {
            r.path(path);
            r.bytes(&mode.to_le_bytes());
            r.bytes(oid.as_bytes());
        });
    }
    d.finish()
}

/// What every sandbox's private repository of one session is made from; prepared once per
/// session ([`SnapshotRepo::prepare`]), written into each sandbox
/// ([`SnapshotRepo::write_into`]).
#[derive(Debug)]
pub struct SnapshotRepo {
    /// Sorted by path bytes, one per path, no path below another.
    entries: Vec<TreeEntry>,
    /// The branch `HEAD` is on (`refs/heads/…`); `None`: detached.
    branch: Option<String>,
    /// The commit `HEAD` names; `None`: unborn (an empty snapshot of a repository without
    /// commits).
    commit: Option<ObjectId>,
    /// `commit` is a snapshot commit of patchbox (not one of the user's).
    snapshot_commit: bool,
    /// The user's refs, copied.
    refs: BTreeMap<String, ObjectId>,
    /// Objects directories, in `alternates` order.
    alternates: Vec<PathBuf>,
    /// The user's `shallow` file.
    shallow: Option<Vec<u8>>,
    /// The user's `info/exclude`.
    exclude: Option<Vec<u8>>,
    /// The private `config`.
    config: Vec<u8>,
}

impl SnapshotRepo {
    /// Prepares the private repository of a snapshot of `repo`'s work tree (or of its
    /// subdirectory `repo.prefix`, which `entries` are relative to): writes the snapshot's
    /// trees, and its snapshot commit when it differs from the user's `HEAD` commit, through
    /// `objects` (whose blobs the caller has written), dated `time`.
    ///
    /// `entries` are sorted and deduplicated here; a path that is also a directory of another
    /// path is dropped (a tree cannot hold both).
    pub fn prepare(
        repo: &GitRepo,
        user: &ObjectStore,
        entries: Vec<TreeEntry>,
        objects: &LooseWriter<'_>,
        time: u64,
    ) -> Result<SnapshotRepo> {
        SnapshotRepo::prepare_known(repo, user, entries, objects, time, None)
    }

    /// [`prepare`](Self::prepare), given what the user's index says of its own tree: when
    /// the entries (sorted, deduplicated) are exactly the ones `known` was made of, its tree
    /// (which the user's store holds) is the snapshot's and no tree is written (for a
    /// project that is its whole work tree).
    pub fn prepare_known(
        repo: &GitRepo,
        user: &ObjectStore,
        mut entries: Vec<TreeEntry>,
        objects: &LooseWriter<'_>,
        time: u64,
        known: Option<HeldTree>,
    ) -> Result<SnapshotRepo> {
        entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        entries.dedup_by(|b, a| a.path.as_bytes() == b.path.as_bytes());
        drop_directory_clashes(&mut entries);
        // The user's index already names this tree when the entries are its entries.
        let known = known.map(|h| *h.known()).filter(|k| {
            repo.prefix.is_none()
                && entries_digest(entries.iter().map(|e| (e.path.as_bytes(), e.mode, &e.oid)))
                    == k.digest
        });
        let tree = match known {
            Some(k) => k.tree,
            None => write_trees(&entries, objects)?,
        };
        // A `HEAD` or refs that cannot be read cost the snapshot its history, not the sandbox.
        let head = read_head(&repo.git_dir, &repo.common_dir).ok();
        let user_commit = head.as_ref().and_then(Head::commit);
        let user_tree = match user_commit {
            Some(c) => match user.read_object(&c) {
                Ok(Some((ObjectKind::Commit, data))) => commit_tree(&data),
                _ => None,
            },
            None => None,
        };
        // A parent that cannot be read would break `git log`: the snapshot then stands alone.
        let parent = user_tree.and(user_commit).filter(|_| repo.prefix.is_none());
        let (commit, snapshot_commit) = if repo.prefix.is_none() && user_tree == Some(tree) {
            (user_commit, false)
        } else if entries.is_empty() && parent.is_none() {
            (None, false)
        } else {
            let message = match &repo.prefix {
                None => "patchbox snapshot: the project as the session found it\n\n\
                         Uncommitted changes and untracked files of the user's work tree, on\n\
                         top of its HEAD. A sandbox's own changes are the difference to this."
                    .to_string(),
                Some(p) => format!(
                    "patchbox snapshot of {p}/ as the session found it\n\n\
                     The project is a subdirectory of its work tree; paths here are relative\n\
                     to it, so this commit has no parent."
                ),
            };
            let bytes = commit_bytes(&tree, parent.as_ref(), time, &message);
            (Some(objects.write(ObjectKind::Commit, &bytes)?), true)
        };
        let branch = match head {
            Some(Head::Branch { name, .. }) if is_branch_name(&name) => Some(name),
            _ => None,
        };
        let mut refs = read_refs(&repo.common_dir).unwrap_or_default();
        if let Some(b) = &branch {
            refs.remove(b);
        }
        let mut alternates = Vec::new();
        if objects.wrote_any() {
            alternates.push(objects.dir().as_path().to_path_buf());
        }
        alternates.extend(user.object_dirs().iter().cloned());
        Ok(SnapshotRepo {
            entries,
            branch,
            commit,
            snapshot_commit,
            refs,
            alternates,
            shallow: read_optional(&repo.common_dir.join("shallow"))?,
            exclude: read_optional(&repo.common_dir.join("info").join("exclude"))?,
            config: config_text(repo),
        })
    }

    /// The snapshot's entries, sorted by path bytes: entry `i` of the index is `entries()[i]`.
    pub fn entries(&self) -> &[TreeEntry] {
        &self.entries
    }

    /// The commit the private `HEAD` names (`None`: unborn).
    pub fn head_commit(&self) -> Option<ObjectId> {
        self.commit
    }

    /// Whether `HEAD` is a snapshot commit of patchbox rather than the user's `HEAD` commit.
    pub fn is_snapshot_commit(&self) -> bool {
        self.snapshot_commit
    }

    /// Writes the private repository into `dot_git` (a sandbox's `.git`, which must not
    /// exist yet or be empty), the index with entry `i` given the stat data `stat(i)` — which
    /// must be `None` unless the sandbox's file has stat data `stat(i)` and the entry's content.
    pub fn write_into(
        &self,
        dot_git: &StatePath,
        stat: &dyn Fn(usize) -> Option<LStat>,
    ) -> Result<()> {
        let at = |rel: &str| -> Result<StatePath> { Ok(dot_git.child(&RelPath::new(rel)?)) };
        for d in [
            "objects/info",
            "objects/pack",
            "refs/heads",
            "refs/tags",
            "info",
        ] {
            state_dir::create_dir_all(&at(d)?)?;
        }
        state_dir::write_scratch(&at("config")?, &self.config)?;
        let mut alt = Vec::new();
        for a in &self.alternates {
            alt.extend_from_slice(a.as_os_str().as_encoded_bytes());
            alt.push(b'\n');
        }
        state_dir::write_scratch(&at("objects/info/alternates")?, &alt)?;
        if !self.refs.is_empty() {
            let mut packed = b"# pack-refs with: sorted \n".to_vec();
            for (name, oid) in &self.refs {
                packed.extend_from_slice(format!("{oid} {name}\n").as_bytes());
            }
            state_dir::write_scratch(&at("packed-refs")?, &packed)?;
        }
        if let Some(s) = &self.shallow {
            state_dir::write_scratch(&at("shallow")?, s)?;
        }
        if let Some(x) = &self.exclude {
            state_dir::write_scratch(&at("info/exclude")?, x)?;
        }
        state_dir::write_scratch_streamed(&at("index")?, |f| {
            index_write::write_index(&self.entries, stat, f)
        })?;
        let head = match (&self.branch, self.commit) {
            (Some(b), commit) => {
                if let Some(c) = commit {
                    let file = at(b)?;
                    if let Some(parent) = RelPath::new(b)?.parent() {
                        state_dir::create_dir_all(&dot_git.child(&parent))?;
                    }
                    state_dir::write_scratch(&file, format!("{c}\n").as_bytes())?;
                }
                format!("ref: {b}\n")
            }
            (None, Some(c)) => format!("{c}\n"),
            (None, None) => "ref: refs/heads/main\n".to_string(),
        };
        state_dir::write_scratch(&at("HEAD")?, head.as_bytes())
    }
}

/// Whether `name` is `refs/heads/…` and a ref name git accepts (`check-ref-format`'s rules:
/// no empty, `.`-led or `.lock`-ended component, no `..`, `@{`, control characters or any of
/// `` ~^:?*[\``); reftable's placeholder `refs/heads/.invalid` is not.
fn is_branch_name(name: &str) -> bool {
    name.strip_prefix("refs/heads/")
        .is_some_and(|b| !b.is_empty())
        && !name.contains("..")
        && !name.contains("@{")
        && !name.ends_with('.')
        && !name
            .bytes()
            .any(|c| c < 0x20 || c == 0x7f || b" ~^:?*[\\".contains(&c))
        && name
            .split('/')
            .all(|c| !c.is_empty() && !c.starts_with('.') && !c.ends_with(".lock"))
}

/// Removes every entry whose path is also a directory of another entry's path, from
/// entries sorted by path bytes.
///
/// One pass, no lookups: when `p` and `p/…` are both there, every entry sorted between them
/// starts with `p` too (it lies between two strings that do). So a stack holding the chain
/// of earlier entries that are prefixes of one another keeps `p` until `p/…` comes, and the
/// deepest entry on it that is a prefix of the current path is the one to test.
fn drop_directory_clashes(entries: &mut Vec<TreeEntry>) {
    let mut clash = vec![false; entries.len()];
    let mut chain: Vec<usize> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let path = e.path.as_bytes();
        while let Some(&top) = chain.last() {
            if path.starts_with(entries[top].path.as_bytes()) {
                break;
            }
            chain.pop();
        }
        if let Some(&top) = chain.last() {
            if path.get(entries[top].path.as_bytes().len()) == Some(&b'/') {
                clash[top] = true;
            }
        }
        chain.push(i);
    }
    let mut i = 0;
    entries.retain(|_| {
        i += 1;
        !clash[i - 1]
    });
}

fn read_optional(p: &std::path::Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(p) {
        Ok(d) => Ok(Some(d)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", p, e)),
    }
}

/// The private repository's configuration (see the module documentation).
fn config_text(repo: &GitRepo) -> Vec<u8> {
    let mut c = String::from(
        "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
         \tlogallrefupdates = true\n\tsymlinks = true\n",
    );
    c.push_str(&format!("\tignorecase = {}\n", repo.ignore_case));
    let quoted = |p: &std::path::Path| -> Option<String> {
        let s = p.to_str()?;
        (!s.contains('\n')).then(|| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")))
    };
    if let Some(q) = repo.excludes_file.as_deref().and_then(quoted) {
        c.push_str(&format!("\texcludesFile = {q}\n"));
    }
    if let Some(q) = repo.attributes_file.as_deref().and_then(quoted) {
        c.push_str(&format!("\tattributesFile = {q}\n"));
    }
    c.push_str("[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n");
    c.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_follow_gits_rules() {
        for ok in ["refs/heads/main", "refs/heads/feat/x-1", "refs/heads/a.b"] {
            assert!(is_branch_name(ok), "{ok}");
        }
        for bad in [
            "refs/heads/.invalid",
            "refs/heads/",
            "refs/tags/v1",
            "refs/heads/a..b",
            "refs/heads/x.lock",
            "refs/heads/a b",
            "refs/heads/a//b",
            "refs/heads/a.",
        ] {
            assert!(!is_branch_name(bad), "{bad}");
        }
    }

    #[test]
    fn clashing_paths_are_dropped() {
        let e = |p: &[u8]| TreeEntry {
            path: RelPath::from_bytes(p).unwrap(),
            mode: 0o100644,
            oid: ObjectId::default(),
            skip_worktree: false,
        };
        let mut v = vec![e(b"a"), e(b"a-x"), e(b"a.c"), e(b"a/b"), e(b"b")];
        drop_directory_clashes(&mut v);
        let paths: Vec<&[u8]> = v.iter().map(|e| e.path.as_bytes()).collect();
        assert_eq!(paths, [&b"a-x"[..], b"a.c", b"a/b", b"b"]);
    }

    /// The one-pass check drops exactly the paths some other path lies under, whatever sorts
    /// between them (checked against the definition over every list of a small alphabet).
    #[test]
    fn the_one_pass_clash_check_matches_its_definition() {
        let names: Vec<Vec<u8>> = [
            "a", "a-b", "a.b", "a/b", "a/b/c", "a/b-c", "a/bc", "ab", "a-b/c",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        for mask in 1u32..(1 << names.len()) {
            let mut paths: Vec<&Vec<u8>> = (0..names.len())
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| &names[i])
                .collect();
            paths.sort();
            let mut v: Vec<TreeEntry> = paths
                .iter()
                .map(|p| TreeEntry {
                    path: RelPath::from_bytes(p).unwrap(),
                    mode: 0o100644,
                    oid: ObjectId::default(),
                    skip_worktree: false,
                })
                .collect();
            let want: Vec<&[u8]> = paths
                .iter()
                .filter(|p| {
                    !paths
                        .iter()
                        .any(|q| q.len() > p.len() && q.starts_with(p) && q[p.len()] == b'/')
                })
                .map(|p| p.as_slice())
                .collect();
            drop_directory_clashes(&mut v);
            let got: Vec<&[u8]> = v.iter().map(|e| e.path.as_bytes()).collect();
            assert_eq!(got, want, "{paths:?}");
        }
    }
}
