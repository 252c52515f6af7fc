//! The `patchbox` command line: run a command in a sandbox of a project and get its patch,
//! manage pending patches and sessions, apply patches.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

mod exit;
mod plan;
mod remote;

use clap::{Parser, Subcommand};
use patchbox::apply::store::UndoStore;
use patchbox::session::{pending, recover};
use patchbox::tree::snapshot::Progress;
use patchbox::{Error, Options, SandboxManager};

#[derive(Parser)]
#[command(
    name = "patchbox",
    version,
    about = "Isolate delegated work in sandboxes; get it back as a patch",
    after_help = "Exit status: 0 done; 1 refused or conflicts (nothing written); 2 error: bad \
input (command line, id, empty or malformed patch) or a failure (I/O …); run: 74 patch \
undelivered (work kept), 126/127 CMD cannot run / not found, else CMD's own status."
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
        /// With --pending: store it in this object store (`s3://bucket/prefix`, or a
        /// directory) instead of the local one. When the store fails, the patch is kept
        /// locally and the exit status is 74; `pending push --store URL` uploads it later.
        #[arg(long, value_name = "URL", requires = "pending")]
        store: Option<String>,
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
        /// The command and its arguments (after `--`).
        #[arg(last = true)]
        cmd: Vec<std::ffi::OsString>,
    },
    /// Apply a patch to a project: atomically (crash-safe), 3-way against pre-images when
    /// given, refusing anything outside the project. Exit 0 when applied (or already applied).
    ///
    /// Each apply that writes keeps an undo record under ROOT/undo/<id>/; `--undo` uses the
    /// newest one of the project, `--list-undo` lists them, `--drop-undo ID` removes one.
    /// Records are pruned after each apply: the newest 50 per project are kept, none older
    /// than 30 days, and used ones are removed.
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
        /// List the project's undo records, oldest first: id, time, paths, state.
        #[arg(long, conflicts_with_all = ["check", "preimages", "conflict_markers", "patch", "undo", "drop_undo"])]
        list_undo: bool,
        /// Remove the undo record ID (see --list-undo).
        #[arg(long, value_name = "ID", conflicts_with_all = ["check", "preimages", "conflict_markers", "patch", "undo"])]
        drop_undo: Option<String>,
        /// The patch file, or - for standard input.
        #[arg(required_unless_present_any = ["undo", "list_undo", "drop_undo"])]
        patch: Option<PathBuf>,
    },
    /// Complete or roll back an apply or undo that was interrupted (a crash, a kill -9) in a
    /// project, so it is exactly as before or exactly as after it, with no `.patchbox-txn-*`
    /// directory left. `apply` and `apply --undo` do this first on their own.
    Recover {
        /// The project directory (default: the current directory).
        #[arg(long)]
        project: Option<PathBuf>,
        /// The sandbox root whose undo store is tidied too (default: $PATCHBOX_ROOT, else
        /// $HOME/.entropic/sandbox).
        #[arg(long)]
        root: Option<PathBuf>,
    },
    /// Pending patches: list, show, drop, apply (locally, or in an object store with
    /// --store), push what was kept locally.
    Pending {
        #[command(subcommand)]
        cmd: PendingCmd,
        /// The object store (`s3://bucket/prefix`, or a directory) instead of the local
        /// pending store. Endpoint and credentials come from the AWS variables
        /// (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
        /// AWS_ALLOW_HTTP).
        #[arg(long, global = true, value_name = "URL")]
        store: Option<String>,
    },
    /// Plan sandboxes under the root: list, diff, commit, roll back, clean up.
    Plan {
        #[command(subcommand)]
        cmd: plan::PlanCmd,
        /// The sandbox root (default: $PATCHBOX_ROOT, else $HOME/.entropic/sandbox).
        #[arg(long, global = true)]
        root: Option<PathBuf>,
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
        /// The project (default: the one the patch was made from; with --store, the
        /// current directory).
        #[arg(long)]
        project: Option<PathBuf>,
        /// Report what would happen; write nothing, keep the pending patch.
        #[arg(long)]
        check: bool,
        id: String,
    },
    /// Upload the local pending patches (all, or ID) to the --store, removing each locally
    /// once it is stored. Exit 74 when some stay local.
    Push {
        #[arg(long)]
        root: Option<PathBuf>,
        id: Option<String>,
    },
    /// In the --store: remove patch and pre-image objects no pending patch refers to and
    /// older than --grace (an upload cut short leaves such objects).
    Gc {
        /// Seconds an unreferenced object is spared (it may belong to an upload running).
        #[arg(long, default_value_t = 3600)]
        grace: u64,
    },
    /// In the --store: bytes of records, patches and pre-images (and without sharing).
    Usage,
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
            if let Some(hint) = run_without_separator(&e) {
                eprintln!("{hint}");
            }
            return ExitCode::from(if e.use_stderr() {
                exit::BAD_INPUT
            } else {
                exit::OK
            });
        }
    };
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("patchbox: {e}");
            ExitCode::from(exit::of(&e))
        }
    }
}

/// `patchbox run make test`: the command's words were taken for options of `run`; says to
/// put the command after `--`.
fn run_without_separator(e: &clap::Error) -> Option<String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let unexpected = matches!(
        e.kind(),
        clap::error::ErrorKind::UnknownArgument | clap::error::ErrorKind::InvalidSubcommand
    );
    if !unexpected || args.first().map(String::as_str) != Some("run") || args.contains(&"--".into())
    {
        return None;
    }
    // The command starts at the first word clap did not take for an option of `run`.
    let bad = match e.get(clap::error::ContextKind::InvalidArg) {
        Some(clap::error::ContextValue::String(s)) => s.clone(),
        _ => return None,
    };
    let at = args.iter().position(|a| *a == bad)?;
    let mut fixed = vec!["patchbox".to_string()];
    fixed.extend(args[..at].iter().cloned());
    fixed.push("--".into());
    fixed.extend(args[at..].iter().cloned());
    Some(format!(
        "patchbox run: put the command after --: {}",
        fixed.join(" ")
    ))
}

fn dispatch(cli: Cli) -> Result<ExitCode, Error> {
    match cli.cmd {
        Cmd::Plan { cmd, root } => Ok(plan::run(root_or_default(root)?, cmd).unwrap_or_else(|e| {
            eprintln!("patchbox: {e}");
            ExitCode::from(exit::of_plan(&e))
        })),
        Cmd::Run {
            project,
            root,
            id,
            pending,
            store,
            out,
            no_confine,
            allow_write,
            cmd,
        } => run(
            project,
            root,
            &id,
            Destination {
                pending,
                store,
                out,
            },
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
            list_undo,
            drop_undo,
            patch,
        } => {
            let project = project_or_cwd(project)?;
            let root = root_or_default(root)?;
            let store = UndoStore::new(&root);
            if undo {
                return undo_last(&project, &store, force);
            }
            if list_undo {
                return list_undo_records(&project, &store);
            }
            if let Some(id) = drop_undo {
                store.drop_record(&id)?;
                eprintln!("undo record {id} removed");
                return Ok(ExitCode::SUCCESS);
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
            if text.iter().all(u8::is_ascii_whitespace) {
                // As `git apply` does: an empty patch is a mistake, not a no-op.
                eprintln!("patchbox: no valid patches in input (the patch is empty)");
                return Ok(ExitCode::from(exit::BAD_INPUT));
            }
            apply_and_report(&project, &store, &text, check, preimages, conflict_markers)
        }
        Cmd::Recover { project, root } => {
            let project = project_or_cwd(project)?;
            let r = patchbox::apply::recover_project(&project)?;
            println!("{r}");
            let root = root_or_default(root)?;
            let pruned = UndoStore::new(&root).prune()?;
            if !pruned.is_empty() {
                eprintln!("{} used or old undo record(s) pruned", pruned.len());
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Pending {
            cmd,
            store: Some(url),
        } => {
            let (root, action) = match cmd {
                PendingCmd::List { root } => (root, remote::Action::List),
                PendingCmd::Show { root, id } => (root, remote::Action::Show(id)),
                PendingCmd::Drop { root, id } => (root, remote::Action::Drop(id)),
                PendingCmd::Apply {
                    root,
                    project,
                    check,
                    id,
                } => (root, remote::Action::Apply { id, project, check }),
                PendingCmd::Push { root, id } => (root, remote::Action::Push(id)),
                PendingCmd::Gc { grace } => (
                    None,
                    remote::Action::Gc(std::time::Duration::from_secs(grace)),
                ),
                PendingCmd::Usage => (None, remote::Action::Usage),
            };
            remote::run(&url, root_or_default(root)?, action)
        }
        Cmd::Pending { cmd, store: None } => match cmd {
            PendingCmd::Push { .. } | PendingCmd::Gc { .. } | PendingCmd::Usage => {
                eprintln!("patchbox pending: this command needs --store URL");
                Ok(ExitCode::from(exit::BAD_INPUT))
            }
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
                let opts = patchbox::apply::ApplyOptions {
                    check,
                    ..Default::default()
                };
                let report = pending::apply_pending(&root, &id, project.as_deref(), &opts)?;
                let code = print_report(&report);
                if code == ExitCode::SUCCESS && !check {
                    eprintln!("pending patch {id} applied and removed");
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
                    if r.shared_layers_removed > 0 {
                        eprintln!(
                            "removed {} unused shared lower layer(s)",
                            r.shared_layers_removed
                        );
                    }
                    for e in &r.errors {
                        eprintln!("patchbox: {e}");
                    }
                    if !r.errors.is_empty() {
                        return Ok(ExitCode::from(exit::ERROR));
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub(crate) fn project_or_cwd(project: Option<PathBuf>) -> Result<PathBuf, Error> {
    match project {
        Some(p) => Ok(p),
        None => std::env::current_dir().map_err(|e| Error::io("read current directory", ".", e)),
    }
}

/// Applies `text` to `project` with an undo record in `store`, and prints the report: on
/// stdout when the patch applied, on stderr otherwise. Exit 1 when refused or conflicting.
fn apply_and_report(
    project: &Path,
    store: &UndoStore,
    text: &[u8],
    check: bool,
    preimages: Option<PathBuf>,
    conflict_markers: bool,
) -> Result<ExitCode, Error> {
    use patchbox::apply::ApplyOptions;
    let opts = ApplyOptions {
        check,
        preimages,
        conflict_markers,
        ..ApplyOptions::default()
    };
    let report = store.apply(project, text, &opts)?;
    Ok(print_report(&report))
}

/// Prints an apply's report (stdout when it applied, stderr otherwise); exit
/// [`exit::REFUSED`] when refused or conflicting.
pub(crate) fn print_report(report: &patchbox::apply::ApplyReport) -> ExitCode {
    use patchbox::apply::Outcome;
    if matches!(report.outcome, Outcome::Applied | Outcome::AlreadyApplied) {
        println!("{report}");
        ExitCode::SUCCESS
    } else {
        eprintln!("{report}");
        ExitCode::from(exit::REFUSED)
    }
}

/// Restores the project from its newest undo record, then removes the record.
fn undo_last(project: &Path, store: &UndoStore, force: bool) -> Result<ExitCode, Error> {
    let r = match store.undo_last(project, force) {
        Ok(r) => r,
        // Nothing to undo: refused, not failed.
        Err(e @ Error::Pending { .. }) => {
            eprintln!("patchbox: {e}");
            return Ok(ExitCode::from(exit::REFUSED));
        }
        Err(e) => return Err(e),
    };
    if !r.report.recovery.is_empty() {
        eprintln!("{}", r.report.recovery);
    }
    if r.report.already_undone {
        println!(
            "the interrupted undo of {} is complete; nothing more to undo",
            r.record.id
        );
    }
    for p in &r.report.restored {
        println!("restored {p}");
    }
    for w in &r.report.warnings {
        eprintln!("warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}

/// One undo record of the project a line: id, time (UTC), paths changed, state.
fn list_undo_records(project: &Path, store: &UndoStore) -> Result<ExitCode, Error> {
    use patchbox::apply::store::RecordState;
    let mut stdout = std::io::stdout().lock();
    for r in store.list(Some(project))? {
        let secs = r
            .created
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let _ = writeln!(
            stdout,
            "{}\t{}\t{} path(s)\t{}",
            r.id,
            utc(secs),
            r.paths,
            match r.state {
                RecordState::Applied => "applied",
                RecordState::Undone => "undone",
                RecordState::Incomplete => "incomplete",
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the epoch (civil-from-days, proleptic Gregorian).
fn utc(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn count_files(patch: &[u8]) -> usize {
    patch
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"diff --git "))
        .count()
}

/// The snapshot's progress on stderr (indicatif): only on a terminal and once the copy has
/// taken a second; at most 10 redraws a second; the phase, files done of all, the rate and
/// the time left. Workers report out of order: the bar only moves forward.
fn progress_bar() -> Option<Arc<patchbox::tree::snapshot::ProgressFn>> {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    use std::sync::atomic::{AtomicU64, Ordering};
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(10));
    let style =
        ProgressStyle::with_template("{msg} [{bar:20}] {pos}/{len} files, {rate}, {eta} left")
            .ok()?
            .with_key(
                "rate",
                |st: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{:.0}/s", st.per_sec());
                },
            )
            .progress_chars("#> ");
    bar.set_style(style);
    bar.set_message("snapshot");
    let start = Instant::now();
    let furthest = AtomicU64::new(0);
    Some(Arc::new(move |p: Progress| {
        let before = furthest.fetch_max(p.files_done, Ordering::Relaxed);
        if p.files_done < before || start.elapsed().as_secs_f32() < 1.0 {
            return;
        }
        bar.set_length(p.files_total);
        bar.set_position(p.files_done);
        if p.files_done >= p.files_total {
            bar.finish_and_clear();
        }
    }))
}

/// Where `run` sends the patch: the pending store (local, or the object store `store`), the
/// file `out`, or stdout.
struct Destination {
    pending: bool,
    store: Option<String>,
    out: Option<PathBuf>,
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
    to: Destination,
    confine: Confine,
    cmd: &[std::ffi::OsString],
) -> Result<ExitCode, Error> {
    if cmd.is_empty() {
        eprintln!(
            "patchbox run: no command given; put it after --, e.g. patchbox run -- make test"
        );
        return Ok(ExitCode::from(exit::BAD_INPUT));
    }
    let project = project_or_cwd(project)?;
    let Destination {
        pending: to_pending,
        store,
        out,
    } = to;
    let store = match store {
        Some(url) => Some(patchbox::store::StoreUrl::parse(&url)?),
        None => None,
    };
    let mgr = SandboxManager::with_options(
        &project,
        Options {
            root,
            store,
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
    let status = match mgr.command(&sb, program).args(args).stdout(stderr).status() {
        Ok(s) => s,
        Err(e) => {
            // As a shell says it: 127 when CMD is not found, 126 when it cannot run. The
            // sandbox goes with the manager (nothing ran in it).
            eprintln!(
                "patchbox run: cannot start {}: {e}",
                Path::new(program).display()
            );
            return Ok(ExitCode::from(match e.kind() {
                std::io::ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::CANNOT_EXECUTE,
            }));
        }
    };
    let res = mgr.finalize_sandbox(&sb)?;
    let mut kept = false;
    let delivered = if to_pending {
        if res.patch.is_empty() {
            eprintln!("patchbox: no changes; nothing stored");
            Ok(())
        } else {
            mgr.deliver_pending_patch(id, &res.patch).map(|d| match d {
                patchbox::Delivery::Local(p) => {
                    eprintln!("{}/{}", mgr.session_id(), pending_name(&p));
                }
                patchbox::Delivery::Stored { id, url } => eprintln!("{id} (in {url})"),
                patchbox::Delivery::Kept { path, error } => {
                    kept = true;
                    eprintln!("patchbox: the store failed: {error}");
                    eprintln!(
                        "patchbox: kept as pending patch {}/{} ({}); `patchbox pending push \
                         --store URL` uploads it",
                        mgr.session_id(),
                        pending_name(&path),
                        path.display()
                    );
                }
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
    if kept {
        return Ok(ExitCode::from(exit::UNDELIVERED));
    }
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

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
            return ExitCode::from(exit::UNDELIVERED);
        }
    }
    let session = mgr.keep();
    eprintln!(
        "patchbox: the sandbox is kept at {} (session {}); `patchbox sessions prune` recovers \
         it into a pending patch",
        sb.path.display(),
        session.display()
    );
    ExitCode::from(exit::UNDELIVERED)
}

/// The pending entry's name (`<id>` or `<id>.<n>`) from its patch file's path.
fn pending_name(patch_file: &Path) -> String {
    patch_file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Writes `data` to `path` whole or not at all: a temporary file beside it, fsync, rename.
///
/// A symlink at `path` (or a chain of them) is written through, as a shell's `>` would: the
/// file it leads to is the one replaced, by a temporary file in that file's directory (so
/// the rename stays on its filesystem), and keeps its permissions; the link stays a link.
fn write_file_atomic(path: &Path, data: &[u8]) -> Result<(), Error> {
    let path = &resolve_symlinks(path)?;
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
    // The replaced file's permissions, if there is one (a new file gets the umask's).
    let perms = std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.permissions());
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        if let Some(p) = perms {
            f.set_permissions(p)?;
        }
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io("write patch", path, e)
    })
}

/// The path a write to `path` lands on: `path` itself unless it is a symlink, else where
/// the link leads (a relative target taken from the link's directory), followed up to 40
/// links deep (the kernel's limit). The last entry may not exist yet (a dangling link).
fn resolve_symlinks(path: &Path) -> Result<PathBuf, Error> {
    let mut cur = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                let target =
                    std::fs::read_link(&cur).map_err(|e| Error::io("read symlink", &cur, e))?;
                cur = match cur.parent() {
                    Some(d) => d.join(target),
                    None => target,
                };
            }
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io("inspect", &cur, e));
            }
            _ => return Ok(cur),
        }
    }
    Err(Error::io(
        "resolve symlink",
        path,
        std::io::Error::from_raw_os_error(libc::ELOOP),
    ))
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
