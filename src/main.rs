//! The `patchbox` command line: run a command in a sandbox of a project and get its patch,
//! manage pending patches and sessions, apply patches.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{Parser, Subcommand};
use patchbox::snapshot::Progress;
use patchbox::{pending, recover, Error, Options, SandboxManager};

#[derive(Parser)]
#[command(
    name = "patchbox",
    version,
    about = "Isolate delegated work in sandboxes; get it back as a patch"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Snapshot the project, run CMD in a sandbox of it, print the patch of what CMD changed.
    Run {
        /// The project directory (default: the current directory).
        #[arg(long)]
        project: Option<PathBuf>,
        /// The sandbox root (default: $PATCHBOX_ROOT, else $HOME/.entropic/sandbox).
        #[arg(long)]
        root: Option<PathBuf>,
        /// The delegation id.
        #[arg(long, default_value = "run")]
        id: String,
        /// Store the patch in the pending store instead of printing it.
        #[arg(long)]
        pending: bool,
        /// Write the patch to FILE instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// The command and its arguments.
        #[arg(required = true, last = true)]
        cmd: Vec<std::ffi::OsString>,
    },
    /// Pending patches: list, show, drop.
    Pending {
        #[command(subcommand)]
        cmd: PendingCmd,
    },
    /// Sessions under the root: list (default) or prune dead ones.
    Sessions {
        #[command(subcommand)]
        cmd: Option<SessionsCmd>,
        /// The sandbox root.
        #[arg(long, global = true)]
        root: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum PendingCmd {
    /// One pending patch a line: id, files touched, recovered flag, project.
    List {
        #[arg(long)]
        root: Option<PathBuf>,
    },
    /// Print a pending patch.
    Show {
        #[arg(long)]
        root: Option<PathBuf>,
        id: String,
    },
    /// Remove a pending patch.
    Drop {
        #[arg(long)]
        root: Option<PathBuf>,
        id: String,
    },
}

#[derive(Subcommand)]
enum SessionsCmd {
    /// One session a line: id, live or dead, sandboxes, pending patches, project.
    List,
    /// Recover dead sessions' work into pending patches, then remove their sandboxes.
    Prune,
}

fn root_or_default(root: Option<PathBuf>) -> Result<PathBuf, Error> {
    match root {
        Some(r) => Ok(r),
        None => patchbox::layout::default_root(),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("patchbox: {e}");
            ExitCode::from(1)
        }
    }
}

fn dispatch(cli: Cli) -> Result<ExitCode, Error> {
    match cli.cmd {
        Cmd::Run {
            project,
            root,
            id,
            pending,
            out,
            cmd,
        } => run(project, root, &id, pending, out, &cmd),
        Cmd::Pending { cmd } => match cmd {
            PendingCmd::List { root } => {
                let root = root_or_default(root)?;
                let mut stdout = std::io::stdout().lock();
                for e in pending::list(&root)? {
                    let files = std::fs::read(&e.patch_path)
                        .map(|p| count_files(&p))
                        .unwrap_or(0);
                    let _ = writeln!(
                        stdout,
                        "{}\t{} file(s)\t{}\t{}",
                        e.id,
                        files,
                        if e.meta.recovered {
                            "recovered"
                        } else {
                            "pending"
                        },
                        e.meta.project.display()
                    );
                }
                Ok(ExitCode::SUCCESS)
            }
            PendingCmd::Show { root, id } => {
                let e = pending::find(&root_or_default(root)?, &id)?;
                let data = std::fs::read(&e.patch_path)
                    .map_err(|err| Error::io("read pending patch", &e.patch_path, err))?;
                let _ = std::io::stdout().lock().write_all(&data);
                Ok(ExitCode::SUCCESS)
            }
            PendingCmd::Drop { root, id } => {
                pending::drop_pending(&root_or_default(root)?, &id)?;
                Ok(ExitCode::SUCCESS)
            }
        },
        Cmd::Sessions { cmd, root } => {
            let root = root_or_default(root)?;
            match cmd.unwrap_or(SessionsCmd::List) {
                SessionsCmd::List => {
                    let mut stdout = std::io::stdout().lock();
                    for s in recover::list_sessions(&root)? {
                        let _ = writeln!(
                            stdout,
                            "{}\t{}\t{} sandbox(es)\t{} pending\t{}",
                            s.id,
                            if s.live { "live" } else { "dead" },
                            s.sandboxes.len(),
                            s.pending,
                            s.project.as_deref().unwrap_or(Path::new("?")).display()
                        );
                    }
                }
                SessionsCmd::Prune => {
                    let r = recover::prune(&root)?;
                    for p in &r.recovered {
                        eprintln!("recovered {}", p.display());
                    }
                    for s in &r.pruned {
                        eprintln!("pruned session {s}");
                    }
                    for e in &r.errors {
                        eprintln!("patchbox: {e}");
                    }
                    if !r.errors.is_empty() {
                        return Ok(ExitCode::from(1));
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn count_files(patch: &[u8]) -> usize {
    patch
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"diff --git "))
        .count()
}

/// A progress bar on stderr, drawn only on a terminal and only once work has taken a second.
fn progress_bar() -> Option<Arc<patchbox::snapshot::ProgressFn>> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let start = Instant::now();
    Some(Arc::new(move |p: Progress| {
        if start.elapsed().as_secs_f32() < 1.0 {
            return;
        }
        let width = 30usize;
        let filled = (p.files_done as usize * width)
            .checked_div(p.files_total as usize)
            .unwrap_or(width)
            .min(width);
        eprint!(
            "\r[{}{}] {}/{} files, {} MB ",
            "#".repeat(filled),
            " ".repeat(width - filled),
            p.files_done,
            p.files_total,
            p.bytes_done / 1_000_000
        );
        if p.files_done >= p.files_total {
            eprintln!();
        }
    }))
}

fn run(
    project: Option<PathBuf>,
    root: Option<PathBuf>,
    id: &str,
    to_pending: bool,
    out: Option<PathBuf>,
    cmd: &[std::ffi::OsString],
) -> Result<ExitCode, Error> {
    let project = match project {
        Some(p) => p,
        None => std::env::current_dir().map_err(|e| Error::io("read current directory", ".", e))?,
    };
    let mgr = SandboxManager::with_options(
        &project,
        Options {
            root,
            progress: progress_bar(),
            ..Options::default()
        },
    )?;
    let sb = mgr.create_sandbox(id, None)?;
    let stderr = std::io::stderr()
        .as_fd_clone()
        .map_err(|e| Error::io("duplicate stderr", "<stderr>", e))?;
    let (program, args) = cmd.split_first().ok_or_else(|| Error::InvalidId {
        id: String::new(),
        reason: "no command given",
    })?;
    let status = mgr
        .command(&sb, program)
        .args(args)
        .stdout(stderr)
        .status()
        .map_err(|e| Error::io("run command", Path::new(program), e))?;
    let res = mgr.finalize_sandbox(&sb)?;
    if to_pending {
        if res.patch.is_empty() {
            eprintln!("patchbox: no changes; nothing stored");
        } else {
            mgr.write_pending_patch(id, &res.patch)?;
            eprintln!("{}/{}", mgr.session_id(), id);
        }
    } else if let Some(out) = out {
        std::fs::write(&out, &res.patch).map_err(|e| Error::io("write patch", &out, e))?;
    } else {
        let _ = std::io::stdout().lock().write_all(&res.patch);
    }
    mgr.discard_sandbox(&sb)?;
    drop(mgr);
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

trait FdClone {
    fn as_fd_clone(&self) -> std::io::Result<std::process::Stdio>;
}

impl FdClone for std::io::Stderr {
    fn as_fd_clone(&self) -> std::io::Result<std::process::Stdio> {
        use std::os::fd::AsFd;
        Ok(std::process::Stdio::from(
            self.as_fd().try_clone_to_owned()?,
        ))
    }
}
