//! `patchbox pending …`: list, show (the patch, or `--stat`, with its provenance), drop and
//! apply pending patches — all of one, or a selection of files and hunks (`--only`,
//! `--exclude`, `--hunks`), the rest kept pending. With `--store URL` they act on the
//! pending store in an object store instead (see `remote.rs`), where `push`, `gc` and `usage`
//! work too.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use patchbox::apply::{ApplyOptions, Outcome};
use patchbox::patch::select::{HunkPick, Selection};
use patchbox::patch::stat::diffstat;
use patchbox::records::{self, ApplyRecord, PendingRecord};
use patchbox::session::pending;
use patchbox::session::pending_select::apply_pending_selected;
use patchbox::Error;

use crate::color::{self, paint};
use crate::{exit, pager, root_or_default, utc, View};

/// The `pending` subcommands.
#[derive(Subcommand)]
pub enum PendingCmd {
    /// One pending patch a line: id, files touched, origin, project.
    List {
        /// The sandbox root.
        #[arg(long)]
        root: Option<PathBuf>,
        /// Print the records as JSON (docs/json.md).
        #[arg(long)]
        json: bool,
    },
    /// Print a pending patch after what produced it (command, directory, exit status,
    /// times), as `git show` prints a commit.
    Show {
        /// The sandbox root.
        #[arg(long)]
        root: Option<PathBuf>,
        /// A summary per file (`git diff --stat`) instead of the patch.
        #[arg(long)]
        stat: bool,
        /// Print the record as JSON, the patch text included (docs/json.md).
        #[arg(long, conflicts_with = "stat")]
        json: bool,
        /// The pending patch: `<session>/<name>`, or a name only one has.
        id: String,
    },
    /// Remove a pending patch.
    Drop {
        /// The sandbox root.
        #[arg(long)]
        root: Option<PathBuf>,
        /// The pending patch.
        id: String,
    },
    /// Apply a pending patch to its project (merging against its stored pre-images); on
    /// success the pending patch is removed. With --only, --exclude or --hunks only those
    /// parts are applied, and the rest stays pending as a new entry (printed on stderr, and
    /// as `remaining` in the JSON) that applies later.
    Apply {
        /// The sandbox root.
        #[arg(long)]
        root: Option<PathBuf>,
        /// The project (default: the one the patch was made from; with --store, the current
        /// directory).
        #[arg(long)]
        project: Option<PathBuf>,
        /// Report what would happen; write nothing, keep the pending patch.
        #[arg(long)]
        check: bool,
        /// Write conflict markers instead of refusing a conflicting patch.
        #[arg(long)]
        conflict_markers: bool,
        /// Apply only the files under these paths (a file, or a directory's files).
        #[arg(long, value_name = "PATH", num_args = 1..)]
        only: Vec<String>,
        /// Leave out the files under these paths.
        #[arg(long, value_name = "PATH", num_args = 1..)]
        exclude: Vec<String>,
        /// Apply only these hunks of a file, counted from 1 (`pending show` lists them):
        /// PATH:1,3 or PATH:2-4; repeatable.
        #[arg(long, value_name = "PATH:N,…", num_args = 1..)]
        hunks: Vec<String>,
        /// Print the report as JSON (docs/json.md).
        #[arg(long)]
        json: bool,
        /// The pending patch.
        id: String,
    },
    /// Upload the local pending patches (all, or ID) to the --store, removing each locally
    /// once it is stored. Exit 74 when some stay local.
    Push {
        /// The sandbox root.
        #[arg(long)]
        root: Option<PathBuf>,
        /// The local pending patch (default: all of them).
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

/// Runs a `pending` subcommand on the local pending store (`remote::run` serves `--store`).
pub fn run(cmd: PendingCmd, view: View) -> Result<ExitCode, Error> {
    match cmd {
        PendingCmd::Push { .. } | PendingCmd::Gc { .. } | PendingCmd::Usage => {
            eprintln!("patchbox pending: this command needs --store URL");
            Ok(ExitCode::from(exit::BAD_INPUT))
        }
        PendingCmd::List { root, json } => {
            let recs = records::pending_records(&root_or_default(root)?)?;
            if json {
                print!("{}", records::to_json(&recs));
                return Ok(ExitCode::SUCCESS);
            }
            let mut out = std::io::stdout().lock();
            for r in recs {
                // The third column keeps its two words; the JSON says more (`origin`).
                let state = if r.origin == "recovered" {
                    "recovered"
                } else {
                    "pending"
                };
                let _ = writeln!(
                    out,
                    "{}\t{} file(s)\t{state}\t{}",
                    r.id,
                    r.files.len(),
                    r.project
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        PendingCmd::Show {
            root,
            stat,
            json,
            id,
        } => {
            let e = pending::find(&root_or_default(root)?, &id)?;
            let rec = PendingRecord::of(&e, true)?;
            if json {
                print!("{}", records::to_json(&rec));
                return Ok(ExitCode::SUCCESS);
            }
            if stat {
                show(&rec, None, view);
            } else {
                let patch = std::fs::read(&e.patch_path)
                    .map_err(|err| Error::io("read pending patch", &e.patch_path, err))?;
                show(&rec, Some(&patch), view);
            }
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
            conflict_markers,
            only,
            exclude,
            hunks,
            json,
            id,
        } => {
            let root = root_or_default(root)?;
            let sel = selection(&id, only, exclude, hunks)?;
            let opts = ApplyOptions {
                check,
                conflict_markers,
                ..ApplyOptions::default()
            };
            let full_id = pending::find(&root, &id)?.id;
            let r = apply_pending_selected(&root, &id, project.as_deref(), &sel, &opts)?;
            let ok = matches!(r.report.outcome, Outcome::Applied | Outcome::AlreadyApplied);
            if json {
                let mut rec = ApplyRecord::from(&r.report);
                rec.pending_id = Some(full_id);
                if !sel.is_everything() {
                    rec.remaining = Some(r.remaining.clone());
                }
                print!("{}", records::to_json(&rec));
            } else if ok {
                println!("{}", r.report);
            } else {
                eprintln!("{}", r.report);
            }
            if let Some(rest) = &r.remaining {
                eprintln!("the rest is pending as {rest}");
            }
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(exit::REFUSED)
            })
        }
    }
}

/// The `--only`, `--exclude` and `--hunks` of `pending apply ID` as a selection.
pub fn selection(
    id: &str,
    only: Vec<String>,
    exclude: Vec<String>,
    hunks: Vec<String>,
) -> Result<Selection, Error> {
    let hunks = hunks
        .iter()
        .map(|h| HunkPick::parse(h))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Pending {
            id: id.to_string(),
            reason: e.to_string(),
        })?;
    Ok(Selection {
        only,
        exclude,
        hunks,
    })
}

/// Shows a pending patch as `pending show` does: its header, then `patch` (coloured on a
/// terminal) or, when `patch` is `None` (`--stat`), a summary per file; through the pager.
pub fn show(rec: &PendingRecord, patch: Option<&[u8]>, view: View) {
    let on = view.color.enabled();
    let mut text = header(rec, on).into_bytes();
    match patch {
        None => text.extend_from_slice(diffstat(&rec.files, 80, on).as_bytes()),
        Some(p) if on => text.extend(color::color_patch(p)),
        Some(p) => text.extend_from_slice(p),
    }
    pager::page(&text, view.no_pager);
}

/// The lines above a pending patch, as `git show` puts a commit's above its diff: the id,
/// then the project, origin, command, directory, exit status and times that are known.
fn header(r: &PendingRecord, on: bool) -> String {
    let mut s = paint(&format!("pending {}", r.id), color::YELLOW, on);
    s.push('\n');
    let mut field = |k: &str, v: String| s.push_str(&format!("{k:<12}{v}\n"));
    field("Project:", r.project.clone());
    field(
        "Origin:",
        format!("{} (stored {})", r.origin, utc(r.created_ms / 1000)),
    );
    if let Some(f) = &r.split_from {
        field("Split from:", f.clone());
    }
    let p = &r.provenance;
    if !p.command.is_empty() {
        field("Command:", shell_words(&p.command));
    }
    if let Some(c) = &p.cwd {
        field("Directory:", c.clone());
    }
    if let Some(x) = p.exit_status {
        field("Exit:", x.to_string());
    }
    if let Some(t) = p.started_ms {
        field("Started:", utc(t / 1000));
    }
    if let Some(t) = p.ended_ms {
        let took = p
            .started_ms
            .map(|a| format!(" ({:.1}s)", t.saturating_sub(a) as f64 / 1000.0))
            .unwrap_or_default();
        field("Ended:", format!("{}{took}", utc(t / 1000)));
    }
    s.push('\n');
    s
}

/// The words quoted for a POSIX shell where they need it, so the line can be pasted.
fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            let plain = !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
            if plain {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
