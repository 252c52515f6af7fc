//! The names the plan family crosses by: statuses, strategies and error kinds as their
//! snake_case names, so the C++ tests check `patchbox::plan`'s enums against the Rust ones
//! and a strategy added in Rust needs no header change.

use crate::ffi::guarded_or_default;
use crate::plan::{SandboxError, Status, Strategy};

/// [`Status::ALL`] by name, for the C++ tests' check of `patchbox::plan::Status`.
pub(super) fn plan_status_names() -> Vec<String> {
    guarded_or_default(|| Status::ALL.iter().map(|s| s.name().to_string()).collect())
}

/// [`Status::can_transition`] by names; an unknown name is `false`.
pub(super) fn plan_can_transition(from: &str, to: &str) -> bool {
    guarded_or_default(|| match (Status::from_name(from), Status::from_name(to)) {
        (Some(f), Some(t)) => Status::can_transition(f, t),
        _ => false,
    })
}

/// [`Strategy::ALL`] by name.
pub(super) fn plan_strategy_names() -> Vec<String> {
    guarded_or_default(|| Strategy::ALL.iter().map(|s| s.name().to_string()).collect())
}

/// [`SandboxError::KINDS`], each as its bridge kind (`plan_<kind>`).
pub(super) fn plan_error_kinds() -> Vec<String> {
    guarded_or_default(|| {
        SandboxError::KINDS
            .iter()
            .map(|k| format!("plan_{k}"))
            .collect()
    })
}
