//! The crate's one error type.
//!
//! Every fallible operation in patchbox returns [`Error`]. Variants that come from the operating
//! system carry the operation that failed and the path it failed on, so a message read in a log
//! tells which file and which step without a backtrace.

use std::path::{Path, PathBuf};

/// Everything that can go wrong in patchbox.
///
/// Each variant names the operation and, where there is one, the path. The C++ bridge maps the
/// variant to the C++ `patchbox::ErrorKind` through [`Error::kind`]; [`Error::KINDS`] lists
/// every kind name, and a C++ test checks that `ErrorKind` has exactly these (plus
/// `Internal`).
///
/// ```
/// use patchbox::Error;
/// let e = Error::InvalidId { id: "../x".into(), reason: "contains '/'" };
/// assert_eq!(e.kind(), "invalid_id");
/// assert!(e.to_string().contains("../x"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What the library was doing, e.g. "create directory".
        op: &'static str,
        /// The path the operation was applied to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A path would leave the session directory (or the project, for apply).
    #[error("refused: {} is outside {} ({reason})", path.display(), base.display())]
    Containment {
        /// The offending path.
        path: PathBuf,
        /// The directory it must stay within.
        base: PathBuf,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A delegation or session id that is not acceptable.
    #[error("invalid id {id:?}: {reason}")]
    InvalidId {
        /// The id as given.
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A delegation id that is already in use in this session.
    #[error("delegation id {id:?} is already in use in this session")]
    IdInUse {
        /// The id as given.
        id: String,
    },
    /// A sandbox that this manager does not know (never created, or discarded).
    #[error("unknown sandbox {}", path.display())]
    UnknownSandbox {
        /// The sandbox path as given.
        path: PathBuf,
    },
    /// The project directory is missing or not a directory.
    #[error("project {} is not a directory", path.display())]
    NotADirectory {
        /// The path as given.
        path: PathBuf,
    },
    /// A git repository file (index, config) could not be understood.
    #[error("cannot read git data {}: {reason}", path.display())]
    Git {
        /// The file that failed to parse.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A patch could not be parsed.
    #[error("malformed patch at line {line}: {reason}")]
    PatchParse {
        /// 1-based line number in the patch text.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A patch could not be applied; nothing was written.
    #[error("patch does not apply: {0}")]
    ApplyFailed(String),
    /// A pending patch id that matches nothing, or more than one patch.
    #[error("pending patch {id:?}: {reason}")]
    Pending {
        /// The id as given.
        id: String,
        /// Not found, ambiguous, …
        reason: String,
    },
    /// A callback supplied by the caller failed or panicked.
    #[error("callback failed: {0}")]
    Callback(String),
    /// An object store (a pending store or checkpoints beyond this machine) failed: its URL,
    /// the operation and the key or path are in the message.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl Error {
    /// Builds an [`Error::Io`] from an operation name, the path and the OS error.
    pub fn io(op: &'static str, path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.as_ref().to_path_buf(),
            source,
        }
    }

    /// Every name [`Error::kind`] can return, in declaration order. The C++ `ErrorKind` has
    /// one value per name here, plus `Internal` (checked by the C++ tests through the bridge).
    pub const KINDS: &'static [&'static str] = &[
        "io",
        "containment",
        "invalid_id",
        "id_in_use",
        "unknown_sandbox",
        "not_a_directory",
        "git",
        "patch_parse",
        "apply_failed",
        "pending",
        "callback",
        "store",
    ];

    /// A short stable name for the variant, used by the CLI and the C++ bridge; one of
    /// [`Error::KINDS`].
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Io { .. } => "io",
            Error::Containment { .. } => "containment",
            Error::InvalidId { .. } => "invalid_id",
            Error::IdInUse { .. } => "id_in_use",
            Error::UnknownSandbox { .. } => "unknown_sandbox",
            Error::NotADirectory { .. } => "not_a_directory",
            Error::Git { .. } => "git",
            Error::PatchParse { .. } => "patch_parse",
            Error::ApplyFailed(_) => "apply_failed",
            Error::Pending { .. } => "pending",
            Error::Callback(_) => "callback",
            Error::Store(_) => "store",
        }
    }
}

impl From<crate::id::IdError> for Error {
    /// An id refused where it came in: [`Error::InvalidId`] with the text and the reason,
    /// worded as the session family always worded it.
    fn from(e: crate::id::IdError) -> Self {
        let reason = e.reason();
        Error::InvalidId {
            id: e.into_id(),
            reason,
        }
    }
}

/// Shorthand for `std::result::Result<T, patchbox::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attaches an operation and a path to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn ctx(self, op: &'static str, path: &Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, op: &'static str, path: &Path) -> Result<T> {
        self.map_err(|e| Error::io(op, path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One error of each variant. The `match` is exhaustive, so a new variant does not
    /// compile until it is added here, and then [`kinds_are_listed_once`] checks its kind.
    fn one_of_each() -> Vec<Error> {
        let all = vec![
            Error::io("op", "/p", std::io::Error::other("x")),
            Error::Containment {
                path: "/p".into(),
                base: "/b".into(),
                reason: "r",
            },
            Error::InvalidId {
                id: "x".into(),
                reason: "r",
            },
            Error::IdInUse { id: "x".into() },
            Error::UnknownSandbox { path: "/p".into() },
            Error::NotADirectory { path: "/p".into() },
            Error::Git {
                path: "/p".into(),
                reason: "r".into(),
            },
            Error::PatchParse {
                line: 1,
                reason: "r".into(),
            },
            Error::ApplyFailed("r".into()),
            Error::Pending {
                id: "x".into(),
                reason: "r".into(),
            },
            Error::Callback("r".into()),
            Error::Store(crate::store::StoreError::Key {
                key: "k".into(),
                reason: "r",
            }),
        ];
        for e in &all {
            match e {
                Error::Io { .. }
                | Error::Containment { .. }
                | Error::InvalidId { .. }
                | Error::IdInUse { .. }
                | Error::UnknownSandbox { .. }
                | Error::NotADirectory { .. }
                | Error::Git { .. }
                | Error::PatchParse { .. }
                | Error::ApplyFailed(_)
                | Error::Pending { .. }
                | Error::Callback(_)
                | Error::Store(_) => {}
            }
        }
        all
    }

    #[test]
    fn kinds_are_listed_once() {
        let kinds: Vec<&str> = one_of_each().iter().map(Error::kind).collect();
        assert_eq!(
            kinds,
            Error::KINDS,
            "one kind per variant, in declaration order"
        );
        let mut unique = kinds.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), kinds.len(), "kind names are distinct");
        assert!(
            !kinds.contains(&"internal"),
            "'internal' is the C++ side's own"
        );
    }
}
