//! The write-ahead journal of the write phase, the project lock, and crash recovery.
//!
//! Every apply and every undo goes through [`txn::commit`](super::txn), which works in a
//! private staging directory `.patchbox-txn-<ulid>` in the project root (renames must stay on
//! one file system). The journal lives in that directory, beside the staged files (`s<i>`,
//! the new contents of op `i`) and the originals moved aside (`b<i>`):
//!
//! ```text
//! begin     written first: the root's and every touched directory's mode and mtime,
//!           and the undo record being written (to delete it if the change never happens)
//! intent    the ops: path, the stamp the original must have, what is placed there (perm
//!           and sha1 of a file or the target of a link, and the inode of the staged entry)
//! abort     `intent` renamed: the change is being rolled back
//! done      `intent` renamed: the change is complete, only cleanup is left
//! ```
//!
//! The states and what recovery does in each (a crash can happen at any instant):
//!
//! ```text
//! state     on disk                              recovery
//! STAGING   stage dir, maybe begin, s<i>, the    roll back: delete s<i> and the journal,
//!           record being written; no intent      delete the record, restore the root mtime
//! INTENT    intent (durable: written, then one   roll forward: move the remaining
//!           syncfs of the project's file system  originals aside, prune/create
//!           before the first original moves)     directories, place the remaining s<i>,
//!                                                write the record's marker, → DONE; if an
//!                                                original changed since → ABORT
//! ABORT     abort                                roll back from what is on disk: take
//!                                                placed entries back (by inode), remove
//!                                                created directories, recreate removed
//!                                                ones, move b<i> back, restore mtimes
//! DONE      done (the record's marker is synced) delete b<i> and the journal, set the final
//!                                                mtimes (undo)
//! ```
//!
//! A file replaced in place is swapped with its staged entry (`RENAME_EXCHANGE`) rather than
//! moved aside to `b<i>` and replaced: the original then sits at `s<i>` while the staged
//! inode is at its path. Recovery first renames every such original to `b<i>`
//! ([`unswap`](super::recover::unswap)), which gives the state two renames would have left,
//! then goes on as the table says.
//!
//! Every recovery step looks at the file system before acting, so a crash during recovery
//! is recovered by the next one. Roll-forward is sound because at INTENT everything it needs
//! is durable: the staged contents (checked against the sha1s in `intent` before anything
//! moves), the undo record, and the intent itself. The undo record is complete before the
//! intent is written and is marked `applied` (synced) before `done`; recovery of an INTENT
//! writes that marker, so a record is usable from the moment the first original moves.
//!
//! The project is locked (`flock` on the root directory) for the whole write phase, the
//! recovery included, so recovery never touches a live transaction of another process.
//!
//! Cost: one `syncfs` after the intent (which also makes the staged files and an undo record
//! on the same file system durable), one after the renames and the record's marker (an
//! `fsync` of the marker and its directory instead when the record is on another file
//! system). A batch of applies (`commit_all`) may share that second sync: each stays at
//! INTENT, its change in place, until the batch's one sync per filesystem, then goes to
//! DONE; a crash before is recovered as a crash before a lone apply's second sync. A `syncfs` is a superset of `fsync` of each file and directory. The cleanup after
//! DONE is not synced: a crash that loses it leaves the staging directory with its `done`,
//! which recovery removes. Staged files have their writeback started as they are written
//! (`sync_file_range`), so the intent's `syncfs` finds their data under way. The marker is
//! created before that last sync, so a crash may leave it with the intent still in place:
//! recovery then completes the change (the marker was right) or rolls it back, removing
//! the record with its marker.
//!
//! The staging directory's name also carries the root's mtime from before it was made
//! (`.patchbox-txn-<ulid>.<s>.<ns>`), so even a crash before `begin` is written ends with
//! the root's mtime restored.
//!
//! Known limits: after a power loss in STAGING, `begin` may be lost while an undo record kept elsewhere
//! survives: such a record never gets its `applied` marker, is never offered for undo, and is
//! pruned by age (see [`store`](super::store)).

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::change::{sorted_paths, Prune};
use crate::error::{Error, IoContext, Result};
use crate::fs::project::{Entry, Stamp};
use crate::fs::relpath::RelPath;
use crate::fs::Timestamp;
use crate::git::oid::{blob_id, from_hex as unhex, to_hex as hex, ObjectId};

/// Prefix of a staging directory in the project root.
pub(crate) const STAGE_PREFIX: &str = ".patchbox-txn-";

/// The component of `rel` that names one of the library's own files in a project, if any:
/// a staging directory (`.patchbox-txn-…`, matched without regard to ASCII case, for
/// case-folding filesystems). Recovery takes every such entry of the root for an
/// interrupted transaction, so a patch may not name one on either side: a file renamed
/// into one would be removed as debris by the next apply or undo. Any component counts,
/// not only the first: a subdirectory may be a project of its own.
pub(crate) fn reserved_component(rel: &RelPath) -> Option<&[u8]> {
    let prefix = STAGE_PREFIX.as_bytes();
    rel.as_bytes()
        .split(|&b| b == b'/')
        .find(|c| c.len() >= prefix.len() && c[..prefix.len()].eq_ignore_ascii_case(prefix))
}
const BEGIN_HEADER: &str = "patchbox-txn-begin 2";
const INTENT_HEADER: &str = "patchbox-txn-intent 2";
/// The headers of journals whose path lists are all written in full (read still).
const BEGIN_HEADER_V1: &str = "patchbox-txn-begin 1";
const INTENT_HEADER_V1: &str = "patchbox-txn-intent 1";

fn path_from(b: Vec<u8>) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(b))
}

fn path_hex(p: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    hex(p.as_os_str().as_bytes())
}

/// A list of paths written one per line, each relative to the one before it (front
/// coding), so that the directories above a deep path, listed one by one, take text
/// proportional to the path and not to its length times its depth. A path that shares
/// whole leading components with the path before it in the list is written
/// `+<n>:<hex of the rest>`: the first `n` bytes of the path before (those components),
/// then `/` and the rest (an empty rest: just those components, an ancestor of the path
/// before). Any other path is written in full, as hex. Hex never starts with `+`, so a
/// reader of the older form (every path in full) refuses the newer one instead of
/// misreading it. Used by the journal's `begin` and `intent` and by undo records.
#[derive(Default)]
pub(crate) struct PathCoder {
    prev: Option<RelPath>,
}

impl PathCoder {
    /// The field for `p`, the next path of the list. Costs one comparison of bytes with
    /// the path before (the length of their common prefix).
    pub(crate) fn encode(&mut self, p: &RelPath) -> String {
        let b = p.as_bytes();
        let shared = self
            .prev
            .as_ref()
            .map_or(0, |q| shared_prefix(q.as_bytes(), b));
        let field = if shared == 0 {
            hex(b)
        } else {
            let rest = b.get(shared + 1..).unwrap_or_default();
            format!("+{shared}:{}", hex(rest))
        };
        self.prev = Some(p.clone());
        field
    }
}

/// Reads a list that [`PathCoder`] wrote, field by field; [`finish`](PathDecoder::finish)
/// gives the paths. A path below the one before it (the next directory of a chain) is
/// appended to the same bytes, and each path is a prefix of them (see [`RelPath`]'s
/// shared bytes), so the directories of a chain thousands deep take memory and time
/// proportional to the chain, not to its length times its depth; they also compare with
/// each other by their lengths alone. Only a path that leaves the chain (a sibling, an
/// unrelated path) starts new bytes.
#[derive(Default)]
pub(crate) struct PathDecoder {
    /// The bytes of each chain, each a normal path.
    chains: Vec<Vec<u8>>,
    /// Each path read: its chain and its length there.
    paths: Vec<(usize, usize)>,
}

impl PathDecoder {
    /// Reads `field`, the next field of the list; `None` when it is not one.
    pub(crate) fn push(&mut self, field: &str) -> Option<()> {
        let at = match field.strip_prefix('+') {
            None => self.start(RelPath::from_bytes(&unhex(field)?).ok()?.as_bytes()),
            Some(rel) => {
                let (n, rest) = rel.split_once(':')?;
                let n: usize = n.parse().ok()?;
                let rest = unhex(rest)?;
                let &(c, len) = self.paths.last()?;
                let chain = self.chains.get_mut(c)?;
                let q = chain.get(..len)?;
                if n == 0 || n > q.len() || q.get(n).is_some_and(|&x| x != b'/') {
                    return None;
                }
                if rest.is_empty() {
                    // An ancestor of the path before.
                    (c, n)
                } else {
                    let rest = RelPath::from_bytes(&rest).ok()?;
                    if n == chain.len() {
                        // Below the end of the chain: the chain grows.
                        chain.push(b'/');
                        chain.extend_from_slice(rest.as_bytes());
                        (c, chain.len())
                    } else {
                        let mut b = chain.get(..n)?.to_vec();
                        b.push(b'/');
                        b.extend_from_slice(rest.as_bytes());
                        self.start(&b)
                    }
                }
            }
        };
        self.paths.push(at);
        Some(())
    }

    /// A new chain holding `b`, a normal path.
    fn start(&mut self, b: &[u8]) -> (usize, usize) {
        self.chains.push(b.to_vec());
        (self.chains.len() - 1, b.len())
    }

    /// The paths read, in order.
    pub(crate) fn finish(self) -> Option<Vec<RelPath>> {
        let chains = self
            .chains
            .iter()
            .map(|b| RelPath::from_bytes(b).ok())
            .collect::<Option<Vec<_>>>()?;
        self.paths
            .iter()
            .map(|&(c, len)| chains.get(c)?.prefix_at(len))
            .collect()
    }
}

/// The length in bytes of the whole leading components `a` and `b` share (0: none).
fn shared_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    // Two prefixes of the same bytes (the directories of a chain, listed in order): they
    // share all of the shorter one, nothing to compare.
    let same = a.as_ptr() == b.as_ptr();
    // Below the path before (a directory listed before what is below it): one comparison.
    if b.len() > a.len() && (same || b.starts_with(a)) && b[a.len()] == b'/' {
        return a.len();
    }
    let mut c = if same { n } else { 0 };
    while c + 64 <= n && a[c..c + 64] == b[c..c + 64] {
        c += 64;
    }
    while c < n && a[c] == b[c] {
        c += 1;
    }
    let boundary = |s: &[u8]| s.get(c).is_none_or(|&x| x == b'/');
    if boundary(a) && boundary(b) {
        c
    } else {
        a[..c].iter().rposition(|&x| x == b'/').unwrap_or(0)
    }
}

// ------------------------------------------------------------------------------------------
// Journal contents
// ------------------------------------------------------------------------------------------

/// A directory as it was before the change: restored on rollback and by undo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DirInfo {
    pub rel: RelPath,
    pub perm: u32,
    pub mtime: Timestamp,
}

/// The root's mtime and every directory the change touches, before it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Dirs {
    pub root_mtime: Timestamp,
    pub dirs: Vec<DirInfo>,
}

/// The `begin` file.
#[derive(Clone, Debug, Default)]
pub(crate) struct Begin {
    pub dirs: Dirs,
    /// The undo record being written and whether the library created its directory.
    pub record: Option<(PathBuf, bool)>,
}

/// What op `i` places.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum JAfter {
    Absent,
    File { perm: u32, sha1: ObjectId, ino: u64 },
    Link { target: Vec<u8>, ino: u64 },
}

impl JAfter {
    pub(crate) fn ino(&self) -> Option<u64> {
        match self {
            JAfter::Absent => None,
            JAfter::File { ino, .. } | JAfter::Link { ino, .. } => Some(*ino),
        }
    }
}

/// One op of the `intent` file.
#[derive(Clone, Debug)]
pub(crate) struct JOp {
    pub rel: RelPath,
    pub expect: Option<Stamp>,
    pub before_is_dir: bool,
    pub after: JAfter,
}

/// The `intent` file (also `abort` and `done`, which are it renamed).
#[derive(Clone, Debug)]
pub(crate) struct Intent {
    pub ops: Vec<JOp>,
    pub prune: Prune,
    /// Mode (and mtime) of directories to recreate (undo).
    pub restore: BTreeMap<RelPath, (u32, Timestamp)>,
    /// Mtimes to set once the staging directory is gone (`None`: the root).
    pub finals: Vec<(Option<RelPath>, Timestamp)>,
    /// The marker file to write (synced) once the change is complete.
    pub marker: Option<PathBuf>,
}

fn stamp_text(s: &Option<Stamp>) -> String {
    match s {
        None => "-".into(),
        Some(s) => format!(
            "{}:{}:{}:{}:{}:{}:{}:{}",
            s.dev, s.ino, s.mode, s.size, s.mtime.secs, s.mtime.nanos, s.ctime.secs, s.ctime.nanos
        ),
    }
}

fn parse_stamp(t: &str) -> Option<Option<Stamp>> {
    if t == "-" {
        return Some(None);
    }
    let f: Vec<&str> = t.split(':').collect();
    let [dev, ino, mode, size, ms, mns, cs, cns] = f.as_slice() else {
        return None;
    };
    Some(Some(Stamp {
        dev: dev.parse().ok()?,
        ino: ino.parse().ok()?,
        mode: mode.parse().ok()?,
        size: size.parse().ok()?,
        mtime: Timestamp::new(ms.parse().ok()?, mns.parse().ok()?),
        ctime: Timestamp::new(cs.parse().ok()?, cns.parse().ok()?),
    }))
}

impl Begin {
    pub(crate) fn to_text(&self) -> String {
        let mut t = format!(
            "{BEGIN_HEADER}\nroot {} {}\n",
            self.dirs.root_mtime.secs, self.dirs.root_mtime.nanos
        );
        let mut coder = PathCoder::default();
        for d in &self.dirs.dirs {
            t.push_str(&format!(
                "dir {} {:o} {} {}\n",
                coder.encode(&d.rel),
                d.perm,
                d.mtime.secs,
                d.mtime.nanos
            ));
        }
        if let Some((p, created)) = &self.record {
            t.push_str(&format!("record {} {}\n", path_hex(p), u8::from(*created)));
        }
        t.push_str("end\n");
        t
    }

    /// `None` when the file is torn or not a journal.
    pub(crate) fn parse(text: &[u8]) -> Option<Begin> {
        let text = std::str::from_utf8(text).ok()?;
        let mut lines = text.lines();
        if !matches!(lines.next()?, BEGIN_HEADER | BEGIN_HEADER_V1) {
            return None;
        }
        let mut b = Begin::default();
        let mut ended = false;
        let mut paths = PathDecoder::default();
        let mut infos = Vec::new();
        for line in lines {
            let f: Vec<&str> = line.split(' ').collect();
            match f.as_slice() {
                ["root", s, ns] => {
                    b.dirs.root_mtime = Timestamp::new(s.parse().ok()?, ns.parse().ok()?)
                }
                ["dir", p, perm, s, ns] => {
                    paths.push(p)?;
                    infos.push((
                        u32::from_str_radix(perm, 8).ok()?,
                        Timestamp::new(s.parse().ok()?, ns.parse().ok()?),
                    ));
                }
                ["record", p, c] => b.record = Some((path_from(unhex(p)?), *c == "1")),
                ["end"] => ended = true,
                _ => return None,
            }
        }
        b.dirs.dirs = paths
            .finish()?
            .into_iter()
            .zip(infos)
            .map(|(rel, (perm, mtime))| DirInfo { rel, perm, mtime })
            .collect();
        ended.then_some(b)
    }
}

impl Intent {
    /// The paths that had something before the change: a symlink met on the way to one of
    /// them may be what the change replaces, so containment checks let it pass.
    pub(crate) fn replaced_paths(&self) -> BTreeSet<RelPath> {
        self.ops
            .iter()
            .filter(|o| o.expect.is_some())
            .map(|o| o.rel.clone())
            .collect()
    }

    pub(crate) fn to_text(&self) -> String {
        let mut t = format!("{INTENT_HEADER}\n");
        for (i, op) in self.ops.iter().enumerate() {
            let after = match &op.after {
                JAfter::Absent => "absent".to_string(),
                JAfter::File { perm, sha1, ino } => format!("file:{perm:o}:{sha1}:{ino}"),
                JAfter::Link { target, ino } => format!("link:{}:{ino}", hex(target)),
            };
            t.push_str(&format!(
                "op {i} {} {} {} {after}\n",
                hex(op.rel.as_bytes()),
                stamp_text(&op.expect),
                u8::from(op.before_is_dir)
            ));
        }
        match &self.prune {
            Prune::EmptiedParents => t.push_str("prune emptied\n"),
            Prune::Only(set) => {
                t.push_str("prune only\n");
                let mut coder = PathCoder::default();
                for d in set {
                    t.push_str(&format!("only {}\n", coder.encode(d)));
                }
            }
        }
        let mut coder = PathCoder::default();
        for (d, (perm, m)) in &self.restore {
            t.push_str(&format!(
                "restore {} {perm:o} {} {}\n",
                coder.encode(d),
                m.secs,
                m.nanos
            ));
        }
        let mut coder = PathCoder::default();
        for (d, m) in &self.finals {
            let name = d.as_ref().map_or("-".to_string(), |d| coder.encode(d));
            t.push_str(&format!("final {name} {} {}\n", m.secs, m.nanos));
        }
        if let Some(m) = &self.marker {
            t.push_str(&format!("marker {}\n", path_hex(m)));
        }
        t.push_str(&format!("end {}\n", self.ops.len()));
        t
    }

    /// `None` when the file is torn (no complete `end` line) or not a journal.
    pub(crate) fn parse(text: &[u8]) -> Option<Intent> {
        let text = std::str::from_utf8(text).ok()?;
        let mut lines = text.lines();
        if !matches!(lines.next()?, INTENT_HEADER | INTENT_HEADER_V1) {
            return None;
        }
        let mut it = Intent {
            ops: Vec::new(),
            prune: Prune::EmptiedParents,
            restore: BTreeMap::new(),
            finals: Vec::new(),
            marker: None,
        };
        // Collected, then made into sets at once (in path order already, they are sorted
        // in one pass, not looked up one by one).
        let (mut only, mut restore, mut finals) = (
            PathDecoder::default(),
            PathDecoder::default(),
            PathDecoder::default(),
        );
        let mut restore_info = Vec::new();
        // Each final's mtime, and whether it names a directory (else the root).
        let mut final_info = Vec::new();
        let mut prune_only = false;
        let mut ended = false;
        let rel = |s: &str| RelPath::from_bytes(&unhex(s)?).ok();
        for line in lines {
            if ended {
                return None;
            }
            let f: Vec<&str> = line.split(' ').collect();
            match f.as_slice() {
                ["op", i, p, expect, dir, after] => {
                    if i.parse::<usize>().ok()? != it.ops.len() {
                        return None;
                    }
                    let a: Vec<&str> = after.split(':').collect();
                    let after = match a.as_slice() {
                        ["absent"] => JAfter::Absent,
                        ["file", perm, sha1, ino] => JAfter::File {
                            perm: u32::from_str_radix(perm, 8).ok()?,
                            sha1: sha1.parse().ok()?,
                            ino: ino.parse().ok()?,
                        },
                        ["link", t, ino] => JAfter::Link {
                            target: unhex(t)?,
                            ino: ino.parse().ok()?,
                        },
                        _ => return None,
                    };
                    it.ops.push(JOp {
                        rel: rel(p)?,
                        expect: parse_stamp(expect)?,
                        before_is_dir: *dir == "1",
                        after,
                    });
                }
                ["prune", "emptied"] => prune_only = false,
                ["prune", "only"] => prune_only = true,
                ["only", p] => only.push(p)?,
                ["restore", p, perm, s, ns] => {
                    restore.push(p)?;
                    restore_info.push((
                        u32::from_str_radix(perm, 8).ok()?,
                        Timestamp::new(s.parse().ok()?, ns.parse().ok()?),
                    ));
                }
                ["final", p, s, ns] => {
                    if *p != "-" {
                        finals.push(p)?;
                    }
                    final_info.push((*p != "-", Timestamp::new(s.parse().ok()?, ns.parse().ok()?)));
                }
                ["marker", p] => it.marker = Some(path_from(unhex(p)?)),
                ["end", n] => {
                    if n.parse::<usize>().ok()? != it.ops.len() {
                        return None;
                    }
                    ended = true;
                }
                _ => return None,
            }
        }
        if prune_only {
            it.prune = Prune::Only(sorted_paths(only.finish()?));
        }
        it.restore = restore.finish()?.into_iter().zip(restore_info).collect();
        let mut dirs = finals.finish()?.into_iter();
        for (named, mtime) in final_info {
            let d = if named { Some(dirs.next()?) } else { None };
            it.finals.push((d, mtime));
        }
        ended.then_some(it)
    }
}

// ------------------------------------------------------------------------------------------
// The project lock
// ------------------------------------------------------------------------------------------

/// An exclusive `flock` on the project root directory, held while a transaction or a
/// recovery runs. Released when dropped (or when the process dies).
pub(crate) struct ProjectLock {
    _file: std::fs::File,
}

impl ProjectLock {
    /// Waits for and takes the lock on `root`.
    pub(crate) fn acquire(root: &Path) -> Result<ProjectLock> {
        let file = std::fs::File::open(root).ctx("open project", root)?;
        loop {
            // SAFETY: valid descriptor.
            let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if r == 0 {
                return Ok(ProjectLock { _file: file });
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(Error::io("lock project", root, e));
            }
        }
    }
}

/// The project root of `dir`: canonical, and a directory (what the lock is taken on).
pub(crate) fn project_root(dir: &Path) -> Result<PathBuf> {
    let root = std::fs::canonicalize(dir).map_err(|e| Error::io("resolve project", dir, e))?;
    let md = std::fs::metadata(&root).map_err(|e| Error::io("inspect project", &root, e))?;
    if !md.is_dir() {
        return Err(Error::NotADirectory { path: root });
    }
    Ok(root)
}

/// The sha1 (git blob id) check of a staged entry against what the intent says.
pub(crate) fn staged_matches(entry: &Entry, after: &JAfter) -> bool {
    match (entry, after) {
        (Entry::File { data, perm, .. }, JAfter::File { perm: p, sha1, .. }) => {
            perm == p && blob_id(data) == *sha1
        }
        (Entry::Symlink { target, .. }, JAfter::Link { target: t, .. }) => target == t,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_text_round_trips_and_torn_files_are_refused() {
        let rel = |s: &str| RelPath::new(s).unwrap();
        let intent = Intent {
            ops: vec![
                JOp {
                    rel: rel("a b/c"),
                    expect: Some(Stamp {
                        dev: 1,
                        ino: 2,
                        mode: 0o100644,
                        size: 3,
                        mtime: crate::fs::Timestamp::new(4, 5),
                        ctime: crate::fs::Timestamp::new(6, 7),
                    }),
                    before_is_dir: false,
                    after: JAfter::File {
                        perm: 0o755,
                        sha1: blob_id(b"abc"),
                        ino: 9,
                    },
                },
                JOp {
                    rel: rel("l"),
                    expect: None,
                    before_is_dir: true,
                    after: JAfter::Link {
                        target: b"../x y".to_vec(),
                        ino: 10,
                    },
                },
            ],
            prune: Prune::Only(vec![rel("d")]),
            restore: [(rel("d"), (0o750, crate::fs::Timestamp::new(1, 2)))]
                .into_iter()
                .collect(),
            finals: vec![
                (None, crate::fs::Timestamp::new(3, 4)),
                (Some(rel("d")), crate::fs::Timestamp::new(5, 6)),
            ],
            marker: Some("/tmp/r/applied".into()),
        };
        let text = intent.to_text();
        let back = Intent::parse(text.as_bytes()).unwrap();
        assert_eq!(back.to_text(), text);
        // Every proper prefix is torn.
        for n in 0..text.len() - 1 {
            assert!(Intent::parse(&text.as_bytes()[..n]).is_none(), "prefix {n}");
        }
        let begin = Begin {
            dirs: Dirs {
                root_mtime: crate::fs::Timestamp::new(1, 2),
                dirs: vec![DirInfo {
                    rel: rel("d"),
                    perm: 0o700,
                    mtime: crate::fs::Timestamp::new(3, 4),
                }],
            },
            record: Some(("/r/u".into(), true)),
        };
        let text = begin.to_text();
        assert_eq!(Begin::parse(text.as_bytes()).unwrap().to_text(), text);
        assert!(Begin::parse(&text.as_bytes()[..text.len() - 2]).is_none());
    }

    /// Path lists written relative to the line before read back as they were, whatever
    /// the order (below, above, beside, unrelated, repeated); a path below the one before
    /// costs text for its own components only.
    #[test]
    fn path_lists_are_front_coded_and_read_back() {
        let paths: Vec<RelPath> = [
            "a",
            "a/b",
            "a/b/c d",
            "a/b",
            "a/bc",
            "a/b/x",
            "z",
            "z",
            "ab/c",
            "a/b/c d/e/f",
            "a",
        ]
        .iter()
        .map(|s| RelPath::new(s).unwrap())
        .collect();
        let mut enc = PathCoder::default();
        let fields: Vec<String> = paths.iter().map(|p| enc.encode(p)).collect();
        assert_eq!(fields[0], hex(b"a"));
        assert_eq!(fields[1], format!("+1:{}", hex(b"b")));
        assert_eq!(fields[3], "+3:");
        assert_eq!(fields[4], format!("+1:{}", hex(b"bc")));
        assert_eq!(fields[6], hex(b"z"), "nothing shared");
        assert_eq!(
            fields[8],
            hex(b"ab/c"),
            "a shared byte is no shared component"
        );
        assert_eq!(decode(&fields).as_ref(), Some(&paths));
        // Nothing before, or past the path before, or not at a component: refused.
        assert!(decode(&["+1:62"]).is_none());
        assert!(decode(&[&hex(b"ab/c"), "+5:"]).is_none());
        assert!(decode(&[&hex(b"ab/c"), "+1:"]).is_none());
        // A chain of 2,000 directories: each line holds one component.
        let mut enc = PathCoder::default();
        let mut p = RelPath::new("d").unwrap();
        let mut total = enc.encode(&p).len();
        for _ in 1..2000 {
            p = p.join(&RelPath::new("d").unwrap());
            total += enc.encode(&p).len();
        }
        assert!(total < 2000 * 16, "{total} bytes");
    }

    fn decode(fields: &[impl AsRef<str>]) -> Option<Vec<RelPath>> {
        let mut dec = PathDecoder::default();
        for f in fields {
            dec.push(f.as_ref())?;
        }
        dec.finish()
    }

    /// A chain of directories read back shares one copy of its bytes, and the paths of a
    /// list that leave the chain are read back as written.
    #[test]
    fn a_decoded_chain_is_one_buffer() {
        let mut enc = PathCoder::default();
        let mut chain = vec![RelPath::new("d").unwrap()];
        for _ in 1..500 {
            let next = chain[chain.len() - 1].join(&RelPath::new("d").unwrap());
            chain.push(next);
        }
        let mut all = chain.clone();
        all.push(RelPath::new("d/d/x").unwrap());
        all.push(RelPath::new("d/d/x/y").unwrap());
        all.push(RelPath::new("d/d").unwrap());
        let fields: Vec<String> = all.iter().map(|p| enc.encode(p)).collect();
        let back = decode(&fields).unwrap();
        assert_eq!(back, all);
        let first = back[0].as_bytes().as_ptr();
        assert!(back[..500].iter().all(|p| p.as_bytes().as_ptr() == first));
        assert_ne!(
            back[500].as_bytes().as_ptr(),
            first,
            "a sibling starts new bytes"
        );
        assert!(back.windows(2).take(499).all(|w| w[0] < w[1]));
    }
}
