//! The plan layer's one error type, whose variants are the users' exception hierarchy:
//! `SandboxError` (the base, [`SandboxError::Sandbox`]) with `Creation`, `Commit`,
//! `Rollback`, `State` and `AtomicCommit`. The C++ header `<patchbox/plan.hpp>` has one
//! exception class per variant, derived from `patchbox::plan::SandboxError`.
//!
//! ```
//! use patchbox::plan::{SandboxError, Status};
//! let e = Status::assert_transition(Status::CleanedUp, Status::Active).unwrap_err();
//! assert_eq!(e.kind(), "state");
//! assert!(matches!(e, SandboxError::State { from: Status::CleanedUp, to: Status::Active, .. }));
//! ```

use std::fmt;

use super::status::Status;

/// Everything that can go wrong in the plan layer. Each variant names the sandbox (or plan)
/// and says what failed; where a lower layer failed, its error is the source.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A plan-layer failure that is none of the kinds below: bad input (an unknown strategy,
    /// an id with a `/`), a path that would leave the sandbox, an I/O failure outside an
    /// operation of the lifecycle.
    #[error("sandbox{}: {reason}", Ctx(sandbox_id))]
    Sandbox {
        /// The sandbox concerned, when there is one.
        sandbox_id: Option<String>,
        /// What went wrong.
        reason: String,
        /// The lower layer's error, when one caused it.
        #[source]
        source: Option<Box<crate::Error>>,
    },
    /// The sandbox could not be made; nothing of it is left on disk.
    #[error("cannot create sandbox for resource {resource_id:?}: {reason}")]
    Creation {
        /// The resource it was made for.
        resource_id: String,
        /// What went wrong.
        reason: String,
        /// The lower layer's error, when one caused it.
        #[source]
        source: Option<Box<crate::Error>>,
    },
    /// The commit was refused or failed; the original resource is as it was.
    #[error("cannot commit sandbox {sandbox_id}: {reason}{}", Files(files))]
    Commit {
        /// The sandbox.
        sandbox_id: String,
        /// What went wrong.
        reason: String,
        /// The files concerned (conflicts, files the user changed meanwhile), if any.
        files: Vec<String>,
        /// The lower layer's error, when one caused it.
        #[source]
        source: Option<Box<crate::Error>>,
    },
    /// The rollback was refused or failed.
    #[error("cannot roll back sandbox {sandbox_id}: {reason}{}", Files(files))]
    Rollback {
        /// The sandbox.
        sandbox_id: String,
        /// What went wrong.
        reason: String,
        /// The files concerned (for an undo of a commit: the files changed since), if any.
        files: Vec<String>,
        /// The lower layer's error, when one caused it.
        #[source]
        source: Option<Box<crate::Error>>,
    },
    /// The operation is not valid in the sandbox's status (see [`Status::can_transition`]).
    #[error("sandbox{}: invalid transition {from} -> {to}", Ctx(sandbox_id))]
    State {
        /// The sandbox, when known.
        sandbox_id: Option<String>,
        /// Its status.
        from: Status,
        /// The status the operation would lead to.
        to: Status,
    },
    /// A failure that is not a sandbox-level one: a panic inside an operation, or a custom
    /// strategy's unanticipated exception ([`StrategyFailure::unexpected`]). In `commit_all`
    /// it becomes [`SandboxError::AtomicCommit`] (a sandbox-level failure becomes a failed
    /// [`CommitResult`](crate::plan::CommitResult) instead).
    ///
    /// [`StrategyFailure::unexpected`]: crate::plan::custom::StrategyFailure::unexpected
    #[error("sandbox{}: unexpected failure: {reason}", Ctx(sandbox_id))]
    Unexpected {
        /// The sandbox concerned, when there is one.
        sandbox_id: Option<String>,
        /// What went wrong.
        reason: String,
    },
    /// `commit_all` failed; the sandboxes it had committed were rolled back in LIFO order.
    #[error(
        "atomic commit of plan {plan_id} failed: {reason} (rolled back: [{}]; rollback failed: [{}])",
        rolled_back_ids.join(", "),
        failed_rollback_ids.join(", ")
    )]
    AtomicCommit {
        /// The plan.
        plan_id: String,
        /// The first failure.
        reason: String,
        /// Sandboxes whose commit was undone, in the order they were undone.
        rolled_back_ids: Vec<String>,
        /// Sandboxes whose commit could not be undone (their originals hold the commit).
        failed_rollback_ids: Vec<String>,
        /// The sandbox whose commit (or check) failed, when one did.
        failed_sandbox_id: Option<String>,
    },
}

impl From<crate::id::IdError> for SandboxError {
    /// An id refused where it came in: a [`SandboxError::Sandbox`] stating the kind, the
    /// text and the rule (`invalid plan id "a/b": use 1 to 128 of …`).
    fn from(e: crate::id::IdError) -> Self {
        SandboxError::sandbox(
            None,
            format!("invalid {} {:?}: {}", e.kind(), e.id(), e.rule()),
        )
    }
}

struct Ctx<'a>(&'a Option<String>);
impl fmt::Display for Ctx<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(id) => write!(f, " {id}"),
            None => Ok(()),
        }
    }
}

struct Files<'a>(&'a [String]);
impl fmt::Display for Files<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return Ok(());
        }
        write!(f, " (files: {})", self.0.join(", "))
    }
}

impl SandboxError {
    /// Every name [`SandboxError::kind`] can return; the C++ bridge maps each to its class.
    pub const KINDS: &'static [&'static str] = &[
        "sandbox",
        "creation",
        "commit",
        "rollback",
        "state",
        "atomic_commit",
        "unexpected",
    ];

    /// A short stable name of the variant, one of [`SandboxError::KINDS`].
    pub fn kind(&self) -> &'static str {
        match self {
            SandboxError::Sandbox { .. } => "sandbox",
            SandboxError::Creation { .. } => "creation",
            SandboxError::Commit { .. } => "commit",
            SandboxError::Rollback { .. } => "rollback",
            SandboxError::State { .. } => "state",
            SandboxError::AtomicCommit { .. } => "atomic_commit",
            SandboxError::Unexpected { .. } => "unexpected",
        }
    }

    /// A [`SandboxError::Sandbox`] from a message.
    pub fn sandbox(sandbox_id: Option<&str>, reason: impl Into<String>) -> SandboxError {
        SandboxError::Sandbox {
            sandbox_id: sandbox_id.map(str::to_string),
            reason: reason.into(),
            source: None,
        }
    }

    /// A [`SandboxError::Sandbox`] caused by a lower layer's error.
    pub fn from_lower(sandbox_id: Option<&str>, what: &str, e: crate::Error) -> SandboxError {
        SandboxError::Sandbox {
            sandbox_id: sandbox_id.map(str::to_string),
            reason: format!("{what}: {e}"),
            source: Some(Box::new(e)),
        }
    }

    /// Whether the failure is a sandbox-level one (every variant but
    /// [`SandboxError::Unexpected`]): what `commit_all` reports as a failed result.
    pub fn is_sandbox_level(&self) -> bool {
        !matches!(self, SandboxError::Unexpected { .. })
    }

    /// The same error with the sandbox id filled in where it was unknown.
    pub(crate) fn for_sandbox(self, id: &str) -> SandboxError {
        match self {
            SandboxError::State {
                sandbox_id: None,
                from,
                to,
            } => SandboxError::State {
                sandbox_id: Some(id.to_string()),
                from,
                to,
            },
            SandboxError::Sandbox {
                sandbox_id: None,
                reason,
                source,
            } => SandboxError::Sandbox {
                sandbox_id: Some(id.to_string()),
                reason,
                source,
            },
            e => e,
        }
    }
}

/// The lifecycle table as an error. It lives with the errors rather than beside the table
/// (`plan/status.rs`) so that the status, which the errors name, stays below them.
///
/// ```
/// use patchbox::plan::Status;
/// let refused = Status::assert_transition(Status::Pending, Status::Committed).unwrap_err();
/// assert!(refused.to_string().contains("pending -> committed"));
/// ```
impl Status {
    /// [`Status::can_transition`] as an error: [`SandboxError::State`] naming both statuses.
    pub fn assert_transition(from: Status, to: Status) -> Result<(), SandboxError> {
        if Status::can_transition(from, to) {
            Ok(())
        } else {
            Err(SandboxError::State {
                sandbox_id: None,
                from,
                to,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_distinct_and_listed() {
        let all = [
            SandboxError::sandbox(None, "x"),
            SandboxError::Creation {
                resource_id: "r".into(),
                reason: "x".into(),
                source: None,
            },
            SandboxError::Commit {
                sandbox_id: "s".into(),
                reason: "x".into(),
                files: vec!["a".into()],
                source: None,
            },
            SandboxError::Rollback {
                sandbox_id: "s".into(),
                reason: "x".into(),
                files: vec![],
                source: None,
            },
            SandboxError::State {
                sandbox_id: None,
                from: Status::Pending,
                to: Status::Active,
            },
            SandboxError::AtomicCommit {
                plan_id: "p".into(),
                reason: "x".into(),
                rolled_back_ids: vec!["a".into()],
                failed_rollback_ids: vec![],
                failed_sandbox_id: None,
            },
            SandboxError::Unexpected {
                sandbox_id: None,
                reason: "x".into(),
            },
        ];
        let kinds: Vec<&str> = all.iter().map(|e| e.kind()).collect();
        assert_eq!(kinds, SandboxError::KINDS);
        assert!(all[2].to_string().contains("(files: a)"));
    }
}
