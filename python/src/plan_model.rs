//! The plan layer's values in Python: `SandboxStatus` and `SandboxStrategy` (enums with the
//! Rust names' values), the frozen records `DiffEntry`, `SandboxDiff` and `DiffView`, and the
//! conversions into the documented dataclasses `SandboxContext`, `CommitResult` and
//! `SandboxRef`, which are Python classes (`patchbox._records`) built from here.
//!
//! Why: the engines read these as plain data (`result.success`, `ctx.sandbox_path`), so each
//! is a snapshot copied out of Rust, readable after its sandbox is gone; the documentation
//! makes the three records frozen dataclasses (`dataclasses.asdict` works on them). Invariants:
//! times are timezone-aware `datetime`s in UTC; paths are `str`; contents are `bytes`; a
//! `SandboxRef`'s metadata round-trips JSON values (kept as JSON text on the Rust side).

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};

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

/// An instance of the Python record class `name` of `patchbox._records` (the documented
/// frozen dataclasses), made with `kwargs`.
pub(crate) fn record<'py>(
    py: Python<'py>,
    name: &str,
    kwargs: &Bound<'py, PyDict>,
) -> PyResult<Py<PyAny>> {
    let cls = py.import("patchbox._records")?.getattr(name)?;
    Ok(cls.call((), Some(kwargs))?.unbind())
}

/// A Rust context as the `SandboxContext` dataclass.
pub(crate) fn context_record(py: Python<'_>, c: RsContext) -> PyResult<Py<PyAny>> {
    let kw = PyDict::new(py);
    kw.set_item("sandbox_id", c.sandbox_id)?;
    kw.set_item("sandbox_path", path_str(&c.sandbox_path))?;
    kw.set_item("original_path", path_str(&c.original_path))?;
    kw.set_item("resource_id", c.resource_id)?;
    kw.set_item("plan_id", c.plan_id)?;
    kw.set_item("created_at", datetime(py, c.created_at)?)?;
    kw.set_item("metadata", meta_dict(py, &c.metadata)?)?;
    record(py, "SandboxContext", &kw)
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

/// A Rust commit result as the `CommitResult` dataclass. `rolled_back_ids` in a failed
/// result's metadata (comma-separated in Rust) becomes a list.
pub(crate) fn commit_record(py: Python<'_>, r: RsCommitResult) -> PyResult<Py<PyAny>> {
    let kw = PyDict::new(py);
    kw.set_item("sandbox_id", r.sandbox_id)?;
    kw.set_item("success", r.success)?;
    kw.set_item("commit_ref", r.commit_ref)?;
    kw.set_item("changed_files", r.changed_files)?;
    kw.set_item("added_files", r.added_files)?;
    kw.set_item("deleted_files", r.deleted_files)?;
    kw.set_item("error", r.error)?;
    kw.set_item("timestamp", datetime(py, r.timestamp)?)?;
    let meta = PyDict::new(py);
    for (k, v) in r.metadata {
        if !r.success && k == "rolled_back_ids" {
            let ids: Vec<&str> = v.split(',').filter(|s| !s.is_empty()).collect();
            meta.set_item(k, ids)?;
        } else {
            meta.set_item(k, v)?;
        }
    }
    kw.set_item("metadata", meta)?;
    record(py, "CommitResult", &kw)
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

/// Metadata key under which a Python strategy's non-text metadata values are kept, as a
/// JSON object (the Rust side keeps text only; `patchbox.custom` encodes and decodes it).
pub(crate) const JSON_META_KEY: &str = "strategy.json";

/// A Rust sandbox reference as the `SandboxRef` dataclass, its metadata as the strategy gave
/// it (values kept as JSON under [`JSON_META_KEY`] decoded back).
pub(crate) fn ref_record<'py>(
    py: Python<'py>,
    r: &patchbox::plan::custom::SandboxRef,
) -> PyResult<Bound<'py, PyAny>> {
    let kw = PyDict::new(py);
    kw.set_item("sandbox_id", &r.sandbox_id)?;
    kw.set_item("plan_id", &r.plan_id)?;
    kw.set_item("resource_id", &r.resource_id)?;
    kw.set_item("created_at", datetime(py, r.created_at)?)?;
    kw.set_item("metadata", meta_dict(py, &r.metadata)?)?;
    Ok(record(py, "SandboxRef", &kw)?.into_bound(py))
}

/// Metadata as the strategy gave it: the text values, and those kept as JSON under
/// [`JSON_META_KEY`] decoded back.
pub(crate) fn meta_dict<'py>(
    py: Python<'py>,
    m: &BTreeMap<String, String>,
) -> PyResult<Bound<'py, PyDict>> {
    let meta = PyDict::new(py);
    for (k, v) in m {
        if k != JSON_META_KEY {
            meta.set_item(k, v)?;
        }
    }
    if let Some(j) = m.get(JSON_META_KEY) {
        let decoded = py.import("json")?.call_method1("loads", (j,))?;
        meta.call_method1("update", (decoded,))?;
    }
    Ok(meta)
}

/// A metadata mapping as the Rust side keeps it: text values as they are, the others in one
/// JSON object under [`JSON_META_KEY`] (decoded back by [`ref_record`]).
pub(crate) fn meta_of(m: &Bound<'_, PyAny>) -> PyResult<BTreeMap<String, String>> {
    let py = m.py();
    let mut metadata = BTreeMap::new();
    let extra = PyDict::new(py);
    for item in m.call_method0("items")?.try_iter()? {
        let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
        let k = k.str()?.to_string();
        match v.extract::<String>() {
            Ok(s) if k != JSON_META_KEY => {
                metadata.insert(k, s);
            }
            _ => extra.set_item(k, v)?,
        }
    }
    if !extra.is_empty() {
        // A value JSON cannot hold is kept as its `str` (as before JSON was kept).
        let kw = PyDict::new(py);
        kw.set_item("default", py.import("builtins")?.getattr("str")?)?;
        let j: String = py
            .import("json")?
            .call_method("dumps", (extra,), Some(&kw))?
            .extract()?;
        metadata.insert(JSON_META_KEY.to_string(), j);
    }
    Ok(metadata)
}

/// A `SandboxRef` (the dataclass, or any object with its attributes) as the Rust reference;
/// metadata values that are not text go under [`JSON_META_KEY`] as JSON.
pub(crate) fn ref_of(r: &Bound<'_, PyAny>) -> PyResult<patchbox::plan::custom::SandboxRef> {
    let created_at = match r.getattr("created_at") {
        Ok(t) if !t.is_none() => t
            .extract::<SystemTime>()
            .unwrap_or_else(|_| SystemTime::now()),
        _ => SystemTime::now(),
    };
    let metadata = match r.getattr("metadata") {
        Ok(m) if !m.is_none() => meta_of(&m)?,
        _ => BTreeMap::new(),
    };
    Ok(patchbox::plan::custom::SandboxRef {
        sandbox_id: r.getattr("sandbox_id")?.extract()?,
        plan_id: r.getattr("plan_id")?.extract()?,
        resource_id: r.getattr("resource_id")?.extract()?,
        created_at,
        metadata,
    })
}
