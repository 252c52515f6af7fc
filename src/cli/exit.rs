//! Exit statuses: what a script can tell apart.
//!
//! | status | meaning |
//! |---|---|
//! | 0 | done (applied, already applied, listed, committed …) |
//! | 1 | refused or conflicts: the patch does not apply, a commit or undo was refused, nothing to undo (nothing written) |
//! | 2 | an error: bad input (the command line, an id, a malformed or empty patch, an unknown pending patch) or a failure (I/O, an unreadable repository …) |
//! | 74 | `run`: the patch could not be delivered where asked (a failing object store included); the work is kept (stderr says where). `pending push`: some stay local |
//! | 126 / 127 | `run`: CMD was found but cannot be executed / CMD cannot be found (as shells say) |
//!
//! `run` otherwise exits with CMD's own status (128 + the signal when it was killed).

use patchbox::plan::SandboxError;
use patchbox::Error;

/// Done.
pub const OK: u8 = 0;
/// Refused or conflicts; nothing written.
pub const REFUSED: u8 = 1;
/// An error: bad input (command line, id, patch) or a failure (I/O …).
pub const ERROR: u8 = 2;
/// Bad input: an error like any other (see [`ERROR`]).
pub const BAD_INPUT: u8 = ERROR;
/// `run`: the patch could not be delivered; the work is kept (EX_IOERR).
pub const UNDELIVERED: u8 = 74;
/// `run`: CMD exists but cannot be executed.
pub const CANNOT_EXECUTE: u8 = 126;
/// `run`: CMD cannot be found.
pub const NOT_FOUND: u8 = 127;

/// The status of a failed command whose error is `e`.
pub fn of(e: &Error) -> u8 {
    match e {
        Error::Containment { .. } | Error::ApplyFailed(_) => REFUSED,
        Error::InvalidId { .. }
        | Error::IdInUse { .. }
        | Error::UnknownSandbox { .. }
        | Error::NotADirectory { .. }
        | Error::PatchParse { .. }
        | Error::Pending { .. } => BAD_INPUT,
        _ => ERROR,
    }
}

/// The status of a failed `plan` command whose error is `e`.
pub fn of_plan(e: &SandboxError) -> u8 {
    match e {
        SandboxError::Commit { .. }
        | SandboxError::Rollback { .. }
        | SandboxError::AtomicCommit { .. } => REFUSED,
        SandboxError::State { .. } => BAD_INPUT,
        SandboxError::Sandbox { source, reason, .. } => match source.as_deref() {
            Some(e) => of(e),
            None if reason.starts_with("invalid ") => BAD_INPUT,
            None => ERROR,
        },
        SandboxError::Creation { .. } | SandboxError::Unexpected { .. } => ERROR,
    }
}
