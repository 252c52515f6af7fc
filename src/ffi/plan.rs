//! The bridge behind `<patchbox/plan.hpp>`: the C++ `patchbox::plan::SandboxManager` drives a
//! Rust [`PlanManager`](crate::plan::PlanManager) through the opaque [`PlanMgr`]; each sandbox it hands out is an opaque
//! [`PlanSandbox`] holding the `Arc<dyn Sandbox>`, wrapped on the C++ side by the built-in
//! implementation of the abstract `patchbox::plan::Sandbox`.
//!
//! It also serves `<patchbox/checkpoint.hpp>`: the opaque [`PlanCheckpoints`] wraps a
//! [`CheckpointManager`](crate::plan::checkpoint::CheckpointManager); the C++ `PhaseRunner` is written in C++ over these calls.
//!
//! Strategies and statuses cross as their snake_case names ([`Strategy::name`](crate::plan::Strategy::name),
//! [`Status::name`](crate::plan::Status::name)), so a strategy added in Rust is usable from C++ without a header change;
//! a name that is not built in is a custom strategy's ([`Strategy::parse`](crate::plan::Strategy::parse)).
//!
//! Custom strategies: every C++ manager has a [`StrategyRegistry`](crate::plan::custom::StrategyRegistry); `register_strategy` puts a
//! C++ `patchbox::plan::CustomStrategy` in it, held by the opaque C++ `CustomStrategyHandle`
//! (`cpp/custom_strategy.h`). The Rust side (`CppStrategy`, a [`StrategyProtocol`](crate::plan::custom::StrategyProtocol)) calls the
//! handle's `noexcept` methods, which catch everything the strategy throws and return it as an
//! error string; those calls run inside the bridge functions' `catch_unwind`. A C++
//! `SandboxStrategyRegistry` is a shared [`StrategyRegistry`](crate::plan::custom::StrategyRegistry) of its own (with the module
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
//! `<kind>` is [`SandboxError::kind`](crate::plan::SandboxError::kind) (`plan_sandbox`, `plan_creation`, `plan_commit`,
//! `plan_rollback`, `plan_state`, `plan_atomic_commit`); the four trailing fields are always
//! present (possibly empty) and are parsed from the right, so a message holding a `\x1e` still
//! parses; lists are `\x1f`-separated. The sandbox id is the failed sandbox of an atomic commit.
//! A panic is an `internal` error, as in every bridge.
//!
//! This file holds the bridge declaration (one `#[cxx::bridge]` module, at this path because
//! `build.rs` compiles it and the C++ glue includes its generated `patchbox/src/ffi/plan.rs.h`)
//! and names what it calls; the Rust halves are in `plan/`, one file per idea: `error.rs`
//! (the error encoding above), `convert.rs` (values crossing the bridge), `names.rs`
//! (strategy, status and error kind names), `manager.rs` ([`PlanMgr`], the manager's
//! operations), `sandbox.rs` ([`PlanSandbox`], one sandbox's), `custom.rs` (a C++ custom
//! strategy as a Rust one), `checkpoint.rs` ([`PlanCheckpoints`]), `sqlite.rs` (SQL in a
//! `transaction_rollback` sandbox), `registry.rs` and `adapter.rs` (see above).

mod adapter;
mod checkpoint;
mod convert;
mod custom;
mod error;
mod manager;
mod names;
mod registry;
mod sandbox;
mod sqlite;

pub use checkpoint::PlanCheckpoints;
pub use manager::{PlanMgr, PlanSandboxList};
pub use sandbox::PlanSandbox;

// What the bridge's `extern "Rust"` functions name: cxx resolves them in this module.
use adapter::{plan_adapter_new, PlanAdapter};
use checkpoint::{plan_checkpoints_new, plan_checkpoints_with_store};
use manager::plan_open;
use names::{plan_can_transition, plan_error_kinds, plan_status_names, plan_strategy_names};
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
