//! A sandbox's state on disk (`state.json` in its directory) and the lifecycle guard every
//! strategy runs its operations under.
//!
//! The state file is replaced atomically (written beside, synced, renamed) on every status
//! change, so a crash leaves either the old state or the new one. A manager opened after a
//! crash reads these files to find its plans again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use parking_lot::{Mutex, MutexGuard};
use serde::{Deserialize, Serialize};

use super::error::SandboxError;
use super::lock::PlanGuard;
use super::model::{unix_millis, SandboxContext, Strategy};
use super::status::Status;
use crate::fs::state_dir::{self, StateDir};
use crate::id::{PlanId, SandboxId};

/// Name of the state file in a sandbox's directory.
pub const STATE_FILE: &str = "state.json";

/// Format version of [`STATE_FILE`].
const VERSION: u32 = 1;

/// What `state.json` holds.
///
/// The ids are written as plain strings and checked again when read: a state file whose
/// sandbox or plan id is not one is refused by [`Record::load`] as malformed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    /// Format version.
    pub version: u32,
    /// The sandbox's ULID.
    pub sandbox_id: SandboxId,
    /// Its plan.
    pub plan_id: PlanId,
    /// Its resource.
    pub resource_id: String,
    /// Its strategy.
    pub strategy: Strategy,
    /// Its status.
    pub status: Status,
    /// The original resource.
    pub original_path: PathBuf,
    /// Where its files are.
    pub sandbox_path: PathBuf,
    /// When it was created.
    #[serde(with = "unix_millis")]
    pub created_at: SystemTime,
    /// Strategy-specific facts.
    pub metadata: BTreeMap<String, String>,
    /// What names the last commit (undo record, git commit), while it can be undone.
    pub commit_ref: Option<String>,
    /// A commit started under this reference and not known to have finished: after a
    /// crash the strategy looks the reference up to learn whether it landed.
    pub commit_in_flight: Option<String>,
}

impl Record {
    /// The context this record describes.
    pub fn context(&self) -> SandboxContext {
        SandboxContext {
            sandbox_id: self.sandbox_id.to_string(),
            sandbox_path: self.sandbox_path.clone(),
            original_path: self.original_path.clone(),
            resource_id: self.resource_id.clone(),
            plan_id: self.plan_id.to_string(),
            created_at: self.created_at,
            metadata: self.metadata.clone(),
        }
    }

    /// Reads `<dir>/state.json`.
    pub fn load(dir: &Path) -> Result<Record, SandboxError> {
        let p = dir.join(STATE_FILE);
        let data = std::fs::read(&p).map_err(|e| {
            SandboxError::from_lower(None, "read sandbox state", crate::Error::io("read", &p, e))
        })?;
        let r: Record = serde_json::from_slice(&data).map_err(|e| {
            SandboxError::sandbox(
                None,
                format!("{}: malformed sandbox state: {e}", p.display()),
            )
        })?;
        if r.version != VERSION {
            return Err(SandboxError::sandbox(
                Some(r.sandbox_id.as_str()),
                format!("{}: unknown state version {}", p.display(), r.version),
            ));
        }
        Ok(r)
    }
}

/// The mutable part of a sandbox, behind its operation lock.
pub struct State {
    /// The status now.
    pub status: Status,
    /// The persisted record; `None` while pending (nothing on disk).
    pub record: Option<Record>,
}

/// A changing operation's hold on its sandbox: the plan's lock (taken first, see
/// [`crate::plan::lock`]), then the sandbox's operation lock, with the state re-read from
/// disk in between — another process may have committed, rolled back or removed the
/// sandbox since this one last looked. Dereferences to the [`State`].
pub struct OpGuard<'a> {
    // Dropped in this order: the operation lock, then the plan's.
    state: MutexGuard<'a, State>,
    plan: PlanGuard,
}

impl OpGuard<'_> {
    /// Whether the plan's lock was taken by this operation (see [`PlanGuard::is_fresh`]):
    /// then a commit the state shows in flight is the remains of a holder that is gone.
    pub fn is_fresh(&self) -> bool {
        self.plan.is_fresh()
    }
}

impl std::ops::Deref for OpGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl std::ops::DerefMut for OpGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

/// The lifecycle guard: identity, the operation lock, and persistence. Every strategy holds
/// one; an operation takes [`Lifecycle::lock`] for its whole length, so two operations of
/// one sandbox never interleave.
pub struct Lifecycle {
    id: SandboxId,
    strategy: Strategy,
    /// The sandbox's own directory (`<plan dir>/<sandbox id>`), where its state lives.
    dir: PathBuf,
    state: Mutex<State>,
}

/// [`Lifecycle::lock_for_path`]'s hold: with the plan's lock, or the operation lock alone.
pub enum MaybeOp<'a> {
    /// The sandbox was `Created`: the plan's lock too.
    Op(OpGuard<'a>),
    /// The operation lock alone.
    Plain(MutexGuard<'a, State>),
}

impl std::ops::Deref for MaybeOp<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        match self {
            MaybeOp::Op(o) => o,
            MaybeOp::Plain(p) => p,
        }
    }
}

impl std::ops::DerefMut for MaybeOp<'_> {
    fn deref_mut(&mut self) -> &mut State {
        match self {
            MaybeOp::Op(o) => o,
            MaybeOp::Plain(p) => p,
        }
    }
}

/// `st`'s status, in memory and in its record alike.
fn set_status(st: &mut State, to: Status) {
    st.status = to;
    if let Some(r) = st.record.as_mut() {
        r.status = to;
    }
}

impl Lifecycle {
    /// A pending sandbox (nothing on disk yet) with a new ULID, greater than those this
    /// process made before (see [`crate::id`]: a plan's sandboxes are listed and committed
    /// in id order, which must be their creation order).
    pub fn pending(strategy: Strategy, plan_dir: &Path) -> Lifecycle {
        let id = SandboxId::new();
        Lifecycle {
            dir: plan_dir.join(id.as_str()),
            id,
            strategy,
            state: Mutex::new(State {
                status: Status::Pending,
                record: None,
            }),
        }
    }

    /// A sandbox found on disk.
    pub fn loaded(record: Record, dir: PathBuf) -> Lifecycle {
        Lifecycle {
            id: record.sandbox_id.clone(),
            strategy: record.strategy.clone(),
            dir,
            state: Mutex::new(State {
                status: record.status,
                record: Some(record),
            }),
        }
    }

    /// The sandbox's ULID.
    pub fn id(&self) -> &SandboxId {
        &self.id
    }

    /// Its strategy.
    pub fn strategy(&self) -> Strategy {
        self.strategy.clone()
    }

    /// Its directory under the plan's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The status now (waits for a running operation).
    pub fn status(&self) -> Status {
        self.state.lock().status
    }

    /// The context, once created.
    pub fn context(&self) -> Option<SandboxContext> {
        self.state.lock().record.as_ref().map(Record::context)
    }

    /// Takes the operation lock alone: for reads (diff, checks under `commit_all`'s plan
    /// lock) and for steps that touch nothing another process can see.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    /// The directory of the sandbox's plan (where the plan's lock lives).
    pub fn plan_dir(&self) -> &Path {
        self.dir.parent().unwrap_or(&self.dir)
    }

    /// Takes the plan's lock, then the operation lock, and re-reads the state from disk:
    /// what every operation that changes the sandbox or its original runs under. When this
    /// operation took the plan's lock itself, `settle` settles what the state shows in
    /// flight (a commit, a revert: their process is gone then, see [`OpGuard::is_fresh`]);
    /// it must do nothing when nothing is.
    pub fn lock_op(
        &self,
        settle: impl FnOnce(&mut State) -> Result<(), SandboxError>,
    ) -> Result<OpGuard<'_>, SandboxError> {
        let plan = PlanGuard::acquire(self.plan_dir())?;
        let mut state = self.state.lock();
        self.refresh(&mut state);
        let mut op = OpGuard { state, plan };
        if op.is_fresh() && op.record.is_some() {
            settle(&mut op)?;
        }
        Ok(op)
    }

    /// [`Lifecycle::lock_op`] when the sandbox is `Created` (a first path makes it active,
    /// a change of state others must see in order); the operation lock alone otherwise.
    pub fn lock_for_path(&self) -> Result<MaybeOp<'_>, SandboxError> {
        if self.status() == Status::Created {
            return self.lock_op(|_| Ok(())).map(MaybeOp::Op);
        }
        Ok(MaybeOp::Plain(self.state.lock()))
    }

    /// Makes `st` what the state file says (another process may have changed it): a
    /// sandbox whose directory is gone was cleaned up. Nothing is written.
    fn refresh(&self, st: &mut State) {
        if st.record.is_none() || st.status == Status::CleanedUp {
            return;
        }
        let p = self.dir.join(STATE_FILE);
        match std::fs::symlink_metadata(&p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                st.status = Status::CleanedUp;
                return;
            }
            Err(_) => return,
            Ok(_) => {}
        }
        if let Ok(r) = Record::load(&self.dir) {
            if r.sandbox_id == self.id {
                st.status = r.status;
                st.record = Some(r);
            }
        }
    }

    /// Refuses the step `from → to` unless the table allows it.
    pub fn check(&self, from: Status, to: Status) -> Result<(), SandboxError> {
        Status::assert_transition(from, to).map_err(|e| e.for_sandbox(self.id.as_str()))
    }

    /// Moves to `to` (after checking the step) and persists the state.
    pub fn advance(&self, st: &mut State, to: Status) -> Result<(), SandboxError> {
        self.check(st.status, to)?;
        let before = st.status;
        set_status(st, to);
        if let Err(e) = self.persist(st) {
            set_status(st, before);
            return Err(e);
        }
        Ok(())
    }

    /// Where a commit's change has just landed in the original, its record still saying
    /// the commit is in flight: nothing, but for the test hook
    /// `plan::fault::panic_after_next_landing` (feature `fault-injection`).
    #[doc(hidden)]
    #[inline]
    pub fn landed(&self) {
        #[cfg(feature = "fault-injection")]
        super::fault::after_landing(&self.id);
    }

    /// Advances `st` to `Committed` after a commit; `landed`: its change is in the original
    /// (an apply wrote, a branch moved, a `COMMIT` returned).
    ///
    /// When the state file cannot be written, the error is returned, but a landed commit is
    /// `Committed` in memory all the same: that is what it is, whatever the file says, and
    /// a rollback (`commit_all`'s, after this error) must then undo it rather than pass it
    /// by and leave the user's original changed under a plan reported rolled back. On disk
    /// the commit is still in flight, which the next start settles.
    pub fn advance_committed(&self, st: &mut State, landed: bool) -> Result<(), SandboxError> {
        let Err(e) = self.advance(st, Status::Committed) else {
            return Ok(());
        };
        if landed {
            self.check(st.status, Status::Committed)?;
            set_status(st, Status::Committed);
        }
        Err(e)
    }

    /// Writes the state file (nothing while pending, nor once the directory is gone).
    pub fn persist(&self, st: &State) -> Result<(), SandboxError> {
        let Some(r) = st.record.as_ref() else {
            return Ok(());
        };
        if st.status == Status::CleanedUp {
            return Ok(());
        }
        #[cfg(feature = "fault-injection")]
        if st.status == Status::Committed && super::fault::committed_state_write_fails(&self.id) {
            return Err(SandboxError::sandbox(
                Some(self.id.as_str()),
                "write sandbox state: injected failure",
            ));
        }
        let data = serde_json::to_vec_pretty(r).map_err(|e| {
            SandboxError::sandbox(Some(self.id.as_str()), format!("encode state: {e}"))
        })?;
        let dir = StateDir::open(&self.dir).map_err(|e| {
            SandboxError::from_lower(Some(self.id.as_str()), "open sandbox directory", e)
        })?;
        let p = dir
            .join(Path::new(STATE_FILE))
            .map_err(|e| SandboxError::from_lower(Some(self.id.as_str()), "state file", e))?;
        state_dir::write_atomic(&p, &data)
            .map_err(|e| SandboxError::from_lower(Some(self.id.as_str()), "write sandbox state", e))
    }

    /// A [`SandboxError::Commit`] of this sandbox (no lower-layer source).
    pub fn commit_error(&self, reason: impl Into<String>, files: Vec<String>) -> SandboxError {
        SandboxError::Commit {
            sandbox_id: self.id.to_string(),
            reason: reason.into(),
            files,
            source: None,
        }
    }

    /// A [`SandboxError::Rollback`] of this sandbox (no lower-layer source).
    pub fn rollback_error(&self, reason: impl Into<String>, files: Vec<String>) -> SandboxError {
        SandboxError::Rollback {
            sandbox_id: self.id.to_string(),
            reason: reason.into(),
            files,
            source: None,
        }
    }

    /// The sandbox directory as a chokepoint capability (writes inside it go through it).
    pub fn state_dir(&self) -> Result<StateDir, SandboxError> {
        StateDir::open(&self.dir).map_err(|e| {
            SandboxError::from_lower(Some(self.id.as_str()), "open sandbox directory", e)
        })
    }
}

impl Record {
    /// A new record for a sandbox just created (status set by the first `advance`).
    pub fn new(
        sandbox_id: &SandboxId,
        plan_id: &PlanId,
        resource_id: &str,
        strategy: Strategy,
        original_path: &Path,
        sandbox_path: &Path,
        metadata: BTreeMap<String, String>,
    ) -> Record {
        Record {
            version: VERSION,
            sandbox_id: sandbox_id.clone(),
            plan_id: plan_id.clone(),
            resource_id: resource_id.to_string(),
            strategy,
            status: Status::Pending,
            original_path: original_path.to_path_buf(),
            sandbox_path: sandbox_path.to_path_buf(),
            created_at: SystemTime::now(),
            metadata,
            commit_ref: None,
            commit_in_flight: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record::new(
            &SandboxId::new(),
            &PlanId::parse("p-1").unwrap(),
            "r",
            Strategy::CopyOnWrite,
            Path::new("/orig"),
            Path::new("/tree"),
            BTreeMap::new(),
        )
    }

    #[test]
    fn ids_are_written_as_plain_strings_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let r = record();
        let json: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(json["sandbox_id"], r.sandbox_id.as_str());
        assert_eq!(json["plan_id"], "p-1");
        std::fs::write(dir.path().join(STATE_FILE), serde_json::to_vec(&r).unwrap()).unwrap();
        let back = Record::load(dir.path()).unwrap();
        assert_eq!(back.sandbox_id, r.sandbox_id);
        assert_eq!(back.plan_id, r.plan_id);
    }

    #[test]
    fn a_state_file_with_a_bad_id_is_refused_as_malformed() {
        for (field, bad, kind) in [
            ("sandbox_id", "../x", "sandbox id"),
            ("plan_id", "a/b", "plan id"),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let mut json = serde_json::to_value(record()).unwrap();
            json[field] = serde_json::Value::from(bad);
            std::fs::write(dir.path().join(STATE_FILE), json.to_string()).unwrap();
            let e = Record::load(dir.path()).unwrap_err();
            let text = e.to_string();
            assert!(text.contains("malformed sandbox state"), "{text}");
            assert!(text.contains(&format!("invalid {kind} {bad:?}")), "{text}");
        }
    }
}
