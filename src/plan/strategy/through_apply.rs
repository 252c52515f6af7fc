//! Committing a sandbox's patch into the original through the atomic 3-way apply, and
//! undoing it: what `copy_on_write` and `overlay` share.
//!
//! A commit is never a swap of the user's directory. The sandbox's patch is applied to the
//! original with the base as pre-images: files the user changed elsewhere are untouched,
//! files both changed merge when the edits do not overlap, and any conflict refuses the whole
//! commit with nothing written. The apply writes an undo record in the plan root's store;
//! its id is the commit's `commit_ref`, chosen and persisted *before* the apply starts, so
//! after a crash the sandbox finds out whether its commit landed (see [`reconcile`]).
//!
//! A check ([`check`]) keeps its plan ([`Checked`]); a commit of the same patch right after
//! (what `commit_all` does: every sandbox checked, then every one committed) writes that
//! plan instead of planning the 3-way apply again, as long as the original still carries
//! the stat data the check read (see [`CheckedApply`]).

use std::path::Path;

use crate::apply::store::{RecordState, UndoStore};
use crate::apply::{
    check_patch, recover_project, ApplyOptions, ApplyReport, CheckedApply, FileStatus,
};
use crate::id::SandboxId;
use crate::plan::batch::CommitBatch;
use crate::plan::error::SandboxError;
use crate::plan::model::{CommitResult, DiffOp, SandboxDiff};
use crate::plan::record::{Lifecycle, State};
use crate::plan::status::Status;

fn options(base_dir: &Path, check: bool) -> ApplyOptions {
    ApplyOptions {
        check,
        preimages: Some(base_dir.to_path_buf()),
        // Where a symlink points is the plan layer's rule (`links.rs`), checked on the diff
        // before any apply: it follows links instead of reading targets as text, and allows
        // an absolute target inside the original.
        allow_outside_symlinks: true,
        ..ApplyOptions::default()
    }
}

fn refused_files(report: &ApplyReport) -> Vec<String> {
    report
        .files
        .iter()
        .filter(|f| matches!(f.status, FileStatus::Conflict | FileStatus::Refused))
        .map(|f| f.path.as_path().to_string_lossy().into_owned())
        .collect()
}

/// A successful check of a sandbox's patch, kept for the commit that follows.
pub struct Checked {
    /// The patch checked.
    patch: Vec<u8>,
    /// The pre-images it was checked with.
    base_dir: std::path::PathBuf,
    apply: CheckedApply,
}

impl Checked {
    /// Whether this check was of `diff`'s patch with `base_dir` as pre-images.
    pub fn is_of(&self, base_dir: &Path, diff: &SandboxDiff) -> bool {
        self.patch == diff.patch && self.base_dir == base_dir
    }
}

/// Checks that `diff` applies to `original` now (nothing written). The check, when there is
/// a patch, for [`commit`] to reuse. A symlink the diff adds or changes that points outside
/// the resource refuses it ([`SandboxError::Commit`] naming the links).
pub fn check(
    lc: &Lifecycle,
    original: &Path,
    base_dir: &Path,
    diff: &SandboxDiff,
) -> Result<Option<Checked>, SandboxError> {
    if diff.patch.is_empty() {
        return Ok(None);
    }
    super::links::refuse_links_out(lc.id(), original, &diff.entries, str::to_string)?;
    let checked = check_patch(original, &diff.patch, &options(base_dir, true))
        .map_err(|e| commit_err(lc, "the patch cannot be checked", e))?;
    let report = checked.report();
    if report.is_ok() {
        Ok(Some(Checked {
            patch: diff.patch.clone(),
            base_dir: base_dir.to_path_buf(),
            apply: checked,
        }))
    } else {
        Err(SandboxError::Commit {
            sandbox_id: lc.id().to_string(),
            reason: "the original changed where the sandbox did (conflict)".into(),
            files: refused_files(report),
            source: None,
        })
    }
}

fn commit_err(lc: &Lifecycle, what: &str, e: crate::Error) -> SandboxError {
    SandboxError::Commit {
        sandbox_id: lc.id().to_string(),
        reason: format!("{what}: {e}"),
        files: Vec::new(),
        source: Some(Box::new(e)),
    }
}

/// Applies `diff` to `original` with an undo record in `store`, moving `st` from `Active` to
/// `Committed`. On a refusal (a conflict, a symlink pointing outside the resource) nothing
/// is written and the status stays `Active`. `checked`, a [`check`] of the same patch, saves
/// planning it again. With `batch` (`commit_all`), the apply of a checked patch leaves its
/// last sync and cleanup to the batch ([`CommitBatch`]): the status is `Committed` once the
/// change is in place, and the change is durable when the batch is finished (a crash before
/// is recovered by completing it).
pub fn commit(
    lc: &Lifecycle,
    st: &mut State,
    store: &UndoStore,
    base_dir: &Path,
    diff: &SandboxDiff,
    checked: Option<Checked>,
    batch: Option<&mut CommitBatch>,
) -> Result<CommitResult, SandboxError> {
    lc.check(st.status, Status::Committed)?;
    let original = st
        .record
        .as_ref()
        .map(|r| r.original_path.clone())
        .ok_or_else(|| SandboxError::sandbox(Some(lc.id().as_str()), "sandbox has no context"))?;
    let mut commit_ref = None;
    if !diff.patch.is_empty() {
        super::links::refuse_links_out(lc.id(), &original, &diff.entries, str::to_string)?;
        let id = crate::id::next();
        set_in_flight(lc, st, Some(id.to_string()))?;
        let opts = options(base_dir, false);
        let checked = checked.filter(|c| c.is_of(base_dir, diff));
        let applied = match batch {
            // In a batch every apply is deferred (and, in a commit group, must reach the
            // group's shared sync): a patch not checked yet is checked now.
            Some(batch) => batch.make_room(&original).and_then(|_| {
                let apply = match checked {
                    Some(c) => c.apply,
                    None => check_patch(&original, &diff.patch, &options(base_dir, true))?,
                };
                let (report, deferred) =
                    store.apply_checked_deferred(apply, &opts, id, batch.intent())?;
                if let Some(d) = deferred {
                    batch.keep(d);
                }
                if report.is_ok() {
                    // Its state is written next; a failure there is still rolled back
                    // (`advance_committed`), so the next member need not wait for it.
                    batch.placed();
                }
                Ok(report)
            }),
            None => match checked {
                Some(c) => store.apply_checked_as(c.apply, &opts, id),
                None => store.apply_as(&original, &diff.patch, &opts, id),
            },
        };
        let report = match applied {
            Ok(r) => r,
            Err(e) => {
                let _ = set_in_flight(lc, st, None);
                return Err(commit_err(lc, "the patch could not be applied", e));
            }
        };
        if !report.is_ok() {
            set_in_flight(lc, st, None)?;
            return Err(SandboxError::Commit {
                sandbox_id: lc.id().to_string(),
                reason:
                    "the original changed where the sandbox did (conflict); nothing was written"
                        .into(),
                files: refused_files(&report),
                source: None,
            });
        }
        if report.wrote() {
            lc.landed();
            commit_ref = Some(id.to_string());
        }
    }
    if let Some(r) = st.record.as_mut() {
        r.commit_in_flight = None;
        r.commit_ref = commit_ref.clone();
    }
    lc.advance_committed(st, commit_ref.is_some())?;
    Ok(result(lc.id(), commit_ref, diff))
}

/// The [`CommitResult`] of a successful commit of `diff`.
pub fn result(id: &SandboxId, commit_ref: Option<String>, diff: &SandboxDiff) -> CommitResult {
    CommitResult {
        sandbox_id: id.to_string(),
        success: true,
        commit_ref,
        changed_files: diff.paths(DiffOp::Modified),
        added_files: diff.paths(DiffOp::Added),
        deleted_files: diff.paths(DiffOp::Deleted),
        error: None,
        timestamp: std::time::SystemTime::now(),
        metadata: Default::default(),
    }
}

fn set_in_flight(lc: &Lifecycle, st: &mut State, v: Option<String>) -> Result<(), SandboxError> {
    if let Some(r) = st.record.as_mut() {
        r.commit_in_flight = v;
    }
    lc.persist(st)
}

/// Undoes the commit of `st` (`Committed → RolledBack`). Refused, with the files named,
/// when the user changed them since the commit.
pub fn undo(lc: &Lifecycle, st: &mut State, store: &UndoStore) -> Result<(), SandboxError> {
    lc.check(st.status, Status::RolledBack)?;
    let (original, commit_ref) = match st.record.as_ref() {
        Some(r) => (r.original_path.clone(), r.commit_ref.clone()),
        None => {
            return Err(SandboxError::sandbox(
                Some(lc.id().as_str()),
                "sandbox has no context",
            ))
        }
    };
    if let Some(id) = commit_ref {
        store.undo(&original, &id, false).map_err(|e| {
            let files = changed_since(&e);
            SandboxError::Rollback {
                sandbox_id: lc.id().to_string(),
                reason: format!("cannot undo commit {id}: {e}"),
                files,
                source: Some(Box::new(e)),
            }
        })?;
    }
    if let Some(r) = st.record.as_mut() {
        r.commit_ref = None;
    }
    lc.advance(st, Status::RolledBack)
}

/// The files an undo refused over ("changed since the apply: a, b (use force …)").
fn changed_since(e: &crate::Error) -> Vec<String> {
    let msg = e.to_string();
    let Some(i) = msg.find("changed since the apply: ") else {
        return Vec::new();
    };
    let rest = &msg[i + "changed since the apply: ".len()..];
    let rest = rest.split(" (use force").next().unwrap_or(rest);
    rest.split(", ").map(str::to_string).collect()
}

/// After a crash: settles a commit that was in flight. The original's own apply journal is
/// recovered first (the apply is then either complete or undone); the undo record then says
/// whether the commit landed: applied means `Committed`, anything else means it did not.
pub fn reconcile(lc: &Lifecycle, st: &mut State, store: &UndoStore) -> Result<(), SandboxError> {
    let Some((original, id)) = st.record.as_ref().and_then(|r| {
        r.commit_in_flight
            .clone()
            .map(|id| (r.original_path.clone(), id))
    }) else {
        return Ok(());
    };
    recover_project(&original)
        .map_err(|e| SandboxError::from_lower(Some(lc.id().as_str()), "recover the original", e))?;
    let landed = matches!(store.entry(&id), Ok(e) if e.state == RecordState::Applied);
    if !landed {
        let _ = store.drop_record(&id);
    }
    if let Some(r) = st.record.as_mut() {
        r.commit_in_flight = None;
        if landed {
            r.commit_ref = Some(id);
        }
    }
    if landed && st.status != Status::Committed {
        lc.advance(st, Status::Committed)
    } else {
        lc.persist(st)
    }
}
