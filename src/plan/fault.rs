//! Test faults of plan commits, compiled only with the cargo feature `fault-injection` (the
//! test suite turns it on; the CLI, the C++ library and the Python extension are built
//! without it): a state write that fails after its commit landed, a panic between a landed
//! commit and its status, and `commit_all`'s failure or abort at a position
//! ([`CommitAllOptions`](super::manager::CommitAllOptions)'s `fail_at` and `crash_before`).
//!
//! The hooks name a sandbox by id and fire once, so tests running in parallel in one process
//! arm only their own sandboxes.

use parking_lot::Mutex;

use super::error::SandboxError;
use crate::id::SandboxId;

/// Sandboxes whose next write of a `Committed` state fails.
static FAIL_COMMITTED_STATE: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Sandboxes whose next landed commit panics before its status says so.
static PANIC_AFTER_LANDING: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The next write of sandbox `sandbox_id`'s state as `Committed` fails, as a full disk or an
/// I/O error would, after its commit's change is in the original.
pub fn fail_next_committed_state_write(sandbox_id: &str) {
    FAIL_COMMITTED_STATE.lock().push(sandbox_id.to_string());
}

/// The next commit of sandbox `sandbox_id` whose change lands in the original panics right
/// after, before the sandbox's status is `Committed`: the window a bug between the two would
/// open.
pub fn panic_after_next_landing(sandbox_id: &str) {
    PANIC_AFTER_LANDING.lock().push(sandbox_id.to_string());
}

/// Whether this write of `sandbox_id`'s `Committed` state is to fail (the hook is used up).
pub(crate) fn committed_state_write_fails(sandbox_id: &SandboxId) -> bool {
    take_id(&FAIL_COMMITTED_STATE, sandbox_id.as_str())
}

/// Panics when [`panic_after_next_landing`] armed `sandbox_id` (the hook is used up).
pub(crate) fn after_landing(sandbox_id: &SandboxId) {
    if take_id(&PANIC_AFTER_LANDING, sandbox_id.as_str()) {
        panic!("injected panic after the commit of {sandbox_id} landed");
    }
}

/// `commit_all`'s injected failure of sandbox `sandbox_id`, as a conflict would fail it.
pub(crate) fn commit_failure(sandbox_id: &SandboxId) -> SandboxError {
    SandboxError::Commit {
        sandbox_id: sandbox_id.to_string(),
        reason: "injected failure".into(),
        files: vec![],
        source: None,
    }
}

/// Takes `id` off a hook's list; whether it was on it.
fn take_id(list: &Mutex<Vec<String>>, id: &str) -> bool {
    let mut ids = list.lock();
    match ids.iter().position(|i| i == id) {
        Some(k) => {
            ids.swap_remove(k);
            true
        }
        None => false,
    }
}
