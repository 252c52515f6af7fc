//! `ScopedSandbox`: point an engine's tools at a sandbox for a scope, and back.
//!
//! The library never changes the process's working directory (it is process-wide, and an
//! engine is threaded). Instead the engine gives a swap function that re-points its own tool
//! root; the guard calls it with the sandbox path when made and with the original path when
//! dropped — also when the scope is left by `?` or a panic.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::session::delegation::SandboxInfo;

/// The engine's swap function, boxed.
type SwapFn<'a> = Box<dyn FnMut(&Path) + 'a>;

/// RAII guard that swaps a tool directory into a sandbox and restores it on drop.
///
/// ```
/// use std::cell::RefCell;
/// use std::path::{Path, PathBuf};
/// use patchbox::session::scoped::ScopedSandbox;
/// let cwd = RefCell::new(PathBuf::from("/project"));
/// {
///     let _g = ScopedSandbox::new(
///         Some(|p: &Path| *cwd.borrow_mut() = p.to_path_buf()),
///         "/sandbox/d-1",
///         "/project",
///     );
///     assert_eq!(*cwd.borrow(), PathBuf::from("/sandbox/d-1"));
/// }
/// assert_eq!(*cwd.borrow(), PathBuf::from("/project"));
/// ```
pub struct ScopedSandbox<'a> {
    swap: Option<SwapFn<'a>>,
    sandbox: PathBuf,
    original: PathBuf,
}

impl<'a> ScopedSandbox<'a> {
    /// Calls `swap(sandbox_path)` now and `swap(original_path)` on drop. With `None`, the
    /// guard does nothing.
    pub fn new<F: FnMut(&Path) + 'a>(
        swap: Option<F>,
        sandbox_path: impl Into<PathBuf>,
        original_path: impl Into<PathBuf>,
    ) -> Self {
        let sandbox = sandbox_path.into();
        let mut swap: Option<SwapFn<'a>> = swap.map(|f| Box::new(f) as SwapFn<'a>);
        if let Some(f) = swap.as_mut() {
            f(&sandbox);
        }
        ScopedSandbox {
            swap,
            sandbox,
            original: original_path.into(),
        }
    }

    /// The sandbox path the tools point at.
    pub fn sandbox_path(&self) -> &Path {
        &self.sandbox
    }

    /// The path restored on drop.
    pub fn original_path(&self) -> &Path {
        &self.original
    }

    /// Leaves the tools pointing at the sandbox: the guard is consumed without restoring.
    pub fn keep(mut self) {
        self.swap = None;
    }
}

impl Drop for ScopedSandbox<'_> {
    fn drop(&mut self) {
        if let Some(mut f) = self.swap.take() {
            let original = self.original.clone();
            // A panic from the swap function during unwinding would abort the process.
            let _ = catch_unwind(AssertUnwindSafe(|| f(&original)));
        }
    }
}

/// A `Command` for `program` that runs with its working directory in the sandbox and
/// `PATCHBOX_SANDBOX` / `PATCHBOX_PROJECT` set: the way to run a tool in a sandbox without
/// touching the process's own working directory.
///
/// ```no_run
/// # fn f(info: &patchbox::SandboxInfo, project: &std::path::Path) {
/// let status = patchbox::session::scoped::command_in(info, project, "make").status();
/// # }
/// ```
pub fn command_in(
    info: &SandboxInfo,
    project: &Path,
    program: impl AsRef<std::ffi::OsStr>,
) -> Command {
    let mut c = Command::new(program);
    c.current_dir(&info.path)
        .env("PATCHBOX_SANDBOX", &info.path)
        .env("PATCHBOX_PROJECT", project);
    c
}
