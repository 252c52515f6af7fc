//! `patchbox pending … --store URL`: the pending store in an object store shared by many
//! machines — list, show, apply onto the caller's own copy, drop, and `push` what a failed
//! upload kept locally.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use patchbox::session::remote::{push, RemotePending};
use patchbox::store::StoreUrl;
use patchbox::Error;

use crate::exit;

/// What to do in the store.
pub enum Action {
    /// List its pending patches.
    List,
    /// Print one.
    Show(String),
    /// Remove one.
    Drop(String),
    /// Apply one onto a project (default: the current directory).
    Apply {
        id: String,
        project: Option<PathBuf>,
        check: bool,
    },
    /// Upload the local pending patches (all, or one).
    Push(Option<String>),
    /// Remove unreferenced objects older than the grace time.
    Gc(Duration),
    /// Print what the store holds and what it would hold without sharing pre-images.
    Usage,
}

/// Opens the store `url`.
pub fn open(url: &str) -> Result<RemotePending, Error> {
    RemotePending::open(&StoreUrl::parse(url)?)
}

/// Runs `action` against the store `url`; `root` is the local sandbox root (undo records of
/// an apply, the local pending patches a push sends).
pub fn run(url: &str, root: PathBuf, action: Action) -> Result<ExitCode, Error> {
    let store = open(url)?;
    match action {
        Action::List => {
            let mut stdout = std::io::stdout().lock();
            for e in store.list()? {
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
        Action::Show(id) => {
            let data = store.read(&id)?;
            let _ = std::io::stdout().lock().write_all(&data);
        }
        Action::Drop(id) => store.drop_pending(&id)?,
        Action::Apply { id, project, check } => {
            let project = crate::project_or_cwd(project)?;
            let opts = patchbox::apply::ApplyOptions {
                check,
                ..Default::default()
            };
            std::fs::create_dir_all(&root).map_err(|e| Error::io("create root", &root, e))?;
            let report = store.apply(&id, &project, &root, &opts)?;
            let code = crate::print_report(&report);
            if code == ExitCode::SUCCESS && !check {
                eprintln!(
                    "pending patch {id} applied and removed from {}",
                    store.url()
                );
            }
            return Ok(code);
        }
        Action::Push(only) => {
            let r = push::push(&root, &store, only.as_deref())?;
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
        Action::Gc(grace) => {
            let n = store.gc(grace)?;
            eprintln!("{n} unreferenced object(s) removed");
        }
        Action::Usage => {
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
