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
//! ([`txn::unswap`](super::txn::unswap)), which gives the state two renames would have left,
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
use std::fmt;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::txn::{self, Prune};
use crate::error::{Error, IoContext, Result};
use crate::fs::project::{self, Entry, ProjectPath, Stamp};
use crate::fs::relpath::RelPath;
use crate::git::oid::{blob_id_hex, from_hex as unhex, to_hex as hex};

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

    /// The path of `field`, the next field of the list; `None` when it is not one. A path
    /// below the one before costs copying it and reading the rest.
    pub(crate) fn decode(&mut self, field: &str) -> Option<RelPath> {
        let p = match field.strip_prefix('+') {
            None => RelPath::from_bytes(&unhex(field)?).ok()?,
            Some(rel) => {
                let (n, rest) = rel.split_once(':')?;
                let n: usize = n.parse().ok()?;
                let rest = unhex(rest)?;
                let prev = self.prev.as_ref()?;
                let q = prev.as_bytes();
                if n == 0 || n > q.len() || q.get(n).is_some_and(|&c| c != b'/') {
                    return None;
                }
                match (n == q.len(), rest.is_empty()) {
                    (true, true) => prev.clone(),
                    (true, false) => prev.join(&RelPath::from_bytes(&rest).ok()?),
                    (false, _) => {
                        let mut b = q[..n].to_vec();
                        if !rest.is_empty() {
                            b.push(b'/');
                            b.extend_from_slice(&rest);
                        }
                        RelPath::from_bytes(&b).ok()?
                    }
                }
            }
        };
        self.prev = Some(p.clone());
        Some(p)
    }
}

/// The length in bytes of the whole leading components `a` and `b` share (0: none).
fn shared_prefix(a: &[u8], b: &[u8]) -> usize {
    // Below the path before (a directory listed before what is below it): one comparison.
    if b.len() > a.len() && b.starts_with(a) && b[a.len()] == b'/' {
        return a.len();
    }
    let n = a.len().min(b.len());
    let mut c = 0;
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
    pub mtime: (i64, i64),
}

/// The root's mtime and every directory the change touches, before it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Dirs {
    pub root_mtime: (i64, i64),
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
    File { perm: u32, sha1: String, ino: u64 },
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
    pub restore: BTreeMap<RelPath, (u32, (i64, i64))>,
    /// Mtimes to set once the staging directory is gone (`None`: the root).
    pub finals: Vec<(Option<RelPath>, (i64, i64))>,
    /// The marker file to write (synced) once the change is complete.
    pub marker: Option<PathBuf>,
}

fn stamp_text(s: &Option<Stamp>) -> String {
    match s {
        None => "-".into(),
        Some(s) => format!(
            "{}:{}:{}:{}:{}:{}:{}:{}",
            s.dev, s.ino, s.mode, s.size, s.mtime.0, s.mtime.1, s.ctime.0, s.ctime.1
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
        mtime: (ms.parse().ok()?, mns.parse().ok()?),
        ctime: (cs.parse().ok()?, cns.parse().ok()?),
    }))
}

impl Begin {
    pub(crate) fn to_text(&self) -> String {
        let mut t = format!(
            "{BEGIN_HEADER}\nroot {} {}\n",
            self.dirs.root_mtime.0, self.dirs.root_mtime.1
        );
        let mut coder = PathCoder::default();
        for d in &self.dirs.dirs {
            t.push_str(&format!(
                "dir {} {:o} {} {}\n",
                coder.encode(&d.rel),
                d.perm,
                d.mtime.0,
                d.mtime.1
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
        let mut coder = PathCoder::default();
        for line in lines {
            let f: Vec<&str> = line.split(' ').collect();
            match f.as_slice() {
                ["root", s, ns] => b.dirs.root_mtime = (s.parse().ok()?, ns.parse().ok()?),
                ["dir", p, perm, s, ns] => b.dirs.dirs.push(DirInfo {
                    rel: coder.decode(p)?,
                    perm: u32::from_str_radix(perm, 8).ok()?,
                    mtime: (s.parse().ok()?, ns.parse().ok()?),
                }),
                ["record", p, c] => b.record = Some((path_from(unhex(p)?), *c == "1")),
                ["end"] => ended = true,
                _ => return None,
            }
        }
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
                m.0,
                m.1
            ));
        }
        let mut coder = PathCoder::default();
        for (d, m) in &self.finals {
            let name = d.as_ref().map_or("-".to_string(), |d| coder.encode(d));
            t.push_str(&format!("final {name} {} {}\n", m.0, m.1));
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
        let mut only = Vec::new();
        let mut restore = Vec::new();
        let (mut only_coder, mut restore_coder, mut final_coder) = Default::default();
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
                            sha1: sha1.to_string(),
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
                ["only", p] => {
                    only.push(PathCoder::decode(&mut only_coder, p)?);
                }
                ["restore", p, perm, s, ns] => {
                    restore.push((
                        PathCoder::decode(&mut restore_coder, p)?,
                        (
                            u32::from_str_radix(perm, 8).ok()?,
                            (s.parse().ok()?, ns.parse().ok()?),
                        ),
                    ));
                }
                ["final", p, s, ns] => {
                    let d = if *p == "-" {
                        None
                    } else {
                        Some(PathCoder::decode(&mut final_coder, p)?)
                    };
                    it.finals.push((d, (s.parse().ok()?, ns.parse().ok()?)));
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
            it.prune = Prune::Only(txn::sorted_paths(only));
        }
        it.restore = restore.into_iter().collect();
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

// ------------------------------------------------------------------------------------------
// Recovery
// ------------------------------------------------------------------------------------------

/// What recovery did to one interrupted transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryAction {
    /// It had not reached its intent (or was failing): the project is as before it.
    RolledBack,
    /// Its intent was durable: recovery completed it.
    RolledForward,
    /// It was complete; only its staging directory was left to remove.
    CleanedUp,
}

/// One interrupted transaction found in the project.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveredTxn {
    /// The staging directory's name in the project root (`.patchbox-txn-…`).
    pub name: String,
    /// What was done.
    pub action: RecoveryAction,
}

/// The result of [`recover_project`](super::recover_project).
///
/// ```
/// let project = tempfile::tempdir().unwrap();
/// let r = patchbox::apply::recover_project(project.path()).unwrap();
/// assert!(r.is_empty());
/// assert_eq!(r.to_string(), "nothing to recover");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The interrupted transactions, in the order they were recovered.
    pub recovered: Vec<RecoveredTxn>,
    /// Non-fatal notes (e.g. an undo record that could not be marked complete).
    pub warnings: Vec<String>,
}

impl RecoveryReport {
    /// True when there was nothing to recover.
    pub fn is_empty(&self) -> bool {
        self.recovered.is_empty() && self.warnings.is_empty()
    }
}

impl fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("nothing to recover");
        }
        let mut first = true;
        for r in &self.recovered {
            if !first {
                writeln!(f)?;
            }
            first = false;
            let what = match r.action {
                RecoveryAction::RolledBack => "rolled back (the project is as before it)",
                RecoveryAction::RolledForward => "completed (the project is as after it)",
                RecoveryAction::CleanedUp => "was complete; cleaned up",
            };
            write!(f, "interrupted apply/undo {}: {what}", r.name)?;
        }
        for w in &self.warnings {
            if !first {
                writeln!(f)?;
            }
            first = false;
            write!(f, "warning: {w}")?;
        }
        Ok(())
    }
}

/// The staging directories in `root` (names), sorted.
pub(crate) fn pending(root: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(root).ctx("list project", root)? {
        let e = e.ctx("list project", root)?;
        if let Ok(n) = e.file_name().into_string() {
            if n.starts_with(STAGE_PREFIX) {
                out.push(n);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Recovers every interrupted transaction in `root`. The caller holds the [`ProjectLock`].
pub(crate) fn recover_locked(root: &Path) -> Result<RecoveryReport> {
    let mut report = RecoveryReport::default();
    for name in pending(root)? {
        let _scope = project::DirScope::enter(root)?;
        let stage_rel = RelPath::new(&name)?;
        let stage = project::check(root, &stage_rel, &|_| false)?;
        match project::read(&stage)? {
            Entry::Dir { .. } => {}
            Entry::Absent => continue,
            _ => {
                return Err(Error::ApplyFailed(format!(
                    "{} is not a staging directory of patchbox (not a directory); remove it by \
                     hand",
                    stage.to_path_buf().display()
                )))
            }
        }
        let action = recover_one(root, &stage, &stage_rel, &mut report.warnings)?;
        report.recovered.push(RecoveredTxn { name, action });
    }
    Ok(report)
}

fn file_in(root: &Path, stage_rel: &RelPath, name: &str) -> Result<ProjectPath> {
    project::check(root, &stage_rel.join(&RelPath::new(name)?), &|_| false)
}

fn read_journal(root: &Path, stage_rel: &RelPath, name: &str) -> Result<Option<Vec<u8>>> {
    match project::read(&file_in(root, stage_rel, name)?)? {
        Entry::File { data, .. } => Ok(Some(data.to_vec())),
        _ => Ok(None),
    }
}

fn recover_one(
    root: &Path,
    stage: &ProjectPath,
    stage_rel: &RelPath,
    warnings: &mut Vec<String>,
) -> Result<RecoveryAction> {
    let begin = read_journal(root, stage_rel, "begin")?.and_then(|t| Begin::parse(&t));
    let journal = |name: &str| -> Result<Option<Intent>> {
        Ok(read_journal(root, stage_rel, name)?.and_then(|t| Intent::parse(&t)))
    };
    if let Some(done) = journal("done")? {
        txn::finish_cleanup(root, stage, stage_rel, &done.finals, warnings);
        return Ok(RecoveryAction::CleanedUp);
    }
    if let Some(abort) = journal("abort")? {
        roll_back(
            root,
            stage,
            stage_rel,
            begin.as_ref(),
            Some(&abort),
            "abort",
        )?;
        return Ok(RecoveryAction::RolledBack);
    }
    if let Some(intent) = journal("intent")? {
        match txn::roll_forward(root, stage, stage_rel, &intent) {
            Ok(()) => {
                txn::finish_cleanup(root, stage, stage_rel, &intent.finals, warnings);
                return Ok(RecoveryAction::RolledForward);
            }
            Err(e) => {
                warnings.push(format!(
                    "{}: cannot complete the interrupted change ({e}); rolling it back",
                    stage.to_path_buf().display()
                ));
                let from = file_in(root, stage_rel, "intent")?;
                let to = file_in(root, stage_rel, "abort")?;
                project::rename_noreplace(&from, &to)?;
                roll_back(
                    root,
                    stage,
                    stage_rel,
                    begin.as_ref(),
                    Some(&intent),
                    "abort",
                )?;
                return Ok(RecoveryAction::RolledBack);
            }
        }
    }
    // STAGING. Without a readable `begin` (a crash right after the staging directory was
    // made) the root's mtime comes from the directory's name.
    let begin = begin.or_else(|| {
        let name = stage_rel.as_path().to_str()?;
        Some(Begin {
            dirs: Dirs {
                root_mtime: txn::root_mtime_from_name(name)?,
                dirs: Vec::new(),
            },
            record: None,
        })
    });
    roll_back(root, stage, stage_rel, begin.as_ref(), None, "intent")?;
    Ok(RecoveryAction::RolledBack)
}

fn depth(r: &RelPath) -> usize {
    r.as_path().components().count()
}

/// Rolls a transaction back from what is on disk, then removes its staging directory, its
/// undo record (if it wrote one) and restores directory mtimes. `journal` names the file
/// holding `intent` (removed once the project is restored).
pub(crate) fn roll_back(
    root: &Path,
    stage: &ProjectPath,
    stage_rel: &RelPath,
    begin: Option<&Begin>,
    intent: Option<&Intent>,
    journal: &str,
) -> Result<()> {
    let none = |_: &RelPath| false;
    let sub = |name: String| -> Result<ProjectPath> { file_in(root, stage_rel, &name) };
    let mut failures: Vec<String> = Vec::new();
    let before_dirs: BTreeMap<RelPath, &DirInfo> = begin
        .map(|b| b.dirs.dirs.iter().map(|d| (d.rel.clone(), d)).collect())
        .unwrap_or_default();
    if let Some(intent) = intent {
        txn::unswap(root, stage_rel, intent)?;
        let ops = &intent.ops;
        let gone = intent.replaced_paths();
        let path = |rel: &RelPath| project::check_with(root, rel, &none, &|a| gone.contains(a));
        // 1. Take back what was placed (recognised by inode) into the staging directory.
        for (i, op) in ops.iter().enumerate().rev() {
            let Some(ino) = op.after.ino() else { continue };
            let s = sub(format!("s{i}"))?;
            if project::stamp(&s)?.is_some() {
                continue;
            }
            let Ok(p) = path(&op.rel) else { continue };
            if matches!(project::stamp(&p), Ok(Some(st)) if st.ino == ino) {
                if let Err(e) = project::rename_noreplace(&p, &s) {
                    failures.push(e.to_string());
                }
            }
        }
        // 2. Remove directories the change created (deepest first).
        let mut created: BTreeSet<(usize, RelPath)> = BTreeSet::new();
        for op in ops {
            let mut a = op.rel.parent();
            while let Some(d) = a {
                a = d.parent();
                if !before_dirs.contains_key(&d) {
                    created.insert((depth(&d), d));
                }
            }
        }
        for (_, d) in created.iter().rev() {
            let Ok(p) = project::check(root, d, &none) else {
                continue;
            };
            if let Ok(Some(st)) = project::stamp(&p) {
                if st.mode & 0o170000 == 0o040000 {
                    match project::remove_dir_if_empty(&p) {
                        Ok(true) => {}
                        Ok(false) => failures.push(format!("{d} is not empty")),
                        Err(e) => failures.push(e.to_string()),
                    }
                }
            }
        }
        // 3. Recreate directories the change removed (shallowest first).
        let mut dirs: Vec<&DirInfo> = before_dirs.values().copied().collect();
        dirs.sort_by_key(|d| depth(&d.rel));
        for d in dirs {
            let made = project::check(root, &d.rel, &none).and_then(|p| {
                if project::stamp(&p)?.is_none() {
                    project::make_dir(&p, Some(d.perm))?;
                }
                Ok(())
            });
            if let Err(e) = made {
                failures.push(e.to_string());
            }
        }
        // 4. Move the originals back.
        for (i, op) in ops.iter().enumerate() {
            if op.expect.is_none() || op.before_is_dir {
                continue;
            }
            let b = sub(format!("b{i}"))?;
            if project::stamp(&b)?.is_none() {
                continue;
            }
            let back = project::check(root, &op.rel, &none)
                .and_then(|p| project::rename_noreplace(&b, &p));
            if let Err(e) = back {
                failures.push(e.to_string());
            }
        }
    }
    if !failures.is_empty() {
        return Err(Error::ApplyFailed(format!(
            "cannot roll back the interrupted change in {} (left as it is for the next \
             recovery): {}",
            stage.to_path_buf().display(),
            failures.join("; ")
        )));
    }
    project::sync_fs(root)?;
    // The project is as before: the journal goes first, then everything else staged. A
    // backup still here (no intent to say where it belongs) is never deleted.
    if let Ok(j) = file_in(root, stage_rel, journal) {
        match project::remove_file(&j) {
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
            r => r?,
        }
    }
    let leaves = project::list_leaves(stage)?;
    if let Some(b) = leaves.iter().find(|l| is_backup(l)) {
        return Err(Error::ApplyFailed(format!(
            "{} holds an original ({b}) but no journal saying where it belongs; left for you \
             to inspect",
            stage.to_path_buf().display()
        )));
    }
    for l in &leaves {
        let p = project::check(root, l, &none)?;
        project::remove_file(&p)?;
    }
    project::remove_dir_if_empty(stage)?;
    if let Some((dir, created)) = begin.and_then(|b| b.record.as_ref()) {
        super::undo::discard_record(dir, *created)?;
    }
    if let Some(b) = begin {
        for d in &b.dirs.dirs {
            if let Ok(p) = project::check(root, &d.rel, &none) {
                if matches!(project::stamp(&p), Ok(Some(_))) {
                    project::set_mtime(&p, d.mtime)?;
                }
            }
        }
        project::set_root_mtime(root, b.dirs.root_mtime)?;
    }
    project::sync_root(root)
}

/// A moved-aside original in a staging directory: `b<digits>`.
fn is_backup(l: &RelPath) -> bool {
    l.as_path()
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix('b'))
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()))
}

/// The sha1 (git blob id) check of a staged entry against what the intent says.
pub(crate) fn staged_matches(entry: &Entry, after: &JAfter) -> bool {
    match (entry, after) {
        (Entry::File { data, perm, .. }, JAfter::File { perm: p, sha1, .. }) => {
            perm == p && blob_id_hex(data) == *sha1
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
                        mtime: (4, 5),
                        ctime: (6, 7),
                    }),
                    before_is_dir: false,
                    after: JAfter::File {
                        perm: 0o755,
                        sha1: "abc".into(),
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
            restore: [(rel("d"), (0o750, (1, 2)))].into_iter().collect(),
            finals: vec![(None, (3, 4)), (Some(rel("d")), (5, 6))],
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
                root_mtime: (1, 2),
                dirs: vec![DirInfo {
                    rel: rel("d"),
                    perm: 0o700,
                    mtime: (3, 4),
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
        let mut dec = PathCoder::default();
        for (p, f) in paths.iter().zip(&fields) {
            assert_eq!(dec.decode(f).as_ref(), Some(p), "{f}");
        }
        // Nothing before, or past the path before, or not at a component: refused.
        assert!(PathCoder::default().decode("+1:62").is_none());
        let mut dec = PathCoder::default();
        dec.decode(&hex(b"ab/c")).unwrap();
        assert!(dec.clone_free_decode("+5:").is_none());
        assert!(dec.clone_free_decode("+1:").is_none());
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

    impl PathCoder {
        /// [`PathCoder::decode`] that leaves the coder as it was.
        fn clone_free_decode(&mut self, field: &str) -> Option<RelPath> {
            let prev = self.prev.clone();
            let r = self.decode(field);
            self.prev = prev;
            r
        }
    }
}
