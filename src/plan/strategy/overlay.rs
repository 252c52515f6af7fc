//! `overlay`: the sandbox is an OverlayFS view whose lower layer is the stable base snapshot;
//! every write lands in the upper layer, so a diff costs what changed, not the tree's size.
//! Commits go through the atomic 3-way apply exactly as `copy_on_write`'s do.
//!
//! ```text
//! <plan dir>/<sandbox id>/
//!   state.json    the lifecycle record (metadata "overlay.mode": kernel | fuse | copy_on_write,
//!                 and "overlay.lower": the shared snapshot used, if one)
//!   base/         the stable snapshot, in sandboxes made before every sandbox's was shared
//!                 (now the snapshot in the store plays that part)
//!   upper/        the upper layer: what the sandbox changed (whiteouts for deletions)
//!   work/         OverlayFS's work directory
//!   tree/         the mount point: what get_path points into
//! ```
//!
//! When the manager holds a prepared snapshot of the original
//! ([`crate::plan::PlanManager::prepare_snapshot`]), the newest one is the lower layer and
//! the pre-images instead of `base/`: create then copies nothing (a few directories, a
//! mount), and is O(1) in the tree's size. Without one, the plan's own snapshot plays that
//! part: taken by the plan's first sandbox over the original, reused by its later ones (see
//! [`crate::plan::own_snapshot`]). In a git project either snapshot stacks the project's shared
//! lower layer, the one its sessions stack ([`crate::isolation::layered`]): a new plan's
//! first create then costs the walk of the project and copies of what differs from the
//! layer, not a copy of the project, and the mount stacks both. A commit's pre-images are
//! then the old sides of its diff, written beside the sandbox for the 3-way apply.
//!
//! The mode is chosen at create: the kernel's OverlayFS when the process may mount (root or
//! `CAP_SYS_ADMIN`), else `fuse-overlayfs` when it is installed and `/dev/fuse` opens, else
//! the sandbox is exactly a `copy_on_write` one (`tree/` is a copy, nothing is mounted). The
//! environment variable [`MODE_ENV`] (`kernel`, `fuse` or `copy`) forces a mode; a forced
//! mode that cannot be had is a creation error.
//!
//! The mount belongs to the sandbox object: dropping it unmounts (the upper layer keeps the
//! changes), opening it again — after a crash too — mounts afresh. Nothing outside the
//! sandbox's directory is ever mounted, unmounted or written.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;

use parking_lot::Mutex;

use super::copy_on_write::CopyOnWrite;
use super::tree_base::{self, TreeBase};
use super::{sandbox_path_of, Env};
use crate::fs::overlay::fingerprint::{self, Fingerprint};
use crate::fs::overlay::mount::{self, Backend, Layers};
use crate::fs::overlay::mountinfo::is_mounted;
use crate::fs::overlay::upper::{self, UpperScan};
use crate::fs::state_dir::{self, StateDir};
use crate::fs::RelPath;
use crate::id::PlanId;
use crate::isolation::snapshot;
use crate::plan::backend::Backend as PlanBackend;
use crate::plan::error::SandboxError;
use crate::plan::model::{CommitResult, DiffEntry, SandboxContext, SandboxDiff, Strategy};
use crate::plan::record::Lifecycle;
use crate::plan::record::{Record, State};
use crate::plan::status::Status;
use crate::plan::strategy::factory::FnFactory;
use crate::tree::diff::Change;
use crate::tree::overlay_diff;

const UPPER: &str = "upper";
const WORK: &str = "work";
const TREE: &str = "tree";
/// `fuse-overlayfs`'s standard error, kept for diagnosis.
const FUSE_LOG: &str = "fuse-overlayfs.log";

/// The environment variable that forces the mode at create: `kernel`, `fuse` or `copy`.
/// Unset (or empty) chooses the first mode available, in that order.
pub const MODE_ENV: &str = crate::isolation::backend::MODE_ENV;

/// The key of the mode in the context's metadata.
pub const MODE_KEY: &str = "overlay.mode";

/// How an overlay sandbox presents its files (the substrate's choice, one for both faces).
pub use crate::isolation::backend::Mode;

/// An `overlay` sandbox.
pub struct Overlay {
    /// The lifecycle, the base, the commit path, and all of copy mode.
    cow: CopyOnWrite,
    /// The mode, once created (or read back from the record).
    mode: Mutex<Option<Mode>>,
    /// The `fuse-overlayfs` process serving the mount this object made.
    fuse: Mutex<Option<Child>>,
    /// A shared `flock` on `<sandbox dir>/mount.users` while this object may use the view:
    /// the mount is seen by every process, so the last user alone unmounts it (see Drop).
    user: Mutex<Option<std::fs::File>>,
}

/// The file whose shared locks count the objects, in any process, using a sandbox's view.
const MOUNT_USERS: &str = "mount.users";

impl Overlay {
    /// A pending sandbox for `original`.
    pub fn new(env: Arc<Env>, plan_dir: &Path, resource_id: &str, original: &Path) -> Self {
        Overlay {
            cow: CopyOnWrite::new_as(Strategy::Overlay, env, plan_dir, resource_id, original),
            mode: Mutex::new(None),
            fuse: Mutex::new(None),
            user: Mutex::new(None),
        }
    }

    /// A sandbox found on disk: an interrupted commit is settled, and the overlay is mounted
    /// afresh (a mount left by a crashed process is detached first).
    pub fn open(env: Arc<Env>, record: Record, dir: PathBuf) -> Result<Self, SandboxError> {
        let mode = record
            .metadata
            .get(MODE_KEY)
            .and_then(|m| Mode::from_name(m))
            .ok_or_else(|| {
                SandboxError::sandbox(
                    Some(record.sandbox_id.as_str()),
                    format!("{}: no valid {MODE_KEY} in its state", dir.display()),
                )
            })?;
        let sb = Overlay {
            cow: CopyOnWrite::open(env, record, dir)?,
            mode: Mutex::new(Some(mode)),
            fuse: Mutex::new(None),
            user: Mutex::new(None),
        };
        if mode != Mode::Copy {
            let st = sb.cow.lc.lock();
            if matches!(
                st.status,
                Status::Created | Status::Active | Status::Committed | Status::RolledBack
            ) {
                // Another process may be using the view: a live mount is kept as it is. A
                // failure here is reported again by the first operation that needs the view.
                sb.register_user();
                let _ = sb.ensure_mounted(mode);
            }
        }
        Ok(sb)
    }

    /// The mode, once created.
    pub fn mode(&self) -> Option<Mode> {
        *self.mode.lock()
    }

    fn mounted_mode(&self) -> Option<Mode> {
        self.mode().filter(|m| *m != Mode::Copy)
    }

    fn at(&self, name: &str) -> PathBuf {
        self.cow.lc.dir().join(name)
    }

    fn err(&self, what: &str, e: crate::Error) -> SandboxError {
        self.cow.lower(what, e)
    }

    /// The mount point as the mount table names it (the sandbox directory resolved).
    fn mount_point(&self) -> Result<PathBuf, crate::Error> {
        let dir = std::fs::canonicalize(self.cow.lc.dir())
            .map_err(|e| crate::Error::io("resolve sandbox directory", self.cow.lc.dir(), e))?;
        Ok(dir.join(TREE))
    }

    // ---- mounting -------------------------------------------------------------------------

    /// Mounts the overlay at `tree/`, refusing unless `tree/` is an empty directory of this
    /// sandbox that nothing is mounted on.
    fn mount(&self, mode: Mode) -> Result<(), crate::Error> {
        self.register_user();
        let mnt = self.mount_point()?;
        let dir = mnt.parent().unwrap_or(Path::new("/")).to_path_buf();
        let layers = Layers {
            lower: self.cow.lower_layers(),
            upper: dir.join(UPPER),
            work: dir.join(WORK),
            rename_dirs: false,
        };
        let backend = match mode {
            Mode::Kernel => Backend::Kernel,
            Mode::Fuse => Backend::Fuse,
            Mode::Copy => return Ok(()),
        };
        let m = mount::mount(backend, &layers, &mnt, &dir.join(FUSE_LOG))?;
        *self.fuse.lock() = m.server;
        Ok(())
    }

    /// Unmounts whatever is mounted on `tree/` (lazily when busy); fails when a mount
    /// remains. Only ever `tree/` of this sandbox.
    fn unmount(&self, mode: Mode) -> Result<(), crate::Error> {
        let mnt = self.mount_point()?;
        let server = self.fuse.lock().take();
        mount::unmount(&mnt, mode == Mode::Fuse, server)
    }

    /// Counts this object among the view's users (a shared lock, released when it drops).
    fn register_user(&self) {
        let mut user = self.user.lock();
        if user.is_some() {
            return;
        }
        if let Ok(f) = crate::plan::lock::open_lock_file(&self.at(MOUNT_USERS)) {
            if rustix::fs::flock(&f, rustix::fs::FlockOperation::LockShared).is_ok() {
                *user = Some(f);
            }
        }
    }

    /// Whether this object is the view's last user (no other object, in any process, holds
    /// a shared lock on it). Gives up this object's own lock.
    fn last_user(&self) -> bool {
        let Some(f) = self.user.lock().take() else {
            // Never counted (a pending or copy-mode sandbox): only its own mount is known.
            return true;
        };
        crate::plan::lock::flock_exclusive_patiently(&f)
    }

    /// Mounts again when the view is gone (unmounted, or its FUSE server died).
    fn ensure_mounted(&self, mode: Mode) -> Result<(), SandboxError> {
        self.register_user();
        let run = || -> Result<(), crate::Error> {
            let mnt = self.mount_point()?;
            if is_mounted(&mnt)? {
                if std::fs::symlink_metadata(&mnt).is_ok() {
                    return Ok(());
                }
                self.unmount(mode)?;
            }
            self.mount(mode)
        };
        run().map_err(|e| self.err("mount the overlay", e))
    }

    // ---- create ---------------------------------------------------------------------------

    fn make(&self, plan_id: &PlanId, forced: Option<Mode>) -> Result<Record, crate::Error> {
        // The newest snapshot prepared for every plan, else the plan's own one (reused, or
        // taken now: see `own_snapshot`).
        let env = &self.cow.env;
        let canon = std::fs::canonicalize(&self.cow.original)
            .map_err(|e| crate::Error::io("resolve", &self.cow.original, e))?;
        let (shared, base) = match snapshot::newest_for(&env.lowers, &canon) {
            Some(info) => {
                // Recorded before the record names it, under the store's shared lock: no
                // prune removes it from here on.
                snapshot::hold_for(&env.lowers, &info.id, self.cow.lc.dir())?;
                (info, None)
            }
            None => {
                let (info, base) = self.cow.take_own_snapshot(plan_id, &canon)?;
                (info, base)
            }
        };
        self.cow.use_shared(&shared.id);
        let dir = self.cow.make_dir()?;
        for name in [UPPER, WORK, TREE] {
            state_dir::create_dir_new(&dir.join(Path::new(name))?)?;
        }
        let (mode, refusals) = match crate::isolation::backend::choose(forced, |b| {
            self.mount(if b == Backend::Kernel {
                Mode::Kernel
            } else {
                Mode::Fuse
            })
        }) {
            Ok((m, r)) => (m, r),
            Err(r) => {
                let all: Vec<String> = r
                    .iter()
                    .map(|(m, e)| format!("{}: {e}", m.name()))
                    .collect();
                return Err(crate::Error::io(
                    "mount the overlay",
                    self.at(TREE),
                    std::io::Error::other(all.join("; ")),
                ));
            }
        };
        let refusals: Vec<String> = refusals
            .iter()
            .map(|(m, e)| format!("{}: {e}", m.name()))
            .collect();
        if mode == Mode::Copy {
            for name in [UPPER, WORK, TREE] {
                state_dir::remove_tree(&dir.join(Path::new(name))?)?;
            }
            let base = match base {
                Some(b) => b,
                None => self.cow.env.lower_base(&shared.id)?,
            };
            self.cow.make_copy(&dir, &base)?;
        }
        *self.mode.lock() = Some(mode);
        let mut metadata = std::collections::BTreeMap::new();
        metadata.insert(MODE_KEY.to_string(), mode.name().to_string());
        metadata.insert(snapshot::LOWER_KEY.to_string(), shared.id.clone());
        if !refusals.is_empty() {
            metadata.insert("overlay.refused".into(), refusals.join("; "));
        }
        Ok(self.cow.new_record(plan_id, &self.at(TREE), metadata))
    }

    // ---- diff -----------------------------------------------------------------------------

    /// The changes of the view against the base, found by walking the upper layer only;
    /// with `fingerprinted`, also the upper layer's fingerprint from the same walk, taken
    /// before any content is read (see [`upper::scan_fingerprinted`]). Returns too the
    /// directory to read the changes' new sides from.
    ///
    /// That is the upper layer itself when the scan found the changes: every path with a
    /// new side is then an entry of the upper layer, and a single upper layer mounted with
    /// `metacopy=off` (or `fuse-overlayfs`, which copies up whole files) holds what the
    /// view shows there, type, size and bytes; reading it there spares an overlay lookup
    /// per path. A renamed lower directory (never with this module's mount options) falls
    /// back to listing and reading the view.
    fn changes(
        &self,
        mode: Mode,
        fingerprinted: bool,
    ) -> Result<(Vec<Change>, Option<Fingerprint>, PathBuf), SandboxError> {
        let base = self.cow.base()?;
        let tree = self.at(TREE);
        let upper_dir = self.at(UPPER);
        let fuse = mode == Mode::Fuse;
        let (scan, print) = if fingerprinted {
            upper::scan_fingerprinted(&upper_dir, fuse)
        } else {
            upper::scan(&upper_dir, fuse).map(|s| (s, None))
        }
        .map_err(|e| self.err("read the upper layer", e))?;
        let rules = tree_base::ignore_rules(&tree, &self.cow.original)
            .map_err(|e| self.err("ignore rules", e))?;
        let ignored = |rel: &RelPath| rules.is_ignored(rel, false);
        if scan.redirected {
            let head = crate::tree::snapshot::list_tree(&tree)
                .map_err(|e| self.err("list the sandbox", e))?;
            return tree_base::changes(&base, &tree, &head, None, &ignored)
                .map(|c| (c, print, tree))
                .map_err(|e| self.err("diff the sandbox", e));
        }
        changes_of_scan(&base, &upper_dir, &scan, &ignored)
            .map(|c| (c, print, upper_dir))
            .map_err(|e| self.err("diff the sandbox", e))
    }

    /// Whether nothing was written in the view since the upper layer's fingerprint `then`
    /// was taken (`commit_all`'s commit then reuses the diff of its check).
    fn unchanged(&self, then: &Fingerprint) -> Result<bool, SandboxError> {
        fingerprint::unchanged(&self.at(UPPER), then)
            .map_err(|e| self.err("read the upper layer", e))
    }

    fn diff_now(&self, mode: Mode) -> Result<SandboxDiff, SandboxError> {
        self.diff_with(mode, true)
    }

    /// The diff with its patch, and the fingerprint of the upper layer it was read from.
    fn diff_fingerprinted(
        &self,
        mode: Mode,
    ) -> Result<(SandboxDiff, Option<Fingerprint>), SandboxError> {
        self.diff_from(mode, true, true)
    }

    fn diff_with(&self, mode: Mode, with_patch: bool) -> Result<SandboxDiff, SandboxError> {
        self.diff_from(mode, with_patch, false).map(|(d, _)| d)
    }

    fn diff_from(
        &self,
        mode: Mode,
        with_patch: bool,
        fingerprinted: bool,
    ) -> Result<(SandboxDiff, Option<Fingerprint>), SandboxError> {
        self.ensure_mounted(mode)?;
        let (changes, print, read_from) = self.changes(mode, fingerprinted)?;
        let d = tree_base::render(&*self.cow.base()?, &read_from, &changes, with_patch)
            .map_err(|e| self.err("render the diff", e))?;
        Ok((d, print))
    }

    /// Rollback of an active sandbox: unmount, empty the upper and work layers, mount again.
    fn discard(&self, mode: Mode, _st: &mut State) -> Result<(), SandboxError> {
        let run = || -> Result<(), crate::Error> {
            self.unmount(mode)?;
            let dir = StateDir::open(self.cow.lc.dir())?;
            for name in [UPPER, WORK] {
                let p = dir.join(Path::new(name))?;
                state_dir::remove_tree(&p)?;
                state_dir::create_dir_new(&p)?;
            }
            self.mount(mode)
        };
        run().map_err(|e| self.err("reset the overlay", e))
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        // Another object (here or in another process) still using the view keeps it.
        if let Some(mode) = self.mounted_mode().filter(|_| self.last_user()) {
            let _ = self.unmount(mode);
        }
    }
}

impl PlanBackend for Overlay {
    fn lifecycle(&self) -> &Lifecycle {
        &self.cow.lc
    }

    fn create(&self, plan_id: &PlanId) -> Result<SandboxContext, SandboxError> {
        let forced = Mode::forced().map_err(|bad| SandboxError::Creation {
            resource_id: self.cow.resource_id.clone(),
            reason: bad.to_string(),
            source: None,
        })?;
        self.cow.create_with(
            || self.make(plan_id, forced),
            || {
                if let Some(mode) = self.mounted_mode() {
                    let _ = self.unmount(mode);
                }
                // What a failed mount attempt may have left.
                let _ = self.unmount(Mode::Kernel);
                *self.mode.lock() = None;
                self.cow.release_own_snapshot();
            },
        )
    }

    fn get_path(&self, rel: &Path) -> Result<PathBuf, SandboxError> {
        let Some(mode) = self.mounted_mode() else {
            return self.cow.get_path(rel);
        };
        let mut st = self.cow.lc.lock_for_path()?;
        super::activate_for_path(&self.cow.lc, &mut st)?;
        self.ensure_mounted(mode)?;
        sandbox_path_of(&self.cow.lc, &st, rel)
    }

    fn diff(&self) -> Result<SandboxDiff, SandboxError> {
        let Some(mode) = self.mounted_mode() else {
            return self.cow.diff();
        };
        let st = self.cow.lc.lock();
        super::require_created(&self.cow.lc, &st)?;
        self.diff_now(mode)
    }

    fn changes(&self) -> Result<Vec<DiffEntry>, SandboxError> {
        let Some(mode) = self.mounted_mode() else {
            return PlanBackend::changes(&self.cow);
        };
        let st = self.cow.lc.lock();
        super::require_created(&self.cow.lc, &st)?;
        Ok(self.diff_with(mode, false)?.entries)
    }

    fn check_commit(&self) -> Result<(), SandboxError> {
        match self.mounted_mode() {
            None => self.cow.check_commit(),
            Some(mode) => self.cow.check_commit_with(|| self.diff_fingerprinted(mode)),
        }
    }

    fn commit(&self, message: Option<&str>) -> Result<CommitResult, SandboxError> {
        match self.mounted_mode() {
            None => self.cow.commit(message),
            Some(mode) => {
                self.cow
                    .commit_with(|| self.diff_now(mode), |then| self.unchanged(then), None)
            }
        }
    }

    fn commit_batched(
        &self,
        message: Option<&str>,
        batch: &mut crate::plan::batch::CommitBatch,
    ) -> Result<CommitResult, SandboxError> {
        match self.mounted_mode() {
            None => self.cow.commit_batched(message, batch),
            Some(mode) => self.cow.commit_with(
                || self.diff_now(mode),
                |then| self.unchanged(then),
                Some(batch),
            ),
        }
    }

    fn settle_in_flight(&self) -> Result<(), SandboxError> {
        self.cow.settle_in_flight()
    }

    fn rollback(&self) -> Result<(), SandboxError> {
        match self.mounted_mode() {
            None => self.cow.rollback(),
            Some(mode) => self.cow.rollback_with(|st| self.discard(mode, st)),
        }
    }

    fn cleanup(&self) -> Result<(), SandboxError> {
        let done = match self.mounted_mode() {
            None => self.cow.cleanup(),
            Some(mode) => {
                let mut st = self.cow.op()?;
                super::cleanup_dir(&self.cow.lc, &mut st, || {
                    self.unmount(mode)
                        .map_err(|e| self.err("unmount the overlay", e))
                })
            }
        };
        if done.is_ok() {
            self.cow.release_own_snapshot();
        }
        done
    }
}

// ---- the upper layer ----------------------------------------------------------------------

/// Turns a scan into changes: every path the upper layer touched, compared with the base;
/// the view (`tree`) gives the new side.
fn changes_of_scan(
    base: &TreeBase,
    tree: &Path,
    scan: &UpperScan,
    is_ignored: &dyn Fn(&RelPath) -> bool,
) -> Result<Vec<Change>, crate::Error> {
    Ok(overlay_diff::diff_scan(&base.nodes, base, tree, scan, is_ignored)?.changes)
}

/// How the registry makes and reopens `overlay` backends (see [`builtins`](crate::plan::strategy::builtins)).
pub const FACTORY: FnFactory = FnFactory {
    new: |r| {
        Ok(Box::new(Overlay::new(
            r.env.clone(),
            r.plan_dir,
            r.resource_id,
            r.original,
        )))
    },
    open: |env, rec, dir| Ok(Box::new(Overlay::open(env.clone(), rec, dir)?)),
};
