//! A reader that goes away (`patchbox pending show ID | head`) ends the command quietly, as it
//! ends git, instead of a panic and a backtrace.
//!
//! Why: Rust starts every program with SIGPIPE ignored, so a write to a closed pipe returns
//! `EPIPE` and `println!` panics on it. Every command but `run` gets the default disposition
//! back: the kernel then ends the process at that write (status 141 in a shell), as for git.
//! Being ended there is never worse than the kill -9 every changing command already survives
//! (applies, undos, commits and pending writes are crash-atomic), and most print only once
//! their work is done. `run` keeps SIGPIPE ignored: its stdout is where the patch is
//! delivered, and it must see the closed pipe to keep the patch pending (exit 74).

use crate::{Cli, Cmd};

/// Whether `cli` should end quietly at a write to a closed stdout: every command but `run`.
pub fn ends_at_closed_stdout(cli: &Cli) -> bool {
    !matches!(cli.cmd, Cmd::Run { .. })
}

/// Restores the default SIGPIPE disposition for this process.
pub fn end_quietly_on_closed_stdout() {
    // SAFETY: `signal` with `SIG_DFL` only changes this process's disposition of SIGPIPE;
    // it runs before any thread is started and installs no handler code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
