//! The on-disk layout of sessions: where the root is, how sessions and delegations are named,
//! and how a session directory is created and claimed.
//!
//! ```text
//! <root>/                       default $HOME/.entropic/sandbox, or PATCHBOX_ROOT
//!   <session-id>/               ULID: unique and time-sortable
//!     session.lock              flock held for the session's lifetime
//!     session.meta              project path, for recovery after a crash
//!     base/                     snapshot of the project
//!     base.objects/             its git objects the user's repository lacks (git projects)
//!     d-<delegation-id>/        one sandbox per delegation
//!     tmp-<delegation-id>/      the TMPDIR of its confined tools (when /tmp holds the project)
//!     .lower/                   overlay isolation: the snapshot materialized whole, the
//!                               lowest layer of every overlay sandbox (made once) — or,
//!                               over a shared layer, only what differs from it
//!     .lower.shared             overlay isolation: the shared layer under `.lower/`, if any
//!     .overlay-<delegation-id>  overlay isolation: its record (backend, layers), written
//!                               before anything is mounted on d-<delegation-id>/
//!     .upper-<delegation-id>/   its upper layer (what it changed), .work-<id>/ its work dir
//!     .layer-<ulid>/            a frozen layer (chained): a predecessor's former upper layer,
//!                               or a copy of it
//!     pending/<id>.patch        patches waiting for review (+ .meta, .pre/ pre-images)
//! ```
//!
//! Writes inside a session go through the chokepoint of [`crate::fs::state_dir`]; the only
//! writes this module makes outside an existing session directory are creating the root and
//! the new session directory itself.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::fs::state_dir::{self, StateDir};
use crate::fs::RelPath;
use crate::id::{DelegationId, SessionId};

/// Name of the snapshot directory in a session directory.
pub const BASE_DIR: &str = "base";

/// The session's scratch directory: temporary files of writes into `base/` are made here, so
/// a crash never leaves one in the snapshot.
pub const SCRATCH_DIR: &str = ".scratch";

/// Prefix of the file keeping a sandbox's manifest (`.manifest-<delegation>`): the stat data
/// recorded when it was made, which recovery diffs against as finalize does.
pub const MANIFEST_PREFIX: &str = ".manifest-";

/// Prefix of a confined tool's private temporary directory in the session directory
/// (`tmp-<delegation>`): outside the sandbox, so never in a patch.
pub const TMP_PREFIX: &str = "tmp-";

/// The session's snapshot objects (`base.objects/`): the blobs, trees and commit of the
/// snapshot that the user's object store lacks, an alternate of every sandbox's private
/// `.git` (see [`crate::git::private`]). Goes with the session.
pub const GIT_OBJECTS_DIR: &str = "base.objects";

/// Overlay isolation: the snapshot materialized whole, every overlay's lowest layer.
pub const LOWER_DIR: &str = ".lower";

pub use crate::isolation::shared_lower::SHARED_LOWER_FILE;

/// Overlay isolation: prefix of a sandbox's record (`.overlay-<delegation>`): its backend
/// and its lower layers, written before anything is mounted, so recovery reads its layers.
pub const OVERLAY_PREFIX: &str = ".overlay-";

/// Overlay isolation: prefix of a sandbox's upper layer (`.upper-<delegation>`).
pub const UPPER_PREFIX: &str = ".upper-";

/// Overlay isolation: prefix of a sandbox's OverlayFS work directory (`.work-<delegation>`).
pub const WORK_PREFIX: &str = ".work-";

/// Overlay isolation: prefix of a frozen layer (`.layer-<ulid>`): what a predecessor had
/// written when a sandbox was chained from it (its former upper layer, or a copy of it),
/// stacked by both.
pub const LAYER_PREFIX: &str = ".layer-";

/// Overlay isolation: prefix of a `fuse-overlayfs` server's log (`.fuse-<delegation>.log`).
pub const FUSE_LOG_PREFIX: &str = ".fuse-";

/// Overlay isolation: prefix of a probe mount's directory (`.probe-<ulid>`).
pub const PROBE_PREFIX: &str = ".probe-";

/// Whether `name` (an entry of a session directory) is overlay state: removed with the
/// session, never a delegation's work by itself.
pub fn is_overlay_state(name: &str) -> bool {
    // `..overlay-<id>.<ulid>.tmp`: a record's temporary file, left by a crash mid-write.
    let name = name
        .strip_prefix('.')
        .filter(|n| n.starts_with(OVERLAY_PREFIX))
        .unwrap_or(name);
    name == LOWER_DIR
        || name == SHARED_LOWER_FILE
        || name == ".creating-lower"
        || [
            OVERLAY_PREFIX,
            UPPER_PREFIX,
            WORK_PREFIX,
            LAYER_PREFIX,
            FUSE_LOG_PREFIX,
            PROBE_PREFIX,
        ]
        .iter()
        .any(|p| name.starts_with(p))
}

/// Longest accepted delegation id, in bytes.
pub const MAX_ID_LEN: usize = crate::id::MAX_NAME_LEN;

pub use crate::isolation::root::default_root;

/// A fresh session id: a ULID, so ids sort by creation time and never collide.
pub fn new_session_id() -> String {
    SessionId::new().into_string()
}

/// True when `name` looks like a session directory name (a ULID).
pub fn is_session_id(name: &str) -> bool {
    SessionId::parse(name).is_ok()
}

/// Checks a delegation id: `[A-Za-z0-9._-]`, 1 to [`MAX_ID_LEN`] bytes, not starting with
/// `.` (so not `.` or `..` either). The rule is [`DelegationId::parse`]'s; this is its
/// yes/no form, for callers that only hold text.
///
/// ```
/// use patchbox::session::layout::validate_delegation_id;
/// assert!(validate_delegation_id("task-1.2_b").is_ok());
/// assert!(validate_delegation_id("../x").is_err());
/// assert!(validate_delegation_id("..").is_err());
/// assert!(validate_delegation_id(".hidden").is_err());
/// assert!(validate_delegation_id("").is_err());
/// ```
pub fn validate_delegation_id(id: &str) -> Result<()> {
    DelegationId::parse(id)?;
    Ok(())
}

/// A session directory this process created and holds the lock of.
#[derive(Debug)]
pub struct NewSession {
    /// The session id (a ULID).
    pub id: SessionId,
    /// The canonical session directory.
    pub dir: PathBuf,
    /// The open, exclusively `flock`ed `session.lock`; the session is alive while it is held.
    pub lock: File,
    /// The session directory, open: every write into it goes through this capability.
    pub handle: StateDir,
}

/// Name of the lock file in a session directory.
pub const LOCK_FILE: &str = "session.lock";
/// Name of the file recording the project path of a session.
pub const META_FILE: &str = "session.meta";

/// Creates `root` if needed and a new session directory in it, locked and recorded.
///
/// These are the only writes outside an existing session directory. The directory is
/// prepared under a hidden temporary name and renamed into place once locked, so a pruner
/// never sees a session without its lock.
pub fn create_session(root: &Path, project: &Path) -> Result<NewSession> {
    fs::create_dir_all(root).ctx("create sandbox root", root)?;
    let root = root.canonicalize().ctx("resolve sandbox root", root)?;
    let id = SessionId::new();
    let tmp = root.join(format!(".{id}.tmp"));
    fs::create_dir(&tmp).ctx("create session directory", &tmp)?;
    let handle = StateDir::open(&tmp)?;
    let tmp_dir = handle.join(&tmp)?;
    let lock = state_dir::open_lock_file(&tmp_dir.child(&RelPath::new(LOCK_FILE)?))?;
    lock.try_lock().map_err(|e| {
        Error::io(
            "lock session",
            &tmp,
            std::io::Error::other(format!("{e:?}")),
        )
    })?;
    use std::os::unix::ffi::OsStrExt;
    state_dir::write_atomic(
        &tmp_dir.child(&RelPath::new(META_FILE)?),
        project.as_os_str().as_bytes(),
    )?;
    let dir = root.join(id.as_str());
    fs::rename(&tmp, &dir).ctx("create session directory", &dir)?;
    // The descriptor follows the directory to its new name.
    let handle = handle.renamed(&dir)?;
    Ok(NewSession {
        id,
        dir,
        lock,
        handle,
    })
}

/// Opens the sessions lock of an existing session and tries to take it: `Ok(Some(file))`
/// means the session is dead (its owner is gone) and is now held by the caller; `Ok(None)`
/// means it is alive (or has no lock file: already cleaned up).
pub fn try_claim_session(session_dir: &Path) -> Result<Option<File>> {
    let p = session_dir.join(LOCK_FILE);
    let f = match OpenOptions::new().read(true).write(true).open(&p) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open lock file", &p, e)),
    };
    match f.try_lock() {
        Ok(()) => Ok(Some(f)),
        Err(fs::TryLockError::WouldBlock) => Ok(None),
        Err(fs::TryLockError::Error(e)) => Err(Error::io("lock session", &p, e)),
    }
}
