//! A reader that goes away (`patchbox pending show ID | head`) ends a report quietly, as it
//! ends git's, instead of a panic and a backtrace.
//!
//! Why: Rust starts every program with SIGPIPE ignored, so a write to a closed pipe returns
//! `EPIPE` and `println!` panics on it. Only the commands that write nothing but their report
//! get the default disposition back (the kernel then ends the process on that write, status
//! 141 in a shell, as for git): `run` must see the closed pipe to keep its patch pending
//! (exit 74), and the commands that change a project, a plan or a store keep reporting errors
//! themselves rather than being killed at a write.

use crate::{Cli, Cmd, SessionsCmd};

/// Whether `cli` only reads and reports (lists, shows, diffs, help texts).
pub fn reports_only(cli: &Cli) -> bool {
    use crate::pending::PendingCmd as P;
    use crate::plan::PlanCmd as Pl;
    match &cli.cmd {
        Cmd::Pending { cmd, .. } => matches!(cmd, P::List { .. } | P::Show { .. } | P::Usage),
        Cmd::Plan { cmd, .. } => matches!(cmd, Pl::List { .. } | Pl::Diff { .. }),
        Cmd::Sessions { cmd, .. } => matches!(cmd, None | Some(SessionsCmd::List)),
        Cmd::Apply {
            list_undo, check, ..
        } => *list_undo || *check,
        Cmd::Completions { .. } | Cmd::Man { .. } => true,
        Cmd::Run { .. } | Cmd::Recover { .. } => false,
    }
}

/// Restores the default SIGPIPE disposition for this process.
pub fn end_quietly_on_closed_stdout() {
    // SAFETY: `signal` with `SIG_DFL` only changes this process's disposition of SIGPIPE;
    // it runs before any thread is started and installs no handler code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
