//! The `patchbox` command line: run a command in a sandbox of a project and get its patch,
//! review and accept pending patches (whole or in part), manage sessions and plans, apply
//! patches; `--json` on every listing and report, completions and man pages.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod apply;
mod checkpoint;
mod color;
mod completions;
mod exit;
mod pager;
mod pending;
mod plan;
mod remote;
mod run;
mod sigpipe;

use clap::{Parser, Subcommand};
use patchbox::apply::store::UndoStore;
use patchbox::session::recover;
use patchbox::Error;

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
    /// Colour the output: auto (on a terminal, unless NO_COLOR is set), always or never.
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "WHEN",
        default_value = "auto"
    )]
    color: color::ColorWhen,
    /// Never page the output (by default long output goes through $PAGER, else less, when
    /// stdout is a terminal).
    #[arg(long, global = true)]
    no_pager: bool,
}

/// How output is shown: colour and paging, from the global options.
#[derive(Clone, Copy, Debug)]
pub struct View {
    /// When to colour.
    pub color: color::ColorWhen,
    /// True with `--no-pager`.
    pub no_pager: bool,
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
        /// Print a JSON record of the run on stdout (docs/json.md); needs --pending or --out,
        /// which take the patch.
        #[arg(long)]
        json: bool,
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
        /// Print the report (of the apply, the undo or the list) as JSON (docs/json.md).
        #[arg(long)]
        json: bool,
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
    /// Pending patches: list, show, drop, apply (all, or some files or hunks), locally or in
    /// an object store (--store); push what was kept locally.
    Pending {
        #[command(subcommand)]
        cmd: pending::PendingCmd,
        /// The object store (`s3://bucket/prefix`, or a directory) instead of the local
        /// pending store. Endpoint and credentials come from the AWS variables
        /// (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
        /// AWS_ALLOW_HTTP).
        #[arg(long, global = true, value_name = "URL")]
        store: Option<String>,
    },
    /// Plan sandboxes under the root: list, diff, commit, roll back, clean up; checkpoints
    /// kept in an object store: list, restore.
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
        /// Print the sessions (list) or the prune report as JSON (docs/json.md).
        #[arg(long, global = true)]
        json: bool,
    },
    /// Print a completion script for SHELL on stdout (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) on stdout, or write one page per command into DIR.
    Man {
        /// Write patchbox.1 and patchbox-<command>.1 pages into this directory.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
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
    if sigpipe::ends_at_closed_stdout(&cli) {
        sigpipe::end_quietly_on_closed_stdout();
    }
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
    let view = View {
        color: cli.color,
        no_pager: cli.no_pager,
    };
    match cli.cmd {
        Cmd::Plan { cmd, root } => Ok(plan::run(root_or_default(root)?, cmd, view).unwrap_or_else(
            |e| {
                eprintln!("patchbox: {e}");
                ExitCode::from(exit::of_plan(&e))
            },
        )),
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
            json,
        } => run::run(
            project,
            root,
            &id,
            run::Deliver {
                to_pending: pending,
                store,
                out,
                json,
            },
            run::Confine {
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
            json,
            patch,
        } => {
            let project = project_or_cwd(project)?;
            let root = root_or_default(root)?;
            let store = UndoStore::new(&root);
            if undo {
                return apply::undo_last(&project, &store, force, json);
            }
            if list_undo {
                return apply::list_undo_records(&project, &store, json);
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
            let opts = patchbox::apply::ApplyOptions {
                check,
                preimages,
                conflict_markers,
                ..Default::default()
            };
            apply::apply_and_report(&project, &store, &text, &opts, json)
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
        Cmd::Pending { cmd, store } => match store {
            Some(url) => remote::run(&url, cmd, view),
            None => pending::run(cmd, view),
        },
        Cmd::Completions { shell } => completions::completions(shell),
        Cmd::Man { out_dir } => completions::man(out_dir),
        Cmd::Sessions { cmd, root, json } => {
            let root = root_or_default(root)?;
            match cmd.unwrap_or(SessionsCmd::List) {
                SessionsCmd::List if json => {
                    let recs: Vec<patchbox::records::SessionRecord> =
                        recover::list_sessions(&root)?
                            .iter()
                            .map(Into::into)
                            .collect();
                    print!("{}", patchbox::records::to_json(&recs));
                }
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
                    if json {
                        let rec = patchbox::records::PruneRecord::from(&r);
                        print!("{}", patchbox::records::to_json(&rec));
                        return Ok(ExitCode::from(if r.errors.is_empty() {
                            exit::OK
                        } else {
                            exit::ERROR
                        }));
                    }
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
                    if r.snapshots_removed > 0 {
                        eprintln!("removed {} unused plan snapshot(s)", r.snapshots_removed);
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
