//! `patchbox run`: snapshot the project, run a command in a sandbox of it, deliver the patch
//! of what it changed (stdout, a file, or the pending store — local or an object store —
//! with the command's provenance), and leave the sandbox's removal to a detached reaper.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use patchbox::id::DelegationId;
use patchbox::session::provenance::Provenance;
use patchbox::tree::snapshot::Progress;
use patchbox::{Error, Options, SandboxManager};

use crate::{exit, project_or_cwd};

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

/// `run`'s confinement flags.
pub struct Confine {
    /// `--no-confine`.
    pub off: bool,
    /// `--allow-write` directories.
    pub writable: Vec<PathBuf>,
}

/// Where `run` puts the patch, and whether it reports in JSON.
pub struct Deliver {
    /// `--pending`.
    pub to_pending: bool,
    /// `--store URL`: with `--pending`, the object store to put the patch in.
    pub store: Option<String>,
    /// `--out FILE`.
    pub out: Option<PathBuf>,
    /// `--json`.
    pub json: bool,
}

/// Runs `cmd` in a sandbox of the project and delivers its patch.
pub fn run(
    project: Option<PathBuf>,
    root: Option<PathBuf>,
    id: &str,
    deliver: Deliver,
    confine: Confine,
    cmd: &[std::ffi::OsString],
) -> Result<ExitCode, Error> {
    let Deliver {
        to_pending,
        store,
        out,
        json,
    } = deliver;
    if cmd.is_empty() {
        eprintln!(
            "patchbox run: no command given; put it after --, e.g. patchbox run -- make test"
        );
        return Ok(ExitCode::from(exit::BAD_INPUT));
    }
    if json && !to_pending && out.is_none() {
        eprintln!("patchbox run: --json prints the run's record on stdout; add --pending or --out FILE for the patch");
        return Ok(ExitCode::from(exit::BAD_INPUT));
    }
    let mut provenance = Provenance {
        command: cmd
            .iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect(),
        cwd: std::env::current_dir()
            .ok()
            .map(|d| d.to_string_lossy().into_owned()),
        ..Provenance::default()
    };
    let project = project_or_cwd(project)?;
    let store = match store {
        Some(url) => Some(patchbox::store::StoreUrl::parse(&url)?),
        None => None,
    };
    // The argument is parsed here, once; the sandbox and the pending patch take the type.
    let id = DelegationId::parse(id)?;
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
    let sb = mgr.create_sandbox(&id, None)?;
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
    provenance.started_ms = Some(Provenance::now_ms());
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
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    provenance.ended_ms = Some(Provenance::now_ms());
    provenance.exit_status = Some(code);
    let res = mgr.finalize_sandbox(&sb)?;
    let mut pending_id = None;
    // Stored in the object store (`--store`), or kept locally because it failed.
    let mut stored = false;
    let mut kept = false;
    let delivered = if to_pending {
        if res.patch.is_empty() {
            eprintln!("patchbox: no changes; nothing stored");
            Ok(())
        } else {
            mgr.deliver_pending_patch_with(&id, &res.patch, &provenance)
                .map(|d| match d {
                    patchbox::Delivery::Local(p) => {
                        let full = format!("{}/{}", mgr.session_id(), pending_name(&p));
                        eprintln!("{full}");
                        pending_id = Some(full);
                    }
                    patchbox::Delivery::Stored { id, url } => {
                        eprintln!("{id} (in {url})");
                        stored = true;
                        pending_id = Some(id);
                    }
                    patchbox::Delivery::Kept { path, error } => {
                        kept = true;
                        let full = format!("{}/{}", mgr.session_id(), pending_name(&path));
                        eprintln!("patchbox: the store failed: {error}");
                        eprintln!(
                            "patchbox: kept as pending patch {full} ({}); `patchbox pending \
                             push --store URL` uploads it",
                            path.display()
                        );
                        pending_id = Some(full);
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
        return Ok(keep_undelivered(
            mgr,
            &sb,
            &id,
            &res.patch,
            (to_pending, &provenance),
            &e,
        ));
    }
    if json {
        let files = patchbox::patch::parse::parse_patch(&res.patch)
            .map(|p| patchbox::patch::stat::file_stats(&p))
            .unwrap_or_default();
        let rec = patchbox::records::RunRecord {
            session: mgr.session_id().to_string(),
            delegation: id.to_string(),
            project: std::fs::canonicalize(&project)
                .unwrap_or_else(|_| project.clone())
                .to_string_lossy()
                .into_owned(),
            delivered: if res.patch.is_empty() {
                "none"
            } else if stored {
                "stored"
            } else if to_pending {
                "pending"
            } else {
                "file"
            },
            pending_id,
            patch_file: out
                .as_deref()
                .filter(|_| !to_pending)
                .map(|p| p.to_string_lossy().into_owned()),
            files,
            provenance,
        };
        print!("{}", patchbox::records::to_json(&rec));
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
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// `run` could not deliver its patch: keeps the work and says where. The patch goes to the
/// pending store (unless that is what just failed); when it cannot be stored either, the whole
/// session is kept, sandbox included, for the next start or `sessions prune` to recover.
fn keep_undelivered(
    mgr: SandboxManager,
    sb: &patchbox::SandboxInfo,
    id: &DelegationId,
    patch: &[u8],
    (pending_failed, provenance): (bool, &Provenance),
    why: &Error,
) -> ExitCode {
    eprintln!("patchbox: could not deliver the patch: {why}");
    if !pending_failed {
        if let Ok(p) = mgr.write_pending_patch_with(id, patch, provenance) {
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
