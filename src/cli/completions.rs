//! `patchbox completions SHELL` and `patchbox man`: shell completion scripts and man pages
//! generated from the command definitions by `clap_complete` and `clap_mangen`, so they
//! never drift from `--help`. The CMake package installs them (see `docs/cli.md`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::CommandFactory;
use patchbox::Error;

use crate::Cli;

/// Prints the completion script for `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<ExitCode, Error> {
    let mut cmd = Cli::command();
    // Into memory first: clap_complete panics on a write error (a full disk, a closed
    // stdout), and an error belongs on stderr with a status.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "patchbox", &mut script);
    std::io::stdout()
        .lock()
        .write_all(&script)
        .map_err(|e| Error::io("write completion script", "<stdout>", e))?;
    Ok(ExitCode::SUCCESS)
}

/// Prints `patchbox.1` on stdout, or with `out_dir` writes it and one page per subcommand
/// (`patchbox-pending.1`, `patchbox-pending-apply.1`, …) there.
pub fn man(out_dir: Option<PathBuf>) -> Result<ExitCode, Error> {
    let cmd = Cli::command();
    match out_dir {
        None => {
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(cmd)
                .render(&mut out)
                .map_err(|e| Error::io("write man page", "<stdout>", e))?;
        }
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .map_err(|e| Error::io("create man page directory", &dir, e))?;
            clap_mangen::generate_to(cmd, &dir)
                .map_err(|e| Error::io("write man pages", &dir, e))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
