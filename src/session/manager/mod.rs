//! The manager: one per engine session, creating, finalizing and discarding sandboxes.
//!
//! [`SandboxManager`] is `Send + Sync`; any number of engine threads may call it at once.
//! Its state is a map of delegation ids to sandboxes under a short lock; copying and diffing
//! run outside it. The base snapshot is taken lazily by the first [`create_sandbox`], under
//! its own lock, so a session that never delegates never copies anything.
//!
//! A sandbox is copied into a hidden `.creating-<id>` directory and renamed to `d-<id>` when
//! complete, so crash recovery never mistakes a half-made copy for a delegation's work.
//! In overlay isolation ([`Options::isolation`]) `d-<id>` is instead a mount over the
//! materialized snapshot, made after its record (see [`crate::session::overlay`]); finalize
//! then reads the upper layers, and discard unmounts.
//!
//! [`create_sandbox`]: SandboxManager::create_sandbox

use std::collections::HashMap;
use std::fs::File;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::fs::relpath::RelPath;
use crate::fs::state_dir::{self, StateDir, StatePath};
use crate::git::ignore::IgnoreRules;
use crate::git::index::LStat;
use crate::git::odb::ObjectStore;
use crate::git::repo::GitRepo;
use crate::id::{DelegationId, IntoId, SessionId};
use crate::session::confine::{self, Confinement};
use crate::session::delegation::{
    Completion, DecideFn, Decision, Routed, SandboxInfo, SandboxResult,
};
use crate::session::layout;
use crate::session::pending::{self, PendingMeta};
use crate::session::provenance::Provenance;
use crate::session::recover;
use crate::tree::base::{Base, BaseSrc};
use crate::tree::diff::{self, Manifest, ManifestEntry};
use crate::tree::select;
use crate::tree::snapshot::{self, Node, NodeKind, ProgressFn, StatKey};

mod build;
mod chain;
mod deliver;
mod git_view;
mod overlay;
mod shared_lower;
mod teardown;

pub use deliver::Delivery;

use crate::session::delegation::{Isolation, IsolationMode};

/// Settings for a [`SandboxManager`].
#[derive(Clone, Default)]
pub struct Options {
    /// The sandbox root; `None`: [`layout::default_root`].
    pub root: Option<PathBuf>,
    /// Called with copy progress while snapshotting.
    pub progress: Option<Arc<ProgressFn>>,
    /// Skip recovering dead sessions at start (they are still recovered by `prune`).
    pub no_prune_on_start: bool,
    /// Run tools started by [`SandboxManager::command`] without Landlock confinement (see
    /// [`crate::session::confine`]). Off by default: a confined tool writes only under its
    /// sandbox, its `TMPDIR` and [`Options::writable_dirs`].
    pub no_confine: bool,
    /// More directories confined tools may write (a tool's caches, say).
    pub writable_dirs: Vec<PathBuf>,
    /// Make sandboxes of a git project without their private `.git`. Off by default: a
    /// sandbox of a git project is a work tree of a private repository whose `HEAD` and
    /// index are the snapshot, so `git status` and `git diff` there show the delegation's
    /// changes (see [`crate::git::private`]).
    pub no_git_repo: bool,
    /// How sandboxes are isolated: copies, or overlay mounts over one materialized copy of
    /// the snapshot (see [`Isolation`]); the default is `$PATCHBOX_ISOLATION`, else
    /// [`Isolation::Auto`] (an overlay where one can be mounted, else copies).
    pub isolation: Isolation,
    /// Where [`SandboxManager::deliver_pending_patch`] stores pending patches: an object
    /// store (`s3://bucket/prefix`, or a directory of the same layout) shared with other
    /// machines. `None` (the default): the local pending store under the root, and no
    /// network is touched.
    pub store: Option<crate::store::StoreUrl>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("root", &self.root)
            .field("progress", &self.progress.is_some())
            .field("no_prune_on_start", &self.no_prune_on_start)
            .field("no_confine", &self.no_confine)
            .field("writable_dirs", &self.writable_dirs)
            .field("no_git_repo", &self.no_git_repo)
            .field("isolation", &self.isolation)
            .field("store", &self.store)
            .finish()
    }
}

struct SessionBase {
    base: Base,
    repo: Option<GitRepo>,
    skipped: Vec<(PathBuf, String)>,
    /// Absolute symlinks of the project that point into it.
    links_into_project: Vec<PathBuf>,
    /// Whether `base.blobs` is written (see [`SandboxManager::write_blob_list`]).
    blob_list_written: Mutex<bool>,
    /// What the sandboxes' private repository needs of the user's index.
    view_index: git_view::ViewIndex,
    /// The digest of the base's blob nodes, as a shared layer of them would have it
    /// ([`crate::isolation::layer_digest`]), taken beside the base's copy; `None` outside
    /// git or when a shared layer is out of the question.
    blob_digest: Option<crate::isolation::layer_digest::LayerDigest>,
}

struct Sandbox {
    info: SandboxInfo,
    manifest: Manifest,
    /// Paths the last finalize reported, for storing pre-images with a pending patch.
    last_touched: Mutex<Vec<RelPath>>,
    /// Its layers, when it is an overlay mount.
    overlay: Option<overlay::OverlaySb>,
}

enum Slot {
    Creating,
    Ready(Arc<Sandbox>),
}

/// How long the recovery a manager starts with may start new sessions.
const STARTUP_RECOVERY_TIME: std::time::Duration = std::time::Duration::from_secs(20);
/// How many dead sessions the recovery a manager starts with recovers at most.
const STARTUP_RECOVERY_SESSIONS: usize = 16;

/// The state of the recovery a manager starts with.
enum Recovery {
    Running(std::thread::JoinHandle<recover::PruneReport>),
    Done(recover::PruneReport),
}

/// One engine session's sandboxes.
///
/// Creating it creates the session directory `<root>/<session-id>/` and locks it for the
/// manager's lifetime; dropping it stores the work of sandboxes neither completed nor discarded
/// as pending patches marked abandoned, then removes `base/` and every `d-*/`, keeping pending
/// patches.
///
/// ```
/// # fn main() -> patchbox::Result<()> {
/// use patchbox::session::{Manager, Options};
/// let project = tempfile::tempdir().unwrap();
/// std::fs::write(project.path().join("a.txt"), "one\n").unwrap();
/// let root = tempfile::tempdir().unwrap();
/// let mgr = Manager::with_options(
///     project.path(),
///     Options { root: Some(root.path().into()), ..Options::default() },
/// )?;
/// let sb = mgr.create_sandbox("task1", None)?;
/// std::fs::write(sb.path.join("a.txt"), "two\n").unwrap();
/// let res = mgr.finalize_sandbox(&sb)?;
/// assert!(res.patch_text().contains("+two"));
/// assert_eq!(res.files_touched, vec![std::path::PathBuf::from("a.txt")]);
/// mgr.discard_sandbox(&sb)?;
/// # Ok(()) }
/// ```
pub struct Manager {
    project: PathBuf,
    root: PathBuf,
    session_id: SessionId,
    session_dir: PathBuf,
    /// The session directory, open: the capability every write of this manager goes through.
    handle: StateDir,
    lock: Mutex<Option<File>>,
    progress: Option<Arc<ProgressFn>>,
    base: Mutex<Option<Arc<SessionBase>>>,
    sandboxes: Mutex<HashMap<DelegationId, Slot>>,
    keep: std::sync::atomic::AtomicBool,
    /// Cleanup left to another process ([`SandboxManager::leave_cleanup_to_reaper`]).
    handed_off: std::sync::atomic::AtomicBool,
    removals: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// The recovery of dead sessions started by the constructor, if any.
    recovery: Mutex<Option<Recovery>>,
    /// Confine tools started by [`SandboxManager::command`] (see [`Options::no_confine`]).
    confine: bool,
    /// Extra directories confined tools may write.
    writable_dirs: Vec<PathBuf>,
    /// The sandboxes' private git repository ([`Options::no_git_repo`]).
    git_view: git_view::GitView,
    /// The isolation asked for.
    isolation: Isolation,
    /// What sandboxes are made as, decided by the first create.
    decided: Mutex<Option<overlay::Decided>>,
    /// `.lower/`, once materialized (overlay isolation).
    lower: Mutex<Option<PathBuf>>,
    /// The shared layer under `.lower/`, held while the manager lives (overlay isolation of
    /// a git project; see [`crate::isolation::shared_lower`]).
    shared_lower: Mutex<Option<crate::isolation::shared_lower::SharedLayer>>,
    /// The object store pending patches are delivered to ([`Options::store`]).
    remote: Option<crate::session::remote::RemotePending>,
}

/// The session manager under the name it has at the crate root (`patchbox::SandboxManager`),
/// which C++ (`patchbox::SandboxManager`) and engines written before the family modules use.
/// The same type as [`Manager`]; new code names `patchbox::session::Manager`, as the plan
/// family's is `patchbox::plan::Manager`.
pub type SandboxManager = Manager;

impl SandboxManager {
    /// A manager for `project_dir` with the default root.
    pub fn new(project_dir: impl AsRef<Path>) -> Result<Self> {
        Self::with_options(project_dir, Options::default())
    }

    /// A manager for `project_dir` with explicit options. Dead sessions under the root are
    /// recovered first (unless disabled): their unfinished delegations become pending
    /// patches marked recovered.
    pub fn with_options(project_dir: impl AsRef<Path>, options: Options) -> Result<Self> {
        let project_dir = project_dir.as_ref();
        let project = match project_dir.canonicalize() {
            Ok(p) if p.is_dir() => p,
            _ => {
                return Err(Error::NotADirectory {
                    path: project_dir.to_path_buf(),
                })
            }
        };
        let root = match options.root {
            Some(r) => r,
            None => layout::default_root()?,
        };
        // Opened before the session exists: a bad URL is refused with nothing made.
        let remote = match &options.store {
            Some(url) => Some(crate::session::remote::RemotePending::open(url)?),
            None => None,
        };
        let s = layout::create_session(&root, &project)?;
        let root = s.dir.parent().map(Path::to_path_buf).unwrap_or(root);
        let mgr = SandboxManager {
            project,
            root,
            session_id: s.id,
            session_dir: s.dir,
            handle: s.handle,
            lock: Mutex::new(Some(s.lock)),
            progress: options.progress,
            base: Mutex::new(None),
            sandboxes: Mutex::new(HashMap::new()),
            keep: std::sync::atomic::AtomicBool::new(false),
            handed_off: std::sync::atomic::AtomicBool::new(false),
            removals: Mutex::new(Vec::new()),
            recovery: Mutex::new(None),
            confine: !options.no_confine,
            writable_dirs: options.writable_dirs,
            git_view: git_view::GitView::new(!options.no_git_repo),
            isolation: options.isolation,
            decided: Mutex::new(None),
            lower: Mutex::new(None),
            shared_lower: Mutex::new(None),
            remote,
        };
        if !options.no_prune_on_start {
            // Off the caller's path and bounded: an engine starts at once, whatever crashed
            // sessions the root holds. Problems are reported by startup_recovery(); what is
            // left is recovered by the next start or an explicit prune.
            let root = mgr.root.clone();
            let spawned = std::thread::Builder::new()
                .name("patchbox-recover".into())
                .spawn(move || {
                    recover::prune_within(
                        &root,
                        Some(STARTUP_RECOVERY_TIME),
                        STARTUP_RECOVERY_SESSIONS,
                    )
                    .unwrap_or_else(|e| recover::PruneReport {
                        errors: vec![e.to_string()],
                        ..Default::default()
                    })
                });
            *mgr.recovery.lock() = Some(match spawned {
                Ok(h) => Recovery::Running(h),
                Err(e) => Recovery::Done(recover::PruneReport {
                    errors: vec![format!("start the recovery thread: {e}")],
                    ..Default::default()
                }),
            });
        }
        Ok(mgr)
    }

    /// The project directory (canonical).
    pub fn project_dir(&self) -> &Path {
        &self.project
    }

    /// The session directory `<root>/<session-id>` (canonical).
    pub fn session_base(&self) -> &Path {
        &self.session_dir
    }

    /// The session id.
    pub fn session_id(&self) -> &str {
        self.session_id.as_str()
    }

    /// The session id, as its type.
    pub fn session_id_typed(&self) -> &SessionId {
        &self.session_id
    }

    /// The sandbox root (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The chokepoint for this session: see [`StateDir::join`].
    pub fn path_in_state_dir(&self, p: &Path) -> Result<StatePath> {
        self.handle.join(p)
    }

    /// Entries the snapshot skipped (FIFOs, sockets, devices, nested repositories, files
    /// that vanished), with reasons; empty before the first sandbox.
    pub fn skipped(&self) -> Vec<(PathBuf, String)> {
        self.base
            .lock()
            .as_ref()
            .map(|b| b.skipped.clone())
            .unwrap_or_default()
    }

    /// Absolute symlinks in the snapshot that resolve into the project (relative to the
    /// project), found when the snapshot was taken; empty before the first sandbox. A tool
    /// writing through one in its sandbox would change the user's file, and the change would
    /// be in no patch: confined tools ([`SandboxManager::command`]) cannot.
    pub fn symlinks_into_project(&self) -> Vec<PathBuf> {
        self.base
            .lock()
            .as_ref()
            .map(|b| b.links_into_project.clone())
            .unwrap_or_default()
    }

    fn lookup(&self, info: &SandboxInfo) -> Result<Arc<Sandbox>> {
        match self.sandboxes.lock().get(&info.delegation_id) {
            Some(Slot::Ready(s)) if s.info.path == info.path => Ok(s.clone()),
            _ => Err(Error::UnknownSandbox {
                path: info.path.clone(),
            }),
        }
    }

    /// Creates the sandbox `d-<id>`: a copy of the base snapshot, or of `chain_from`'s
    /// current state. A chained sandbox keeps its predecessor's `base_dir`, so its patch is
    /// cumulative against the session snapshot. An id already in use is an error.
    ///
    /// `delegation_id` is a [`DelegationId`] or text parsed as one here (an invalid one is
    /// [`Error::InvalidId`]).
    pub fn create_sandbox(
        &self,
        delegation_id: impl IntoId<DelegationId>,
        chain_from: Option<&SandboxInfo>,
    ) -> Result<SandboxInfo> {
        let delegation_id = delegation_id.into_id()?;
        let dir = self.path_in_state_dir(Path::new(&format!("d-{delegation_id}")))?;
        {
            let mut map = self.sandboxes.lock();
            if map.contains_key(&delegation_id) || state_dir::exists(&dir)? {
                return Err(Error::IdInUse {
                    id: delegation_id.into_string(),
                });
            }
            map.insert(delegation_id.clone(), Slot::Creating);
        }
        let made = self.build_sandbox(&delegation_id, &dir, chain_from);
        release_freed_memory();
        let mut map = self.sandboxes.lock();
        match made {
            Ok(sb) => {
                let info = sb.info.clone();
                map.insert(delegation_id, Slot::Ready(Arc::new(sb)));
                Ok(info)
            }
            Err(e) => {
                map.remove(&delegation_id);
                Err(e)
            }
        }
    }

    /// Computes what the delegation changed: the patch against the base snapshot and the
    /// touched paths. The sandbox is kept.
    pub fn finalize_sandbox(&self, info: &SandboxInfo) -> Result<SandboxResult> {
        let sb = self.lookup(info)?;
        let sbase = self.ensure_base()?;
        let base = &sbase.base;
        // Ignore rules are only needed for new paths: loaded on the first one.
        let rules = std::cell::OnceCell::new();
        let is_ignored = |rel: &RelPath| {
            rules
                .get_or_init(|| IgnoreRules::load(&sb.info.path, sbase.repo.as_ref()))
                .as_ref()
                .is_ok_and(|r| r.is_ignored(rel, false))
        };
        // An overlay's layers stay as they are until the patch is read from its view.
        let stack = sb.overlay.as_ref().map(|o| o.stack.read());
        let d = match (&sb.overlay, &stack) {
            (Some(o), Some(stack)) => self.overlay_changes(&sb, o, stack, base, &is_ignored)?,
            _ => diff::diff_trees(
                &base.nodes,
                base,
                &sb.info.path,
                Some(&sb.manifest),
                &is_ignored,
            )?,
        };
        if let Some(Err(e)) = rules.into_inner() {
            return Err(e);
        }
        // The sandbox listing is gone; the patch may need room for large files.
        release_freed_memory();
        let base_dir = self.path_in_state_dir(&base.dir)?;
        let scratch = self.path_in_state_dir(Path::new(layout::SCRATCH_DIR))?;
        state_dir::create_dir_all(&scratch)?;
        // The pre-images are put into `base/` (linked from an overlay session's layers, else
        // copied) while the patch is rendered from the project and the sandbox: neither
        // reads what the other writes, and on two cores the slower one sets the time, not
        // their sum.
        let layers = self.preimage_layers();
        let copier = || -> Result<()> {
            for i in d.changes.iter().filter_map(|c| c.base_index) {
                let from = layers.file(&base.nodes[i].rel);
                base.materialize_linked(&base_dir, &scratch, i, from.as_deref())?;
            }
            Ok(())
        };
        let (materialized, patch) = crate::cores::beside(copier, || {
            diff::render_patch(base, &sb.info.path, &d.changes)
        });
        materialized?;
        let patch = patch?;
        drop(stack);
        *sb.last_touched.lock() = d.changes.iter().map(|c| c.rel.clone()).collect();
        Ok(result_from(
            &d,
            patch,
            base.dir.clone(),
            sb.info.path.clone(),
        ))
    }

    /// Removes a sandbox. Idempotent. A path outside this session's `d-*` sandboxes is
    /// refused with an error and nothing is removed.
    pub fn discard_sandbox(&self, info: &SandboxInfo) -> Result<()> {
        let p = self.path_in_state_dir(&info.path)?;
        let expected = self.session_dir.join(format!("d-{}", info.delegation_id));
        // The id is valid by its type: only the path is left to match it.
        if p.as_path() != expected {
            return Err(Error::Containment {
                path: info.path.clone(),
                base: self.session_dir.clone(),
                reason: "not a sandbox of this session",
            });
        }
        let removed = {
            let mut map = self.sandboxes.lock();
            if let Some(Slot::Creating) = map.get(&info.delegation_id) {
                return Err(Error::IdInUse {
                    id: info.delegation_id.to_string(),
                });
            }
            map.remove(&info.delegation_id)
        };
        let sb = match removed {
            Some(Slot::Ready(sb)) => Some(sb),
            _ => None,
        };
        let r = match sb.as_ref().filter(|sb| sb.overlay.is_some()) {
            Some(sb) => self.discard_mounted(sb, &p),
            None => self.move_to_trash(&p, &info.delegation_id),
        };
        match (r, sb) {
            (Ok(()), Some(sb)) if sb.overlay.is_some() => self.discard_overlay(sb),
            (Ok(()), _) => Ok(()),
            // Not removed: still this manager's (and its work is saved on drop), so a later
            // discard tries again. Nobody took the id meanwhile: a create refuses an id
            // whose `d-<id>` exists.
            (Err(e), sb) => {
                if let Some(sb) = sb {
                    self.sandboxes
                        .lock()
                        .entry(info.delegation_id.clone())
                        .or_insert(Slot::Ready(sb));
                }
                Err(e)
            }
        }
    }

    /// Takes an overlay sandbox out of view: unmounted first (its layers go afterwards, in
    /// [`Self::discard_overlay`], so a crash in between never leaves a half-removed upper
    /// layer for recovery to read), then its mount point removed as the directory it is,
    /// wherever it was renamed: an empty directory once unmounted, so it goes at once. A
    /// foreign entry at `d-<id>` (a symlink swapped in) is never removed.
    fn discard_mounted(&self, sb: &Sandbox, p: &StatePath) -> Result<()> {
        self.unmount_sandbox(sb)?;
        self.remove_private_files(&sb.info.delegation_id)?;
        match &sb.overlay {
            Some(o) => self.remove_mount_point(&o.mount_point, p),
            None => Ok(()),
        }
    }

    /// The confined tools' private TMPDIR and the manifest of sandbox `id`.
    fn remove_private_files(&self, id: &DelegationId) -> Result<()> {
        for prefix in [layout::TMP_PREFIX, layout::MANIFEST_PREFIX] {
            state_dir::remove_tree(&self.path_in_state_dir(Path::new(&format!("{prefix}{id}")))?)?;
        }
        Ok(())
    }

    /// The rest of a discard: the sandbox's private files go, and the sandbox leaves view
    /// at once and is deleted aside. `id` is the sandbox's delegation (`p` is its `d-<id>`).
    fn move_to_trash(&self, p: &StatePath, id: &DelegationId) -> Result<()> {
        // The confined tools' private TMPDIR and the manifest go with the sandbox.
        self.remove_private_files(id)?;
        // Removal is moved off the caller's path: the sandbox is renamed to a hidden trash
        // name at once (so the id is free and the tree is gone from view) and deleted by a
        // background thread. Drop waits for those threads; a crash leaves `.trash-*`, which
        // pruning removes (it is discarded work, never recovered).
        let trash = self.path_in_state_dir(Path::new(&format!(".trash-{}", ulid::Ulid::new())))?;
        match state_dir::rename(p, &trash) {
            Ok(()) => {}
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(())
            }
            // Refused (a symlink swapped in): nothing is removed.
            Err(e @ Error::Containment { .. }) => return Err(e),
            Err(_) => return state_dir::remove_tree(p),
        }
        let in_thread = trash.clone();
        let handle = std::thread::Builder::new()
            .name("patchbox-remove".into())
            .spawn(move || {
                let _ = state_dir::remove_tree(&in_thread);
            });
        match handle {
            Ok(h) => {
                let mut removals = self.removals.lock();
                removals.retain(|h| !h.is_finished());
                removals.push(h);
                Ok(())
            }
            // No thread to be had: remove here.
            Err(_) => state_dir::remove_tree(&trash),
        }
    }

    /// Stores `patch` as a pending patch of `delegation_id`, atomically (temporary file,
    /// fsync, rename, directory fsync), and returns the patch file. A second pending patch of
    /// the same id gets the next free name (`<id>.2.patch`, …): none is ever overwritten. When the delegation was finalized by this manager,
    /// the base versions of the files it touched are kept beside it for 3-way merging.
    ///
    /// `delegation_id` is a [`DelegationId`] or text parsed as one here.
    pub fn write_pending_patch(
        &self,
        delegation_id: impl IntoId<DelegationId>,
        patch: &[u8],
    ) -> Result<PathBuf> {
        self.write_pending_inner(
            &delegation_id.into_id()?,
            patch,
            false,
            &Provenance::default(),
        )
    }

    /// [`write_pending_patch`](Self::write_pending_patch) with what produced the work (the
    /// command, its directory, exit status and times), kept beside the patch for review and
    /// shown by `patchbox pending show` and in its JSON.
    pub fn write_pending_patch_with(
        &self,
        delegation_id: impl IntoId<DelegationId>,
        patch: &[u8],
        provenance: &Provenance,
    ) -> Result<PathBuf> {
        self.write_pending_inner(&delegation_id.into_id()?, patch, false, provenance)
    }

    /// What a pending patch of `id` is stored with: its meta (with `provenance`), the paths
    /// its last finalize touched, and the session base their pre-images are read from (none
    /// before the first snapshot).
    fn pending_parts(
        &self,
        id: &DelegationId,
        abandoned: bool,
        provenance: &Provenance,
    ) -> Result<(PendingMeta, Vec<RelPath>, Option<Arc<SessionBase>>)> {
        let touched: Vec<RelPath> = match self.sandboxes.lock().get(id) {
            Some(Slot::Ready(s)) => s.last_touched.lock().clone(),
            _ => Vec::new(),
        };
        let meta = PendingMeta {
            session: self.session_id.to_string(),
            delegation: id.to_string(),
            project: self.project.clone(),
            created: now_secs(),
            recovered: false,
            abandoned,
            provenance: provenance.clone(),
            split_from: None,
        };
        Ok((meta, touched, self.base.lock().clone()))
    }

    fn write_pending_inner(
        &self,
        id: &DelegationId,
        patch: &[u8],
        abandoned: bool,
        provenance: &Provenance,
    ) -> Result<PathBuf> {
        let (meta, touched, sbase) = self.pending_parts(id, abandoned, provenance)?;
        let read = |rel: &RelPath| match sbase.as_ref() {
            Some(sb) => sb.base.preimage(rel),
            None => Ok(None),
        };
        let pre = sbase
            .as_ref()
            .map(|_| (touched.as_slice(), &read as pending::PreimageFn));
        pending::write_pending_as(&self.handle, id, &meta, patch, pre)
    }

    /// Finalizes the sandbox, asks `decide` (if any) whether to accept the patch, then
    /// discards the sandbox. Reject, no callback, a callback error or a callback panic all
    /// send the patch to the pending store: nothing is dropped without consent. If storing
    /// the pending patch fails the sandbox is kept and the error returned.
    pub fn complete_sandbox(
        &self,
        info: &SandboxInfo,
        decide: Option<DecideFn<'_>>,
    ) -> Result<Completion> {
        let result = self.finalize_sandbox(info)?;
        let routed = if result.patch.is_empty() {
            Routed::Unchanged
        } else {
            let decision = match decide {
                None => Decision::Reject,
                Some(f) => match catch_unwind(AssertUnwindSafe(|| f(&result))) {
                    Ok(Ok(d)) => d,
                    Ok(Err(_)) | Err(_) => Decision::Reject,
                },
            };
            match decision {
                Decision::Accept => Routed::Accepted,
                Decision::Reject => {
                    Routed::Pending(self.write_pending_patch(&info.delegation_id, &result.patch)?)
                }
            }
        };
        self.discard_sandbox(info)?;
        Ok(Completion { result, routed })
    }

    /// What the recovery of dead sessions started by the constructor did, waiting for it to
    /// end if it still runs; `None` when it was not started ([`Options::no_prune_on_start`]).
    /// It is bounded (at most 16 sessions and 20 s); the sessions it left are listed as
    /// deferred and are recovered by the next start or `sessions prune`.
    pub fn startup_recovery(&self) -> Option<recover::PruneReport> {
        let mut slot = self.recovery.lock();
        let report = match slot.take()? {
            Recovery::Running(h) => h.join().unwrap_or_else(|_| recover::PruneReport {
                errors: vec!["the recovery thread panicked".into()],
                ..Default::default()
            }),
            Recovery::Done(r) => r,
        };
        *slot = Some(Recovery::Done(report.clone()));
        Some(report)
    }

    /// Whether tools started by [`SandboxManager::command`] are confined on this machine.
    pub fn confinement(&self) -> Confinement {
        if self.confine {
            confine::probe()
        } else {
            Confinement::Off
        }
    }

    /// A `Command` for `program` that runs in the sandbox (working directory, and
    /// `PATCHBOX_SANDBOX` / `PATCHBOX_PROJECT` in its environment) and inherits the session
    /// lock: should this process die, the session stays alive until the tool exits too, so
    /// recovery never snapshots a sandbox that is still being written.
    ///
    /// Unless [`Options::no_confine`] is set, the tool's process tree is confined with
    /// Landlock where the kernel has it ([`SandboxManager::confinement`] says): it may write
    /// only under the sandbox, its `TMPDIR` (a private directory of the session when the
    /// system's temporary directory holds the project) and [`Options::writable_dirs`]; a
    /// write anywhere else, the user's project above all, fails with a permission error.
    pub fn command(
        &self,
        info: &SandboxInfo,
        program: impl AsRef<std::ffi::OsStr>,
    ) -> std::process::Command {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let mut c = crate::session::scoped::command_in(info, &self.project, program);
        if self.confine {
            // A failure to make the private TMPDIR leaves the tool without one; it is still
            // confined (writes to it fail, nothing else does).
            let tmp = self
                .path_in_state_dir(Path::new(&format!(
                    "{}{}",
                    layout::TMP_PREFIX,
                    info.delegation_id
                )))
                .and_then(|p| state_dir::create_dir_all(&p).map(|()| p));
            if let Ok(tmp) = &tmp {
                c.env("TMPDIR", tmp.as_path());
            }
            let private = tmp.map(|t| t.as_path().to_path_buf()).unwrap_or_default();
            let writable = confine::writable_dirs(
                &info.path,
                &private,
                &[&self.project, &self.root],
                &self.writable_dirs,
            );
            if confine::probe() == Confinement::Enforced {
                confine::confine(&mut c, &writable);
            }
        }
        if let Some(fd) = self.lock.lock().as_ref().map(|f| f.as_raw_fd()) {
            // SAFETY: runs in the forked child before exec; fcntl is async-signal-safe and
            // touches only the child's copy of the descriptor table.
            unsafe {
                c.pre_exec(move || {
                    if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        c
    }
}

/// Hands memory freed by the snapshot (the selection of a large tree is transient) back to
/// the system, so the engine's resident size does not keep the high-water mark of a snapshot.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

pub(crate) fn result_from(
    d: &diff::TreeDiff,
    patch: Vec<u8>,
    base_dir: PathBuf,
    head_dir: PathBuf,
) -> SandboxResult {
    let mut r = SandboxResult {
        patch,
        base_dir,
        head_dir,
        ..SandboxResult::default()
    };
    for c in &d.changes {
        let p = c.rel.as_path().to_path_buf();
        r.files_touched.push(p.clone());
        match (c.old, c.new) {
            (None, Some(_)) => r.added.push(p),
            (Some(_), None) => r.deleted.push(p),
            _ => r.modified.push(p),
        }
    }
    r.ignored = d
        .ignored
        .iter()
        .map(|p| p.as_path().to_path_buf())
        .collect();
    r
}
