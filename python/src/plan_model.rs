//! The plan layer's values as Python classes: `SandboxStatus` and `SandboxStrategy` (enums
//! with the Rust names' values), and the frozen records `SandboxContext`, `CommitResult`,
//! `DiffEntry`, `SandboxDiff`, `DiffView` and `SandboxRef`.
//!
//! Why: the engines read these as plain data (`result.success`, `ctx.sandbox_path`), so each
//! is a snapshot copied out of Rust, readable after its sandbox is gone. Invariants: times
//! are timezone-aware `datetime`s in UTC; paths are `str`; contents are `bytes`; metadata is
//! a fresh `dict[str, str]` on every read (a record cannot be changed through it).

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use pyo3::prelude::*;
use pyo3::types::PyType;

use patchbox::plan::custom::DiffView as RsDiffView;
use patchbox::plan::{
    CommitResult as RsCommitResult, DiffEntry as RsDiffEntry, SandboxContext as RsContext,
    SandboxDiff as RsDiff, Status, Strategy,
};

use crate::errors::plan_err;

/// A `SystemTime` as an aware UTC `datetime` (a time before 1970 reads as 1970).
pub(crate) fn datetime(py: Python<'_>, t: SystemTime) -> PyResult<Py<PyAny>> {
    let t = t.max(UNIX_EPOCH);
    Ok(t.into_pyobject(py)?.into_any().unbind())
}

/// A path as the `str` Python users expect (lossy for non-UTF-8 names).
pub(crate) fn path_str(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Where a sandbox is in its lifecycle (`SandboxStatus.ACTIVE.value == "active"`).
#[pyclass(eq, eq_int, frozen, hash, module = "patchbox._native")]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum SandboxStatus {
    #[pyo3(name = "PENDING")]
    Pending,
    #[pyo3(name = "CREATED")]
    Created,
    #[pyo3(name = "ACTIVE")]
    Active,
    #[pyo3(name = "COMMITTED")]
    Committed,
    #[pyo3(name = "ROLLED_BACK")]
    RolledBack,
    #[pyo3(name = "CLEANED_UP")]
    CleanedUp,
    #[pyo3(name = "ERRORED")]
    Errored,
}

impl SandboxStatus {
    pub(crate) fn rs(self) -> Status {
        match self {
            SandboxStatus::Pending => Status::Pending,
            SandboxStatus::Created => Status::Created,
            SandboxStatus::Active => Status::Active,
            SandboxStatus::Committed => Status::Committed,
            SandboxStatus::RolledBack => Status::RolledBack,
            SandboxStatus::CleanedUp => Status::CleanedUp,
            SandboxStatus::Errored => Status::Errored,
        }
    }

    pub(crate) fn py(s: Status) -> SandboxStatus {
        match s {
            Status::Pending => SandboxStatus::Pending,
            Status::Created => SandboxStatus::Created,
            Status::Active => SandboxStatus::Active,
            Status::Committed => SandboxStatus::Committed,
            Status::RolledBack => SandboxStatus::RolledBack,
            Status::CleanedUp => SandboxStatus::CleanedUp,
            Status::Errored => SandboxStatus::Errored,
        }
    }
}

#[pymethods]
impl SandboxStatus {
    /// The snake_case name (`"rolled_back"`), as on disk and in the C++ API.
    #[getter]
    fn value(&self) -> &'static str {
        self.rs().name()
    }

    /// Whether a sandbox in `from_` may move to `to` (the lifecycle's one table).
    #[staticmethod]
    fn can_transition(from_: SandboxStatus, to: SandboxStatus) -> bool {
        Status::can_transition(from_.rs(), to.rs())
    }

    /// Raises `SandboxStateError` naming both statuses when the step is not allowed.
    #[staticmethod]
    fn assert_transition(from_: SandboxStatus, to: SandboxStatus) -> PyResult<()> {
        Status::assert_transition(from_.rs(), to.rs()).map_err(plan_err)
    }

    /// Every status, in lifecycle order.
    #[classmethod]
    fn members(_cls: &Bound<'_, PyType>) -> Vec<SandboxStatus> {
        Status::ALL.into_iter().map(SandboxStatus::py).collect()
    }

    fn __str__(&self) -> &'static str {
        self.value()
    }
}

/// The built-in strategies by name (`SandboxStrategy.GIT_WORKTREE.value == "git_worktree"`).
/// Wherever a strategy is taken, its name as a `str` works too (custom strategies have only
/// their registered name).
#[pyclass(eq, eq_int, frozen, hash, module = "patchbox._native")]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum SandboxStrategy {
    #[pyo3(name = "NONE")]
    None,
    #[pyo3(name = "COPY_ON_WRITE")]
    CopyOnWrite,
    #[pyo3(name = "OVERLAY")]
    Overlay,
    #[pyo3(name = "GIT_WORKTREE")]
    GitWorktree,
    #[pyo3(name = "TRANSACTION_ROLLBACK")]
    TransactionRollback,
}

impl SandboxStrategy {
    pub(crate) fn rs(self) -> Strategy {
        match self {
            SandboxStrategy::None => Strategy::None,
            SandboxStrategy::CopyOnWrite => Strategy::CopyOnWrite,
            SandboxStrategy::Overlay => Strategy::Overlay,
            SandboxStrategy::GitWorktree => Strategy::GitWorktree,
            SandboxStrategy::TransactionRollback => Strategy::TransactionRollback,
        }
    }
}

#[pymethods]
impl SandboxStrategy {
    /// The strategy's name.
    #[getter]
    fn value(&self) -> String {
        self.rs().name().to_string()
    }

    /// Whether a commit of it can be undone (`commit_all` commits these first).
    #[getter]
    fn is_rollbackable(&self) -> bool {
        self.rs().is_rollbackable()
    }

    fn __str__(&self) -> String {
        self.value()
    }
}

/// A strategy given as a `SandboxStrategy` or a name: a built-in name is that strategy,
/// any other name a custom one (checked when a sandbox of it is made).
pub(crate) fn strategy_arg(v: &Bound<'_, PyAny>) -> PyResult<Strategy> {
    if let Ok(s) = v.cast::<SandboxStrategy>() {
        return Ok(s.get().rs());
    }
    let name: String = v.extract().map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(
            "a strategy is a SandboxStrategy or a strategy name (str)",
        )
    })?;
    Ok(Strategy::parse(&name))
}

/// What a created sandbox is: where its files are and what they stand for.
#[pyclass(frozen, get_all, module = "patchbox._native")]
pub struct SandboxContext {
    pub sandbox_id: String,
    /// Where the sandboxed files are (for `none`, the original itself).
    pub sandbox_path: String,
    pub original_path: String,
    pub resource_id: String,
    pub plan_id: String,
    pub created_at: Py<PyAny>,
    pub metadata: BTreeMap<String, String>,
}

impl SandboxContext {
    pub(crate) fn new(py: Python<'_>, c: RsContext) -> PyResult<SandboxContext> {
        Ok(SandboxContext {
            created_at: datetime(py, c.created_at)?,
            sandbox_id: c.sandbox_id,
            sandbox_path: path_str(&c.sandbox_path),
            original_path: path_str(&c.original_path),
            resource_id: c.resource_id,
            plan_id: c.plan_id,
            metadata: c.metadata,
        })
    }
}

#[pymethods]
impl SandboxContext {
    fn __repr__(&self) -> String {
        format!(
            "SandboxContext(sandbox_id={:?}, plan_id={:?}, resource_id={:?}, sandbox_path={:?})",
            self.sandbox_id, self.plan_id, self.resource_id, self.sandbox_path
        )
    }
}

/// A shared snapshot of an original (`SandboxManager.prepare_snapshot`): the lower layer,
/// pre-images and rollback source of every `overlay` sandbox created for that original after
/// it was taken.
#[pyclass(frozen, get_all, module = "patchbox._native")]
pub struct SnapshotInfo {
    /// Its ULID (the greatest is the newest).
    pub id: String,
    /// The original it is a snapshot of (canonical path).
    pub original: String,
    pub created_at: Py<PyAny>,
    /// How many files and symlinks it holds.
    pub files: usize,
    /// Where its files are.
    pub path: String,
}

impl SnapshotInfo {
    pub(crate) fn new(py: Python<'_>, s: patchbox::plan::SnapshotInfo) -> PyResult<SnapshotInfo> {
        Ok(SnapshotInfo {
            created_at: datetime(py, s.created_at)?,
            id: s.id,
            original: path_str(&s.original),
            files: s.files,
            path: path_str(&s.path),
        })
    }
}

#[pymethods]
impl SnapshotInfo {
    fn __repr__(&self) -> String {
        format!(
            "SnapshotInfo(id={:?}, original={:?}, files={})",
            self.id, self.original, self.files
        )
    }
}

/// The outcome of one commit.
#[pyclass(frozen, get_all, module = "patchbox._native")]
pub struct CommitResult {
    pub sandbox_id: String,
    pub success: bool,
    /// The undo record (`copy_on_write`, `overlay`), the commit id (`git_worktree`), the
    /// changeset (`transaction_rollback`); `None` for `none`.
    pub commit_ref: Option<String>,
    pub changed_files: Vec<String>,
    pub added_files: Vec<String>,
    pub deleted_files: Vec<String>,
    pub error: Option<String>,
    pub timestamp: Py<PyAny>,
    pub metadata: BTreeMap<String, String>,
}

impl CommitResult {
    pub(crate) fn new(py: Python<'_>, r: RsCommitResult) -> PyResult<CommitResult> {
        Ok(CommitResult {
            timestamp: datetime(py, r.timestamp)?,
            sandbox_id: r.sandbox_id,
            success: r.success,
            commit_ref: r.commit_ref,
            changed_files: r.changed_files,
            added_files: r.added_files,
            deleted_files: r.deleted_files,
            error: r.error,
            metadata: r.metadata,
        })
    }
}

#[pymethods]
impl CommitResult {
    fn __repr__(&self) -> String {
        let py_list = |v: &[String]| {
            let items: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
            format!("[{}]", items.join(", "))
        };
        format!(
            "CommitResult(sandbox_id={:?}, success={}, commit_ref={}, changed_files={}, added_files={}, deleted_files={})",
            self.sandbox_id,
            if self.success { "True" } else { "False" },
            self.commit_ref.as_deref().map_or("None".to_string(), |r| format!("{r:?}")),
            py_list(&self.changed_files),
            py_list(&self.added_files),
            py_list(&self.deleted_files)
        )
    }
}

/// One changed path: `operation` is `"added"`, `"modified"` or `"deleted"`; `before`/`after`
/// the contents (`None` on the side where the path does not exist); modes are git's
/// (`0o100644`, `0o100755`, `0o120000`), `None` where unknown. Custom strategies return these
/// from `diff` (any object with `path`, `operation`, `before`, `after` does as well).
#[pyclass(frozen, get_all, module = "patchbox._native")]
pub struct DiffEntry {
    pub path: String,
    pub operation: String,
    pub before: Option<Vec<u8>>,
    pub after: Option<Vec<u8>>,
    pub before_mode: Option<u32>,
    pub after_mode: Option<u32>,
}

impl DiffEntry {
    pub(crate) fn from_rs(e: RsDiffEntry) -> DiffEntry {
        DiffEntry {
            path: e.path,
            operation: e.operation.name().to_string(),
            before: e.before,
            after: e.after,
            before_mode: e.before_mode,
            after_mode: e.after_mode,
        }
    }
}

#[pymethods]
impl DiffEntry {
    #[new]
    #[pyo3(signature = (path, operation, before=None, after=None, before_mode=None, after_mode=None))]
    fn py_new(
        path: String,
        operation: String,
        before: Option<Vec<u8>>,
        after: Option<Vec<u8>>,
        before_mode: Option<u32>,
        after_mode: Option<u32>,
    ) -> PyResult<DiffEntry> {
        if patchbox::plan::DiffOp::from_name(&operation).is_none() {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "DiffEntry {path:?}: operation {operation:?} is not added, modified or deleted"
            )));
        }
        Ok(DiffEntry {
            path,
            operation,
            before,
            after,
            before_mode,
            after_mode,
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "DiffEntry(path={:?}, operation={:?})",
            self.path, self.operation
        )
    }
}

fn entries_of(py: Python<'_>, entries: Vec<RsDiffEntry>) -> PyResult<Vec<Py<DiffEntry>>> {
    entries
        .into_iter()
        .map(|e| Py::new(py, DiffEntry::from_rs(e)))
        .collect()
}

/// A sandbox's changes: per path (`entries`, sorted by path) and as a patch `git apply`
/// accepts (`patch`, bytes; for `transaction_rollback` a readable summary per table).
#[pyclass(frozen, get_all, module = "patchbox._native")]
pub struct SandboxDiff {
    pub entries: Vec<Py<DiffEntry>>,
    pub patch: Vec<u8>,
}

impl SandboxDiff {
    pub(crate) fn new(py: Python<'_>, d: RsDiff) -> PyResult<SandboxDiff> {
        Ok(SandboxDiff {
            entries: entries_of(py, d.entries)?,
            patch: d.patch,
        })
    }
}

#[pymethods]
impl SandboxDiff {
    /// `"2 added, 1 modified"`, or `"no changes"`.
    #[getter]
    fn summary(&self, py: Python<'_>) -> String {
        let count = |op: &str| {
            self.entries
                .iter()
                .filter(|e| e.get().operation == op)
                .count()
        };
        let parts: Vec<String> = ["added", "modified", "deleted"]
            .into_iter()
            .filter_map(|op| {
                let n = count(op);
                (n > 0).then(|| format!("{n} {op}"))
            })
            .collect();
        let _ = py;
        if parts.is_empty() {
            "no changes".into()
        } else {
            parts.join(", ")
        }
    }

    fn __len__(&self) -> usize {
        self.entries.len()
    }
}

/// A custom strategy's view of a sandbox's changes (what its `diff` returns).
#[pyclass(frozen, get_all, module = "patchbox._native")]
pub struct DiffView {
    pub sandbox_id: String,
    pub entries: Vec<Py<DiffEntry>>,
    pub summary: String,
}

impl DiffView {
    pub(crate) fn from_rs(py: Python<'_>, v: RsDiffView) -> PyResult<DiffView> {
        Ok(DiffView {
            sandbox_id: v.sandbox_id,
            entries: entries_of(py, v.entries)?,
            summary: v.summary,
        })
    }
}

#[pymethods]
impl DiffView {
    #[new]
    #[pyo3(signature = (sandbox_id, entries, summary=None))]
    fn py_new(
        sandbox_id: String,
        entries: Vec<Py<DiffEntry>>,
        summary: Option<String>,
    ) -> DiffView {
        let summary = summary.unwrap_or_else(|| {
            let parts: Vec<String> = ["added", "modified", "deleted"]
                .into_iter()
                .filter_map(|op| {
                    let n = entries.iter().filter(|e| e.get().operation == op).count();
                    (n > 0).then(|| format!("{n} {op}"))
                })
                .collect();
            if parts.is_empty() {
                "no changes".into()
            } else {
                parts.join(", ")
            }
        });
        DiffView {
            sandbox_id,
            entries,
            summary,
        }
    }
}

/// Which sandbox a custom strategy's operation is about (what the library passes to it,
/// unless the strategy's `create` returned its own reference, which it then gets back).
/// Metadata values are kept as text (`str(value)`): they are persisted with the sandbox.
#[pyclass(frozen, get_all, module = "patchbox._native")]
pub struct SandboxRef {
    pub sandbox_id: String,
    pub plan_id: String,
    pub resource_id: String,
    pub created_at: Py<PyAny>,
    pub metadata: BTreeMap<String, String>,
}

#[pymethods]
impl SandboxRef {
    #[new]
    #[pyo3(signature = (sandbox_id, plan_id, resource_id, created_at=None, metadata=None))]
    fn py_new(
        py: Python<'_>,
        sandbox_id: String,
        plan_id: String,
        resource_id: String,
        created_at: Option<Py<PyAny>>,
        metadata: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<SandboxRef> {
        let created_at = match created_at {
            Some(t) => t,
            None => datetime(py, SystemTime::now())?,
        };
        // The docs' metadata is `dict[str, object]`; it is kept (and persisted) as text.
        let mut meta = BTreeMap::new();
        if let Some(d) = metadata {
            for (k, v) in d.iter() {
                meta.insert(k.str()?.to_string(), v.str()?.to_string());
            }
        }
        Ok(SandboxRef {
            sandbox_id,
            plan_id,
            resource_id,
            created_at,
            metadata: meta,
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "SandboxRef(sandbox_id={:?}, plan_id={:?}, resource_id={:?})",
            self.sandbox_id, self.plan_id, self.resource_id
        )
    }
}

impl SandboxRef {
    pub(crate) fn from_rs(
        py: Python<'_>,
        r: &patchbox::plan::custom::SandboxRef,
    ) -> PyResult<SandboxRef> {
        Ok(SandboxRef {
            sandbox_id: r.sandbox_id.clone(),
            plan_id: r.plan_id.clone(),
            resource_id: r.resource_id.clone(),
            created_at: datetime(py, r.created_at)?,
            metadata: r.metadata.clone(),
        })
    }
}
