//! The bridge behind `<patchbox/plan.hpp>`: the C++ `patchbox::plan::SandboxManager` drives a
//! Rust [`PlanManager`] through the opaque [`PlanMgr`]; each sandbox it hands out is an opaque
//! [`PlanSandbox`] holding the `Arc<dyn Sandbox>`, wrapped on the C++ side by the built-in
//! implementation of the abstract `patchbox::plan::Sandbox`.
//!
//! It also serves `<patchbox/checkpoint.hpp>`: the opaque [`PlanCheckpoints`] wraps a
//! [`CheckpointManager`]; the C++ `PhaseRunner` is written in C++ over these calls.
//!
//! Strategies and statuses cross as their snake_case names ([`Strategy::name`],
//! [`Status::name`]), so a strategy added in Rust is usable from C++ without a header change;
//! a name that is not built in is a custom strategy's ([`Strategy::parse`]).
//!
//! Custom strategies: every C++ manager has a [`StrategyRegistry`]; `register_strategy` puts a
//! C++ `patchbox::plan::CustomStrategy` in it, held by the opaque C++ `CustomStrategyHandle`
//! (`cpp/custom_strategy.h`). The Rust side (`CppStrategy`, a [`StrategyProtocol`]) calls the
//! handle's `noexcept` methods, which catch everything the strategy throws and return it as an
//! error string; those calls run inside the bridge functions' `catch_unwind`. A C++
//! `SandboxStrategyRegistry` is a shared [`StrategyRegistry`] of its own (with the module
//! allow-list), which a manager opened over it uses instead (`registry.rs`); a C++
//! `BuiltInSandboxStrategyAdapter` is a [`crate::plan::custom::BuiltInAdapter`] (`adapter.rs`).
//! Times cross as milliseconds since the Unix epoch.
//!
//! Errors keep the rules of [`super`], with the plan error's kind and details:
//!
//! ```text
//! plan_<kind> \x1f <message> \x1e <sandbox id> \x1e <files> \x1e <rolled back ids> \x1e <failed rollback ids>
//! ```
//!
//! `<kind>` is [`SandboxError::kind`] (`plan_sandbox`, `plan_creation`, `plan_commit`,
//! `plan_rollback`, `plan_state`, `plan_atomic_commit`); the four trailing fields are always
//! present (possibly empty) and are parsed from the right, so a message holding a `\x1e` still
//! parses; lists are `\x1f`-separated. The sandbox id is the failed sandbox of an atomic commit.
//! A panic is an `internal` error, as in every bridge.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStringExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{guarded, guarded_or_default, internal, path_from};
use crate::plan::checkpoint::{Checkpoint, CheckpointManager};
use crate::plan::custom::{
    DiffView, OpResult, SandboxRef, StrategyFailure, StrategyProtocol, StrategyRegistry,
};
use crate::plan::CheckpointSupport;
use crate::plan::DiffEntry;
use crate::plan::{
    CommitResult, DiffOp, PlanManager, Resource, ResourceKind, ResourceRegistry, Sandbox,
    SandboxContext, SandboxDiff, SandboxError, Status, Strategy,
};

mod adapter;
mod registry;
use adapter::{plan_adapter_new, PlanAdapter};
use registry::{plan_open_with_registry, plan_registry_new, PlanRegistry};

#[cxx::bridge(namespace = "patchbox::bridge::plan")]
mod bridge {
    /// One metadata entry.
    struct FfiPlanMeta {
        key: String,
        value: String,
    }

    /// `SandboxContext` across the bridge.
    struct FfiPlanContext {
        sandbox_id: String,
        sandbox_path: Vec<u8>,
        original_path: Vec<u8>,
        resource_id: String,
        plan_id: String,
        created_at_ms: i64,
        metadata: Vec<FfiPlanMeta>,
    }

    /// An optional context: `present == false` before `create`.
    struct FfiPlanContextOpt {
        present: bool,
        context: FfiPlanContext,
    }

    /// `session::provenance::Provenance` for `commit_all_as`; absent values are `has_* ==
    /// false`.
    struct FfiCommitProvenance {
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

    /// `CommitResult` across the bridge; absent options are `has_* == false`.
    struct FfiCommitResult {
        sandbox_id: String,
        success: bool,
        has_commit_ref: bool,
        commit_ref: String,
        changed_files: Vec<String>,
        added_files: Vec<String>,
        deleted_files: Vec<String>,
        has_error: bool,
        error: String,
        timestamp_ms: i64,
        metadata: Vec<FfiPlanMeta>,
        /// The result as the JSON record `patchbox plan commit --json` prints one of.
        json: String,
    }

    /// `DiffEntry` across the bridge; `operation` is `added`, `modified` or `deleted`.
    struct FfiDiffEntry {
        path: String,
        operation: String,
        has_before: bool,
        before: Vec<u8>,
        has_after: bool,
        after: Vec<u8>,
    }

    /// `SandboxDiff` across the bridge.
    struct FfiDiff {
        entries: Vec<FfiDiffEntry>,
        patch: Vec<u8>,
    }

    /// `Resource` across the bridge; `kind` is `git_repository`, `directory`, `file`,
    /// `database` or anything else (other).
    struct FfiResource {
        id: String,
        kind: String,
        path: Vec<u8>,
        has_parent: bool,
        parent: String,
        has_strategy: bool,
        strategy: String,
    }

    /// `SandboxRef` across the bridge (to a C++ `CustomStrategy`).
    struct FfiSandboxRef {
        sandbox_id: String,
        plan_id: String,
        resource_id: String,
        created_at_ms: i64,
        metadata: Vec<FfiPlanMeta>,
    }

    /// `DiffView` across the bridge (from a C++ `CustomStrategy`).
    struct FfiDiffView {
        sandbox_id: String,
        entries: Vec<FfiDiffEntry>,
        summary: String,
    }

    unsafe extern "C++" {
        include!("patchbox/cpp/custom_strategy.h");

        /// A C++ `patchbox::plan::CustomStrategy`, held by a `shared_ptr`. Every method is
        /// `noexcept`: it catches whatever the strategy throws, puts its message in `err` and
        /// returns false.
        type CustomStrategyHandle;
        fn create(
            self: &CustomStrategyHandle,
            sandbox: &FfiSandboxRef,
            original: &[u8],
            metadata: &mut Vec<FfiPlanMeta>,
            err: &mut String,
        ) -> bool;
        fn read(
            self: &CustomStrategyHandle,
            sandbox: &FfiSandboxRef,
            path: &str,
            found: &mut bool,
            data: &mut Vec<u8>,
            err: &mut String,
        ) -> bool;
        fn write(
            self: &CustomStrategyHandle,
            sandbox: &FfiSandboxRef,
            path: &str,
            data: &[u8],
            err: &mut String,
        ) -> bool;
        fn diff(
            self: &CustomStrategyHandle,
            sandbox: &FfiSandboxRef,
            view: &mut FfiDiffView,
            err: &mut String,
        ) -> bool;
        fn commit(
            self: &CustomStrategyHandle,
            sandbox: &FfiSandboxRef,
            has_message: bool,
            message: &str,
            has_ref: &mut bool,
            commit_ref: &mut String,
            err: &mut String,
        ) -> bool;
        fn rollback(
            self: &CustomStrategyHandle,
            sandbox: &FfiSandboxRef,
            after_commit: bool,
            err: &mut String,
        ) -> bool;
        fn checkpoint(
            self: &CustomStrategyHandle,
            sandbox: &FfiSandboxRef,
            checkpoint_id: &str,
            err: &mut String,
        ) -> bool;
        fn restore_checkpoint(
            self: &CustomStrategyHandle,
            sandbox: &FfiSandboxRef,
            checkpoint_id: &str,
            err: &mut String,
        ) -> bool;
        fn cleanup(self: &CustomStrategyHandle, sandbox: &FfiSandboxRef, err: &mut String) -> bool;
        fn is_rollbackable(self: &CustomStrategyHandle) -> bool;
    }

    /// `Checkpoint` across the bridge.
    struct FfiCheckpoint {
        checkpoint_id: String,
        sandbox_id: String,
        plan_id: String,
        phase: String,
        created_at_ms: i64,
        metadata: Vec<FfiPlanMeta>,
        snapshot_path: Vec<u8>,
    }

    extern "Rust" {
        type PlanMgr;
        type PlanSandbox;
        type PlanSandboxList;

        fn plan_open(root: &[u8]) -> Result<Box<PlanMgr>>;
        fn root(self: &PlanMgr) -> Vec<u8>;
        fn get_or_create_sandbox(
            self: &PlanMgr,
            plan_id: &str,
            resource_id: &str,
            original_path: &[u8],
            strategy: &str,
        ) -> Result<Box<PlanSandbox>>;
        fn get_sandbox(
            self: &PlanMgr,
            plan_id: &str,
            resource_id: &str,
        ) -> Result<Box<PlanSandbox>>;
        fn list_sandboxes(self: &PlanMgr, plan_id: &str) -> Result<Box<PlanSandboxList>>;
        fn list_plans(self: &PlanMgr) -> Result<Vec<String>>;
        /// What `patchbox plan list --json [PLAN]` prints (every plan when `has_plan` is
        /// false).
        fn plans_json(self: &PlanMgr, has_plan: bool, plan_id: &str) -> Result<String>;
        /// What `patchbox plan diff --json PLAN` prints.
        fn diff_json(self: &PlanMgr, plan_id: &str) -> Result<String>;
        fn commit_all(self: &PlanMgr, plan_id: &str) -> Result<Vec<FfiCommitResult>>;
        fn commit_all_as(
            self: &PlanMgr,
            plan_id: &str,
            provenance: &FfiCommitProvenance,
        ) -> Result<Vec<FfiCommitResult>>;
        fn rollback_all(self: &PlanMgr, plan_id: &str) -> Result<()>;
        fn cleanup_all(self: &PlanMgr, plan_id: &str) -> Result<()>;
        fn cleanup_abandoned(self: &PlanMgr) -> Result<usize>;
        fn resolve_sandbox_key(
            self: &PlanMgr,
            resource_id: &str,
            registry: &[FfiResource],
        ) -> Result<String>;
        /// The boundary's sandbox; `prefix` receives the resource's place under the boundary.
        fn get_or_create_sandbox_for_resource(
            self: &PlanMgr,
            plan_id: &str,
            resource_id: &str,
            registry: &[FfiResource],
            prefix: &mut Vec<u8>,
        ) -> Result<Box<PlanSandbox>>;
        fn clear_boundary_cache(self: &PlanMgr);
        /// Registers a C++ custom strategy under `name` (then reopens the manager's sandboxes
        /// of it found on disk).
        fn register_strategy(
            self: &PlanMgr,
            name: &str,
            strategy: UniquePtr<CustomStrategyHandle>,
        ) -> Result<()>;
        fn has_custom_strategy(self: &PlanMgr, name: &str) -> bool;
        fn close(self: &mut PlanMgr);

        // The strategy registry with its module allow-list (`registry.rs`).
        type PlanRegistry;
        fn plan_registry_new() -> Box<PlanRegistry>;
        /// A manager whose custom strategies are those of `registry` (shared, not copied).
        fn plan_open_with_registry(root: &[u8], registry: &PlanRegistry) -> Result<Box<PlanMgr>>;
        fn allow_module_prefix(self: &PlanRegistry, prefix: &[u8]) -> Result<()>;
        /// The allowed prefixes, each followed by a NUL byte (paths hold none).
        fn allowed_prefixes(self: &PlanRegistry) -> Vec<u8>;
        fn register_module(
            self: &PlanRegistry,
            name: &str,
            module: &[u8],
            class_name: &str,
        ) -> Result<()>;
        fn register_strategy(
            self: &PlanRegistry,
            name: &str,
            strategy: UniquePtr<CustomStrategyHandle>,
        ) -> Result<()>;
        fn has_custom_strategy(self: &PlanRegistry, name: &str) -> bool;
        fn names(self: &PlanRegistry) -> Vec<String>;

        // A built-in strategy behind the protocol (`adapter.rs`).
        type PlanAdapter;
        fn plan_adapter_new(root: &[u8], strategy: &str) -> Result<Box<PlanAdapter>>;
        fn strategy_name(self: &PlanAdapter) -> String;
        fn create(
            self: &PlanAdapter,
            plan_id: &str,
            resource_id: &str,
            original: &[u8],
        ) -> Result<FfiSandboxRef>;
        fn read(
            self: &PlanAdapter,
            r: &FfiSandboxRef,
            path: &str,
            found: &mut bool,
        ) -> Result<Vec<u8>>;
        fn write(
            self: &PlanAdapter,
            r: &FfiSandboxRef,
            path: &str,
            data: &[u8],
        ) -> Result<FfiDiffEntry>;
        fn diff(self: &PlanAdapter, r: &FfiSandboxRef) -> Result<FfiDiffView>;
        fn commit(
            self: &PlanAdapter,
            r: &FfiSandboxRef,
            has_message: bool,
            message: &str,
            has_ref: &mut bool,
        ) -> Result<String>;
        fn rollback(self: &PlanAdapter, r: &FfiSandboxRef, after_commit: bool) -> Result<()>;
        fn checkpoint(self: &PlanAdapter, r: &FfiSandboxRef, id: &str) -> Result<()>;
        fn restore_checkpoint(self: &PlanAdapter, r: &FfiSandboxRef, id: &str) -> Result<()>;
        fn cleanup(self: &PlanAdapter, r: &FfiSandboxRef) -> Result<()>;
        fn is_rollbackable(self: &PlanAdapter) -> bool;

        fn len(self: &PlanSandboxList) -> usize;
        fn get(self: &PlanSandboxList, i: usize) -> Box<PlanSandbox>;

        fn is_some(self: &PlanSandbox) -> bool;
        fn sandbox_id(self: &PlanSandbox) -> String;
        fn strategy(self: &PlanSandbox) -> String;
        fn status(self: &PlanSandbox) -> String;
        fn context(self: &PlanSandbox) -> FfiPlanContextOpt;
        fn create(self: &PlanSandbox, plan_id: &str) -> Result<FfiPlanContext>;
        fn get_path(self: &PlanSandbox, resource_relative: &[u8]) -> Result<Vec<u8>>;
        fn read(self: &PlanSandbox, resource_relative: &[u8], found: &mut bool) -> Result<Vec<u8>>;
        fn write(self: &PlanSandbox, resource_relative: &[u8], data: &[u8]) -> Result<()>;
        fn diff(self: &PlanSandbox) -> Result<FfiDiff>;
        fn check_commit(self: &PlanSandbox) -> Result<()>;
        fn commit(self: &PlanSandbox, has_message: bool, message: &str) -> Result<FfiCommitResult>;
        fn rollback(self: &PlanSandbox) -> Result<()>;
        fn cleanup(self: &PlanSandbox) -> Result<()>;
        fn is_rollbackable(self: &PlanSandbox) -> bool;

        fn plan_status_names() -> Vec<String>;
        fn plan_can_transition(from: &str, to: &str) -> bool;
        fn plan_strategy_names() -> Vec<String>;
        fn plan_error_kinds() -> Vec<String>;

        /// `files`, `native` or `unsupported` (`CheckpointSupport`).
        fn checkpoint_support(self: &PlanSandbox) -> String;

        type PlanCheckpoints;

        fn plan_checkpoints_new(root: &[u8]) -> Result<Box<PlanCheckpoints>>;
        /// `CheckpointManager::with_store`; `store` is a store URL.
        fn plan_checkpoints_with_store(root: &[u8], store: &str) -> Result<Box<PlanCheckpoints>>;
        fn list_stored(self: &PlanCheckpoints) -> Result<Vec<FfiCheckpoint>>;
        /// `restore_from_store`; an empty `checkpoint_id` in the result: the store lacks it.
        fn restore_from_store(
            self: &PlanCheckpoints,
            sandbox: &PlanSandbox,
            checkpoint_id: &str,
        ) -> Result<FfiCheckpoint>;
        fn prune_store(self: &PlanCheckpoints, grace_seconds: u64) -> Result<usize>;
        fn keep(self: &PlanCheckpoints) -> Result<()>;
        fn attach(self: &PlanCheckpoints, sandbox: &PlanSandbox) -> Result<()>;
        fn create_checkpoint(
            self: &PlanCheckpoints,
            sandbox: &PlanSandbox,
            plan_id: &str,
            phase: &str,
            metadata: &[FfiPlanMeta],
        ) -> Result<FfiCheckpoint>;
        /// `rollback_to` of the checkpoint with these ids (all it needs of the checkpoint).
        fn rollback_to(
            self: &PlanCheckpoints,
            checkpoint_id: &str,
            sandbox_id: &str,
        ) -> Result<bool>;
        /// `materialize` of the checkpoint with these ids into `dest`.
        fn materialize(
            self: &PlanCheckpoints,
            checkpoint_id: &str,
            sandbox_id: &str,
            dest: &[u8],
        ) -> Result<bool>;
        fn list_checkpoints(self: &PlanCheckpoints, sandbox_id: &str)
            -> Result<Vec<FfiCheckpoint>>;
        fn delete_checkpoint(self: &PlanCheckpoints, checkpoint_id: &str) -> Result<bool>;
        fn disk_bytes(self: &PlanCheckpoints, sandbox_id: &str) -> u64;
        fn close(self: &mut PlanCheckpoints);
    }

    /// One SQL value (`<patchbox/sqlite.hpp>`): `kind` 0 `NULL`, 1 integer, 2 real, 3 text,
    /// 4 blob; only the field of its kind is meaningful.
    struct FfiSqlValue {
        kind: u8,
        integer: i64,
        real: f64,
        text: String,
        blob: Vec<u8>,
    }

    /// What one statement returned: `values` holds the rows one after the other, `width`
    /// (the number of columns) values each.
    struct FfiSqlRows {
        columns: Vec<String>,
        width: usize,
        values: Vec<FfiSqlValue>,
        changes: u64,
    }

    extern "Rust" {
        /// `SqliteSandbox::execute`; a `plan_sandbox` error for a sandbox of another strategy.
        fn sqlite_execute(
            self: &PlanSandbox,
            sql: &str,
            params: Vec<FfiSqlValue>,
        ) -> Result<FfiSqlRows>;
    }
}

// SAFETY: `patchbox::plan::CustomStrategy` requires implementations to be thread-safe (its
// docs say so); the handle only holds the shared_ptr and calls it.
unsafe impl Send for bridge::CustomStrategyHandle {}
// SAFETY: as above; every method of the handle is const.
unsafe impl Sync for bridge::CustomStrategyHandle {}

/// A C++ `CustomStrategy` as a [`StrategyProtocol`]: each operation calls the handle's
/// `noexcept` glue, which turns whatever the strategy throws into an error message.
struct CppStrategy {
    handle: cxx::UniquePtr<bridge::CustomStrategyHandle>,
}

fn sref_out(r: &SandboxRef) -> bridge::FfiSandboxRef {
    bridge::FfiSandboxRef {
        sandbox_id: r.sandbox_id.clone(),
        plan_id: r.plan_id.clone(),
        resource_id: r.resource_id.clone(),
        created_at_ms: millis(r.created_at),
        metadata: meta_out(r.metadata.clone()),
    }
}

/// What the glue puts before the message of an exception that is not a
/// `patchbox::plan::SandboxError` (cpp/plan.cpp's `kUnexpected`): not a sandbox-level failure.
const UNEXPECTED_MARK: &str = "\u{1f}unexpected\u{1f}";

impl CppStrategy {
    fn h(&self) -> OpResult<&bridge::CustomStrategyHandle> {
        self.handle
            .as_ref()
            .ok_or_else(|| StrategyFailure::from("the C++ strategy is gone"))
    }

    /// Runs one call of the glue: `f` returns its success flag, filling `err` on failure.
    fn run(
        &self,
        f: impl FnOnce(&bridge::CustomStrategyHandle, &mut String) -> bool,
    ) -> OpResult<()> {
        let h = self.h()?;
        let mut err = String::new();
        if f(h, &mut err) {
            Ok(())
        } else if let Some(rest) = err.strip_prefix(UNEXPECTED_MARK) {
            Err(StrategyFailure::unexpected(rest))
        } else {
            Err(StrategyFailure::new(err))
        }
    }
}

impl StrategyProtocol for CppStrategy {
    fn create(
        &self,
        sandbox: &SandboxRef,
        original: &std::path::Path,
    ) -> OpResult<BTreeMap<String, String>> {
        let r = sref_out(sandbox);
        let mut meta = Vec::new();
        let orig = super::path_bytes(original);
        self.run(|h, err| h.create(&r, &orig, &mut meta, err))?;
        Ok(meta.into_iter().map(|m| (m.key, m.value)).collect())
    }

    fn read(&self, sandbox: &SandboxRef, path: &str) -> OpResult<Option<Vec<u8>>> {
        let r = sref_out(sandbox);
        let (mut found, mut data) = (false, Vec::new());
        self.run(|h, err| h.read(&r, path, &mut found, &mut data, err))?;
        Ok(found.then_some(data))
    }

    fn write(&self, sandbox: &SandboxRef, path: &str, data: &[u8]) -> OpResult<()> {
        let r = sref_out(sandbox);
        self.run(|h, err| h.write(&r, path, data, err))
    }

    fn diff(&self, sandbox: &SandboxRef) -> OpResult<DiffView> {
        let r = sref_out(sandbox);
        let mut view = bridge::FfiDiffView {
            sandbox_id: String::new(),
            entries: Vec::new(),
            summary: String::new(),
        };
        self.run(|h, err| h.diff(&r, &mut view, err))?;
        let mut entries = Vec::with_capacity(view.entries.len());
        for e in view.entries {
            let Some(operation) = DiffOp::from_name(&e.operation) else {
                return Err(StrategyFailure::new(format!(
                    "diff: unknown operation {:?} for {}",
                    e.operation, e.path
                )));
            };
            entries.push(DiffEntry {
                path: e.path,
                operation,
                before: e.has_before.then_some(e.before),
                after: e.has_after.then_some(e.after),
                before_mode: None,
                after_mode: None,
            });
        }
        let mut out = DiffView::new(&sandbox.sandbox_id, entries);
        if !view.summary.is_empty() {
            out.summary = view.summary;
        }
        Ok(out)
    }

    fn commit(&self, sandbox: &SandboxRef, message: Option<&str>) -> OpResult<Option<String>> {
        let r = sref_out(sandbox);
        let (mut has_ref, mut commit_ref) = (false, String::new());
        self.run(|h, err| {
            h.commit(
                &r,
                message.is_some(),
                message.unwrap_or(""),
                &mut has_ref,
                &mut commit_ref,
                err,
            )
        })?;
        Ok(has_ref.then_some(commit_ref))
    }

    fn rollback(&self, sandbox: &SandboxRef, after_commit: bool) -> OpResult<()> {
        let r = sref_out(sandbox);
        self.run(|h, err| h.rollback(&r, after_commit, err))
    }

    fn checkpoint(&self, sandbox: &SandboxRef, checkpoint_id: &str) -> OpResult<()> {
        let r = sref_out(sandbox);
        self.run(|h, err| h.checkpoint(&r, checkpoint_id, err))
    }

    fn restore_checkpoint(&self, sandbox: &SandboxRef, checkpoint_id: &str) -> OpResult<()> {
        let r = sref_out(sandbox);
        self.run(|h, err| h.restore_checkpoint(&r, checkpoint_id, err))
    }

    fn cleanup(&self, sandbox: &SandboxRef) -> OpResult<()> {
        let r = sref_out(sandbox);
        self.run(|h, err| h.cleanup(&r, err))
    }

    fn is_rollbackable(&self) -> bool {
        self.h().is_ok_and(|h| h.is_rollbackable())
    }
}

/// Separates the error message from the details in a plan error string.
const DETAIL_SEPARATOR: char = '\x1e';

/// Encodes a plan error (see the module docs).
fn encode(e: &SandboxError) -> String {
    let none: &[String] = &[];
    let (id, files, undone, failed): (Option<&str>, &[String], &[String], &[String]) = match e {
        SandboxError::Sandbox { sandbox_id, .. }
        | SandboxError::State { sandbox_id, .. }
        | SandboxError::Unexpected { sandbox_id, .. } => (sandbox_id.as_deref(), none, none, none),
        SandboxError::Creation { .. } => (None, none, none, none),
        SandboxError::Commit {
            sandbox_id, files, ..
        }
        | SandboxError::Rollback {
            sandbox_id, files, ..
        } => (Some(sandbox_id.as_str()), files.as_slice(), none, none),
        SandboxError::AtomicCommit {
            failed_sandbox_id,
            rolled_back_ids,
            failed_rollback_ids,
            ..
        } => (
            failed_sandbox_id.as_deref(),
            none,
            rolled_back_ids.as_slice(),
            failed_rollback_ids.as_slice(),
        ),
    };
    let sep = super::KIND_SEPARATOR.to_string();
    format!(
        "plan_{kind}{k}{e}{d}{id}{d}{files}{d}{undone}{d}{failed}",
        kind = e.kind(),
        k = super::KIND_SEPARATOR,
        d = DETAIL_SEPARATOR,
        id = id.unwrap_or(""),
        files = files.join(&sep),
        undone = undone.join(&sep),
        failed = failed.join(&sep),
    )
}

fn plan<T>(r: Result<T, SandboxError>) -> Result<T, String> {
    r.map_err(|e| encode(&e))
}

fn bytes(p: PathBuf) -> Vec<u8> {
    p.into_os_string().into_vec()
}

fn millis(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

fn meta_out(m: BTreeMap<String, String>) -> Vec<bridge::FfiPlanMeta> {
    m.into_iter()
        .map(|(key, value)| bridge::FfiPlanMeta { key, value })
        .collect()
}

fn context_out(c: SandboxContext) -> bridge::FfiPlanContext {
    bridge::FfiPlanContext {
        sandbox_id: c.sandbox_id,
        sandbox_path: bytes(c.sandbox_path),
        original_path: bytes(c.original_path),
        resource_id: c.resource_id,
        plan_id: c.plan_id,
        created_at_ms: millis(c.created_at),
        metadata: meta_out(c.metadata),
    }
}

fn empty_context() -> bridge::FfiPlanContext {
    bridge::FfiPlanContext {
        sandbox_id: String::new(),
        sandbox_path: Vec::new(),
        original_path: Vec::new(),
        resource_id: String::new(),
        plan_id: String::new(),
        created_at_ms: 0,
        metadata: Vec::new(),
    }
}

fn result_out(r: CommitResult) -> bridge::FfiCommitResult {
    let json = crate::records::to_json(&r);
    bridge::FfiCommitResult {
        sandbox_id: r.sandbox_id,
        success: r.success,
        has_commit_ref: r.commit_ref.is_some(),
        commit_ref: r.commit_ref.unwrap_or_default(),
        changed_files: r.changed_files,
        added_files: r.added_files,
        deleted_files: r.deleted_files,
        has_error: r.error.is_some(),
        error: r.error.unwrap_or_default(),
        timestamp_ms: millis(r.timestamp),
        metadata: meta_out(r.metadata),
        json,
    }
}

fn diff_out(d: SandboxDiff) -> bridge::FfiDiff {
    bridge::FfiDiff {
        entries: d
            .entries
            .into_iter()
            .map(|e| bridge::FfiDiffEntry {
                path: e.path,
                operation: match e.operation {
                    DiffOp::Added => "added",
                    DiffOp::Modified => "modified",
                    DiffOp::Deleted => "deleted",
                }
                .to_string(),
                has_before: e.before.is_some(),
                before: e.before.unwrap_or_default(),
                has_after: e.after.is_some(),
                after: e.after.unwrap_or_default(),
            })
            .collect(),
        patch: d.patch,
    }
}

/// A registry from C++ resources (added in order, so parents come first).
fn registry_in(resources: &[bridge::FfiResource]) -> Result<ResourceRegistry, SandboxError> {
    let mut reg = ResourceRegistry::new();
    for r in resources {
        let kind = match r.kind.as_str() {
            "git_repository" => ResourceKind::GitRepository,
            "directory" => ResourceKind::Directory,
            "file" => ResourceKind::File,
            "database" => ResourceKind::Database,
            other => ResourceKind::Other(other.to_string()),
        };
        let mut res = Resource::new(&r.id, kind, path_from(&r.path));
        if r.has_parent {
            res = res.with_parent(&r.parent);
        }
        if r.has_strategy {
            res = res.with_strategy(Strategy::parse(&r.strategy));
        }
        reg.add(res)?;
    }
    Ok(reg)
}

/// The C++ plan `SandboxManager`'s Rust half: the manager, until its `close` drops it.
pub struct PlanMgr {
    inner: Option<PlanManager>,
}

/// One sandbox handed to C++ (none: `get_sandbox` found nothing).
pub struct PlanSandbox {
    inner: Option<Arc<dyn Sandbox>>,
}

/// The sandboxes of a plan, handed to C++ one by one.
pub struct PlanSandboxList {
    items: Vec<Arc<dyn Sandbox>>,
}

fn plan_open(root: &[u8]) -> Result<Box<PlanMgr>, String> {
    guarded(|| {
        let mgr = plan(if root.is_empty() {
            PlanManager::open_default()
        } else {
            PlanManager::open(path_from(root))
        })?;
        // Every C++ manager has a registry, for SandboxManager::register_strategy.
        mgr.set_registry(Arc::new(StrategyRegistry::new()));
        Ok(Box::new(PlanMgr { inner: Some(mgr) }))
    })
}

fn boxed(sb: Arc<dyn Sandbox>) -> Box<PlanSandbox> {
    Box::new(PlanSandbox { inner: Some(sb) })
}

impl PlanMgr {
    fn get(&self) -> Result<&PlanManager, String> {
        self.inner
            .as_ref()
            .ok_or_else(|| internal("the plan sandbox manager is closed"))
    }

    fn root(&self) -> Vec<u8> {
        guarded_or_default(|| {
            self.inner
                .as_ref()
                .map(|m| m.root().as_os_str().to_owned().into_vec())
                .unwrap_or_default()
        })
    }

    fn get_or_create_sandbox(
        &self,
        plan_id: &str,
        resource_id: &str,
        original_path: &[u8],
        strategy: &str,
    ) -> Result<Box<PlanSandbox>, String> {
        guarded(|| {
            let strategy = Strategy::parse(strategy);
            let sb = plan(self.get()?.get_or_create_sandbox(
                plan_id,
                resource_id,
                path_from(original_path),
                strategy,
            ))?;
            Ok(boxed(sb))
        })
    }

    fn get_sandbox(&self, plan_id: &str, resource_id: &str) -> Result<Box<PlanSandbox>, String> {
        guarded(|| {
            Ok(Box::new(PlanSandbox {
                inner: self.get()?.get_sandbox(plan_id, resource_id),
            }))
        })
    }

    fn list_sandboxes(&self, plan_id: &str) -> Result<Box<PlanSandboxList>, String> {
        guarded(|| {
            Ok(Box::new(PlanSandboxList {
                items: self.get()?.list_sandboxes(plan_id),
            }))
        })
    }

    fn list_plans(&self) -> Result<Vec<String>, String> {
        guarded(|| Ok(self.get()?.list_plans()))
    }

    fn plans_json(&self, has_plan: bool, plan_id: &str) -> Result<String, String> {
        guarded(|| {
            let recs = crate::records::plan_records(self.get()?, has_plan.then_some(plan_id));
            Ok(crate::records::to_json(&recs))
        })
    }

    fn diff_json(&self, plan_id: &str) -> Result<String, String> {
        guarded(|| {
            let recs = plan(crate::records::plan_diff_records(self.get()?, plan_id))?;
            Ok(crate::records::to_json(&recs))
        })
    }

    fn commit_all(&self, plan_id: &str) -> Result<Vec<bridge::FfiCommitResult>, String> {
        guarded(|| {
            let results = plan(self.get()?.commit_all(plan_id))?;
            Ok(results.into_iter().map(result_out).collect())
        })
    }

    fn commit_all_as(
        &self,
        plan_id: &str,
        p: &bridge::FfiCommitProvenance,
    ) -> Result<Vec<bridge::FfiCommitResult>, String> {
        let provenance = crate::session::provenance::Provenance {
            command: p.command.clone(),
            cwd: p
                .has_cwd
                .then(|| String::from_utf8_lossy(&p.cwd).into_owned()),
            exit_status: p.has_exit_status.then_some(p.exit_status),
            started_ms: p.has_started.then_some(p.started_ms),
            ended_ms: p.has_ended.then_some(p.ended_ms),
        };
        guarded(|| {
            let results = plan(self.get()?.commit_all_as(plan_id, &provenance))?;
            Ok(results.into_iter().map(result_out).collect())
        })
    }

    fn rollback_all(&self, plan_id: &str) -> Result<(), String> {
        guarded(|| plan(self.get()?.rollback_all(plan_id)))
    }

    fn cleanup_all(&self, plan_id: &str) -> Result<(), String> {
        guarded(|| plan(self.get()?.cleanup_all(plan_id)))
    }

    fn cleanup_abandoned(&self) -> Result<usize, String> {
        guarded(|| plan(self.get()?.cleanup_abandoned()))
    }

    fn resource<'a>(reg: &'a ResourceRegistry, id: &str) -> Result<&'a Resource, String> {
        reg.get(id).ok_or_else(|| {
            encode(&SandboxError::sandbox(
                None,
                format!("unknown resource {id:?}"),
            ))
        })
    }

    fn resolve_sandbox_key(
        &self,
        resource_id: &str,
        registry: &[bridge::FfiResource],
    ) -> Result<String, String> {
        guarded(|| {
            let reg = plan(registry_in(registry))?;
            let r = Self::resource(&reg, resource_id)?;
            plan(self.get()?.resolve_sandbox_key(r, &reg))
        })
    }

    fn get_or_create_sandbox_for_resource(
        &self,
        plan_id: &str,
        resource_id: &str,
        registry: &[bridge::FfiResource],
        prefix: &mut Vec<u8>,
    ) -> Result<Box<PlanSandbox>, String> {
        guarded(|| {
            let reg = plan(registry_in(registry))?;
            let r = Self::resource(&reg, resource_id)?;
            let view = plan(
                self.get()?
                    .get_or_create_sandbox_for_resource(plan_id, r, &reg),
            )?;
            *prefix = bytes(view.prefix);
            Ok(boxed(view.sandbox))
        })
    }

    fn register_strategy(
        &self,
        name: &str,
        strategy: cxx::UniquePtr<bridge::CustomStrategyHandle>,
    ) -> Result<(), String> {
        guarded(|| {
            let mgr = self.get()?;
            if strategy.is_null() {
                return Err(encode(&SandboxError::sandbox(
                    None,
                    format!("register_strategy({name:?}): no strategy"),
                )));
            }
            let registry = mgr
                .registry()
                .ok_or_else(|| internal("the plan sandbox manager has no registry"))?;
            registry
                .register_instance(name, Arc::new(CppStrategy { handle: strategy }))
                .map_err(|e| encode(&SandboxError::sandbox(None, e.to_string())))?;
            mgr.reopen_custom();
            Ok(())
        })
    }

    fn has_custom_strategy(&self, name: &str) -> bool {
        guarded_or_default(|| {
            self.inner
                .as_ref()
                .and_then(|m| m.registry())
                .is_some_and(|r| r.has_custom_strategy(name))
        })
    }

    fn clear_boundary_cache(&self) {
        guarded_or_default(|| {
            if let Some(m) = self.inner.as_ref() {
                m.clear_boundary_cache();
            }
        })
    }

    /// Drops the manager now (the Rust `Drop`: sandboxes without work cleaned up), so the
    /// C++ destructor runs it under `catch_unwind`. Idempotent.
    fn close(&mut self) {
        let inner = self.inner.take();
        let _ = catch_unwind(AssertUnwindSafe(move || drop(inner)));
    }
}

impl PlanSandboxList {
    fn len(&self) -> usize {
        self.items.len()
    }

    fn get(&self, i: usize) -> Box<PlanSandbox> {
        Box::new(PlanSandbox {
            inner: self.items.get(i).cloned(),
        })
    }
}

impl PlanSandbox {
    fn sb(&self) -> Result<&Arc<dyn Sandbox>, String> {
        self.inner
            .as_ref()
            .ok_or_else(|| internal("no such plan sandbox"))
    }

    fn is_some(&self) -> bool {
        self.inner.is_some()
    }

    fn sandbox_id(&self) -> String {
        guarded_or_default(|| {
            self.inner
                .as_ref()
                .map(|s| s.sandbox_id().to_string())
                .unwrap_or_default()
        })
    }

    fn strategy(&self) -> String {
        guarded_or_default(|| {
            self.inner
                .as_ref()
                .map(|s| s.strategy().name().to_string())
                .unwrap_or_default()
        })
    }

    fn status(&self) -> String {
        guarded_or_default(|| {
            self.inner
                .as_ref()
                .map(|s| s.status().name().to_string())
                .unwrap_or_default()
        })
    }

    fn context(&self) -> bridge::FfiPlanContextOpt {
        let ctx = catch_unwind(AssertUnwindSafe(|| {
            self.inner.as_ref().and_then(|s| s.context())
        }))
        .ok()
        .flatten();
        match ctx {
            Some(c) => bridge::FfiPlanContextOpt {
                present: true,
                context: context_out(c),
            },
            None => bridge::FfiPlanContextOpt {
                present: false,
                context: empty_context(),
            },
        }
    }

    fn create(&self, plan_id: &str) -> Result<bridge::FfiPlanContext, String> {
        guarded(|| Ok(context_out(plan(self.sb()?.create(plan_id))?)))
    }

    fn get_path(&self, resource_relative: &[u8]) -> Result<Vec<u8>, String> {
        guarded(|| {
            Ok(bytes(plan(
                self.sb()?.get_path(&path_from(resource_relative)),
            )?))
        })
    }

    fn read(&self, resource_relative: &[u8], found: &mut bool) -> Result<Vec<u8>, String> {
        guarded(|| {
            let d = plan(self.sb()?.read(&path_from(resource_relative)))?;
            *found = d.is_some();
            Ok(d.unwrap_or_default())
        })
    }

    fn write(&self, resource_relative: &[u8], data: &[u8]) -> Result<(), String> {
        guarded(|| plan(self.sb()?.write(&path_from(resource_relative), data)))
    }

    fn diff(&self) -> Result<bridge::FfiDiff, String> {
        guarded(|| Ok(diff_out(plan(self.sb()?.diff())?)))
    }

    fn check_commit(&self) -> Result<(), String> {
        guarded(|| plan(self.sb()?.check_commit()))
    }

    fn commit(&self, has_message: bool, message: &str) -> Result<bridge::FfiCommitResult, String> {
        guarded(|| {
            let r = plan(self.sb()?.commit(has_message.then_some(message)))?;
            Ok(result_out(r))
        })
    }

    fn rollback(&self) -> Result<(), String> {
        guarded(|| plan(self.sb()?.rollback()))
    }

    fn cleanup(&self) -> Result<(), String> {
        guarded(|| plan(self.sb()?.cleanup()))
    }

    fn is_rollbackable(&self) -> bool {
        guarded_or_default(|| self.inner.as_ref().is_some_and(|s| s.is_rollbackable()))
    }
}

/// [`Status::ALL`] by name, for the C++ tests' check of `patchbox::plan::Status`.
fn plan_status_names() -> Vec<String> {
    guarded_or_default(|| Status::ALL.iter().map(|s| s.name().to_string()).collect())
}

/// [`Status::can_transition`] by names; an unknown name is `false`.
fn plan_can_transition(from: &str, to: &str) -> bool {
    guarded_or_default(|| match (Status::from_name(from), Status::from_name(to)) {
        (Some(f), Some(t)) => Status::can_transition(f, t),
        _ => false,
    })
}

/// [`Strategy::ALL`] by name.
fn plan_strategy_names() -> Vec<String> {
    guarded_or_default(|| Strategy::ALL.iter().map(|s| s.name().to_string()).collect())
}

/// [`SandboxError::KINDS`], each as its bridge kind (`plan_<kind>`).
fn plan_error_kinds() -> Vec<String> {
    guarded_or_default(|| {
        SandboxError::KINDS
            .iter()
            .map(|k| format!("plan_{k}"))
            .collect()
    })
}

// ---- checkpoints (<patchbox/checkpoint.hpp>) ------------------------------------------------

impl PlanSandbox {
    fn checkpoint_support(&self) -> String {
        guarded_or_default(|| {
            match self.inner.as_ref().map(|s| s.checkpoint_support()) {
                Some(CheckpointSupport::Files) => "files",
                Some(CheckpointSupport::Native) => "native",
                Some(CheckpointSupport::Unsupported) | None => "unsupported",
            }
            .to_string()
        })
    }
}

/// The C++ `patchbox::plan::CheckpointManager`'s Rust half, until its `close` drops it.
pub struct PlanCheckpoints {
    inner: Option<CheckpointManager>,
}

/// A checkpoint known by its ids only: what `rollback_to` and `materialize` read of it (the
/// rest is from the manifest on disk).
fn by_ids(checkpoint_id: &str, sandbox_id: &str) -> Checkpoint {
    Checkpoint {
        checkpoint_id: checkpoint_id.to_string(),
        sandbox_id: sandbox_id.to_string(),
        plan_id: String::new(),
        phase: String::new(),
        created_at: UNIX_EPOCH,
        metadata: BTreeMap::new(),
        snapshot_path: PathBuf::new(),
    }
}

fn checkpoint_out(c: Checkpoint) -> bridge::FfiCheckpoint {
    bridge::FfiCheckpoint {
        checkpoint_id: c.checkpoint_id,
        sandbox_id: c.sandbox_id,
        plan_id: c.plan_id,
        phase: c.phase,
        created_at_ms: millis(c.created_at),
        metadata: meta_out(c.metadata),
        snapshot_path: bytes(c.snapshot_path),
    }
}

/// The checkpoint manager of `root`; an empty `root`: one of its own under the system temp
/// folder ([`CheckpointManager::temporary`]).
fn plan_checkpoints_new(root: &[u8]) -> Result<Box<PlanCheckpoints>, String> {
    guarded(|| {
        let inner = if root.is_empty() {
            plan(CheckpointManager::temporary())?
        } else {
            CheckpointManager::new(path_from(root))
        };
        Ok(Box::new(PlanCheckpoints { inner: Some(inner) }))
    })
}

fn plan_checkpoints_with_store(root: &[u8], store: &str) -> Result<Box<PlanCheckpoints>, String> {
    guarded(|| {
        let url = crate::store::StoreUrl::parse(store)
            .map_err(|e| encode(&SandboxError::from_lower(None, "store URL", e.into())))?;
        Ok(Box::new(PlanCheckpoints {
            inner: Some(plan(CheckpointManager::with_store(path_from(root), &url))?),
        }))
    })
}

impl PlanCheckpoints {
    fn list_stored(&self) -> Result<Vec<bridge::FfiCheckpoint>, String> {
        guarded(|| {
            let list = plan(self.get()?.list_stored())?;
            Ok(list.into_iter().map(checkpoint_out).collect())
        })
    }

    fn restore_from_store(
        &self,
        sandbox: &PlanSandbox,
        checkpoint_id: &str,
    ) -> Result<bridge::FfiCheckpoint, String> {
        guarded(
            || match plan(self.get()?.restore_from_store(sandbox.sb()?, checkpoint_id))? {
                Some(c) => Ok(checkpoint_out(c)),
                None => Ok(bridge::FfiCheckpoint {
                    checkpoint_id: String::new(),
                    sandbox_id: String::new(),
                    plan_id: String::new(),
                    phase: String::new(),
                    created_at_ms: 0,
                    metadata: Vec::new(),
                    snapshot_path: Vec::new(),
                }),
            },
        )
    }

    fn prune_store(&self, grace_seconds: u64) -> Result<usize, String> {
        guarded(|| {
            plan(
                self.get()?
                    .prune_store(std::time::Duration::from_secs(grace_seconds)),
            )
        })
    }
}

impl PlanCheckpoints {
    fn get(&self) -> Result<&CheckpointManager, String> {
        self.inner
            .as_ref()
            .ok_or_else(|| internal("the checkpoint manager is closed"))
    }

    fn keep(&self) -> Result<(), String> {
        guarded(|| {
            self.get()?.keep();
            Ok(())
        })
    }

    fn attach(&self, sandbox: &PlanSandbox) -> Result<(), String> {
        guarded(|| plan(self.get()?.attach(sandbox.sb()?)))
    }

    fn create_checkpoint(
        &self,
        sandbox: &PlanSandbox,
        plan_id: &str,
        phase: &str,
        metadata: &[bridge::FfiPlanMeta],
    ) -> Result<bridge::FfiCheckpoint, String> {
        guarded(|| {
            let metadata = metadata
                .iter()
                .map(|m| (m.key.clone(), m.value.clone()))
                .collect();
            let cp = plan(
                self.get()?
                    .create_checkpoint(sandbox.sb()?, plan_id, phase, metadata),
            )?;
            Ok(checkpoint_out(cp))
        })
    }

    fn rollback_to(&self, checkpoint_id: &str, sandbox_id: &str) -> Result<bool, String> {
        guarded(|| plan(self.get()?.rollback_to(&by_ids(checkpoint_id, sandbox_id))))
    }

    fn materialize(
        &self,
        checkpoint_id: &str,
        sandbox_id: &str,
        dest: &[u8],
    ) -> Result<bool, String> {
        guarded(|| {
            let cp = by_ids(checkpoint_id, sandbox_id);
            plan(self.get()?.materialize(&cp, &path_from(dest)))
        })
    }

    fn list_checkpoints(&self, sandbox_id: &str) -> Result<Vec<bridge::FfiCheckpoint>, String> {
        guarded(|| {
            let list = plan(self.get()?.list_checkpoints(sandbox_id))?;
            Ok(list.into_iter().map(checkpoint_out).collect())
        })
    }

    fn delete_checkpoint(&self, checkpoint_id: &str) -> Result<bool, String> {
        guarded(|| plan(self.get()?.delete_checkpoint(checkpoint_id)))
    }

    fn disk_bytes(&self, sandbox_id: &str) -> u64 {
        guarded_or_default(|| {
            self.inner
                .as_ref()
                .map(|m| m.disk_bytes(sandbox_id))
                .unwrap_or(0)
        })
    }

    /// Drops the manager now (the Rust `Drop`: its checkpoints removed unless kept), so the
    /// C++ destructor runs it under `catch_unwind`. Idempotent.
    fn close(&mut self) {
        let inner = self.inner.take();
        let _ = catch_unwind(AssertUnwindSafe(move || drop(inner)));
    }
}

// ---- SQLite statements (<patchbox/sqlite.hpp>) ----------------------------------------------

use crate::plan::strategy::sqlite::SqlValue;

fn sql_value_in(v: bridge::FfiSqlValue) -> Result<SqlValue, String> {
    Ok(match v.kind {
        0 => SqlValue::Null,
        1 => SqlValue::Integer(v.integer),
        2 => SqlValue::Real(v.real),
        3 => SqlValue::Text(v.text),
        4 => SqlValue::Blob(v.blob),
        k => return Err(internal(&format!("unknown SQL value kind {k}"))),
    })
}

fn sql_value_out(v: SqlValue) -> bridge::FfiSqlValue {
    let mut out = bridge::FfiSqlValue {
        kind: 0,
        integer: 0,
        real: 0.0,
        text: String::new(),
        blob: Vec::new(),
    };
    match v {
        SqlValue::Null => {}
        SqlValue::Integer(i) => {
            out.kind = 1;
            out.integer = i;
        }
        SqlValue::Real(f) => {
            out.kind = 2;
            out.real = f;
        }
        SqlValue::Text(t) => {
            out.kind = 3;
            out.text = t;
        }
        SqlValue::Blob(b) => {
            out.kind = 4;
            out.blob = b;
        }
    }
    out
}

impl PlanSandbox {
    fn sqlite_execute(
        &self,
        sql: &str,
        params: Vec<bridge::FfiSqlValue>,
    ) -> Result<bridge::FfiSqlRows, String> {
        guarded(|| {
            let sb = self.sb()?;
            let Some(db) = sb.sql() else {
                return Err(encode(&SandboxError::sandbox(
                    Some(sb.sandbox_id()),
                    format!(
                        "not a SQLite sandbox (its strategy is {})",
                        sb.strategy().name()
                    ),
                )));
            };
            let params = params
                .into_iter()
                .map(sql_value_in)
                .collect::<Result<Vec<_>, _>>()?;
            let rows = plan(db.execute(sql, &params))?;
            let width = rows.columns.len();
            Ok(bridge::FfiSqlRows {
                columns: rows.columns,
                width,
                values: rows.rows.into_iter().flatten().map(sql_value_out).collect(),
                changes: rows.changes,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(s: &str) -> (String, Vec<String>) {
        let (kind, rest) = s.split_once(super::super::KIND_SEPARATOR).unwrap();
        let parts: Vec<String> = rest
            .rsplitn(5, DETAIL_SEPARATOR)
            .map(String::from)
            .collect();
        (kind.to_string(), parts)
    }

    #[test]
    fn atomic_commit_ids_cross_in_the_error_string() {
        let e = SandboxError::AtomicCommit {
            plan_id: "p".into(),
            reason: "boom".into(),
            rolled_back_ids: vec!["A".into(), "B".into()],
            failed_rollback_ids: vec!["C".into()],
            failed_sandbox_id: Some("D".into()),
        };
        let (kind, parts) = fields(&encode(&e));
        assert_eq!(kind, "plan_atomic_commit");
        // rsplitn: failed, undone, files, id, message.
        assert_eq!(parts[0], "C");
        assert_eq!(parts[1], "A\x1fB");
        assert_eq!(parts[2], "");
        assert_eq!(parts[3], "D");
        assert!(parts[4].contains("boom"));
    }

    #[test]
    fn every_kind_is_prefixed() {
        let e = Status::assert_transition(Status::CleanedUp, Status::Active).unwrap_err();
        assert!(encode(&e).starts_with("plan_state\x1f"));
        assert_eq!(plan_error_kinds().len(), SandboxError::KINDS.len());
        assert!(plan_can_transition("active", "committed"));
        assert!(!plan_can_transition("active", "nonsense"));
    }
}

#[cfg(test)]
mod sqlite_tests {
    use super::*;

    #[test]
    fn sql_values_cross_both_ways() {
        let values = [
            SqlValue::Null,
            SqlValue::Integer(-7),
            SqlValue::Real(1.5),
            SqlValue::Text("ada".into()),
            SqlValue::Blob(vec![0, 255]),
        ];
        for v in values {
            assert_eq!(sql_value_in(sql_value_out(v.clone())).unwrap(), v);
        }
        let mut bad = sql_value_out(SqlValue::Null);
        bad.kind = 9;
        assert!(sql_value_in(bad).is_err());
    }

    #[test]
    fn execute_runs_in_sqlite_sandboxes_only() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("app.db");
        std::fs::write(&db, b"").unwrap();
        let dir = tmp.path().join("dir");
        std::fs::create_dir(&dir).unwrap();
        let mgr = PlanManager::open(tmp.path().join("root")).unwrap();
        let sql = boxed(
            mgr.get_or_create_sandbox("p", "db", &db, Strategy::TransactionRollback)
                .unwrap(),
        );
        sql.sqlite_execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)", Vec::new())
            .unwrap();
        let params = vec![
            sql_value_out(SqlValue::Integer(1)),
            sql_value_out(SqlValue::Text("x".into())),
        ];
        assert_eq!(
            sql.sqlite_execute("INSERT INTO t VALUES (?1, ?2)", params)
                .unwrap()
                .changes,
            1
        );
        let rows = sql
            .sqlite_execute("SELECT id, v FROM t", Vec::new())
            .unwrap();
        assert_eq!(rows.columns, ["id", "v"]);
        assert_eq!(rows.width, 2);
        assert_eq!(rows.values.len(), 2);
        assert_eq!(rows.values[1].text, "x");

        let cow = boxed(
            mgr.get_or_create_sandbox("p", "dir", &dir, Strategy::CopyOnWrite)
                .unwrap(),
        );
        let Err(err) = cow.sqlite_execute("SELECT 1", Vec::new()) else {
            panic!("a copy_on_write sandbox ran SQL");
        };
        assert!(err.starts_with("plan_sandbox\x1f"), "{err}");
        assert!(err.contains("not a SQLite sandbox"), "{err}");
        mgr.cleanup_all("p").unwrap();
    }
}
