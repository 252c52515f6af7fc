//! The one file system layer under both chokepoints: opening beneath a directory
//! descriptor and every `*at` operation the library makes, written once on `rustix`.
//!
//! Why a layer of its own: the project chokepoint (`fs::project`, guarding the user's files)
//! and the state chokepoint (`fs::state_dir`, guarding the library's own state
//! directories) keep the same invariant — nothing they do follows a symlink at a parent
//! component, and the last component is acted on relative to its parent's descriptor with a
//! call that does not follow a symlink there either. Each is a policy (which paths, what a
//! refusal is called, what is cached); the system calls that keep the invariant live here,
//! so a flag (`O_NOFOLLOW`, `RENAME_NOREPLACE`, `AT_SYMLINK_NOFOLLOW`) is chosen in one
//! place. Every function is one system call (two where a documented fallback says so), so a
//! chokepoint built on them makes no more calls per file than it would by hand.
//!
//! Errors are [`Errno`]: each chokepoint turns them into its own error with the operation
//! and the path. Names are any [`rustix::path::Arg`] (a `&CStr` is passed as is, other
//! names are copied to the stack, never allocated).

mod dir;
mod entry;
mod meta;
mod open;

pub(crate) use dir::names;
pub(crate) use entry::{
    link, link_out, mkdir, mknod_whiteout, readlink, rename, rename2, rmdir, symlink, unlink,
};
pub(crate) use meta::{
    chmod, fstat, fsync, is_dir, is_symlink, is_symlink_error, lstat, set_fd_mtime, set_mtime,
    start_writeback, syncfs,
};
#[cfg(test)]
pub(crate) use open::walk_beneath;
pub(crate) use open::{
    create_new, hold_dir, link_tmpfile, open_beneath, open_dir, open_meta, open_path_dir,
    open_path_dir_nofollow, open_read, open_rw_create, open_trunc, tmpfile,
};
pub(crate) use rustix::fs::{Dir, FileType, RenameFlags, Stat, CWD};
pub(crate) use rustix::io::Errno;

/// What the layer's calls return.
pub(crate) type AtResult<T> = std::result::Result<T, Errno>;

#[cfg(test)]
mod tests;
