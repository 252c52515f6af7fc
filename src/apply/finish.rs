//! How a write phase ends: its last sync, the `done` mark and the cleanup of its staging
//! directory, done at once or left to the caller.
//!
//! A commit normally syncs the project's file system once its change is in place, renames
//! the journal's intent to `done` and removes the staging directory ([`complete`],
//! [`finish_cleanup`], which recovery shares). A batch of applies takes that over instead
//! ([`Defer`]): each write phase returns an [`Unfinished`] once its change is in place, and
//! one sync per file system then covers them all; the intents may share one sync too
//! ([`SharedSync`]). The invariant kept: nothing is marked `done` before the change is
//! durable, so a crash in between is recovered by rolling forward.

use super::stage::{checked, ignore_missing, in_stage, sub};
use crate::error::Result;
use crate::fs::project::{self, ProjectPath};
use crate::fs::relpath::RelPath;
use crate::fs::Timestamp;
use std::path::{Path, PathBuf};

/// What a commit does around the change itself (kept in the journal, so recovery does it
/// too).
#[derive(Clone, Debug, Default)]
pub(crate) struct Finish {
    /// A file to create (synced) once the change is in place: the undo record's `applied`
    /// marker for an apply, its `undone` marker for an undo.
    pub marker: Option<PathBuf>,
    /// Mtimes to set once the staging directory is gone (`None`: the root); undo restores
    /// the directories' mtimes this way.
    pub finals: Vec<(Option<RelPath>, Timestamp)>,
    /// The undo record being written (and whether the library created its directory): it is
    /// removed if the change is rolled back.
    pub record: Option<(PathBuf, bool)>,
    /// Whether the last sync and the cleanup are left to the caller (the commit then
    /// returns once the change is in place, with [`CommitLog::unfinished`] to finish), and
    /// what makes the intent durable.
    pub defer: Defer,
}

/// How a write phase ends (crate-internal: `commit_all`'s batch, see `plan::batch`).
#[derive(Clone, Debug, Default)]
pub(crate) enum Defer {
    /// Synced and finished before the commit returns.
    #[default]
    No,
    /// Returns once the change is in place, its last sync and cleanup left to the caller
    /// ([`Unfinished`]).
    Yes,
    /// As `Yes`, and the intent is made durable by a sync shared with other applies
    /// ([`SharedSync`]) instead of one of its own.
    Shared(IntentHook),
}

impl Defer {
    /// Whether the last sync and the cleanup are the caller's.
    pub(super) fn is_deferred(&self) -> bool {
        !matches!(self, Defer::No)
    }
}

/// A sync shared by the write phases of several applies (`commit_all`): each calls
/// [`SharedSync::intent_written`] where it would sync its filesystem to make its intent
/// durable, and goes on to move originals only when that returns `Ok` — by then one sync
/// of each filesystem involved has covered every member's intent. An `Err` rolls the
/// transaction back (nothing of the project was touched yet).
pub(crate) trait SharedSync: Send + Sync {
    /// The intent of the transaction on `root` is written; returns once it is durable and
    /// this transaction may move originals, or with the reason it must not.
    fn intent_written(&self, root: &Path) -> Result<()>;

    /// The caller's change is in place (or there was nothing to change): whoever waits for
    /// it may go on. Called at most once, after `intent_written` returned `Ok`.
    fn placed(&self) {}
}

/// A [`SharedSync`] handed down to a write phase.
#[derive(Clone)]
pub(crate) struct IntentHook(pub std::sync::Arc<dyn SharedSync>);

impl std::fmt::Debug for IntentHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IntentHook")
    }
}

/// A transaction whose change is in place (every original moved aside, every new entry
/// placed, the undo record's marker created) but not yet made durable: its journal is still
/// at INTENT, so a crash before [`Unfinished::finish`] is recovered by rolling forward,
/// which finds everything placed. A batch of applies (`commit_all`) keeps these and syncs
/// each filesystem once for all of them instead of once per apply. The caller holds the
/// project lock until `finish` is over. Dropped unfinished, it is finished (synced) then.
pub(crate) struct Unfinished {
    root: PathBuf,
    stage: ProjectPath,
    stage_rel: RelPath,
    finals: Vec<(Option<RelPath>, Timestamp)>,
    finished: bool,
}

impl Unfinished {
    /// A transaction left to finish: its change is in place in `root` (staged in `stage`),
    /// and `finals` are the mtimes to set once the staging directory is gone.
    pub(super) fn new(
        root: PathBuf,
        stage: ProjectPath,
        stage_rel: RelPath,
        finals: Vec<(Option<RelPath>, Timestamp)>,
    ) -> Self {
        Unfinished {
            root,
            stage,
            stage_rel,
            finals,
            finished: false,
        }
    }

    /// The project root.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Makes the change durable (one `syncfs` of the project's filesystem, skipped when
    /// `synced` says the caller did it after this transaction's last rename), then marks
    /// it done and removes its staging directory. Cleanup failures are returned as
    /// warnings; a failed sync is an error and leaves the journal at INTENT (the change
    /// stays in place; the next apply's or undo's recovery completes it).
    pub(crate) fn finish(mut self, synced: bool) -> Result<Vec<String>> {
        self.finished = true;
        if !synced {
            project::sync_fs(&self.root)?;
        }
        let _scope = project::DirScope::enter(&self.root)?;
        let mut warnings = Vec::new();
        complete(
            &self.root,
            &self.stage,
            &self.stage_rel,
            &self.finals,
            &mut warnings,
        );
        Ok(warnings)
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if !self.finished {
            let me = Unfinished {
                root: self.root.clone(),
                stage: self.stage.clone(),
                stage_rel: self.stage_rel.clone(),
                finals: std::mem::take(&mut self.finals),
                finished: true,
            };
            let _ = me.finish(false);
        }
    }
}

/// Renames the intent to `done` (from here on recovery only cleans up), then removes the
/// staging directory ([`finish_cleanup`]). Failures become warnings: the change is durable.
pub(super) fn complete(
    root: &Path,
    stage: &ProjectPath,
    stage_rel: &RelPath,
    finals: &[(Option<RelPath>, Timestamp)],
    warnings: &mut Vec<String>,
) {
    let done = in_stage(root, stage_rel, "intent")
        .and_then(|i| project::rename_noreplace(&i, &in_stage(root, stage_rel, "done")?));
    match done {
        Ok(()) => finish_cleanup(root, stage, stage_rel, finals, warnings),
        Err(e) => warnings.push(format!(
            "the change is complete but cannot be marked so ({e}); the next apply or \
             `patchbox recover` removes {}",
            stage.to_path_buf().display()
        )),
    }
}

/// Removes a complete transaction's staging directory (backups, journal; `done` last), then
/// sets the final mtimes. Failures become warnings: the change itself is complete.
pub(crate) fn finish_cleanup(
    root: &Path,
    stage: &ProjectPath,
    stage_rel: &RelPath,
    finals: &[(Option<RelPath>, Timestamp)],
    warnings: &mut Vec<String>,
) {
    let done = sub(stage_rel, "done".into()).ok();
    match project::list_leaves(stage) {
        Ok(leaves) => {
            for l in leaves.iter().filter(|l| Some(*l) != done.as_ref()) {
                if let Err(e) = checked(root, l).and_then(|p| project::remove_file(&p)) {
                    warnings.push(format!("cannot remove backup: {e}"));
                }
            }
        }
        Err(e) => warnings.push(format!("cannot list the staging directory: {e}")),
    }
    if let Err(e) =
        in_stage(root, stage_rel, "done").and_then(|d| ignore_missing(project::remove_file(&d)))
    {
        warnings.push(format!("cannot remove the journal: {e}"));
    }
    match project::remove_dir_if_empty(stage) {
        Ok(true) => {}
        Ok(false) => warnings.push(format!(
            "staging directory {} is not empty; remove it by hand",
            stage.to_path_buf().display()
        )),
        Err(e) => warnings.push(format!("cannot remove staging directory: {e}")),
    }
    for (d, t) in finals {
        let r = match d {
            None => project::set_root_mtime(root, *t),
            Some(d) => checked(root, d).and_then(|p| match project::stamp(&p)? {
                Some(_) => project::set_mtime(&p, *t),
                None => Ok(()),
            }),
        };
        if let Err(e) = r {
            warnings.push(format!("cannot restore a directory's mtime: {e}"));
        }
    }
    // No sync here: the change was durable before `done` was written, and a crash that
    // loses this cleanup leaves the staging directory with its `done`, which recovery
    // removes (then sets the same mtimes). Syncing the root would make every apply wait for
    // one more journal commit (4–9 ms on a journaled ext4 image) for tidiness alone.
}
