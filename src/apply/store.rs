//! A store of undo records under a sandbox root: apply with a record, list, undo the last
//! one (or a given one), drop, prune. The `patchbox apply` command line uses it.
//!
//! Layout: `<root>/undo/<ulid>/`, one undo record per apply that wrote something (see
//! [`undo_apply`] for what a record holds; it names its project). The
//! ULID orders records by time. A record is *applied* once its apply completed, *undone*
//! once used, *incomplete* otherwise (an apply still running, or the rare leftover of a power
//! loss). Records of an older layout (with a `<ulid>.project` file beside) are still read.
//!
//! Applies and undos through the store are serialized per project by a lock file of the
//! store, `<root>/undo/locks/<sha1 of the project's canonical path>` (an exclusive `flock`;
//! nothing is written into the project): from the choice of a record id to the end of the
//! apply, and from the choice of the record to undo to its removal. An id the store makes is
//! made under that lock and is greater than every id in the store, so "the newest record"
//! is the apply that landed last, across processes too, and undoing the newest record again
//! and again takes the applies back newest first. (An id chosen by the caller,
//! [`UndoStore::apply_as`], sorts where the caller put it.)
//!
//! Pruning ([`UndoStore::prune`], run after every apply through the store) keeps, by
//! default ([`PrunePolicy::default`]), the newest 50 applied records per project and nothing
//! older than 30 days; undone records are removed (their undo is complete), incomplete ones
//! only by age, since one may belong to an apply that is running or waiting for recovery.
//!
//! ```
//! use patchbox::apply::store::UndoStore;
//! use patchbox::apply::ApplyOptions;
//! let root = tempfile::tempdir().unwrap();
//! let project = tempfile::tempdir().unwrap();
//! std::fs::write(project.path().join("a.txt"), "one\n").unwrap();
//! let store = UndoStore::new(root.path());
//! let patch = b"--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n";
//! store.apply(project.path(), patch, &ApplyOptions::default()).unwrap();
//! assert_eq!(store.list(Some(project.path())).unwrap().len(), 1);
//! let undone = store.undo_last(project.path(), false).unwrap();
//! assert_eq!(undone.report.restored.len(), 1);
//! assert_eq!(std::fs::read(project.path().join("a.txt")).unwrap(), b"one\n");
//! assert!(store.list(Some(project.path())).unwrap().is_empty());
//! ```

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::finish::IntentHook;
use super::{apply_patch, recover_project, undo, undo_apply, ApplyOptions, ApplyReport};
use super::{CheckedApply, Defer, Deferred, RecoveryReport, UndoReport};
use crate::error::{Error, Result};

/// The state of an undo record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordState {
    /// Its apply completed: it can be undone.
    Applied,
    /// It has been used.
    Undone,
    /// Its apply has not completed (running, or interrupted and not yet recovered).
    Incomplete,
}

/// One undo record in the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UndoEntry {
    /// Its id (a ULID).
    pub id: String,
    /// Its directory.
    pub dir: PathBuf,
    /// The project it was made for.
    pub project: PathBuf,
    /// When the apply started (from the id).
    pub created: SystemTime,
    /// How many paths the apply changed.
    pub paths: usize,
    /// Applied, undone or incomplete.
    pub state: RecordState,
}

/// What [`UndoStore::prune`] keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrunePolicy {
    /// Applied records kept per project, newest first (default 50).
    pub keep_per_project: usize,
    /// Records older than this are removed, whatever their state (default 30 days).
    pub max_age: Duration,
}

impl Default for PrunePolicy {
    fn default() -> Self {
        PrunePolicy {
            keep_per_project: 50,
            max_age: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

/// The result of [`UndoStore::undo_last`].
#[derive(Clone, Debug)]
pub struct UndoLast {
    /// The record used (now dropped from the store).
    pub record: UndoEntry,
    /// What the undo did. `already_undone` means an interrupted undo of this record was
    /// completed by recovery: nothing more was undone.
    pub report: UndoReport,
}

/// Undo records under `<root>/undo/`.
#[derive(Clone, Debug)]
pub struct UndoStore {
    dir: PathBuf,
    policy: PrunePolicy,
}

const LEGACY_SUFFIX: &str = ".project";

/// The directory of the store's per-project lock files (not a record id, so listing skips it).
const LOCKS_DIR: &str = "locks";

/// The store's lock on one project ([`UndoStore::lock_project`]).
struct StoreLock {
    _file: std::fs::File,
}

fn canonical(project: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(project).map_err(|e| Error::io("resolve project", project, e))
}

impl UndoStore {
    /// The store of the sandbox root `root` (its `undo/` directory, created when needed),
    /// with the default [`PrunePolicy`].
    pub fn new(root: impl AsRef<Path>) -> UndoStore {
        UndoStore {
            dir: root.as_ref().join("undo"),
            policy: PrunePolicy::default(),
        }
    }

    /// The same store with another prune policy.
    pub fn with_policy(mut self, policy: PrunePolicy) -> UndoStore {
        self.policy = policy;
        self
    }

    /// The directory holding the records.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Applies `patch` to `project` (see [`apply_patch`]) with an undo record in the store
    /// (`opts.undo_dir` is ignored), then prunes the store; a prune failure becomes a
    /// warning of the report.
    pub fn apply(
        &self,
        project: impl AsRef<Path>,
        patch: &[u8],
        opts: &ApplyOptions,
    ) -> Result<ApplyReport> {
        let project = canonical(project.as_ref())?;
        Ok(self
            .record_as(&project, opts, None, true, |o| {
                Ok((apply_patch(&project, patch, o)?, ()))
            })?
            .0)
    }

    /// [`UndoStore::apply`] with the record id chosen by the caller, so a caller can note
    /// the id durably before the apply starts (the plan layer's commit journal does: after a
    /// crash it finds the record, applied or not, by that id). `id` must be new to the store.
    pub fn apply_as(
        &self,
        project: impl AsRef<Path>,
        patch: &[u8],
        opts: &ApplyOptions,
        id: ulid::Ulid,
    ) -> Result<ApplyReport> {
        let project = canonical(project.as_ref())?;
        Ok(self
            .record_as(&project, opts, Some(id), true, |o| {
                Ok((apply_patch(&project, patch, o)?, ()))
            })?
            .0)
    }

    /// [`UndoStore::apply_as`] of a patch checked before ([`check_patch`]): its plan is
    /// written if it still holds, else the patch is planned again (see [`CheckedApply`]).
    /// This always writes (`opts.check` is ignored).
    ///
    /// [`check_patch`]: super::check_patch
    pub fn apply_checked_as(
        &self,
        checked: CheckedApply,
        opts: &ApplyOptions,
        id: ulid::Ulid,
    ) -> Result<ApplyReport> {
        let opts = ApplyOptions {
            check: false,
            ..opts.clone()
        };
        let project = checked.root().to_path_buf();
        Ok(self
            .record_as(&project, &opts, Some(id), true, |o| {
                Ok((checked.apply(o)?, ()))
            })?
            .0)
    }

    /// [`UndoStore::apply_checked_as`] that returns once the change is in place, leaving
    /// its last sync and cleanup to the caller ([`Deferred`]; `commit_all` finishes all its
    /// sandboxes' applies with one sync per filesystem). The undo record is complete and
    /// marked applied; the project stays locked until the [`Deferred`] is finished.
    ///
    /// With `intent`, the apply's intent is made durable by that shared sync instead of a
    /// sync of its own (see `apply::finish::SharedSync`). The store is not pruned: listing
    /// every record once per apply of a batch is the caller's to do once, after the batch
    /// ([`UndoStore::prune`]).
    pub(crate) fn apply_checked_deferred(
        &self,
        checked: CheckedApply,
        opts: &ApplyOptions,
        id: ulid::Ulid,
        intent: Option<IntentHook>,
    ) -> Result<(ApplyReport, Option<Deferred>)> {
        let opts = ApplyOptions {
            check: false,
            ..opts.clone()
        };
        let defer = match intent {
            Some(hook) => Defer::Shared(hook),
            None => Defer::Yes,
        };
        let project = checked.root().to_path_buf();
        self.record_as(&project, &opts, Some(id), false, |o| {
            checked.apply_with(o, defer)
        })
    }

    /// Runs `apply` on `project` (canonical) with an undo record in this store (none in
    /// check mode), then prunes (with `prune`), holding the project's lock throughout. The
    /// record's id is `id`, else one made under the lock ([`UndoStore::fresh_id`]).
    fn record_as<T>(
        &self,
        project: &Path,
        opts: &ApplyOptions,
        id: Option<ulid::Ulid>,
        prune: bool,
        apply: impl FnOnce(&ApplyOptions) -> Result<(ApplyReport, T)>,
    ) -> Result<(ApplyReport, T)> {
        let mut opts = opts.clone();
        opts.undo_dir = None;
        let mut _lock = None;
        if !opts.check {
            std::fs::create_dir_all(&self.dir)
                .map_err(|e| Error::io("create undo directory", &self.dir, e))?;
            _lock = Some(self.lock_project(project)?);
            let id = match id {
                Some(id) => id,
                None => self.fresh_id()?,
            };
            let dir = self.dir.join(id.to_string());
            if dir.exists() {
                return Err(Error::InvalidId {
                    id: id.to_string(),
                    reason: "an undo record with this id exists",
                });
            }
            opts.undo_dir = Some(dir);
        }
        let (mut report, more) = apply(&opts)?;
        if prune && report.wrote() {
            if let Err(e) = self.prune() {
                report
                    .warnings
                    .push(format!("cannot prune undo records: {e}"));
            }
        }
        Ok((report, more))
    }

    /// The record `id`, with its state.
    pub fn entry(&self, id: &str) -> Result<UndoEntry> {
        let ulid = ulid::Ulid::from_string(id).map_err(|_| Error::InvalidId {
            id: id.to_string(),
            reason: "not an undo record id",
        })?;
        let dir = self.dir.join(id);
        let (project, paths) = undo::summary(&dir)?;
        let state = if dir.join("undone").exists() {
            RecordState::Undone
        } else if undo::is_applied(&dir) {
            RecordState::Applied
        } else {
            RecordState::Incomplete
        };
        Ok(UndoEntry {
            id: id.to_string(),
            dir,
            project,
            created: ulid.datetime(),
            paths,
            state,
        })
    }

    /// Every record (of `project`, if given), oldest first. A record that cannot be read is
    /// listed as incomplete for its own project path, empty.
    pub fn list(&self, project: Option<&Path>) -> Result<Vec<UndoEntry>> {
        let project = project.map(canonical).transpose()?;
        let rd = match std::fs::read_dir(&self.dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            r => r.map_err(|e| Error::io("list undo records", &self.dir, e))?,
        };
        let mut out = Vec::new();
        for e in rd {
            let e = e.map_err(|e| Error::io("list undo records", &self.dir, e))?;
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            let Ok(ulid) = ulid::Ulid::from_string(&name) else {
                continue;
            };
            let entry = self.entry(&name).unwrap_or_else(|_| UndoEntry {
                id: name.clone(),
                dir: e.path(),
                project: PathBuf::new(),
                created: ulid.datetime(),
                paths: 0,
                state: RecordState::Incomplete,
            });
            if project.as_ref().is_none_or(|p| *p == entry.project) {
                out.push(entry);
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// Undoes the newest applied record of `project` (after recovering the project), then
    /// drops it. If an earlier undo of a record was interrupted and recovery completed it,
    /// that undo is what this call finishes: nothing more is undone.
    ///
    /// The choice and the undo hold the project's lock in the store, so concurrent calls
    /// (and applies through the store) take turns: two calls undo the two newest applies,
    /// newest first.
    pub fn undo_last(&self, project: impl AsRef<Path>, force: bool) -> Result<UndoLast> {
        let project = canonical(project.as_ref())?;
        let _lock = self.lock_project(&project)?;
        let recovery = recover_project(&project)?;
        let records = self.list(Some(&project))?;
        if let Some(done) = records
            .iter()
            .rev()
            .find(|r| r.state == RecordState::Undone)
        {
            self.drop_record(&done.id)?;
            return Ok(UndoLast {
                record: done.clone(),
                report: UndoReport {
                    already_undone: true,
                    recovery,
                    ..UndoReport::default()
                },
            });
        }
        let Some(last) = records
            .iter()
            .rev()
            .find(|r| r.state == RecordState::Applied)
        else {
            return Err(Error::Pending {
                id: "undo".into(),
                reason: format!("no apply to undo for {}", project.display()),
            });
        };
        let mut report = self.undo_locked(&project, &last.id, force)?;
        merge_recovery(&mut report.recovery, recovery);
        Ok(UndoLast {
            record: last.clone(),
            report,
        })
    }

    /// Undoes the record `id` on `project`, then drops it (holding the project's lock in the
    /// store, as [`UndoStore::undo_last`] does).
    pub fn undo(&self, project: impl AsRef<Path>, id: &str, force: bool) -> Result<UndoReport> {
        let _lock = self.lock_project(&canonical(project.as_ref())?)?;
        self.undo_locked(project.as_ref(), id, force)
    }

    /// [`UndoStore::undo`], the caller holding the project's lock.
    fn undo_locked(&self, project: &Path, id: &str, force: bool) -> Result<UndoReport> {
        let entry = self.entry(id)?;
        let report = undo_apply(project, &entry.dir, force)?;
        self.drop_record(id)?;
        Ok(report)
    }

    /// Waits for and takes the store's lock on `project` (canonical): an exclusive `flock`
    /// on `<dir>/locks/<sha1 of the path>`, a file of the store, never of the project.
    /// Released when dropped, or when the process dies.
    fn lock_project(&self, project: &Path) -> Result<StoreLock> {
        use sha1::Digest;
        use std::os::unix::ffi::OsStrExt;
        let locks = self.dir.join(LOCKS_DIR);
        std::fs::create_dir_all(&locks)
            .map_err(|e| Error::io("create lock directory", &locks, e))?;
        let key = sha1::Sha1::digest(project.as_os_str().as_bytes());
        let path = locks.join(crate::git::oid::to_hex(&key));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io("open lock file", &path, e))?;
        loop {
            match rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive) {
                Ok(()) => return Ok(StoreLock { _file: file }),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(Error::io("lock", &path, e.into())),
            }
        }
    }

    /// A new record id, greater than every id in the store. Made under the project's lock,
    /// it sorts after the record of every apply that landed before, whichever process
    /// made it (ids of one millisecond from two processes would otherwise sort at random).
    fn fresh_id(&self) -> Result<ulid::Ulid> {
        let mut id = crate::id::next();
        let rd = match std::fs::read_dir(&self.dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(id),
            r => r.map_err(|e| Error::io("list undo records", &self.dir, e))?,
        };
        for e in rd {
            let e = e.map_err(|e| Error::io("list undo records", &self.dir, e))?;
            let Some(u) = e
                .file_name()
                .to_str()
                .and_then(|n| ulid::Ulid::from_string(n.trim_end_matches(LEGACY_SUFFIX)).ok())
            else {
                continue;
            };
            if u >= id {
                id = u.increment().ok_or_else(|| Error::InvalidId {
                    id: u.to_string(),
                    reason: "no undo record id sorts after this one",
                })?;
            }
        }
        Ok(id)
    }

    /// Removes the record `id`.
    pub fn drop_record(&self, id: &str) -> Result<()> {
        ulid::Ulid::from_string(id).map_err(|_| Error::InvalidId {
            id: id.to_string(),
            reason: "not an undo record id",
        })?;
        let dir = self.dir.join(id);
        if !dir.exists() {
            return Err(Error::Pending {
                id: id.to_string(),
                reason: format!("no undo record in {}", self.dir.display()),
            });
        }
        std::fs::remove_dir_all(&dir).map_err(|e| Error::io("remove undo record", &dir, e))?;
        let legacy = self.dir.join(format!("{id}{LEGACY_SUFFIX}"));
        match std::fs::remove_file(&legacy) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io("remove undo record", &legacy, e))
            }
            _ => Ok(()),
        }
    }

    /// Prunes the store by its [`PrunePolicy`]; returns the ids removed.
    pub fn prune(&self) -> Result<Vec<String>> {
        let now = SystemTime::now();
        let mut removed = Vec::new();
        let mut kept: std::collections::HashMap<PathBuf, usize> = Default::default();
        // Newest first: the first `keep_per_project` applied records of a project stay.
        for r in self.list(None)?.into_iter().rev() {
            let old = now
                .duration_since(r.created)
                .is_ok_and(|age| age > self.policy.max_age);
            let drop = old
                || match r.state {
                    RecordState::Undone => true,
                    RecordState::Incomplete => false,
                    RecordState::Applied => {
                        let n = kept.entry(r.project.clone()).or_default();
                        *n += 1;
                        *n > self.policy.keep_per_project
                    }
                };
            if drop {
                self.drop_record(&r.id)?;
                removed.push(r.id);
            }
        }
        Ok(removed)
    }
}

fn merge_recovery(into: &mut RecoveryReport, mut first: RecoveryReport) {
    first.recovered.append(&mut into.recovered);
    first.warnings.append(&mut into.warnings);
    *into = first;
}
