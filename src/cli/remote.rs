//! `patchbox pending … --store URL`: the pending store in an object store shared by many
//! machines — list, show (`--stat`, `--json` as for local entries), apply onto the caller's
//! own copy, drop, `push` what a failed upload kept locally, `gc` and `usage`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use patchbox::apply::{ApplyOptions, Outcome};
use patchbox::records::{self, ApplyRecord, PendingRecord};
use patchbox::session::remote::{push, RemotePending};
use patchbox::store::StoreUrl;
use patchbox::Error;

use crate::pending::{selection, show, PendingCmd};
use crate::{exit, root_or_default, View};

/// Opens the store `url`.
pub fn open(url: &str) -> Result<RemotePending, Error> {
    RemotePending::open(&StoreUrl::parse(url)?)
}

/// Runs a `pending` subcommand against the store `url`; `--root` is the local sandbox root
/// (undo records of an apply, the local pending patches a push sends).
pub fn run(url: &str, cmd: PendingCmd, view: View) -> Result<ExitCode, Error> {
    let store = open(url)?;
    match cmd {
        PendingCmd::List { root: _, json } => {
            let entries = store.list()?;
            if json {
                let recs = entries
                    .iter()
                    .map(|e| Ok(PendingRecord::of_stored(url, e, &store.patch_of(e)?, false)))
                    .collect::<Result<Vec<_>, Error>>()?;
                print!("{}", records::to_json(&recs));
                return Ok(ExitCode::SUCCESS);
            }
            let mut stdout = std::io::stdout().lock();
            for e in entries {
                let r = &e.record;
                let project = PathBuf::from(
                    <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(
                        r.project_bytes(),
                    ),
                );
                let _ = writeln!(
                    stdout,
                    "{}\t{} file(s)\t{}\t{}:{}",
                    e.id,
                    r.files,
                    if r.recovered { "recovered" } else { "pending" },
                    r.host,
                    project.display()
                );
            }
        }
        PendingCmd::Show {
            root: _,
            stat,
            json,
            id,
        } => {
            let e = store.find(&id)?;
            let patch = store.patch_of(&e)?;
            let rec = PendingRecord::of_stored(url, &e, &patch, json);
            if json {
                print!("{}", records::to_json(&rec));
            } else {
                show(&rec, (!stat).then_some(patch.as_slice()), view);
            }
        }
        PendingCmd::Drop { root: _, id } => store.drop_pending(&id)?,
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
            if !selection(&id, only, exclude, hunks)?.is_everything() {
                eprintln!(
                    "patchbox pending apply: --only, --exclude and --hunks act on the local \
                     pending store; without --store they apply part of a patch"
                );
                return Ok(ExitCode::from(exit::BAD_INPUT));
            }
            let root = root_or_default(root)?;
            let project = crate::project_or_cwd(project)?;
            let opts = ApplyOptions {
                check,
                conflict_markers,
                ..Default::default()
            };
            std::fs::create_dir_all(&root).map_err(|e| Error::io("create root", &root, e))?;
            let full_id = store.find(&id)?.id;
            let report = store.apply(&full_id, &project, &root, &opts)?;
            let ok = matches!(report.outcome, Outcome::Applied | Outcome::AlreadyApplied);
            if json {
                let mut rec = ApplyRecord::from(&report);
                rec.pending_id = Some(full_id.clone());
                print!("{}", records::to_json(&rec));
            } else if ok {
                println!("{report}");
            } else {
                eprintln!("{report}");
            }
            if !ok {
                return Ok(ExitCode::from(exit::REFUSED));
            }
            if !check {
                eprintln!(
                    "pending patch {full_id} applied and removed from {}",
                    store.url()
                );
            }
        }
        PendingCmd::Push { root, id } => {
            let r = push::push(&root_or_default(root)?, &store, id.as_deref())?;
            for (local, remote) in &r.pushed {
                eprintln!("pushed {local} as {remote}");
            }
            for (local, e) in &r.failed {
                eprintln!("patchbox: {local} stays local: {e}");
            }
            if !r.failed.is_empty() {
                return Ok(ExitCode::from(exit::UNDELIVERED));
            }
        }
        PendingCmd::Gc { grace } => {
            let n = store.gc(Duration::from_secs(grace))?;
            eprintln!("{n} unreferenced object(s) removed");
        }
        PendingCmd::Usage => {
            let u = store.usage()?;
            println!(
                "{} pending patch(es)\nrecords\t{} bytes\npatches\t{} bytes\npre-images\t{} bytes \
                 ({} bytes without sharing)",
                u.entries, u.record_bytes, u.patch_bytes, u.object_bytes, u.object_bytes_unshared
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
