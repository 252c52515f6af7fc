//! Undo records: what an apply replaced, kept so that [`undo_apply`](super::undo_apply) can
//! restore it.
//!
//! The invariant kept: a record is complete and on disk before the project is touched (it is
//! written while the new contents are staged, and synced, before the journal's intent), it
//! names the exact state the apply left (so an undo refuses, unless forced, when a path
//! changed since), and an undo goes through the same write phase as an apply, so it is
//! atomic and crash-safe too. A record is offered for undo only once its `applied` marker
//! exists (written, synced, when the apply completes, or by the recovery that completes an
//! interrupted apply); an apply that is rolled back removes its record (only what it wrote:
//! a directory the caller made stays). A record is used once: a second undo finds the
//! `undone` marker and does nothing.
//!
//! Layout of an undo directory:
//!
//! ```text
//! record          text: header, then one line per changed path and directory
//! blobs/<n>       original contents of replaced files
//! applied         present once the apply is complete
//! undone          present once the record has been used
//! ```
//!
//! Record lines (paths and link targets hex-encoded, so any bytes survive):
//!
//! ```text
//! patchbox-undo 3
//! project <hex path>
//! rootmtime <mtime s> <mtime ns>
//! entry <hex path> <before> <after>
//!     before: absent | dir | link:<hex target>:<mtime s>:<mtime ns>
//!             | file:<perm octal>:<mtime s>:<mtime ns>:<blob n>
//!     after:  absent | link:<hex target> | file:<perm octal>:<sha1 of contents>
//! dir <hex path> <perm octal> <mtime s> <mtime ns>     every directory above a changed
//!                                                      path, before the apply
//! mkdir <hex path>                                     a directory the apply creates
//! ```
//!
//! The paths of `dir` lines, and those of `mkdir` lines, are each a list written relative to
//! the line before (`+<n>:<hex rest>`: the first `n` components of the path before, then
//! the rest; see the journal's `PathCoder`), so a path thousands of directories deep adds
//! text proportional to its length, not to its length times its depth.
//!
//! Version 2 records (every path in full) and version 1 records (no `rootmtime`/`dir`
//! lines, `rmdir <hex path> <perm> <s> <ns>` lines appended after the apply, no `applied`
//! marker) are still undone.

use super::change::{sorted_paths, Prune, Target};
use super::finish::{Defer, Finish};
use super::journal::{self, Dirs, ProjectLock};
use super::path_order::dirs_above;
use super::report::UndoReport;
use super::resolver::PlanOp;
use super::stage::checked;
use super::txn::{self, TxOp};
use crate::error::{Error, IoContext, Result};
use crate::fs::project::{self, Entry};
use crate::fs::relpath::{RelPath, RelPathSet};
use crate::fs::Timestamp;
use crate::git::oid::{blob_id, from_hex as unhex, to_hex as hex, ObjectId};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const HEADER: &str = "patchbox-undo 3";
const HEADER_V2: &str = "patchbox-undo 2";
const HEADER_V1: &str = "patchbox-undo 1";

fn bad(dir: &Path, why: &str) -> Error {
    Error::ApplyFailed(format!("undo record {}: {why}", dir.display()))
}

fn write_synced(path: &Path, data: &[u8]) -> Result<()> {
    let mut f = std::fs::File::create(path).ctx("create", path)?;
    f.write_all(data).ctx("write", path)?;
    f.sync_all().ctx("sync", path)
}

/// Writes the record for `ops` (before the write phase). Returns each op's stamp as the
/// write phase must find it (a file kept by a hard link has a new ctime), and the blob id
/// of each new file's contents.
pub(super) fn write_record(
    dir: &Path,
    root: &Path,
    ops: &[PlanOp],
    dirs: &Dirs,
) -> Result<txn::Recorded> {
    check_usable(dir)?;
    // The originals are reached from the root one directory at a time: each directory is
    // opened once on this thread, not once per file below it.
    let _scope = project::DirScope::enter(root)?;
    let blobs = dir.join("blobs");
    std::fs::create_dir_all(&blobs).map_err(|e| Error::io("create undo directory", &blobs, e))?;
    let mut text = format!(
        "{HEADER}\nproject {}\nrootmtime {} {}\n",
        hex(root.as_os_str().as_bytes()),
        dirs.root_mtime.secs,
        dirs.root_mtime.nanos
    );
    let mut stamps = Vec::with_capacity(ops.len());
    let mut oids = Vec::with_capacity(ops.len());
    let mut copied = false;
    for (n, op) in ops.iter().enumerate() {
        stamps.push(op.before.stamp());
        let before = match &op.before {
            Entry::Absent => "absent".to_string(),
            Entry::Dir { .. } => "dir".to_string(),
            Entry::Other { .. } => return Err(bad(dir, "cannot record a special file")),
            Entry::Symlink { target, stamp } => {
                format!(
                    "link:{}:{}:{}",
                    hex(target),
                    stamp.mtime.secs,
                    stamp.mtime.nanos
                )
            }
            Entry::File { data, perm, stamp } => {
                let blob = blobs.join(n.to_string());
                match keep_original(root, op, stamp, &blob)? {
                    Some(now) => stamps[n] = Some(now),
                    None => {
                        write_plain(&blob, data)?;
                        copied = true;
                    }
                }
                format!(
                    "file:{perm:o}:{}:{}:{n}",
                    stamp.mtime.secs, stamp.mtime.nanos
                )
            }
        };
        let after = match &op.after {
            Target::Absent => "absent".to_string(),
            Target::Symlink { target, .. } => format!("link:{}", hex(target)),
            Target::File { data, perm, .. } => {
                let id = blob_id(data);
                let line = format!("file:{perm:o}:{id}");
                oids.push(Some(id));
                line
            }
        };
        if oids.len() == n {
            oids.push(None);
        }
        text.push_str(&format!(
            "entry {} {before} {after}\n",
            hex(op.rel.as_bytes())
        ));
    }
    // Directories: as they were, and the ones the apply creates (above what it places,
    // where there is no directory now).
    let mut coder = journal::PathCoder::default();
    for d in &dirs.dirs {
        text.push_str(&format!(
            "dir {} {:o} {} {}\n",
            coder.encode(&d.rel),
            d.perm,
            d.mtime.secs,
            d.mtime.nanos
        ));
    }
    // Both lists in path order, walked side by side: the directories above what is placed,
    // less those that exist.
    let mut existing: Vec<&RelPath> = dirs.dirs.iter().map(|d| &d.rel).collect();
    existing.sort();
    let mut existing = existing.into_iter().peekable();
    let above = dirs_above(
        ops.iter()
            .filter(|op| !matches!(op.after, Target::Absent))
            .map(|op| &op.rel),
    );
    let mut coder = journal::PathCoder::default();
    for d in &above {
        while existing.next_if(|e| *e < d).is_some() {}
        if existing.next_if(|e| *e == d).is_none() {
            text.push_str(&format!("mkdir {}\n", coder.encode(d)));
        }
    }
    let tmp = dir.join("record.tmp");
    write_plain(&tmp, text.as_bytes())?;
    let rec = dir.join("record");
    std::fs::rename(&tmp, &rec).map_err(|e| Error::io("rename", &rec, e))?;
    // The record must be durable before the project changes. On the project's own
    // filesystem the write phase's sync (after staging, before any original is touched)
    // covers it; elsewhere one sync of that filesystem does.
    let same_fs = std::fs::metadata(dir)
        .ok()
        .zip(std::fs::metadata(root).ok())
        .is_some_and(|(a, b)| a.dev() == b.dev());
    if !same_fs || copied {
        project::sync_fs(dir)?;
    }
    Ok(txn::Recorded { stamps, oids })
}

/// Keeps the original of a replaced file in the record by hard-linking it (no copy):
/// the apply puts a new file in its place and never writes the old one. Only a file with
/// no other links is shared that way (an edit through another link would change the
/// record). Returns the file's stamp after linking, or `None` when it must be copied.
fn keep_original(
    root: &Path,
    op: &PlanOp,
    before: &project::Stamp,
    blob: &Path,
) -> Result<Option<project::Stamp>> {
    let p = checked(root, &op.rel)?;
    let Some((now, links)) = project::link_out(&p, blob)? else {
        return Ok(None);
    };
    let same = now.dev == before.dev
        && now.ino == before.ino
        && now.mode == before.mode
        && now.size == before.size
        && now.mtime == before.mtime;
    if !same || links != 2 {
        // Replaced, edited or linked elsewhere since it was read: the write phase would
        // refuse it anyway.
        std::fs::remove_file(blob).map_err(|e| Error::io("remove", blob, e))?;
        return Err(Error::ApplyFailed(format!(
            "{} changed while the patch was being applied; nothing was changed",
            op.rel
        )));
    }
    Ok(Some(now))
}

fn write_plain(path: &Path, data: &[u8]) -> Result<()> {
    std::fs::write(path, data).map_err(|e| Error::io("write", path, e))
}

/// Refuses an undo directory that exists and is not an empty directory (checked before
/// anything is written, so a refusal touches nothing of the caller's).
pub(super) fn check_usable(dir: &Path) -> Result<()> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("inspect undo directory", dir, e)),
        Ok(md) if !md.is_dir() => Err(bad(dir, "exists and is not a directory")),
        Ok(_) => {
            let mut it =
                std::fs::read_dir(dir).map_err(|e| Error::io("read undo directory", dir, e))?;
            if it.next().is_some() {
                return Err(bad(dir, "directory exists and is not empty"));
            }
            Ok(())
        }
    }
}

/// True once the apply that wrote the record at `dir` is complete (version 1 records,
/// kept only by completed applies, always are).
pub(crate) fn is_applied(dir: &Path) -> bool {
    dir.join("applied").exists()
        || std::fs::read(dir.join("record"))
            .is_ok_and(|t| t.starts_with(format!("{HEADER_V1}\n").as_bytes()))
}

enum Before {
    Absent,
    Dir,
    Link(Vec<u8>, Timestamp),
    File {
        perm: u32,
        mtime: Timestamp,
        blob: usize,
    },
}

enum After {
    Absent,
    Link(Vec<u8>),
    File { perm: u32, sha1: ObjectId },
}

struct Record {
    project: Vec<u8>,
    root_mtime: Option<Timestamp>,
    entries: Vec<(RelPath, Before, After)>,
    /// In path order, each once.
    mkdirs: Vec<RelPath>,
    /// Directories as they were before the apply (v2 `dir`, v1 `rmdir`).
    dirs: BTreeMap<RelPath, (u32, Timestamp)>,
}

/// What the record at `dir` says, for listing: the project and the number of paths. (Its
/// directories are not read: the store lists every record after each apply.)
pub(crate) fn summary(dir: &Path) -> Result<(PathBuf, usize)> {
    let rec_path = dir.join("record");
    let text = std::fs::read(&rec_path).map_err(|e| Error::io("read undo record", &rec_path, e))?;
    let text = String::from_utf8(text).map_err(|_| bad(dir, "not text"))?;
    let rec = parse(dir, &text, false)?;
    use std::os::unix::ffi::OsStringExt;
    Ok((
        PathBuf::from(std::ffi::OsString::from_vec(rec.project)),
        rec.entries.len(),
    ))
}

/// The record in `text`; without `dirs`, its `dir`, `rmdir` and `mkdir` lines are skipped.
fn parse(dir: &Path, text: &str, dirs_too: bool) -> Result<Record> {
    let mut lines = text.lines();
    let header = lines.next();
    if !matches!(header, Some(HEADER | HEADER_V2 | HEADER_V1)) {
        return Err(bad(dir, "not an undo record"));
    }
    let project = lines
        .next()
        .and_then(|l| l.strip_prefix("project "))
        .and_then(unhex)
        .ok_or_else(|| bad(dir, "missing project line"))?;
    let mut rec = Record {
        project,
        root_mtime: None,
        entries: Vec::new(),
        mkdirs: Vec::new(),
        dirs: BTreeMap::new(),
    };
    let path = |s: &str| -> Result<RelPath> {
        let b = unhex(s).ok_or_else(|| bad(dir, "bad path"))?;
        RelPath::from_bytes(&b)
    };
    // Read as lists (a chain of directories shares one copy of its bytes), then made into
    // a set and a map at once: in path order already, they are sorted in one pass instead
    // of looked up one by one.
    let mut mkdirs = journal::PathDecoder::default();
    let (mut coded_dirs, mut coded_info) = (journal::PathDecoder::default(), Vec::new());
    let mut dirs = Vec::new();
    let bad_path = || bad(dir, "bad path");
    let num = |s: &str| s.parse::<i64>().map_err(|_| bad(dir, "bad number"));
    let perm = |s: &str| u32::from_str_radix(s, 8).map_err(|_| bad(dir, "bad mode"));
    for line in lines {
        let f: Vec<&str> = line.split(' ').collect();
        match f.as_slice() {
            ["entry", p, before, after] => {
                let b: Vec<&str> = before.split(':').collect();
                let before = match b.as_slice() {
                    ["absent"] => Before::Absent,
                    ["dir"] => Before::Dir,
                    ["link", t, s, ns] => Before::Link(
                        unhex(t).ok_or_else(|| bad(dir, "bad link"))?,
                        Timestamp::new(num(s)?, num(ns)?),
                    ),
                    ["file", m, s, ns, blob] => Before::File {
                        perm: perm(m)?,
                        mtime: Timestamp::new(num(s)?, num(ns)?),
                        blob: blob.parse().map_err(|_| bad(dir, "bad blob"))?,
                    },
                    _ => return Err(bad(dir, "bad entry")),
                };
                let a: Vec<&str> = after.split(':').collect();
                let after = match a.as_slice() {
                    ["absent"] => After::Absent,
                    ["link", t] => After::Link(unhex(t).ok_or_else(|| bad(dir, "bad link"))?),
                    ["file", m, sha] => After::File {
                        perm: perm(m)?,
                        sha1: sha.parse().map_err(|_| bad(dir, "bad blob id"))?,
                    },
                    _ => return Err(bad(dir, "bad entry")),
                };
                rec.entries.push((path(p)?, before, after));
            }
            ["mkdir", _] | ["rmdir", _, _, _, _] | ["dir", _, _, _, _] if !dirs_too => {}
            ["mkdir", p] => mkdirs.push(p).ok_or_else(bad_path)?,
            ["rmdir", p, m, s, ns] => {
                dirs.push((path(p)?, (perm(m)?, Timestamp::new(num(s)?, num(ns)?))))
            }
            ["dir", p, m, s, ns] => {
                coded_dirs.push(p).ok_or_else(bad_path)?;
                coded_info.push((perm(m)?, Timestamp::new(num(s)?, num(ns)?)));
            }
            ["rootmtime", s, ns] => rec.root_mtime = Some(Timestamp::new(num(s)?, num(ns)?)),
            [""] => {}
            _ => return Err(bad(dir, "unknown line")),
        }
    }
    rec.mkdirs = sorted_paths(mkdirs.finish().ok_or_else(bad_path)?);
    dirs.extend(
        coded_dirs
            .finish()
            .ok_or_else(bad_path)?
            .into_iter()
            .zip(coded_info),
    );
    rec.dirs = dirs.into_iter().collect();
    Ok(rec)
}

fn matches_after(cur: &Entry, after: &After) -> bool {
    match (cur, after) {
        (Entry::Absent, After::Absent) => true,
        (Entry::Symlink { target, .. }, After::Link(t)) => target == t,
        (Entry::File { data, perm, .. }, After::File { perm: p, sha1 }) => {
            perm == p && blob_id(data) == *sha1
        }
        _ => false,
    }
}

pub(super) fn undo(project_dir: &Path, dir: &Path, force: bool) -> Result<UndoReport> {
    let root = journal::project_root(project_dir)?;
    let _lock = ProjectLock::acquire(&root)?;
    let recovery = super::recover::recover_locked(&root)?;
    let rec_path = dir.join("record");
    let text = std::fs::read(&rec_path).map_err(|e| Error::io("read undo record", &rec_path, e))?;
    let text = String::from_utf8(text).map_err(|_| bad(dir, "not text"))?;
    let rec = parse(dir, &text, true)?;
    if dir.join("undone").exists() {
        return Ok(UndoReport {
            already_undone: true,
            recovery,
            ..UndoReport::default()
        });
    }
    if !is_applied(dir) {
        return Err(bad(
            dir,
            "its apply never completed (it was rolled back); nothing to undo",
        ));
    }
    if rec.project != root.as_os_str().as_bytes() && !force {
        return Err(bad(dir, "it was made for another project directory"));
    }
    let planning = project::DirScope::enter(&root)?;
    // Paths the undo removes: a symlink among them may have a directory restored in its
    // place (the apply turned a directory into a symlink).
    // As a tree of components: the removed ancestors of a path are found in one walk
    // down it, whatever its depth.
    let mut removed = RelPathSet::new();
    for (r, _, _) in rec
        .entries
        .iter()
        .filter(|(_, b, _)| matches!(b, Before::Absent | Before::Dir))
    {
        removed.insert(r);
    }
    let mut report = UndoReport {
        recovery,
        ..UndoReport::default()
    };
    let mut ops = Vec::new();
    let mut changed = Vec::new();
    for (rel, before, after) in &rec.entries {
        let p = project::check_sets(&root, rel, None, Some(&removed))?;
        let mut below_removed_link = false;
        for d in removed.ancestors_of(rel) {
            let Some(anc) = rel.ancestor(d) else { continue };
            let ap = checked(&root, &anc)?;
            below_removed_link |= matches!(project::read(&ap)?, Entry::Symlink { .. });
        }
        let cur = if below_removed_link {
            Entry::Absent
        } else {
            project::read(&p)?
        };
        // A directory the apply created where this path's old file or link was: it goes
        // once the restored entries below it are gone.
        let created_dir = matches!(cur, Entry::Dir { .. })
            && matches!(after, After::Absent)
            && rec.mkdirs.binary_search(rel).is_ok();
        if !created_dir && !matches_after(&cur, after) {
            changed.push(rel.clone());
        }
        let target = match before {
            Before::Absent | Before::Dir => Target::Absent,
            Before::Link(t, mtime) => Target::Symlink {
                target: t.clone(),
                mtime: Some(*mtime),
            },
            Before::File { perm, mtime, blob } => {
                let bp = dir.join("blobs").join(blob.to_string());
                let data = std::fs::read(&bp).map_err(|e| Error::io("read undo blob", &bp, e))?;
                Target::File {
                    data: Arc::new(data),
                    perm: *perm,
                    mtime: Some(*mtime),
                }
            }
        };
        if matches!(target, Target::Absent) && matches!(cur, Entry::Absent) {
            report.restored.push(rel.clone());
            continue;
        }
        if !created_dir && matches!(cur, Entry::Dir { .. } | Entry::Other { .. }) {
            return Err(Error::ApplyFailed(format!(
                "cannot undo: {rel} is now a directory or special file"
            )));
        }
        ops.push(TxOp {
            path: p,
            expect: cur.stamp(),
            before_is_dir: created_dir,
            after: target,
        });
        report.restored.push(rel.clone());
    }
    if !changed.is_empty() {
        if !force {
            let names: Vec<String> = changed.iter().map(|p| p.to_string()).collect();
            return Err(Error::ApplyFailed(format!(
                "cannot undo: changed since the apply: {} (use force to overwrite)",
                names.join(", ")
            )));
        }
        report.overwritten = changed;
    }
    drop(planning);
    // Every directory's mtime as it was before the apply, once the undo is complete.
    let mut finals: Vec<(Option<RelPath>, Timestamp)> = rec
        .dirs
        .iter()
        .map(|(d, (_, m))| (Some(d.clone()), *m))
        .collect();
    finals.extend(rec.root_mtime.map(|m| (None, m)));
    let marker = dir.join("undone");
    if ops.is_empty() {
        write_synced(&marker, b"")?;
        return Ok(report);
    }
    let finish = Finish {
        marker: Some(marker),
        finals,
        record: None,
        defer: Defer::No,
    };
    let log = txn::commit(
        &root,
        &ops,
        &Prune::Only(rec.mkdirs.clone()),
        &rec.dirs,
        super::fault::Fault::default(),
        txn::NO_RECORD,
        &finish,
    )?;
    report.warnings.extend(log.warnings);
    Ok(report)
}
