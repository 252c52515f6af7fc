//! Liveness and crash recovery of sessions.
//!
//! A session is alive while its owner holds the `flock` on `session.lock`; the kernel drops
//! the lock when the owner dies, whatever the cause, and no pid is involved (pids are reused,
//! and a home directory may be shared by several machines). [`prune`] claims the lock of each
//! session it finds; one it can claim is dead. Before a dead session loses its `base/` and
//! `d-*/`, each of its delegations that changed anything is finalized (by content, without a
//! manifest) into a pending patch marked recovered. A live session is never touched, and
//! pending patches are never pruned.

use std::fs;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fs::overlay::mount::{self, Backend};
use crate::fs::relpath::RelPath;
use crate::fs::state_dir::{self, StateDir};
use crate::git::ignore::IgnoreRules;
use crate::git::repo::{discover_repo, GitRepo};
use crate::id::{DelegationId, SessionId};
use crate::session::layout;
use crate::session::overlay;
use crate::session::pending::{self, PendingMeta};
use crate::tree::base::Base;
use crate::tree::diff;

/// What [`prune`] did.
#[derive(Clone, Debug, Default)]
pub struct PruneReport {
    /// Dead sessions whose sandboxes were removed.
    pub pruned: Vec<String>,
    /// Pending patches written from the work of dead sessions.
    pub recovered: Vec<PathBuf>,
    /// Sessions left alone because they are alive.
    pub live: Vec<String>,
    /// Problems met; the affected sandboxes were left in place.
    pub errors: Vec<String>,
    /// Dead sessions left for a later prune because the bound of [`prune_within`] was
    /// reached.
    pub deferred: Vec<String>,
    /// Shared lower layers removed: superseded ones nobody uses, and ones a dead process
    /// was writing (an unbounded [`prune`] only; see [`crate::isolation::shared_lower::sweep`]).
    pub shared_layers_removed: usize,
    /// Snapshots of the snapshot store no sandbox held any more, and ones a crash cut
    /// short (an unbounded [`prune`] only; see [`crate::isolation::prune`]).
    pub snapshots_removed: usize,
}

/// A session found under a root.
#[derive(Debug, Clone)]
pub struct SessionStatus {
    /// The session id.
    pub id: String,
    /// Whether its owner still holds its lock.
    pub live: bool,
    /// The project it snapshots (from `session.meta`), if known.
    pub project: Option<PathBuf>,
    /// Its sandboxes (`d-*`).
    pub sandboxes: Vec<String>,
    /// Its pending patches.
    pub pending: usize,
}

fn session_ids(root: &Path) -> Result<Vec<String>> {
    let rd = match fs::read_dir(root) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list sandbox root", root, e)),
    };
    let mut ids: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| layout::is_session_id(n))
        .collect();
    ids.sort();
    Ok(ids)
}

fn sandbox_names(session_dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(session_dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| {
                    n.strip_prefix("d-")
                        .is_some_and(|id| DelegationId::parse(id).is_ok())
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn read_project(session_dir: &Path) -> Option<PathBuf> {
    fs::read(session_dir.join(layout::META_FILE))
        .ok()
        .map(|b| PathBuf::from(std::ffi::OsString::from_vec(b)))
}

/// Lists the sessions under `root` and whether each is alive.
pub fn list_sessions(root: &Path) -> Result<Vec<SessionStatus>> {
    let mut out = Vec::new();
    for id in session_ids(root)? {
        let dir = root.join(&id);
        let has_lock = dir.join(layout::LOCK_FILE).exists();
        // Claiming and releasing at once: a dead session stays as it is.
        let live = has_lock && layout::try_claim_session(&dir)?.is_none();
        out.push(SessionStatus {
            project: read_project(&dir),
            sandboxes: sandbox_names(&dir),
            pending: pending::list_session(&dir, &id)?.len(),
            live,
            id,
        });
    }
    Ok(out)
}

/// Recovers and cleans every dead session under `root`; live sessions are untouched.
pub fn prune(root: &Path) -> Result<PruneReport> {
    prune_within(root, None, usize::MAX)
}

/// [`prune`] within a bound: no dead session is started after `time` has passed or once
/// `max_sessions` have been recovered; the rest are listed as deferred, for a later prune.
/// (A manager recovers this way at start, on a thread of its own.) Without a `time` bound
/// it also runs the substrate's prune: the plan snapshots and shared lower layers nobody
/// uses (see [`crate::isolation::prune`]).
pub fn prune_within(
    root: &Path,
    time: Option<std::time::Duration>,
    max_sessions: usize,
) -> Result<PruneReport> {
    let start = std::time::Instant::now();
    let mut report = PruneReport::default();
    let root = match root.canonicalize() {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(report),
        Err(e) => return Err(Error::io("resolve sandbox root", root, e)),
    };
    remove_dead_half_made_sessions(&root, &mut report);
    for id in session_ids(&root)? {
        let dir = root.join(&id);
        let out_of_bound =
            report.pruned.len() >= max_sessions || time.is_some_and(|t| start.elapsed() >= t);
        match layout::try_claim_session(&dir) {
            Ok(Some(_)) if out_of_bound => report.deferred.push(id),
            Ok(Some(lock)) => {
                recover_session(&dir, &id, &mut report);
                drop(lock);
            }
            Ok(None) => {
                if dir.join(layout::LOCK_FILE).exists() {
                    report.live.push(id);
                }
            }
            Err(e) => report.errors.push(e.to_string()),
        }
    }
    // Only an unbounded prune runs the substrate's prune: a bounded one runs as a manager
    // starts, and a layer or a snapshot is a tree of tens of thousands of files to remove.
    if time.is_none() {
        match crate::isolation::prune::prune(&root, crate::isolation::prune::Scope::Stale) {
            Ok(p) => {
                report.shared_layers_removed = p.layers;
                report.snapshots_removed = p.snapshots;
            }
            Err(e) => report.errors.push(e.to_string()),
        }
    }
    Ok(report)
}

/// How old a half-made session directory must be before a pruner may take it for dead.
const HALF_MADE_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Removes the `.<session-id>.tmp` directories of sessions whose creator died while making
/// them (see [`layout::create_session`]): they hold no work yet. One whose creator still holds
/// its lock is being made, and is left alone.
fn remove_dead_half_made_sessions(root: &Path, report: &mut PruneReport) {
    let Ok(rd) = fs::read_dir(root) else { return };
    for e in rd.filter_map(|e| e.ok()) {
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        let Some(id) = name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".tmp"))
            .and_then(|n| ulid::Ulid::from_string(n).ok())
        else {
            continue;
        };
        // Its creator makes it in milliseconds, but opens its lock file before it can lock
        // it: only a directory whose id (a creation time) is a minute old is claimed.
        let age = std::time::SystemTime::now()
            .duration_since(id.datetime())
            .unwrap_or_default();
        if age < HALF_MADE_GRACE {
            continue;
        }
        let dir = root.join(&name);
        match layout::try_claim_session(&dir) {
            Ok(Some(_lock)) => {
                let r = StateDir::open(&dir)
                    .and_then(|s| s.join(&dir))
                    .and_then(|p| state_dir::remove_tree(&p));
                if let Err(e) = r {
                    report.errors.push(e.to_string());
                }
            }
            // Being made right now, or already gone.
            Ok(None) => {}
            Err(e) => report.errors.push(e.to_string()),
        }
    }
}

/// Waits until no process holds the session `id` under `root`, then recovers and cleans it
/// as [`prune`] does a dead session. This is the other half of
/// [`SandboxManager::leave_cleanup_to_reaper`](crate::session::manager::SandboxManager::leave_cleanup_to_reaper):
/// started before the manager ends, it takes over the session's lock as soon as the manager
/// releases it, so no one else cleans the session in between. A session that is already gone
/// gives an empty report.
pub fn reap(root: &Path, id: &str) -> Result<PruneReport> {
    let mut report = PruneReport::default();
    // Text from the caller: parsed here.
    let session = SessionId::parse(id)?;
    let id = session.as_str();
    let root = match root.canonicalize() {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(report),
        Err(e) => return Err(Error::io("resolve sandbox root", root, e)),
    };
    let dir = root.join(id);
    let lock_path = dir.join(layout::LOCK_FILE);
    let lock = match fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&lock_path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(report),
        Err(e) => return Err(Error::io("open lock file", &lock_path, e)),
    };
    lock.lock()
        .map_err(|e| Error::io("lock session", &lock_path, e))?;
    // The holder may have cleaned up before letting go.
    if dir.join(layout::LOCK_FILE).exists() {
        recover_session(&dir, id, &mut report);
    }
    drop(lock);
    Ok(report)
}

fn recover_session(dir: &Path, id: &str, report: &mut PruneReport) {
    // Every write of the recovery goes through this one open session directory.
    let session = match StateDir::open(dir) {
        Ok(s) => s,
        Err(e) => {
            report.errors.push(format!("session {id}: {e}"));
            return;
        }
    };
    let project = read_project(dir).unwrap_or_default();
    let base_dir = dir.join(layout::BASE_DIR);
    let repo = discover_repo(&project).ok().flatten();
    let base = if base_dir.is_dir() {
        match Base::load(
            dir,
            base_dir.clone(),
            repo.as_ref().map(|r| r.git_dir.as_path()),
        ) {
            Ok(b) => Some(b),
            Err(e) => {
                // Without the base nothing can be diffed: leave the session for a later try.
                report.errors.push(format!("session {id}: {e}"));
                return;
            }
        }
    } else {
        None
    };
    let mut all_ok = true;
    for name in sandbox_names(dir) {
        let d_id = &name[2..];
        let sb = dir.join(&name);
        // An overlay sandbox's mount outlives its process: detached first, in every case.
        let saved = overlay::unmount_entry(dir, &name)
            .and_then(|()| overlay::read_record_for_recovery(dir, d_id))
            .and_then(|rec| match (&base, rec) {
                (Some(base), Some(rec)) => {
                    let ctx = Ctx {
                        session_dir: &session,
                        session: id,
                        d_id,
                        project: &project,
                        base,
                        sb: &sb,
                        repo: repo.as_ref(),
                    };
                    recover_overlay(&ctx, &rec)
                }
                (Some(base), None) => {
                    recover_one(&session, id, d_id, &project, base, &sb, repo.as_ref())
                }
                // No base: the session died before any sandbox could be complete.
                (None, _) => Ok(None),
            });
        match saved {
            Ok(p) => {
                report.recovered.extend(p);
                // Out of view in one step, then deleted: a recovery killed while deleting
                // must not leave a half-deleted sandbox for the next one to take for work.
                let r = session.join(&sb).and_then(|p| {
                    let trash =
                        session.join(Path::new(&format!(".trash-{}", ulid::Ulid::new())))?;
                    state_dir::rename(&p, &trash)?;
                    state_dir::remove_tree(&trash)
                });
                if let Err(e) = r {
                    report.errors.push(e.to_string());
                    all_ok = false;
                }
            }
            Err(e) => {
                report
                    .errors
                    .push(format!("session {id}, delegation {d_id}: {e}"));
                all_ok = false;
            }
        }
    }
    if !all_ok {
        return;
    }
    if let Err(e) = overlay::unmount_all_below(dir) {
        report.errors.push(format!("session {id}: {e}"));
        return;
    }
    let leftovers: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| {
                    n.starts_with(".creating-")
                        || n.starts_with(".clock-")
                        || n.starts_with(".trash-")
                        || n.starts_with(layout::TMP_PREFIX)
                        || n.starts_with(layout::MANIFEST_PREFIX)
                        || n == layout::SCRATCH_DIR
                        || layout::is_overlay_state(n)
                })
                .collect()
        })
        .unwrap_or_default();
    if let Err(e) = pending::tidy_dead_session_in(&session) {
        report.errors.push(format!("session {id}: {e}"));
    }
    let mut remove = |rel: &str| {
        // A probe's mount left by a crash is detached before its directory goes.
        let r = overlay::unmount_entry(dir, rel).and_then(|()| {
            session
                .join(Path::new(rel))
                .and_then(|p| state_dir::remove_tree(&p))
        });
        if let Err(e) = r {
            report.errors.push(e.to_string());
        }
    };
    for n in &leftovers {
        remove(n);
    }
    remove(layout::BASE_DIR);
    remove(crate::tree::base::BLOBS_FILE);
    remove(layout::GIT_OBJECTS_DIR);
    let has_pending = pending::list_session(dir, id)
        .map(|v| !v.is_empty())
        .unwrap_or(true);
    if !has_pending {
        remove(pending::PENDING_DIR);
        remove(layout::META_FILE);
    }
    remove(layout::LOCK_FILE);
    if !has_pending {
        let _ = session
            .join(dir)
            .and_then(|p| state_dir::remove_empty_dir(&p));
    }
    report.pruned.push(id.to_string());
}

fn recover_one(
    session_dir: &StateDir,
    session: &str,
    d_id: &str,
    project: &Path,
    base: &Base,
    sb: &Path,
    repo: Option<&GitRepo>,
) -> Result<Option<PathBuf>> {
    let rules = IgnoreRules::load(sb, repo)?;
    // The manifest kept beside the sandbox lets the diff trust stat data as finalize does;
    // without a whole one, everything is compared by content.
    let dir = session_dir.path();
    let manifest = fs::read(dir.join(format!("{}{d_id}", layout::MANIFEST_PREFIX)))
        .ok()
        .and_then(|b| diff::Manifest::decode(&b));
    let d = diff::diff_trees(&base.nodes, base, sb, manifest.as_ref(), &|rel| {
        rules.is_ignored(rel, false)
    })?;
    store_recovered(
        &Ctx {
            session_dir,
            session,
            d_id,
            project,
            base,
            sb,
            repo,
        },
        &d,
    )
}

/// What recovering one delegation works with.
struct Ctx<'a> {
    session_dir: &'a StateDir,
    session: &'a str,
    d_id: &'a str,
    project: &'a Path,
    base: &'a Base,
    sb: &'a Path,
    repo: Option<&'a GitRepo>,
}

/// Recovers an overlay sandbox (unmounted): its layers are mounted again on `d-<id>` (the
/// recorded backend first), the changes are read from its layers as finalize reads them,
/// and it is unmounted again.
fn recover_overlay(c: &Ctx<'_>, rec: &overlay::Record) -> Result<Option<PathBuf>> {
    let dir = c.session_dir.path();
    let layers = overlay::layers_of(dir, c.d_id, rec);
    if !layers.upper.is_dir() {
        // Cut short before its upper layer was made: nothing was written in it.
        return Ok(None);
    }
    if let Some(l) = layers.lower.iter().find(|l| !l.is_dir()) {
        // Never guessed without: the session is kept for a look.
        return Err(Error::io(
            "recover an overlay sandbox",
            l,
            std::io::Error::new(std::io::ErrorKind::NotFound, "a layer is missing"),
        ));
    }
    let log = dir.join(format!("{}{}.log", layout::FUSE_LOG_PREFIX, c.d_id));
    let others = [Backend::Kernel, Backend::Fuse]
        .into_iter()
        .filter(|b| *b != rec.backend);
    let mut last = None;
    let mut mounted = None;
    for b in std::iter::once(rec.backend).chain(others) {
        match mount::mount(b, &layers, c.sb, &log) {
            Ok(m) => {
                mounted = Some(m);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let Some(m) = mounted else {
        return Err(last.unwrap_or_else(|| {
            Error::io("mount", c.sb, std::io::Error::other("no overlay backend"))
        }));
    };
    let backend = m.backend;
    let frozen = &layers.lower[..rec.layers.len().min(layers.lower.len())];
    let res = overlay::scan_layers(&layers.upper, frozen, backend).and_then(|scan| {
        let rules = IgnoreRules::load(c.sb, c.repo)?;
        let d = overlay::diff_view(&c.base.nodes, c.base, c.sb, &scan, &|rel| {
            rules.is_ignored(rel, false)
        })?;
        store_recovered(c, &d)
    });
    mount::unmount(c.sb, backend == Backend::Fuse, m.server)?;
    res
}

/// Stores a recovered delegation's changes as a pending patch marked recovered (once).
fn store_recovered(c: &Ctx<'_>, d: &diff::TreeDiff) -> Result<Option<PathBuf>> {
    let (session_dir, session, d_id, project, base, sb) =
        (c.session_dir, c.session, c.d_id, c.project, c.base, c.sb);
    let dir = session_dir.path();
    if d.changes.is_empty() {
        return Ok(None);
    }
    let patch = diff::render_patch(base, sb, &d.changes)?;
    let touched: Vec<RelPath> = d.changes.iter().map(|c| c.rel.clone()).collect();
    let read = |rel: &RelPath| base.preimage(rel);
    let meta = PendingMeta {
        session: session.to_string(),
        delegation: d_id.to_string(),
        project: project.to_path_buf(),
        created: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        recovered: true,
        abandoned: false,
        ..PendingMeta::default()
    };
    // Stored already (by the session itself, or by a recovery interrupted before it removed
    // the sandbox): once is enough.
    if let Some(p) = pending::find_identical(dir, session, d_id, &patch)? {
        return Ok(Some(p));
    }
    // A pending patch of the same id may exist already: write_pending keeps both.
    pending::write_pending_in(session_dir, &meta, &patch, Some((&touched, &read))).map(Some)
}
