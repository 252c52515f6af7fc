//! The plan bridge's error encoding (see the bridge's docs): a [`SandboxError`] crosses as
//! `plan_<kind>`, its message, and four detail fields the C++ glue parses from the right,
//! so it can throw the `patchbox::plan::SandboxError` subclass of that kind with its ids.

use crate::ffi::KIND_SEPARATOR;
use crate::plan::SandboxError;

/// Separates the error message from the details in a plan error string.
pub(super) const DETAIL_SEPARATOR: char = '\x1e';

/// Encodes a plan error (see the module docs).
pub(super) fn encode(e: &SandboxError) -> String {
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
    let sep = KIND_SEPARATOR.to_string();
    format!(
        "plan_{kind}{k}{e}{d}{id}{d}{files}{d}{undone}{d}{failed}",
        kind = e.kind(),
        k = KIND_SEPARATOR,
        d = DETAIL_SEPARATOR,
        id = id.unwrap_or(""),
        files = files.join(&sep),
        undone = undone.join(&sep),
        failed = failed.join(&sep),
    )
}

pub(super) fn plan<T>(r: Result<T, SandboxError>) -> Result<T, String> {
    r.map_err(|e| encode(&e))
}

#[cfg(test)]
mod tests {
    use super::super::names::{plan_can_transition, plan_error_kinds};
    use super::*;
    use crate::plan::Status;

    fn fields(s: &str) -> (String, Vec<String>) {
        let (kind, rest) = s.split_once(KIND_SEPARATOR).unwrap();
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
