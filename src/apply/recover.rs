//! Recovery of interrupted transactions: every staging directory left in a project (a
//! crash, a kill -9, a power loss) is completed when its intent was durable, else rolled
//! back, so the project ends exactly before or exactly after the change. The journal's
//! format and state machine are in [`journal`](super::journal); the write phase whose steps
//! this completes or undoes is [`txn`](super::txn).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::finish::finish_cleanup;
use super::journal::{staged_matches, JAfter};
use super::journal::{Begin, DirInfo, Dirs, Intent, STAGE_PREFIX};
use super::place::{stage_rest, RestOp};
use super::report::{RecoveredTxn, RecoveryAction, RecoveryReport};
use super::stage::{in_stage, root_mtime_from_name};
use super::undo_dir::discard_record;
use crate::error::{Error, IoContext, Result};
use crate::fs::project::{self, Entry, ProjectPath};
use crate::fs::relpath::RelPath;

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
        finish_cleanup(root, stage, stage_rel, &done.finals, warnings);
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
        match roll_forward(root, stage, stage_rel, &intent) {
            Ok(()) => {
                finish_cleanup(root, stage, stage_rel, &intent.finals, warnings);
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
                root_mtime: root_mtime_from_name(name)?,
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
        unswap(root, stage_rel, intent)?;
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
        discard_record(dir, *created)?;
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

/// Puts every swapped pair of a crashed transaction back in the shape of two renames: where
/// the staged entry of op `i` is at its path (its inode, as the intent records) while
/// another entry is at its staged name `s<i>` (the original, swapped there by step 6), the
/// original is renamed to `b<i>`, as if it had been moved aside and the staged entry placed.
/// Recovery then rolls forward or back exactly as it does after two renames. Idempotent: a
/// crash during it is recovered by running it again.
pub(crate) fn unswap(root: &Path, stage_rel: &RelPath, intent: &Intent) -> Result<()> {
    let none = |_: &RelPath| false;
    let gone = intent.replaced_paths();
    for (i, op) in intent.ops.iter().enumerate() {
        let Some(ino) = op.after.ino() else { continue };
        if op.expect.is_none() || op.before_is_dir {
            continue;
        }
        let s = in_stage(root, stage_rel, &format!("s{i}"))?;
        match project::stamp(&s)? {
            Some(st) if st.ino != ino => {}
            _ => continue,
        };
        let b = in_stage(root, stage_rel, &format!("b{i}"))?;
        if project::stamp(&b)?.is_some() {
            continue;
        }
        let Ok(p) = project::check_with(root, &op.rel, &none, &|a| gone.contains(a)) else {
            continue;
        };
        if matches!(project::stamp(&p), Ok(Some(st)) if st.ino == ino) {
            project::rename_noreplace(&s, &b)?;
        }
    }
    Ok(())
}

/// Completes a transaction whose intent is durable (recovery). Checks first that every op
/// can complete (staged contents intact, originals not yet moved still as recorded), so a
/// failure leaves the project as the crash did, for a rollback.
pub(super) fn roll_forward(
    root: &Path,
    _stage: &ProjectPath,
    stage_rel: &RelPath,
    intent: &Intent,
) -> Result<()> {
    unswap(root, stage_rel, intent)?;
    let none = |_: &RelPath| false;
    let gone = intent.replaced_paths();
    let mut rest = Vec::with_capacity(intent.ops.len());
    let mut staged = Vec::with_capacity(intent.ops.len());
    for (i, op) in intent.ops.iter().enumerate() {
        let p = project::check_with(root, &op.rel, &none, &|a| gone.contains(a))?;
        let now = match project::stamp(&p) {
            Err(Error::Containment { .. }) => None,
            r => r?,
        };
        let s = in_stage(root, stage_rel, &format!("s{i}"))?;
        let b = in_stage(root, stage_rel, &format!("b{i}"))?;
        let s_entry = match op.after {
            JAfter::Absent => project::Entry::Absent,
            _ => project::read(&s)?,
        };
        let placed = op.after.ino().is_some()
            && matches!(s_entry, project::Entry::Absent)
            && now.is_some_and(|st| Some(st.ino) == op.after.ino());
        let complete = placed || (op.after == JAfter::Absent && now.is_none());
        if op.after != JAfter::Absent && !placed && !staged_matches(&s_entry, &op.after) {
            return Err(Error::ApplyFailed(format!(
                "the staged contents of {} are missing or torn",
                op.rel
            )));
        }
        let moved = project::stamp(&b)?.is_some();
        let skip_move = moved || complete || op.expect.is_none() || op.before_is_dir;
        if !skip_move && now != op.expect {
            return Err(Error::ApplyFailed(format!(
                "{} changed since the interrupted change began",
                op.rel
            )));
        }
        if op.expect.is_none() && !placed && !op.before_is_dir && now.is_some() {
            return Err(Error::ApplyFailed(format!(
                "{} appeared since the interrupted change began",
                op.rel
            )));
        }
        rest.push(RestOp {
            path: p,
            expect: op.expect,
            before_is_dir: op.before_is_dir,
            places: op.after != JAfter::Absent,
            skip_move,
        });
        staged.push((op.after != JAfter::Absent && !placed).then_some(s));
    }
    let mut journal = Vec::new();
    stage_rest(
        root,
        &rest,
        &intent.prune,
        &intent.restore,
        stage_rel,
        &mut journal,
        &staged,
        intent.marker.as_deref(),
        true,
        &mut |_, _| Ok(()),
    )?;
    project::rename_noreplace(
        &in_stage(root, stage_rel, "intent")?,
        &in_stage(root, stage_rel, "done")?,
    )
}
