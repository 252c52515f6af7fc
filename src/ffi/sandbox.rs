//! The bridge behind `<patchbox/sandbox.hpp>`: the C++ `SandboxManager` drives a Rust
//! [`SandboxManager`] through the opaque [`Manager`]; copy progress and the completion
//! decision call back into C++ through `ProgressSink` and `Decider` (declared in
//! `cpp/bridge.h`, whose methods are `noexcept`).

use std::os::unix::ffi::OsStringExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;

use super::{core, guarded, guarded_or_default, internal, path_bytes, path_from};
use crate::error::Error;
use crate::id::DelegationId;
use crate::session::delegation::{Decision, Routed, SandboxInfo, SandboxResult};
use crate::session::delegation::{Isolation, IsolationMode};
use crate::session::manager::{Options, SandboxManager};
use crate::tree::snapshot::{Progress, ProgressFn};

#[cxx::bridge(namespace = "patchbox::bridge")]
mod bridge {
    /// A path as raw bytes (Unix paths need not be UTF-8).
    struct FfiPath {
        bytes: Vec<u8>,
    }

    /// `session::provenance::Provenance` across the bridge; an absent value is `has_* ==
    /// false`.
    struct FfiProvenance {
        command: Vec<String>,
        has_cwd: bool,
        cwd: Vec<u8>,
        has_exit_status: bool,
        exit_status: i32,
        has_started: bool,
        started_ms: u64,
        has_ended: bool,
        ended_ms: u64,
    }

    /// `SandboxInfo` across the bridge.
    struct FfiInfo {
        path: Vec<u8>,
        delegation_id: Vec<u8>,
        base_dir: Vec<u8>,
        /// The isolation it got: 0 copy, 1 kernel overlay, 2 fuse overlay.
        mode: u8,
    }

    /// `SandboxResult` across the bridge.
    struct FfiResult {
        patch: Vec<u8>,
        files_touched: Vec<FfiPath>,
        added: Vec<FfiPath>,
        modified: Vec<FfiPath>,
        deleted: Vec<FfiPath>,
        ignored: Vec<FfiPath>,
        base_dir: Vec<u8>,
        head_dir: Vec<u8>,
    }

    /// `Routed` across the bridge: where a completed delegation's work went.
    #[derive(Debug)]
    #[repr(u8)]
    enum FfiRouted {
        /// The consumer took the patch.
        Accepted,
        /// Stored in the pending store (`pending_path` is set).
        Pending,
        /// Nothing changed; nothing was routed.
        Unchanged,
    }

    /// `Delivery` across the bridge: `place` 0 local (`path`), 1 stored (`id` in `url`),
    /// 2 kept locally (`path`) because the store failed (`error`).
    struct FfiDelivery {
        place: u8,
        path: Vec<u8>,
        id: String,
        url: String,
        error: String,
    }

    /// `Completion` across the bridge; `pending_path` is set when `routed` is `Pending`.
    struct FfiCompletion {
        result: FfiResult,
        routed: FfiRouted,
        pending_path: Vec<u8>,
    }

    unsafe extern "C++" {
        include!("patchbox/cpp/bridge.h");

        /// Forwards copy progress to the C++ `Options::progress` callback (serialized by a
        /// mutex; exceptions swallowed).
        type ProgressSink;
        fn on_progress(self: &ProgressSink, files_done: u64, files_total: u64, bytes_done: u64);

        /// Asks the C++ decision callback: 0 accept, 1 reject, 2 the callback threw.
        type Decider;
        fn decide(self: &Decider, result: &FfiResult) -> u8;
    }

    extern "Rust" {
        type Manager;

        fn new_manager(
            project_dir: &[u8],
            root: &[u8],
            progress: UniquePtr<ProgressSink>,
            prune_on_start: bool,
            git_repo: bool,
            isolation: u8,
            store: &str,
        ) -> Result<Box<Manager>>;
        fn project_dir(self: &Manager) -> Vec<u8>;
        fn session_base(self: &Manager) -> Vec<u8>;
        fn session_id(self: &Manager) -> String;
        /// 0 not decided yet, 1 copy, 2 kernel overlay, 3 fuse overlay.
        fn isolation_mode(self: &Manager) -> u8;
        fn create_sandbox(
            self: &Manager,
            delegation_id: &[u8],
            chain_from: &FfiInfo,
            chained: bool,
        ) -> Result<FfiInfo>;
        fn finalize_sandbox(self: &Manager, info: &FfiInfo) -> Result<FfiResult>;
        fn discard_sandbox(self: &Manager, info: &FfiInfo) -> Result<()>;
        fn write_pending_patch(
            self: &Manager,
            delegation_id: &[u8],
            patch: &[u8],
        ) -> Result<Vec<u8>>;
        fn deliver_pending_patch(
            self: &Manager,
            delegation_id: &[u8],
            patch: &[u8],
        ) -> Result<FfiDelivery>;
        fn write_pending_patch_with(
            self: &Manager,
            delegation_id: &[u8],
            patch: &[u8],
            provenance: &FfiProvenance,
        ) -> Result<Vec<u8>>;
        fn deliver_pending_patch_with(
            self: &Manager,
            delegation_id: &[u8],
            patch: &[u8],
            provenance: &FfiProvenance,
        ) -> Result<FfiDelivery>;
        fn complete_sandbox(
            self: &Manager,
            info: &FfiInfo,
            decider: &Decider,
        ) -> Result<FfiCompletion>;
        fn close(self: &mut Manager);
    }
}

// SAFETY: the C++ `ProgressSink` is immutable after construction except for its mutex, and
// `on_progress` takes that mutex around the user's callback, so it may be called from any
// thread, concurrently, and the sink may be destroyed on any thread.
unsafe impl Send for bridge::ProgressSink {}
// SAFETY: see the `Send` impl above.
unsafe impl Sync for bridge::ProgressSink {}

/// The C++ `SandboxManager`'s Rust half: the manager, until `Manager::close` drops it.
pub struct Manager {
    inner: Option<SandboxManager>,
}

fn paths_out(v: Vec<PathBuf>) -> Vec<bridge::FfiPath> {
    v.into_iter()
        .map(|p| bridge::FfiPath {
            bytes: p.into_os_string().into_vec(),
        })
        .collect()
}

/// A delegation id from C++ bytes. Non-UTF-8 bytes become U+FFFD, which the core's id rules
/// then refuse with the same error as any other bad character.
fn id_from(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A sandbox handle from C++. Its delegation id is parsed here; a handle with an invalid one
/// names no sandbox of any manager, and `refuse` says how the operation refuses it (as it
/// refuses any other foreign handle).
fn info_in(
    i: &bridge::FfiInfo,
    refuse: impl FnOnce(PathBuf) -> Error,
) -> Result<SandboxInfo, Error> {
    let path = path_from(&i.path);
    let Ok(delegation_id) = DelegationId::parse(&id_from(&i.delegation_id)) else {
        return Err(refuse(path));
    };
    Ok(SandboxInfo {
        path,
        delegation_id,
        base_dir: path_from(&i.base_dir),
        mode: match i.mode {
            1 => IsolationMode::KernelOverlay,
            2 => IsolationMode::FuseOverlay,
            _ => IsolationMode::Copy,
        },
    })
}

/// How an operation that looks a sandbox up refuses a handle it does not know.
fn unknown(path: PathBuf) -> Error {
    Error::UnknownSandbox { path }
}

fn info_out(i: SandboxInfo) -> bridge::FfiInfo {
    bridge::FfiInfo {
        path: i.path.into_os_string().into_vec(),
        delegation_id: i.delegation_id.into_string().into_bytes(),
        base_dir: i.base_dir.into_os_string().into_vec(),
        mode: match i.mode {
            IsolationMode::Copy => 0,
            IsolationMode::KernelOverlay => 1,
            IsolationMode::FuseOverlay => 2,
        },
    }
}

fn result_out(r: SandboxResult) -> bridge::FfiResult {
    bridge::FfiResult {
        patch: r.patch,
        files_touched: paths_out(r.files_touched),
        added: paths_out(r.added),
        modified: paths_out(r.modified),
        deleted: paths_out(r.deleted),
        ignored: paths_out(r.ignored),
        base_dir: r.base_dir.into_os_string().into_vec(),
        head_dir: r.head_dir.into_os_string().into_vec(),
    }
}

/// The provenance the C++ side passed (an absent value has its `has_*` flag false).
fn provenance_in(p: &bridge::FfiProvenance) -> crate::session::provenance::Provenance {
    crate::session::provenance::Provenance {
        command: p.command.clone(),
        cwd: p
            .has_cwd
            .then(|| String::from_utf8_lossy(&p.cwd).into_owned()),
        exit_status: p.has_exit_status.then_some(p.exit_status),
        started_ms: p.has_started.then_some(p.started_ms),
        ended_ms: p.has_ended.then_some(p.ended_ms),
    }
}

/// Where a delivery went, as the bridge carries it (`place`: 0 local, 1 stored, 2 kept).
fn delivery_out(d: crate::Delivery) -> bridge::FfiDelivery {
    let mut out = bridge::FfiDelivery {
        place: 0,
        path: Vec::new(),
        id: String::new(),
        url: String::new(),
        error: String::new(),
    };
    match d {
        crate::Delivery::Local(p) => out.path = p.into_os_string().into_vec(),
        crate::Delivery::Stored { id, url } => {
            out.place = 1;
            out.id = id;
            out.url = url;
        }
        crate::Delivery::Kept { path, error } => {
            out.place = 2;
            out.path = path.into_os_string().into_vec();
            out.error = error.to_string();
        }
    }
    out
}

fn new_manager(
    project_dir: &[u8],
    root: &[u8],
    progress: cxx::UniquePtr<bridge::ProgressSink>,
    prune_on_start: bool,
    git_repo: bool,
    isolation: u8,
    store: &str,
) -> Result<Box<Manager>, String> {
    guarded(|| {
        let store = match store {
            "" => None,
            url => Some(core(
                crate::store::StoreUrl::parse(url).map_err(crate::Error::from),
            )?),
        };
        let progress: Option<Arc<ProgressFn>> = if progress.is_null() {
            None
        } else {
            Some(Arc::new(move |p: Progress| {
                if let Some(sink) = progress.as_ref() {
                    sink.on_progress(p.files_done, p.files_total, p.bytes_done);
                }
            }))
        };
        let options = Options {
            root: (!root.is_empty()).then(|| path_from(root)),
            progress,
            no_prune_on_start: !prune_on_start,
            no_git_repo: !git_repo,
            isolation: match isolation {
                1 => Isolation::Copy,
                2 => Isolation::Overlay,
                3 => Isolation::Auto,
                _ => Isolation::default(),
            },
            store,
            ..Options::default()
        };
        let mgr = core(SandboxManager::with_options(
            path_from(project_dir),
            options,
        ))?;
        Ok(Box::new(Manager { inner: Some(mgr) }))
    })
}

impl Manager {
    fn get(&self) -> Result<&SandboxManager, String> {
        self.inner
            .as_ref()
            .ok_or_else(|| internal("the sandbox manager is closed"))
    }

    fn project_dir(&self) -> Vec<u8> {
        guarded_or_default(|| {
            self.inner
                .as_ref()
                .map(|m| path_bytes(m.project_dir()))
                .unwrap_or_default()
        })
    }

    fn session_base(&self) -> Vec<u8> {
        guarded_or_default(|| {
            self.inner
                .as_ref()
                .map(|m| path_bytes(m.session_base()))
                .unwrap_or_default()
        })
    }

    fn isolation_mode(&self) -> u8 {
        guarded_or_default(
            || match self.inner.as_ref().and_then(|m| m.isolation_mode()) {
                None => 0,
                Some(IsolationMode::Copy) => 1,
                Some(IsolationMode::KernelOverlay) => 2,
                Some(IsolationMode::FuseOverlay) => 3,
            },
        )
    }

    fn session_id(&self) -> String {
        guarded_or_default(|| {
            self.inner
                .as_ref()
                .map(|m| m.session_id().to_string())
                .unwrap_or_default()
        })
    }

    fn create_sandbox(
        &self,
        delegation_id: &[u8],
        chain_from: &bridge::FfiInfo,
        chained: bool,
    ) -> Result<bridge::FfiInfo, String> {
        guarded(|| {
            let mgr = self.get()?;
            // The id is refused before the chained handle is looked at, as the core does.
            let id = core(DelegationId::parse(&id_from(delegation_id)).map_err(Error::from))?;
            let chain = core(chained.then(|| info_in(chain_from, unknown)).transpose())?;
            let info = core(mgr.create_sandbox(&id, chain.as_ref()))?;
            Ok(info_out(info))
        })
    }

    fn finalize_sandbox(&self, info: &bridge::FfiInfo) -> Result<bridge::FfiResult, String> {
        guarded(|| {
            let r = core(self.get()?.finalize_sandbox(&core(info_in(info, unknown))?))?;
            Ok(result_out(r))
        })
    }

    fn discard_sandbox(&self, info: &bridge::FfiInfo) -> Result<(), String> {
        guarded(|| {
            let mgr = self.get()?;
            let info = core(info_in(info, |path| Error::Containment {
                path,
                base: mgr.session_base().to_path_buf(),
                reason: "not a sandbox of this session",
            }))?;
            core(mgr.discard_sandbox(&info))
        })
    }

    fn write_pending_patch(&self, delegation_id: &[u8], patch: &[u8]) -> Result<Vec<u8>, String> {
        guarded(|| {
            let p = core(
                self.get()?
                    .write_pending_patch(&id_from(delegation_id), patch),
            )?;
            Ok(p.into_os_string().into_vec())
        })
    }

    fn deliver_pending_patch(
        &self,
        delegation_id: &[u8],
        patch: &[u8],
    ) -> Result<bridge::FfiDelivery, String> {
        guarded(|| {
            let d = core(
                self.get()?
                    .deliver_pending_patch(&id_from(delegation_id), patch),
            )?;
            Ok(delivery_out(d))
        })
    }

    fn write_pending_patch_with(
        &self,
        delegation_id: &[u8],
        patch: &[u8],
        p: &bridge::FfiProvenance,
    ) -> Result<Vec<u8>, String> {
        let provenance = provenance_in(p);
        guarded(|| {
            let p = core(self.get()?.write_pending_patch_with(
                &id_from(delegation_id),
                patch,
                &provenance,
            ))?;
            Ok(p.into_os_string().into_vec())
        })
    }

    fn deliver_pending_patch_with(
        &self,
        delegation_id: &[u8],
        patch: &[u8],
        p: &bridge::FfiProvenance,
    ) -> Result<bridge::FfiDelivery, String> {
        let provenance = provenance_in(p);
        guarded(|| {
            let d = core(self.get()?.deliver_pending_patch_with(
                &id_from(delegation_id),
                patch,
                &provenance,
            ))?;
            Ok(delivery_out(d))
        })
    }

    fn complete_sandbox(
        &self,
        info: &bridge::FfiInfo,
        decider: &bridge::Decider,
    ) -> Result<bridge::FfiCompletion, String> {
        guarded(|| {
            let decide = |r: &SandboxResult| match decider.decide(&result_out(r.clone())) {
                0 => Ok(Decision::Accept),
                1 => Ok(Decision::Reject),
                _ => Err("the decision callback threw".to_string()),
            };
            let info = core(info_in(info, unknown))?;
            let c = core(self.get()?.complete_sandbox(&info, Some(&decide)))?;
            let (routed, pending_path) = match c.routed {
                Routed::Accepted => (bridge::FfiRouted::Accepted, Vec::new()),
                Routed::Pending(p) => (bridge::FfiRouted::Pending, p.into_os_string().into_vec()),
                Routed::Unchanged => (bridge::FfiRouted::Unchanged, Vec::new()),
            };
            Ok(bridge::FfiCompletion {
                result: result_out(c.result),
                routed,
                pending_path,
            })
        })
    }

    /// Drops the manager now (the Rust `Drop`: sandboxes removed, pending patches kept), so
    /// the C++ destructor runs it under `catch_unwind`. Idempotent.
    fn close(&mut self) {
        let inner = self.inner.take();
        let _ = catch_unwind(AssertUnwindSafe(move || drop(inner)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_utf8_ids_are_refused_as_invalid() {
        let id = id_from(b"a\xffb");
        let e = crate::session::layout::validate_delegation_id(&id).unwrap_err();
        assert_eq!(e.kind(), "invalid_id");
    }
}
