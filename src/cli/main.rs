//! The `patchbox` command line: run a command in a sandbox of a project and get its patch,
//! manage pending patches and sessions, apply patches.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{Parser, Subcommand};
use patchbox::session::{pending, recover};
use patchbox::tree::snapshot::Progress;
use patchbox::{Error, Options, SandboxManager};

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
        /// Do not confine CMD: by default (where the kernel has Landlock) it may write only
        /// in its sandbox, its TMPDIR and the --allow-write directories.
        #[arg(long)]
        no_confine: bool,
        /// A directory the confined CMD may write too (a cache, say); repeatable.
        #[arg(long, value_name = "DIR")]
        allow_write: Vec<PathBuf>,
        /// The command and its arguments.
        #[arg(required = true, last = true)]
        cmd: Vec<std::ffi::OsString>,
    },
    /// Apply a patch to a project: atomically, 3-way against pre-images when given, refusing
    /// anything outside the project. Exit 0 when applied (or already applied).
    Apply {
        /// The project directory (default: the current directory).
        #[arg(long)]
        project: Option<PathBuf>,
        /// Report what would happen; write nothing.
        #[arg(long)]
        check: bool,
        /// A tree of pre-images (e.g. a session's base/) for 3-way merging.
        #[arg(long, value_name = "DIR")]
        preimages: Option<PathBuf>,
        /// Write conflict markers instead of refusing a conflicting patch.
        #[arg(long)]
        conflict_markers: bool,
        /// Where undo records are kept (default: $PATCHBOX_ROOT, else $HOME/.entropic/sandbox).
        #[arg(long)]
        root: Option<PathBuf>,
        /// Undo the last apply made to the project (instead of applying).
        #[arg(long, conflicts_with_all = ["check", "preimages", "conflict_markers", "patch"])]
        undo: bool,
        /// With --undo: restore even files changed since the apply.
        #[arg(long, requires = "undo")]
        force: bool,
        /// The patch file, or - for standard input.
        #[arg(required_unless_present = "undo")]
        patch: Option<PathBuf>,
    },
    /// Pending patches: list, show, drop, apply.
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
    /// Apply a pending patch to its project (merging against its stored pre-images); on
    /// success the pending patch is removed.
    Apply {
        #[arg(long)]
        root: Option<PathBuf>,
        /// The project (default: the one the patch was made from).
        #[arg(long)]
        project: Option<PathBuf>,
        /// Report what would happen; write nothing, keep the pending patch.
        #[arg(long)]
        check: bool,
        id: String,
    },
}

#[derive(Subcommand)]
enum SessionsCmd {
    /// One session a line: id, live or dead, sandboxes, pending patches, project.
    List,
    /// Recover dead sessions' work into pending patches, then remove their sandboxes.
    Prune,
    /// Wait for one session to be released, then clean it (started by `run`).
    #[command(hide = true)]
    Reap { session: String },
}

fn root_or_default(root: Option<PathBuf>) -> Result<PathBuf, Error> {
    match root {
        Some(r) => Ok(r),
        None => patchbox::session::layout::default_root(),
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
            no_confine,
            allow_write,
            cmd,
        } => run(
            project,
            root,
            &id,
            pending,
            out,
            Confine {
                off: no_confine,
                writable: allow_write,
            },
            &cmd,
        ),
        Cmd::Apply {
            project,
            check,
            preimages,
            conflict_markers,
            root,
            undo,
            force,
            patch,
        } => {
            let project = project_or_cwd(project)?;
            let root = root_or_default(root)?;
            if undo {
                return undo_last(&project, &root, force);
            }
            let text = match patch.as_deref() {
                Some(p) if p == Path::new("-") => {
                    let mut buf = Vec::new();
                    std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)
                        .map_err(|e| Error::io("read patch", "<stdin>", e))?;
                    buf
                }
                Some(p) => std::fs::read(p).map_err(|e| Error::io("read patch", p, e))?,
                None => Vec::new(),
            };
            apply_and_report(&project, &root, &text, check, preimages, conflict_markers)
        }
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
            PendingCmd::Apply {
                root,
                project,
                check,
                id,
            } => {
                let root = root_or_default(root)?;
                let e = pending::find(&root, &id)?;
                let project = project.unwrap_or_else(|| e.meta.project.clone());
                let text = std::fs::read(&e.patch_path)
                    .map_err(|err| Error::io("read pending patch", &e.patch_path, err))?;
                let code =
                    apply_and_report(&project, &root, &text, check, e.preimages.clone(), false)?;
                if code == ExitCode::SUCCESS && !check {
                    pending::drop_pending(&root, &e.id)?;
                    eprintln!("pending patch {} applied and removed", e.id);
                }
                Ok(code)
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
                SessionsCmd::Reap { session } => {
                    recover::reap(&root, &session)?;
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

fn project_or_cwd(project: Option<PathBuf>) -> Result<PathBuf, Error> {
    match project {
        Some(p) => Ok(p),
        None => std::env::current_dir().map_err(|e| Error::io("read current directory", ".", e)),
    }
}

const UNDO_DIR: &str = "undo";

/// Applies `text` to `project`, keeping an undo record under `<root>/undo/<ulid>/` (with a
/// `<ulid>.project` file naming the project), and prints the report: on stdout when the patch
/// applied, on stderr otherwise. Exit 1 when refused or conflicting.
fn apply_and_report(
    project: &Path,
    root: &Path,
    text: &[u8],
    check: bool,
    preimages: Option<PathBuf>,
    conflict_markers: bool,
) -> Result<ExitCode, Error> {
    use patchbox::apply::{apply_patch, ApplyOptions, Outcome};
    let canonical = project.canonicalize().map_err(|_| Error::NotADirectory {
        path: project.to_path_buf(),
    })?;
    let undo_root = root.join(UNDO_DIR);
    let record = undo_root.join(ulid::Ulid::new().to_string());
    if !check {
        std::fs::create_dir_all(&undo_root)
            .map_err(|e| Error::io("create undo directory", &undo_root, e))?;
    }
    let opts = ApplyOptions {
        check,
        preimages,
        conflict_markers,
        undo_dir: (!check).then(|| record.clone()),
        ..ApplyOptions::default()
    };
    let report = apply_patch(&canonical, text, &opts);
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&record);
            return Err(e);
        }
    };
    if report.wrote() {
        use std::os::unix::ffi::OsStrExt;
        let marker = undo_root.join(format!(
            "{}.project",
            record.file_name().unwrap_or_default().to_string_lossy()
        ));
        std::fs::write(&marker, canonical.as_os_str().as_bytes())
            .map_err(|e| Error::io("record undo", &marker, e))?;
    } else {
        let _ = std::fs::remove_dir_all(&record);
    }
    let ok = matches!(report.outcome, Outcome::Applied | Outcome::AlreadyApplied);
    if ok {
        println!("{report}");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("{report}");
        Ok(ExitCode::from(1))
    }
}

/// Restores the project from its newest undo record, then removes the record.
fn undo_last(project: &Path, root: &Path, force: bool) -> Result<ExitCode, Error> {
    use std::os::unix::ffi::OsStrExt;
    let canonical = project.canonicalize().map_err(|_| Error::NotADirectory {
        path: project.to_path_buf(),
    })?;
    let undo_root = root.join(UNDO_DIR);
    let mut records: Vec<String> = std::fs::read_dir(&undo_root)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter_map(|n| n.strip_suffix(".project").map(str::to_string))
                .filter(|n| {
                    std::fs::read(undo_root.join(format!("{n}.project")))
                        .is_ok_and(|p| p == canonical.as_os_str().as_bytes())
                })
                .collect()
        })
        .unwrap_or_default();
    records.sort();
    let Some(last) = records.pop() else {
        return Err(Error::Pending {
            id: "undo".into(),
            reason: format!("no apply to undo for {}", canonical.display()),
        });
    };
    let dir = undo_root.join(&last);
    let r = patchbox::apply::undo_apply(&canonical, &dir, force)?;
    for p in &r.restored {
        println!("restored {p}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(undo_root.join(format!("{last}.project")));
    Ok(ExitCode::SUCCESS)
}

fn count_files(patch: &[u8]) -> usize {
    patch
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"diff --git "))
        .count()
}

/// A progress bar on stderr, drawn only on a terminal and only once work has taken a second.
fn progress_bar() -> Option<Arc<patchbox::tree::snapshot::ProgressFn>> {
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

/// `run`'s confinement flags.
struct Confine {
    off: bool,
    writable: Vec<PathBuf>,
}

fn run(
    project: Option<PathBuf>,
    root: Option<PathBuf>,
    id: &str,
    to_pending: bool,
    out: Option<PathBuf>,
    confine: Confine,
    cmd: &[std::ffi::OsString],
) -> Result<ExitCode, Error> {
    let project = project_or_cwd(project)?;
    let mgr = SandboxManager::with_options(
        &project,
        Options {
            root,
            progress: progress_bar(),
            no_confine: confine.off,
            writable_dirs: confine.writable,
            ..Options::default()
        },
    )?;
    if let patchbox::session::confine::Confinement::Unavailable(why) = mgr.confinement() {
        eprintln!("patchbox: the command runs unconfined ({why})");
    }
    let sb = mgr.create_sandbox(id, None)?;
    for link in mgr.symlinks_into_project() {
        eprintln!(
            "patchbox: {} is an absolute symlink into the project: writing through it would \
             change the project{}",
            link.display(),
            if mgr.confinement() == patchbox::session::confine::Confinement::Enforced {
                " (refused: the command is confined)"
            } else {
                ""
            }
        );
    }
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
    let delivered = if to_pending {
        if res.patch.is_empty() {
            eprintln!("patchbox: no changes; nothing stored");
            Ok(())
        } else {
            mgr.write_pending_patch(id, &res.patch).map(|p| {
                eprintln!("{}/{}", mgr.session_id(), pending_name(&p));
            })
        }
    } else if let Some(out) = &out {
        write_file_atomic(out, &res.patch)
    } else {
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(&res.patch)
            .and_then(|()| stdout.flush())
            .map_err(|e| Error::io("write patch", "<stdout>", e))
    };
    if let Err(e) = delivered {
        return Ok(keep_undelivered(mgr, &sb, id, &res.patch, to_pending, &e));
    }
    mgr.discard_sandbox(&sb)?;
    // Deleting the sandbox's files is left to a detached `sessions reap`, which waits for the
    // session lock: the caller has the patch and its prompt back at once. Should it fail to
    // start, the files are deleted here.
    match spawn_reaper(mgr.root(), mgr.session_id()) {
        Ok(()) => mgr.leave_cleanup_to_reaper(),
        Err(_) => drop(mgr),
    }
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// Exit status of `run` when the patch could not be delivered where asked (EX_IOERR); the
/// work is then kept (pending, or the sandbox itself) and stderr says where.
const EXIT_UNDELIVERED: u8 = 74;

/// `run` could not deliver its patch: keeps the work and says where. The patch goes to the
/// pending store (unless that is what just failed); when it cannot be stored either, the whole
/// session is kept, sandbox included, for the next start or `sessions prune` to recover.
fn keep_undelivered(
    mgr: SandboxManager,
    sb: &patchbox::SandboxInfo,
    id: &str,
    patch: &[u8],
    pending_failed: bool,
    why: &Error,
) -> ExitCode {
    eprintln!("patchbox: could not deliver the patch: {why}");
    if !pending_failed {
        if let Ok(p) = mgr.write_pending_patch(id, patch) {
            eprintln!(
                "patchbox: kept as pending patch {}/{} ({})",
                mgr.session_id(),
                pending_name(&p),
                p.display()
            );
            let _ = mgr.discard_sandbox(sb);
            return ExitCode::from(EXIT_UNDELIVERED);
        }
    }
    let session = mgr.keep();
    eprintln!(
        "patchbox: the sandbox is kept at {} (session {}); `patchbox sessions prune` recovers \
         it into a pending patch",
        sb.path.display(),
        session.display()
    );
    ExitCode::from(EXIT_UNDELIVERED)
}

/// The pending entry's name (`<id>` or `<id>.<n>`) from its patch file's path.
fn pending_name(patch_file: &Path) -> String {
    patch_file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Writes `data` to `path` whole or not at all: a temporary file beside it, fsync, rename.
fn write_file_atomic(path: &Path, data: &[u8]) -> Result<(), Error> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        Error::io(
            "write patch",
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"),
        )
    })?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io("write patch", path, e)
    })
}

/// Starts `patchbox sessions reap SESSION` in its own process group (a Ctrl-C meant for the
/// terminal's foreground job does not stop it), with no terminal I/O.
fn spawn_reaper(root: &Path, session: &str) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    std::process::Command::new(std::env::current_exe()?)
        .arg("sessions")
        .arg("--root")
        .arg(root)
        .args(["reap", session])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .map(|_| ())
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
