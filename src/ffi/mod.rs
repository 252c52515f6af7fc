//! The C++ bridge (feature `ffi`): a `#[cxx::bridge]` over [`SandboxManager`] and the
//! consumer-side [`apply`](crate::apply) (`apply_patch`, `undo_apply`).
//!
//! The C++ API lives in `include/patchbox/sandbox.hpp` (and `apply.hpp`, `error.hpp`) and the
//! glue in `cpp/`; `build.rs` compiles both into this crate, so the Rust staticlib is the whole
//! C++ library. This module is the only code on the Rust side of the boundary:
//!
//! * Paths and patches cross as bytes (`&[u8]` / `Vec<u8>`): paths need not be UTF-8 on Unix.
//! * Every fallible function returns `Result`, whose error string is `"<kind>\x1f<message>"`
//!   ([`KIND_SEPARATOR`]); `<kind>` is [`Error::kind`] or `internal`. The C++ glue splits it
//!   and throws `patchbox::Error` with the matching `patchbox::ErrorKind`.
//! * No panic crosses the boundary: every bridge function runs under
//!   [`std::panic::catch_unwind`]; a panic becomes an `internal` error (or a neutral value for
//!   the infallible getters). cxx would otherwise abort the process.
//! * Reports cross as plain shared structs (an absent path is a `has_*` flag, enums are cxx
//!   shared enums); an apply's conflicts and refusals are in its report, not errors.
//! * C++ callbacks (copy progress, the completion decision) come in as opaque C++ types whose
//!   methods are `noexcept`: the glue catches whatever the user's callback throws.

use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::apply::{ApplyOptions, ApplyReport, FileReport, FileStatus, Outcome};
use crate::error::Error;
use crate::fs::relpath::RelPath;
use crate::session::manager::{
    Decision, Options, Routed, SandboxInfo, SandboxManager, SandboxResult,
};
use crate::tree::snapshot::{Progress, ProgressFn};

/// Separates the error kind from the message in a bridge error string.
pub const KIND_SEPARATOR: char = '\x1f';

#[cxx::bridge(namespace = "patchbox::bridge")]
mod bridge {
    /// A path as raw bytes (Unix paths need not be UTF-8).
    struct FfiPath {
        bytes: Vec<u8>,
    }

    /// `SandboxInfo` across the bridge.
    struct FfiInfo {
        path: Vec<u8>,
        delegation_id: Vec<u8>,
        base_dir: Vec<u8>,
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

    /// `Completion` across the bridge. `routed`: 0 accepted, 1 pending (then `pending_path`
    /// is set), 2 unchanged.
    struct FfiCompletion {
        result: FfiResult,
        routed: u8,
        pending_path: Vec<u8>,
    }

    /// `apply::ApplyOptions` across the bridge; an absent path is `has_* == false`.
    struct FfiApplyOptions {
        check: bool,
        has_preimages: bool,
        preimages: Vec<u8>,
        conflict_markers: bool,
        has_undo_dir: bool,
        undo_dir: Vec<u8>,
        strip: usize,
        allow_outside_symlinks: bool,
    }

    /// `apply::FileStatus` across the bridge.
    #[derive(Debug)]
    #[repr(u8)]
    enum FfiFileStatus {
        Applied,
        Merged,
        AlreadyApplied,
        Conflict,
        Refused,
    }

    /// `apply::Outcome` across the bridge.
    #[derive(Debug)]
    #[repr(u8)]
    enum FfiOutcome {
        Applied,
        AppliedWithConflicts,
        AlreadyApplied,
        Refused,
    }

    /// `apply::HunkConflict` across the bridge.
    struct FfiHunkConflict {
        hunk: usize,
        header: String,
        reason: String,
    }

    /// `apply::FileReport` across the bridge.
    struct FfiFileReport {
        path: Vec<u8>,
        has_old_path: bool,
        old_path: Vec<u8>,
        status: FfiFileStatus,
        detail: String,
        conflicts: Vec<FfiHunkConflict>,
        markers_written: bool,
    }

    /// `apply::ApplyReport` across the bridge, with its `Display` rendering in `text`.
    struct FfiApplyReport {
        files: Vec<FfiFileReport>,
        outcome: FfiOutcome,
        check_only: bool,
        has_undo_dir: bool,
        undo_dir: Vec<u8>,
        warnings: Vec<String>,
        text: String,
    }

    /// `apply::UndoReport` across the bridge.
    struct FfiUndoReport {
        restored: Vec<FfiPath>,
        overwritten: Vec<FfiPath>,
        already_undone: bool,
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
        ) -> Result<Box<Manager>>;
        fn project_dir(self: &Manager) -> Vec<u8>;
        fn session_base(self: &Manager) -> Vec<u8>;
        fn session_id(self: &Manager) -> String;
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
        fn complete_sandbox(
            self: &Manager,
            info: &FfiInfo,
            decider: &Decider,
        ) -> Result<FfiCompletion>;
        fn close(self: &mut Manager);

        fn apply_patch(
            project_dir: &[u8],
            patch: &[u8],
            options: &FfiApplyOptions,
        ) -> Result<FfiApplyReport>;
        fn undo_apply(project_dir: &[u8], undo_dir: &[u8], force: bool) -> Result<FfiUndoReport>;
    }
}

// SAFETY: the C++ `ProgressSink` is immutable after construction except for its mutex, and
// `on_progress` takes that mutex around the user's callback, so it may be called from any
// thread, concurrently, and the sink may be destroyed on any thread.
unsafe impl Send for bridge::ProgressSink {}
// SAFETY: see the `Send` impl above.
unsafe impl Sync for bridge::ProgressSink {}

/// The C++ `SandboxManager`'s Rust half: the manager, until [`Manager::close`] drops it.
pub struct Manager {
    inner: Option<SandboxManager>,
}

/// Encodes a core error as `"<kind>\x1f<message>"`.
fn encode(e: &Error) -> String {
    format!("{}{KIND_SEPARATOR}{e}", e.kind())
}

/// An `internal` error string.
fn internal(msg: &str) -> String {
    format!("internal{KIND_SEPARATOR}{msg}")
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// Runs `f`, turning a panic into an `internal` error.
fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        Err(internal(&format!(
            "panic in patchbox: {}",
            panic_message(p.as_ref())
        )))
    })
}

/// Runs an infallible `f`; a panic yields `T::default()`.
fn guarded_or_default<T: Default>(f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_default()
}

fn core<T>(r: crate::Result<T>) -> Result<T, String> {
    r.map_err(|e| encode(&e))
}

fn path_from(b: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(b))
}

fn path_bytes(p: &Path) -> Vec<u8> {
    p.as_os_str().as_bytes().to_vec()
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

fn info_in(i: &bridge::FfiInfo) -> SandboxInfo {
    SandboxInfo {
        path: path_from(&i.path),
        delegation_id: id_from(&i.delegation_id),
        base_dir: path_from(&i.base_dir),
    }
}

fn info_out(i: SandboxInfo) -> bridge::FfiInfo {
    bridge::FfiInfo {
        path: i.path.into_os_string().into_vec(),
        delegation_id: i.delegation_id.into_bytes(),
        base_dir: i.base_dir.into_os_string().into_vec(),
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

fn new_manager(
    project_dir: &[u8],
    root: &[u8],
    progress: cxx::UniquePtr<bridge::ProgressSink>,
    prune_on_start: bool,
) -> Result<Box<Manager>, String> {
    guarded(|| {
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
            let chain = chained.then(|| info_in(chain_from));
            let info = core(
                self.get()?
                    .create_sandbox(&id_from(delegation_id), chain.as_ref()),
            )?;
            Ok(info_out(info))
        })
    }

    fn finalize_sandbox(&self, info: &bridge::FfiInfo) -> Result<bridge::FfiResult, String> {
        guarded(|| {
            let r = core(self.get()?.finalize_sandbox(&info_in(info)))?;
            Ok(result_out(r))
        })
    }

    fn discard_sandbox(&self, info: &bridge::FfiInfo) -> Result<(), String> {
        guarded(|| core(self.get()?.discard_sandbox(&info_in(info))))
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
            let c = core(self.get()?.complete_sandbox(&info_in(info), Some(&decide)))?;
            let (routed, pending_path) = match c.routed {
                Routed::Accepted => (0, Vec::new()),
                Routed::Pending(p) => (1, p.into_os_string().into_vec()),
                Routed::Unchanged => (2, Vec::new()),
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

// ---- apply ---------------------------------------------------------------------------------

fn apply_options_in(o: &bridge::FfiApplyOptions) -> ApplyOptions {
    ApplyOptions {
        check: o.check,
        preimages: o.has_preimages.then(|| path_from(&o.preimages)),
        conflict_markers: o.conflict_markers,
        undo_dir: o.has_undo_dir.then(|| path_from(&o.undo_dir)),
        strip: o.strip,
        allow_outside_symlinks: o.allow_outside_symlinks,
        ..ApplyOptions::default()
    }
}

fn status_out(s: FileStatus) -> bridge::FfiFileStatus {
    match s {
        FileStatus::Applied => bridge::FfiFileStatus::Applied,
        FileStatus::Merged => bridge::FfiFileStatus::Merged,
        FileStatus::AlreadyApplied => bridge::FfiFileStatus::AlreadyApplied,
        FileStatus::Conflict => bridge::FfiFileStatus::Conflict,
        FileStatus::Refused => bridge::FfiFileStatus::Refused,
    }
}

fn outcome_out(o: Outcome) -> bridge::FfiOutcome {
    match o {
        Outcome::Applied => bridge::FfiOutcome::Applied,
        Outcome::AppliedWithConflicts => bridge::FfiOutcome::AppliedWithConflicts,
        Outcome::AlreadyApplied => bridge::FfiOutcome::AlreadyApplied,
        Outcome::Refused => bridge::FfiOutcome::Refused,
    }
}

fn rel_paths_out(v: Vec<RelPath>) -> Vec<bridge::FfiPath> {
    v.iter()
        .map(|p| bridge::FfiPath {
            bytes: p.as_bytes().to_vec(),
        })
        .collect()
}

fn file_report_out(f: FileReport) -> bridge::FfiFileReport {
    bridge::FfiFileReport {
        path: f.path.as_bytes().to_vec(),
        has_old_path: f.old_path.is_some(),
        old_path: f
            .old_path
            .map(|p| p.as_bytes().to_vec())
            .unwrap_or_default(),
        status: status_out(f.status),
        detail: f.detail,
        conflicts: f
            .conflicts
            .into_iter()
            .map(|c| bridge::FfiHunkConflict {
                hunk: c.hunk,
                header: c.header,
                reason: c.reason,
            })
            .collect(),
        markers_written: f.markers_written,
    }
}

fn apply_report_out(r: ApplyReport) -> bridge::FfiApplyReport {
    let text = r.to_string();
    bridge::FfiApplyReport {
        files: r.files.into_iter().map(file_report_out).collect(),
        outcome: outcome_out(r.outcome),
        check_only: r.check_only,
        has_undo_dir: r.undo_dir.is_some(),
        undo_dir: r
            .undo_dir
            .map(|p| p.into_os_string().into_vec())
            .unwrap_or_default(),
        warnings: r.warnings,
        text,
    }
}

/// [`crate::apply::apply_patch`]: conflicts and refusals are in the report, not errors.
fn apply_patch(
    project_dir: &[u8],
    patch: &[u8],
    options: &bridge::FfiApplyOptions,
) -> Result<bridge::FfiApplyReport, String> {
    guarded(|| {
        let r = core(crate::apply::apply_patch(
            path_from(project_dir),
            patch,
            &apply_options_in(options),
        ))?;
        Ok(apply_report_out(r))
    })
}

/// [`crate::apply::undo_apply`].
fn undo_apply(
    project_dir: &[u8],
    undo_dir: &[u8],
    force: bool,
) -> Result<bridge::FfiUndoReport, String> {
    guarded(|| {
        let r = core(crate::apply::undo_apply(
            path_from(project_dir),
            path_from(undo_dir),
            force,
        ))?;
        Ok(bridge::FfiUndoReport {
            restored: rel_paths_out(r.restored),
            overwritten: rel_paths_out(r.overwritten),
            already_undone: r.already_undone,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_their_kind() {
        let e = Error::InvalidId {
            id: "../x".into(),
            reason: "contains '/'",
        };
        let s = encode(&e);
        let (kind, msg) = s.split_once(KIND_SEPARATOR).unwrap();
        assert_eq!(kind, "invalid_id");
        assert!(msg.contains("../x"));
    }

    #[test]
    fn panics_become_internal_errors() {
        let r: Result<(), String> = guarded(|| panic!("boom"));
        let s = r.unwrap_err();
        assert!(s.starts_with("internal\x1f"), "{s}");
        assert!(s.contains("boom"), "{s}");
        assert_eq!(guarded_or_default(|| -> u32 { panic!("x") }), 0);
    }

    fn opts() -> bridge::FfiApplyOptions {
        bridge::FfiApplyOptions {
            check: false,
            has_preimages: false,
            preimages: Vec::new(),
            conflict_markers: false,
            has_undo_dir: false,
            undo_dir: Vec::new(),
            strip: 1,
            allow_outside_symlinks: false,
        }
    }

    #[test]
    fn apply_errors_carry_their_kind() {
        let project = tempfile::tempdir().unwrap();
        let dir = path_bytes(project.path());
        let s = apply_patch(&dir, b"not a patch\n", &opts()).err().unwrap();
        assert!(s.starts_with("patch_parse\x1f"), "{s}");
        let evil = b"--- /dev/null\n+++ b/../x\n@@ -0,0 +1 @@\n+x\n";
        let s = apply_patch(&dir, evil, &opts()).err().unwrap();
        assert!(s.starts_with("containment\x1f"), "{s}");
        let s = undo_apply(&dir, &dir, false).err().unwrap();
        assert!(s.starts_with("io\x1f"), "{s}");
    }

    #[test]
    fn apply_reports_cross_whole() {
        let project = tempfile::tempdir().unwrap();
        let records = tempfile::tempdir().unwrap();
        std::fs::write(project.path().join("a.txt"), "one\n").unwrap();
        let dir = path_bytes(project.path());
        let undo = records.path().join("u");
        let patch = b"diff --git a/a.txt b/b.txt\nsimilarity index 50%\nrename from a.txt\n\
rename to b.txt\n--- a/a.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-one\n+two\n";

        let mut o = opts();
        o.check = true;
        let r = apply_patch(&dir, patch, &o).unwrap();
        assert!(r.check_only && !r.has_undo_dir);
        assert_eq!(r.outcome, bridge::FfiOutcome::Applied);
        assert!(r.text.contains("would be applied"), "{}", r.text);

        let mut o = opts();
        o.has_undo_dir = true;
        o.undo_dir = path_bytes(&undo);
        let r = apply_patch(&dir, patch, &o).unwrap();
        assert_eq!(r.outcome, bridge::FfiOutcome::Applied, "{}", r.text);
        assert!(r.has_undo_dir && r.undo_dir == path_bytes(&undo));
        let f = &r.files[0];
        assert_eq!(
            (f.path.as_slice(), f.old_path.as_slice()),
            (&b"b.txt"[..], &b"a.txt"[..])
        );
        assert!(f.has_old_path);
        assert_eq!(f.status, bridge::FfiFileStatus::Applied);
        let again = apply_patch(&dir, patch, &opts()).unwrap();
        assert_eq!(again.outcome, bridge::FfiOutcome::AlreadyApplied);

        let u = undo_apply(&dir, &path_bytes(&undo), false).unwrap();
        assert_eq!(u.restored.len(), 2);
        assert!(!u.already_undone);
        assert_eq!(
            std::fs::read(project.path().join("a.txt")).unwrap(),
            b"one\n"
        );
    }

    #[test]
    fn non_utf8_ids_are_refused_as_invalid() {
        let id = id_from(b"a\xffb");
        let e = crate::session::layout::validate_delegation_id(&id).unwrap_err();
        assert_eq!(e.kind(), "invalid_id");
    }
}
