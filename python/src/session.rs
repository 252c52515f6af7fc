//! `SessionManager`: one engine session (the Rust `patchbox::SandboxManager`) for Python.
//!
//! What: create sandboxes (fresh or chained), finalize them into a patch, discard them,
//! store pending patches, and complete a delegation with a Python decision callable.
//!
//! Why this shape: Python engines are threaded and hold the manager in one object that any
//! thread may call, so the class is frozen and its only state is the Rust manager behind an
//! `RwLock<Option<Arc<..>>>`. A call clones the `Arc` under the lock and lets go of it at
//! once; the work (snapshot copies, diffs, removals) runs with the GIL released. `close()`
//! (or leaving a `with` block) takes the manager out: it ends — sandboxes removed, pending
//! patches kept, open sandboxes saved as abandoned pending patches — when the last call
//! still running on another thread returns.
//!
//! Invariants: no lock of this file is held while the GIL is being acquired or released;
//! every call moves its handle on the manager into the GIL-free part, so the call that
//! outlives a `close()` ends the session there, not under the GIL;
//! a decision callable that raises, or returns neither a `Decision` nor a `bool`, means
//! reject (the patch goes pending: default deny) and the exception is kept on the
//! `Completion`; a `BaseException` that is not an `Exception` (`KeyboardInterrupt`) is
//! re-raised once the work is safely pending.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBool;

use crate::convert::{patch_bytes, rel};
use crate::delegation::{Completion, Decision, SandboxInfo, SandboxResult};
use crate::errors::{lib_err, PatchboxError};
use crate::sessions::PruneReport;
use patchbox::session::confine::Confinement;
use patchbox::session::delegation::Isolation;
use patchbox::tree::snapshot::{Progress, ProgressFn};
use patchbox::{Decision as RsDecision, Options, SandboxManager};

/// One engine session's sandboxes.
#[pyclass(name = "SessionManager", module = "patchbox._native", frozen)]
pub(crate) struct SessionManager {
    inner: RwLock<Option<Arc<SandboxManager>>>,
    project_dir: PathBuf,
    session_base: PathBuf,
    session_id: String,
    root: PathBuf,
}

/// The error of a call on a closed manager: a `PatchboxError` of kind `"closed"`.
fn closed(project: &std::path::Path) -> PyErr {
    let err = PatchboxError::new_err(format!(
        "the session manager of {} is closed",
        project.display()
    ));
    Python::attach(|py| {
        let _ = err.value(py).setattr("kind", "closed");
    });
    err
}

impl SessionManager {
    fn get(&self) -> PyResult<Arc<SandboxManager>> {
        let slot = self.inner.read().unwrap_or_else(|e| e.into_inner());
        slot.clone().ok_or_else(|| closed(&self.project_dir))
    }
}

/// A progress callable as the Rust progress function: called on the copy threads with the
/// GIL taken for the call; what it raises is reported as unraisable and ignored.
fn progress_fn(cb: Py<PyAny>) -> Arc<ProgressFn> {
    Arc::new(move |p: Progress| {
        Python::attach(|py| {
            if let Err(e) = cb.call1(py, (p.files_done, p.files_total, p.bytes_done)) {
                e.write_unraisable(py, Some(cb.bind(py)));
            }
        })
    })
}

/// Reads the decision callable's answer: a `Decision`, or `True` (accept) / `False`
/// (reject); anything else is a `TypeError`.
/// The provenance the keyword arguments of `write_pending_patch` and
/// `deliver_pending_patch` give (every part optional).
fn provenance_of(
    command: Option<Vec<String>>,
    cwd: Option<PathBuf>,
    exit_status: Option<i32>,
    started_ms: Option<u64>,
    ended_ms: Option<u64>,
) -> patchbox::session::provenance::Provenance {
    patchbox::session::provenance::Provenance {
        command: command.unwrap_or_default(),
        cwd: cwd.map(|c| c.to_string_lossy().into_owned()),
        exit_status,
        started_ms,
        ended_ms,
    }
}

fn decision_of(v: &Bound<'_, PyAny>) -> PyResult<RsDecision> {
    if let Ok(d) = v.extract::<Decision>() {
        return Ok(d.into());
    }
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(if b.is_true() {
            RsDecision::Accept
        } else {
            RsDecision::Reject
        });
    }
    Err(PyTypeError::new_err(format!(
        "decide must return a Decision or a bool, not {}",
        v.get_type().name()?
    )))
}

#[pymethods]
impl SessionManager {
    /// Starts a session for `project_dir` under `root` (default: `$PATCHBOX_ROOT`, else
    /// `~/.entropic/sandbox`): creates and locks `<root>/<session-id>/`, and (unless
    /// `prune_on_start` is false) recovers dead sessions there on a background thread.
    ///
    /// `isolation` is `"copy"`, `"overlay"` or `"auto"` (default: `$PATCHBOX_ISOLATION`, else
    /// `"auto"`); `git_repo=False` makes sandboxes of a git project without their private
    /// `.git`. `store` (`s3://bucket/prefix`, or a directory) is where
    /// `deliver_pending_patch` stores pending patches, shared with other machines.
    #[new]
    #[pyo3(signature = (project_dir, root=None, *, prune_on_start=true, confine=true, writable_dirs=Vec::new(), progress=None, isolation=None, git_repo=true, store=None))]
    #[allow(clippy::too_many_arguments)] // the keyword arguments of a Python constructor
    fn new(
        py: Python<'_>,
        project_dir: PathBuf,
        root: Option<PathBuf>,
        prune_on_start: bool,
        confine: bool,
        writable_dirs: Vec<PathBuf>,
        progress: Option<Py<PyAny>>,
        isolation: Option<String>,
        git_repo: bool,
        store: Option<String>,
    ) -> PyResult<Self> {
        let store = match store {
            Some(url) => Some(
                patchbox::store::StoreUrl::parse(&url)
                    .map_err(|e| lib_err(patchbox::Error::from(e)))?,
            ),
            None => None,
        };
        let isolation = match isolation {
            None => Isolation::default(),
            Some(name) => Isolation::from_name(&name).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "isolation must be \"copy\", \"overlay\" or \"auto\", not {name:?}"
                ))
            })?,
        };
        let options = Options {
            root,
            progress: progress.map(progress_fn),
            no_prune_on_start: !prune_on_start,
            no_confine: !confine,
            writable_dirs,
            isolation,
            no_git_repo: !git_repo,
            store,
        };
        let mgr = py
            .detach(|| SandboxManager::with_options(&project_dir, options))
            .map_err(lib_err)?;
        Ok(SessionManager {
            project_dir: mgr.project_dir().to_path_buf(),
            session_base: mgr.session_base().to_path_buf(),
            session_id: mgr.session_id().to_string(),
            root: mgr.root().to_path_buf(),
            inner: RwLock::new(Some(Arc::new(mgr))),
        })
    }

    /// The project directory (canonical).
    #[getter]
    fn project_dir(&self) -> PathBuf {
        self.project_dir.clone()
    }

    /// The session directory `<root>/<session-id>` (canonical).
    #[getter]
    fn session_base(&self) -> PathBuf {
        self.session_base.clone()
    }

    /// The session id (a ULID).
    #[getter]
    fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The sandbox root (canonical).
    #[getter]
    fn root(&self) -> PathBuf {
        self.root.clone()
    }

    /// True once `close()` ran.
    #[getter]
    fn closed(&self) -> bool {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    /// Creates the sandbox `d-<delegation_id>`: a copy of the session snapshot (taken by the
    /// first call), or of `chain_from`'s current state (its patch is then cumulative).
    #[pyo3(signature = (delegation_id, chain_from=None))]
    fn create_sandbox(
        &self,
        py: Python<'_>,
        delegation_id: &str,
        chain_from: Option<SandboxInfo>,
    ) -> PyResult<SandboxInfo> {
        let mgr = self.get()?;
        let chain = chain_from.map(|c| c.inner);
        let info = py
            .detach(move || mgr.create_sandbox(delegation_id, chain.as_ref()))
            .map_err(lib_err)?;
        Ok(SandboxInfo { inner: info })
    }

    /// What the delegation changed, as a patch against the session snapshot. The sandbox
    /// is kept.
    fn finalize_sandbox(&self, py: Python<'_>, info: SandboxInfo) -> PyResult<SandboxResult> {
        let mgr = self.get()?;
        let r = py
            .detach(move || mgr.finalize_sandbox(&info.inner))
            .map_err(lib_err)?;
        Ok(SandboxResult { inner: r })
    }

    /// Removes a sandbox. Idempotent; a path that is not a sandbox of this session is
    /// refused (`kind == "containment"`) and nothing is removed.
    fn discard_sandbox(&self, py: Python<'_>, info: SandboxInfo) -> PyResult<()> {
        let mgr = self.get()?;
        py.detach(move || mgr.discard_sandbox(&info.inner))
            .map_err(lib_err)
    }

    /// Stores `patch` (bytes or str) as a pending patch of `delegation_id` and returns the
    /// patch file. Never overwrites: a second one of the same id is `<id>.2.patch`, … The
    /// keyword arguments say what produced it (its provenance, shown by `pending show` and
    /// in the records): the command and its arguments, its directory, exit status, and start
    /// and end times in milliseconds since the epoch.
    #[pyo3(signature = (delegation_id, patch, *, command=None, cwd=None, exit_status=None, started_ms=None, ended_ms=None))]
    #[allow(clippy::too_many_arguments)]
    fn write_pending_patch(
        &self,
        py: Python<'_>,
        delegation_id: &str,
        patch: &Bound<'_, PyAny>,
        command: Option<Vec<String>>,
        cwd: Option<PathBuf>,
        exit_status: Option<i32>,
        started_ms: Option<u64>,
        ended_ms: Option<u64>,
    ) -> PyResult<PathBuf> {
        let mgr = self.get()?;
        let patch = patch_bytes(patch)?;
        let provenance = provenance_of(command, cwd, exit_status, started_ms, ended_ms);
        py.detach(move || mgr.write_pending_patch_with(delegation_id, &patch, &provenance))
            .map_err(lib_err)
    }

    /// Stores `patch` as a pending patch of `delegation_id` where the session's `store`
    /// says (with the base versions of the files it touched); without a store, in the local
    /// pending store. A failure of the store keeps it locally (`place == "kept"`). The
    /// keyword arguments are its provenance, as for `write_pending_patch`, kept in the
    /// store's record.
    #[pyo3(signature = (delegation_id, patch, *, command=None, cwd=None, exit_status=None, started_ms=None, ended_ms=None))]
    #[allow(clippy::too_many_arguments)]
    fn deliver_pending_patch(
        &self,
        py: Python<'_>,
        delegation_id: &str,
        patch: &Bound<'_, PyAny>,
        command: Option<Vec<String>>,
        cwd: Option<PathBuf>,
        exit_status: Option<i32>,
        started_ms: Option<u64>,
        ended_ms: Option<u64>,
    ) -> PyResult<crate::stored::PendingDelivery> {
        let mgr = self.get()?;
        let patch = patch_bytes(patch)?;
        let provenance = provenance_of(command, cwd, exit_status, started_ms, ended_ms);
        py.detach(move || mgr.deliver_pending_patch_with(delegation_id, &patch, &provenance))
            .map(crate::stored::PendingDelivery::from)
            .map_err(lib_err)
    }

    /// Finalizes the sandbox, asks `decide(result)` whether to accept the patch, then
    /// discards the sandbox. Reject, no `decide`, or a `decide` that raises send the patch to
    /// the pending store. If storing it fails, the sandbox is kept and the error raised.
    #[pyo3(signature = (info, decide=None))]
    fn complete_sandbox(
        &self,
        py: Python<'_>,
        info: SandboxInfo,
        decide: Option<Py<PyAny>>,
    ) -> PyResult<Completion> {
        let mgr = self.get()?;
        let raised: Mutex<Option<PyErr>> = Mutex::new(None);
        let raised_in = &raised;
        // `move`: the manager handle is dropped with the GIL released, in case this call
        // outlived a close() and its drop ends the session.
        let done = py.detach(move || {
            let ask = |r: &patchbox::SandboxResult| -> Result<RsDecision, String> {
                let Some(cb) = decide.as_ref() else {
                    return Ok(RsDecision::Reject);
                };
                Python::attach(|py| {
                    let answer = Py::new(py, SandboxResult { inner: r.clone() })
                        .and_then(|res| cb.call1(py, (res,)))
                        .and_then(|v| decision_of(v.bind(py)));
                    answer.map_err(|e| {
                        let msg = e.to_string();
                        *raised_in.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                        msg
                    })
                })
            };
            mgr.complete_sandbox(&info.inner, Some(&ask))
        });
        let raised = raised.into_inner().unwrap_or_else(|p| p.into_inner());
        let done = done.map_err(lib_err)?;
        if let Some(e) = &raised {
            if !e.is_instance_of::<PyException>(py) {
                // KeyboardInterrupt, SystemExit: the work is pending; let it propagate.
                return Err(e.clone_ref(py));
            }
        }
        Completion::new(py, done, raised)
    }

    /// Runs `args` in the sandbox and waits for it: its working directory is the sandbox,
    /// `PATCHBOX_SANDBOX` / `PATCHBOX_PROJECT` are set (plus `env`), and unless the manager
    /// was made with `confine=False` its process tree is confined with Landlock where the
    /// kernel has it (`confinement()`): it may write only under the sandbox, its `TMPDIR` and
    /// `writable_dirs`. Returns a `subprocess.CompletedProcess` with the output captured
    /// (`returncode` is `-N` for a tool killed by signal N, as in `subprocess`).
    #[pyo3(signature = (info, args, *, env=None, input=None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        info: SandboxInfo,
        args: Vec<std::ffi::OsString>,
        env: Option<std::collections::HashMap<std::ffi::OsString, std::ffi::OsString>>,
        input: Option<Vec<u8>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        use std::io::Write;
        use std::os::unix::process::ExitStatusExt;
        use std::process::Stdio;
        let mgr = self.get()?;
        let Some((program, rest)) = args.split_first() else {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "run needs a program to run",
            ));
        };
        let out = py.detach(move || -> std::io::Result<std::process::Output> {
            let mut c = mgr.command(&info.inner, program);
            c.args(rest)
                .envs(env.iter().flatten())
                .stdin(if input.is_some() {
                    Stdio::piped()
                } else {
                    Stdio::null()
                })
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = c.spawn()?;
            let feeder = match (child.stdin.take(), input.as_ref()) {
                (Some(mut stdin), Some(data)) => {
                    let data = data.clone();
                    // A tool that exits without reading its input is not an error.
                    Some(std::thread::spawn(move || {
                        let _ = stdin.write_all(&data);
                    }))
                }
                _ => None,
            };
            let out = child.wait_with_output()?;
            if let Some(f) = feeder {
                let _ = f.join();
            }
            Ok(out)
        });
        let out =
            out.map_err(|e| lib_err(patchbox::Error::io("run", PathBuf::from(program), e)))?;
        let code = out
            .status
            .code()
            .unwrap_or_else(|| -out.status.signal().unwrap_or(0));
        let completed = py.import("subprocess")?.getattr("CompletedProcess")?;
        completed.call1((
            args.clone(),
            code,
            pyo3::types::PyBytes::new(py, &out.stdout),
            pyo3::types::PyBytes::new(py, &out.stderr),
        ))
    }

    /// What sandboxes are made as (`"copy"`, `"kernel-overlay"`, `"fuse-overlay"`), once the
    /// first create decided it; `None` before.
    fn isolation_mode(&self) -> PyResult<Option<&'static str>> {
        Ok(self.get()?.isolation_mode().map(|m| m.name()))
    }

    /// Entries the snapshot skipped (FIFOs, sockets, nested repositories…) with reasons.
    fn skipped(&self, py: Python<'_>) -> PyResult<Vec<(std::ffi::OsString, String)>> {
        let mgr = self.get()?;
        Ok(py
            .detach(move || mgr.skipped())
            .into_iter()
            .map(|(p, why)| (rel(&p), why))
            .collect())
    }

    /// Absolute symlinks of the snapshot that resolve into the project.
    fn symlinks_into_project(&self, py: Python<'_>) -> PyResult<Vec<std::ffi::OsString>> {
        let mgr = self.get()?;
        Ok(py
            .detach(move || mgr.symlinks_into_project())
            .iter()
            .map(|p| rel(p))
            .collect())
    }

    /// Whether tools run by the library are confined: `"enforced"`, `"off"`, or
    /// `"unavailable: <reason>"`.
    fn confinement(&self, py: Python<'_>) -> PyResult<String> {
        let mgr = self.get()?;
        Ok(match py.detach(move || mgr.confinement()) {
            Confinement::Enforced => "enforced".into(),
            Confinement::Off => "off".into(),
            Confinement::Unavailable(why) => format!("unavailable: {why}"),
        })
    }

    /// What the recovery of dead sessions started with the manager did (waiting for it);
    /// `None` when `prune_on_start` was false.
    fn startup_recovery(&self, py: Python<'_>) -> PyResult<Option<PruneReport>> {
        let mgr = self.get()?;
        Ok(py
            .detach(move || mgr.startup_recovery())
            .map(PruneReport::from))
    }

    /// Ends the session now: open sandboxes are stored as abandoned pending patches, the
    /// snapshot and sandboxes removed, pending patches kept. Idempotent. Calls still running
    /// on other threads finish first; later calls raise `PatchboxError` (kind `"closed"`).
    fn close(&self, py: Python<'_>) {
        let taken = self.inner.write().unwrap_or_else(|e| e.into_inner()).take();
        py.detach(move || drop(taken));
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "SessionManager(project_dir={:?}, session_id={:?})",
            self.project_dir, self.session_id
        )
    }
}

/// Adds the class to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SessionManager>()
}
