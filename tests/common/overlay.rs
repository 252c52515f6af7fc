//! A temporary project and root, and session managers of either isolation over them: what
//! the overlay tests (`isolation.rs`, `shared_lower.rs`) share.

use std::fs;
use std::path::PathBuf;

use patchbox::{Isolation, IsolationMode, Options, SandboxManager};

/// A temporary directory holding an empty project and the root its sessions live under.
pub struct Env {
    /// The temporary directory (removed on drop); scratch space for a test.
    pub _tmp: tempfile::TempDir,
    /// The project (empty at first).
    pub project: PathBuf,
    /// The sessions' root (not made yet).
    pub root: PathBuf,
}

/// A fresh [`Env`].
pub fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let root = tmp.path().join("sandbox");
    fs::create_dir_all(&project).unwrap();
    Env {
        _tmp: tmp,
        project,
        root,
    }
}

/// A manager of the project under the test's root (no prune of other sessions at start).
pub fn manager(e: &Env, isolation: Isolation) -> SandboxManager {
    SandboxManager::with_options(
        &e.project,
        Options {
            root: Some(e.root.clone()),
            isolation,
            no_prune_on_start: true,
            ..Options::default()
        },
    )
    .unwrap()
}

/// The mode the environment asks for, as the manager should report it.
pub fn wanted_mode() -> IsolationMode {
    match std::env::var("PATCHBOX_OVERLAY_MODE").as_deref() {
        Ok("fuse") => IsolationMode::FuseOverlay,
        _ => IsolationMode::KernelOverlay,
    }
}

/// An overlay manager (of the backend the environment asks for), or `None` (with a message)
/// where no overlay can be mounted.
pub fn overlay_manager(e: &Env) -> Option<SandboxManager> {
    let mgr = manager(e, Isolation::Overlay);
    let probe = mgr.create_sandbox("probe", None).unwrap();
    mgr.discard_sandbox(&probe).unwrap();
    match mgr.isolation_mode() {
        Some(IsolationMode::Copy) => {
            eprintln!(
                "skipped: no overlay can be mounted here (needs CAP_SYS_ADMIN or fuse-overlayfs)"
            );
            None
        }
        m => {
            assert_eq!(m, Some(wanted_mode()));
            Some(mgr)
        }
    }
}
