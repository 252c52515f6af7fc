//! A C++ `patchbox::plan::CustomStrategy` as a Rust [`StrategyProtocol`]: [`CppStrategy`] holds
//! the opaque handle (`cpp/custom_strategy.h`) and calls its `noexcept` glue, which turns
//! whatever the strategy throws into an error message. Registered by the manager's
//! `register_strategy` and by a C++ `SandboxStrategyRegistry`.

use std::collections::BTreeMap;

use super::bridge;
use super::convert::sref_out;
use crate::plan::custom::{DiffView, OpResult, SandboxRef, StrategyFailure, StrategyProtocol};
use crate::plan::{DiffEntry, DiffOp};

// SAFETY: `patchbox::plan::CustomStrategy` requires implementations to be thread-safe (its
// docs say so); the handle only holds the shared_ptr and calls it.
unsafe impl Send for bridge::CustomStrategyHandle {}
// SAFETY: as above; every method of the handle is const.
unsafe impl Sync for bridge::CustomStrategyHandle {}

/// A C++ `CustomStrategy` as a [`StrategyProtocol`]: each operation calls the handle's
/// `noexcept` glue, which turns whatever the strategy throws into an error message.
pub(super) struct CppStrategy {
    pub(super) handle: cxx::UniquePtr<bridge::CustomStrategyHandle>,
}

/// What the glue puts before the message of an exception that is not a
/// `patchbox::plan::SandboxError` (cpp/plan_custom_strategy.cpp's `kUnexpected`): not a sandbox-level failure.
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
        let orig = crate::ffi::path_bytes(original);
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
