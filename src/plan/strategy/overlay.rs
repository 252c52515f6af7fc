//! `overlay`: the sandbox is an OverlayFS view whose lower layer is the stable base snapshot;
//! every write lands in the upper layer, so a diff costs what changed, not the tree's size.
//! Commits go through the atomic 3-way apply exactly as `copy_on_write`'s do.
//!
//! ```text
//! <plan dir>/<sandbox id>/
//!   state.json    the lifecycle record (metadata "overlay.mode": kernel | fuse | copy_on_write,
//!                 and "overlay.lower": the shared snapshot used, if one)
//!   base/         the stable snapshot taken at create: lower layer, pre-images, rollback source
//!                 (absent when a shared snapshot plays that part)
//!   upper/        the upper layer: what the sandbox changed (whiteouts for deletions)
//!   work/         OverlayFS's work directory
//!   tree/         the mount point: what get_path points into
//! ```
//!
//! When the manager holds a prepared snapshot of the original
//! ([`crate::plan::PlanManager::prepare_snapshot`]), the newest one is the lower layer and
//! the pre-images instead of `base/`: create then copies nothing (a few directories, a
//! mount), and is O(1) in the tree's size. Without one, create takes a private snapshot.
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

use std::collections::BTreeSet;
use std::ffi::{CString, OsStr};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::copy_on_write::CopyOnWrite;
use super::tree_base::{self, TreeBase};
use super::{sandbox_path_of, Env};
use crate::fs::session_dir::{self, SessionDir};
use crate::fs::RelPath;
use crate::plan::error::SandboxError;
use crate::plan::lower;
use crate::plan::model::{CommitResult, DiffEntry, SandboxContext, SandboxDiff, Strategy};
use crate::plan::record::{Record, State};
use crate::plan::sandbox::Sandbox;
use crate::plan::status::Status;
use crate::tree::diff::{BaseSource, Change};
use crate::tree::snapshot::NodeKind;

const UPPER: &str = "upper";
const WORK: &str = "work";
const TREE: &str = "tree";
/// `fuse-overlayfs`'s standard error, kept for diagnosis.
const FUSE_LOG: &str = "fuse-overlayfs.log";

/// The environment variable that forces the mode at create: `kernel`, `fuse` or `copy`.
/// Unset (or empty) chooses the first mode available, in that order.
pub const MODE_ENV: &str = "PATCHBOX_OVERLAY_MODE";

/// The key of the mode in the context's metadata.
pub const MODE_KEY: &str = "overlay.mode";

/// How an overlay sandbox presents its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The kernel's OverlayFS (`mount -t overlay`).
    Kernel,
    /// `fuse-overlayfs` in user space.
    Fuse,
    /// No mount: a copy, exactly as `copy_on_write`.
    Copy,
}

impl Mode {
    /// The name in the metadata: `kernel`, `fuse`, `copy_on_write`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Kernel => "kernel",
            Mode::Fuse => "fuse",
            Mode::Copy => "copy_on_write",
        }
    }

    /// The mode named `name` (its metadata name, or `copy` for [`Mode::Copy`]).
    pub fn from_name(name: &str) -> Option<Mode> {
        match name {
            "kernel" => Some(Mode::Kernel),
            "fuse" => Some(Mode::Fuse),
            "copy" | "copy_on_write" => Some(Mode::Copy),
            _ => None,
        }
    }

    /// The mode [`MODE_ENV`] forces, if any; an unknown value is an error.
    pub fn forced() -> Result<Option<Mode>, String> {
        match std::env::var(MODE_ENV) {
            Ok(v) if v.is_empty() => Ok(None),
            Ok(v) => Mode::from_name(&v)
                .map(Some)
                .ok_or_else(|| format!("{MODE_ENV}={v:?}: expected kernel, fuse or copy")),
            Err(_) => Ok(None),
        }
    }
}

/// An `overlay` sandbox.
pub struct Overlay {
    /// The lifecycle, the base, the commit path, and all of copy mode.
    cow: CopyOnWrite,
    /// The mode, once created (or read back from the record).
    mode: Mutex<Option<Mode>>,
    /// The `fuse-overlayfs` process serving the mount this object made.
    fuse: Mutex<Option<Child>>,
}

impl Overlay {
    /// A pending sandbox for `original`.
    pub fn new(env: Arc<Env>, plan_dir: &Path, resource_id: &str, original: &Path) -> Self {
        Overlay {
            cow: CopyOnWrite::new_as(Strategy::Overlay, env, plan_dir, resource_id, original),
            mode: Mutex::new(None),
            fuse: Mutex::new(None),
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
                    Some(&record.sandbox_id),
                    format!("{}: no valid {MODE_KEY} in its state", dir.display()),
                )
            })?;
        let sb = Overlay {
            cow: CopyOnWrite::open(env, record, dir)?,
            mode: Mutex::new(Some(mode)),
            fuse: Mutex::new(None),
        };
        if mode != Mode::Copy {
            let st = sb.cow.lc.lock();
            if matches!(
                st.status,
                Status::Created | Status::Active | Status::Committed | Status::RolledBack
            ) {
                // A failure here is reported again by the first operation that needs the view.
                let _ = sb.unmount(mode).and_then(|()| sb.mount(mode));
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

    fn id(&self) -> &str {
        self.cow.lc.id()
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
        let mnt = self.mount_point()?;
        check_mount_point(&mnt)?;
        let dir = mnt.parent().unwrap_or(Path::new("/")).to_path_buf();
        let (lower, upper, work) = (self.cow.base_dir(), dir.join(UPPER), dir.join(WORK));
        match mode {
            Mode::Kernel => mount_kernel(&lower, &upper, &work, &mnt),
            Mode::Fuse => {
                let child = mount_fuse(&lower, &upper, &work, &mnt, &dir.join(FUSE_LOG))?;
                *self.fuse.lock() = Some(child);
                Ok(())
            }
            Mode::Copy => Ok(()),
        }
    }

    /// Unmounts whatever is mounted on `tree/` (lazily when busy); fails when a mount
    /// remains. Only ever `tree/` of this sandbox.
    fn unmount(&self, mode: Mode) -> Result<(), crate::Error> {
        let mnt = self.mount_point()?;
        let mut tries = 0;
        let mut detached = false;
        while is_mounted(&mnt)? {
            tries += 1;
            if tries > 8 {
                return Err(crate::Error::io(
                    "unmount",
                    &mnt,
                    std::io::Error::other("a mount remains after unmounting"),
                ));
            }
            if mode == Mode::Fuse && !is_root() {
                let _ = fusermount(&mnt, false);
                if is_mounted(&mnt)? {
                    detached = fusermount(&mnt, true).is_ok();
                }
                continue;
            }
            match umount2(&mnt, libc::UMOUNT_NOFOLLOW) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    umount2(&mnt, libc::UMOUNT_NOFOLLOW | libc::MNT_DETACH)
                        .map_err(|e| crate::Error::io("detach mount", &mnt, e))?;
                    detached = true;
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => {
                    if mode == Mode::Fuse && fusermount(&mnt, false).is_ok() {
                        continue;
                    }
                    return Err(crate::Error::io("unmount", &mnt, e));
                }
            }
        }
        if let Some(mut child) = self.fuse.lock().take() {
            if detached {
                // It serves the detached mount until the last open file there is closed.
                std::thread::spawn(move || child.wait());
            } else {
                wait_or_kill(&mut child, Duration::from_secs(5));
            }
        }
        Ok(())
    }

    /// Mounts again when the view is gone (unmounted, or its FUSE server died).
    fn ensure_mounted(&self, mode: Mode) -> Result<(), SandboxError> {
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

    fn make(&self, plan_id: &str, forced: Option<Mode>) -> Result<Record, crate::Error> {
        // The newest prepared snapshot of the original, else a private one.
        let shared = std::fs::canonicalize(&self.cow.original)
            .ok()
            .and_then(|o| lower::newest_for(&self.cow.env.lowers, &o));
        let (dir, base) = match &shared {
            Some(info) => {
                self.cow.use_shared(&info.id);
                (self.cow.make_dir()?, None)
            }
            None => {
                let (dir, base) = self.cow.make_base()?;
                (dir, Some(base))
            }
        };
        for name in [UPPER, WORK, TREE] {
            session_dir::create_dir_new(&dir.join(Path::new(name))?)?;
        }
        let candidates = match forced {
            Some(m) => vec![m],
            None => vec![Mode::Kernel, Mode::Fuse, Mode::Copy],
        };
        let mut refusals = Vec::new();
        let mut chosen = None;
        for m in candidates {
            let tried = match m {
                Mode::Kernel => self.mount(Mode::Kernel),
                Mode::Fuse => fuse_available().and_then(|()| self.mount(Mode::Fuse)),
                Mode::Copy => Ok(()),
            };
            match tried {
                Ok(()) => {
                    chosen = Some(m);
                    break;
                }
                Err(e) => refusals.push(format!("{}: {e}", m.name())),
            }
        }
        let Some(mode) = chosen else {
            return Err(crate::Error::io(
                "mount the overlay",
                self.at(TREE),
                std::io::Error::other(refusals.join("; ")),
            ));
        };
        if mode == Mode::Copy {
            for name in [UPPER, WORK, TREE] {
                session_dir::remove_tree(&dir.join(Path::new(name))?)?;
            }
            let base = match base {
                Some(b) => b,
                None => {
                    let id = self.cow.shared_lower().unwrap_or_default();
                    self.cow.env.lower_base(&id)?
                }
            };
            self.cow.make_copy(&dir, &base)?;
        }
        *self.mode.lock() = Some(mode);
        let mut metadata = std::collections::BTreeMap::new();
        metadata.insert(MODE_KEY.to_string(), mode.name().to_string());
        if let Some(info) = &shared {
            metadata.insert(lower::LOWER_KEY.to_string(), info.id.clone());
        }
        if !refusals.is_empty() {
            metadata.insert("overlay.refused".into(), refusals.join("; "));
        }
        Ok(self.cow.new_record(plan_id, &self.at(TREE), metadata))
    }

    // ---- diff -----------------------------------------------------------------------------

    /// The changes of the view against the base, found by walking the upper layer only.
    fn changes(&self, mode: Mode) -> Result<Vec<Change>, SandboxError> {
        let base = self.cow.base()?;
        let tree = self.at(TREE);
        let scan = scan_upper(&self.at(UPPER), mode == Mode::Fuse)
            .map_err(|e| self.err("read the upper layer", e))?;
        let rules = tree_base::ignore_rules(&tree, &self.cow.original)
            .map_err(|e| self.err("ignore rules", e))?;
        let ignored = |rel: &RelPath| rules.is_ignored(rel, false);
        if scan.redirected {
            // A renamed lower directory (never with the options this module mounts with):
            // the upper layer alone does not tell, so list the whole view.
            let head = crate::tree::snapshot::list_tree(&tree)
                .map_err(|e| self.err("list the sandbox", e))?;
            return tree_base::changes(&base, &tree, &head, None, &ignored)
                .map_err(|e| self.err("diff the sandbox", e));
        }
        changes_of_scan(&base, &tree, &scan, &ignored).map_err(|e| self.err("diff the sandbox", e))
    }

    fn diff_now(&self, mode: Mode) -> Result<SandboxDiff, SandboxError> {
        self.diff_with(mode, true)
    }

    fn diff_with(&self, mode: Mode, with_patch: bool) -> Result<SandboxDiff, SandboxError> {
        self.ensure_mounted(mode)?;
        let changes = self.changes(mode)?;
        self.cow
            .rendered
            .render(&*self.cow.base()?, &self.at(TREE), &changes, with_patch)
            .map_err(|e| self.err("render the diff", e))
    }

    /// Rollback of an active sandbox: unmount, empty the upper and work layers, mount again.
    fn discard(&self, mode: Mode, _st: &mut State) -> Result<(), SandboxError> {
        let run = || -> Result<(), crate::Error> {
            self.unmount(mode)?;
            let dir = SessionDir::open(self.cow.lc.dir())?;
            for name in [UPPER, WORK] {
                let p = dir.join(Path::new(name))?;
                session_dir::remove_tree(&p)?;
                session_dir::create_dir_new(&p)?;
            }
            self.mount(mode)
        };
        run().map_err(|e| self.err("reset the overlay", e))
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        if let Some(mode) = self.mounted_mode() {
            let _ = self.unmount(mode);
        }
    }
}

impl Sandbox for Overlay {
    fn sandbox_id(&self) -> &str {
        self.id()
    }

    fn strategy(&self) -> Strategy {
        Strategy::Overlay
    }

    fn status(&self) -> Status {
        self.cow.lc.status()
    }

    fn context(&self) -> Option<SandboxContext> {
        self.cow.lc.context()
    }

    fn create(&self, plan_id: &str) -> Result<SandboxContext, SandboxError> {
        let forced = Mode::forced().map_err(|reason| SandboxError::Creation {
            resource_id: self.cow.resource_id.clone(),
            reason,
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
            },
        )
    }

    fn get_path(&self, rel: &Path) -> Result<PathBuf, SandboxError> {
        let Some(mode) = self.mounted_mode() else {
            return self.cow.get_path(rel);
        };
        let mut st = self.cow.lc.lock();
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
            return Sandbox::changes(&self.cow);
        };
        let st = self.cow.lc.lock();
        super::require_created(&self.cow.lc, &st)?;
        Ok(self.diff_with(mode, false)?.entries)
    }

    fn check_commit(&self) -> Result<(), SandboxError> {
        match self.mounted_mode() {
            None => self.cow.check_commit(),
            Some(mode) => self.cow.check_commit_with(|| self.diff_now(mode)),
        }
    }

    fn commit(&self, message: Option<&str>) -> Result<CommitResult, SandboxError> {
        match self.mounted_mode() {
            None => self.cow.commit(message),
            Some(mode) => self.cow.commit_with(|| self.diff_now(mode)),
        }
    }

    fn rollback(&self) -> Result<(), SandboxError> {
        match self.mounted_mode() {
            None => self.cow.rollback(),
            Some(mode) => self.cow.rollback_with(|st| self.discard(mode, st)),
        }
    }

    fn cleanup(&self) -> Result<(), SandboxError> {
        let Some(mode) = self.mounted_mode() else {
            return self.cow.cleanup();
        };
        let mut st = self.cow.lc.lock();
        super::cleanup_dir(&self.cow.lc, &mut st, || {
            self.unmount(mode)
                .map_err(|e| self.err("unmount the overlay", e))
        })
    }
}

// ---- the upper layer ----------------------------------------------------------------------

/// What the upper layer says changed.
#[derive(Default, Debug)]
struct UpperScan {
    /// Files, symlinks and other non-directories written in the view.
    present: BTreeSet<Vec<u8>>,
    /// Paths whose base node (if any) is hidden: whiteouts, and directories that replaced a
    /// base file.
    hidden: BTreeSet<Vec<u8>>,
    /// Directories whose base nodes below are hidden (opaque directories, whiteouts, files
    /// that replaced a base directory); the empty path is the root.
    hidden_below: BTreeSet<Vec<u8>>,
    /// A directory with a redirect (a renamed lower directory) was found.
    redirected: bool,
}

fn join_rel(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut rel = Vec::with_capacity(dir.len() + 1 + name.len());
    if !dir.is_empty() {
        rel.extend_from_slice(dir);
        rel.push(b'/');
    }
    rel.extend_from_slice(name);
    rel
}

/// Walks `upper`. `fuse`: `fuse-overlayfs`'s `.wh.<name>` whiteouts and `.wh..wh..opq`
/// opaque markers count too (it uses them when it cannot make device nodes or set trusted
/// xattrs).
fn scan_upper(upper: &Path, fuse: bool) -> Result<UpperScan, crate::Error> {
    let mut scan = UpperScan::default();
    if is_opaque(upper) {
        scan.hidden_below.insert(Vec::new());
    }
    let mut stack: Vec<Vec<u8>> = vec![Vec::new()];
    while let Some(rel_dir) = stack.pop() {
        let abs = upper.join(OsStr::from_bytes(&rel_dir));
        let rd =
            std::fs::read_dir(&abs).map_err(|e| crate::Error::io("read directory", &abs, e))?;
        for entry in rd {
            let entry = entry.map_err(|e| crate::Error::io("read directory", &abs, e))?;
            let name = entry.file_name();
            let name = name.as_bytes();
            if fuse && name.starts_with(b".wh.") {
                if name == b".wh..wh..opq" {
                    scan.hidden_below.insert(rel_dir.clone());
                } else if name.len() > 4 {
                    let rel = join_rel(&rel_dir, &name[4..]);
                    scan.hidden.insert(rel.clone());
                    scan.hidden_below.insert(rel);
                }
                continue;
            }
            let rel = join_rel(&rel_dir, name);
            let m = entry
                .metadata()
                .map_err(|e| crate::Error::io("stat", entry.path(), e))?;
            let ft = m.file_type();
            if ft.is_dir() {
                if name == b".git" {
                    continue;
                }
                let p = entry.path();
                scan.hidden.insert(rel.clone());
                if is_opaque(&p) {
                    scan.hidden_below.insert(rel.clone());
                }
                if xattr(&p, "trusted.overlay.redirect").is_some() {
                    scan.redirected = true;
                }
                stack.push(rel);
            } else if ft.is_char_device() && m.rdev() == 0 {
                scan.hidden.insert(rel.clone());
                scan.hidden_below.insert(rel);
            } else {
                scan.hidden_below.insert(rel.clone());
                scan.present.insert(rel);
            }
        }
    }
    Ok(scan)
}

fn is_opaque(dir: &Path) -> bool {
    [
        "trusted.overlay.opaque",
        "user.overlay.opaque",
        "user.fuseoverlayfs.opaque",
    ]
    .iter()
    .any(|n| xattr(dir, n).is_some_and(|v| v.first() == Some(&b'y')))
}

/// An extended attribute of `path` itself (never followed), `None` when absent.
fn xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let p = CString::new(path.as_os_str().as_bytes()).ok()?;
    let n = CString::new(name).ok()?;
    let mut buf = vec![0u8; 256];
    // SAFETY: both strings are NUL-terminated; the buffer is valid for its length.
    let r = unsafe { libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        return None;
    }
    buf.truncate(r as usize);
    Some(buf)
}

/// Index of `rel` in the base's nodes (sorted by path bytes).
fn base_index(base: &TreeBase, rel: &[u8]) -> Option<usize> {
    base.nodes
        .binary_search_by(|n| n.rel.as_bytes().cmp(rel))
        .ok()
}

/// Turns a scan into changes: every path the upper layer touched, compared with the base;
/// the view (`tree`) gives the new side.
fn changes_of_scan(
    base: &TreeBase,
    tree: &Path,
    scan: &UpperScan,
    is_ignored: &dyn Fn(&RelPath) -> bool,
) -> Result<Vec<Change>, crate::Error> {
    let mut suspects: BTreeSet<&[u8]> = scan.present.iter().map(Vec::as_slice).collect();
    for rel in &scan.hidden {
        if base_index(base, rel).is_some() {
            suspects.insert(rel);
        }
    }
    for dir in &scan.hidden_below {
        let start = if dir.is_empty() {
            0
        } else {
            let mut prefix = dir.clone();
            prefix.push(b'/');
            base.nodes
                .partition_point(|n| n.rel.as_bytes() < prefix.as_slice())
        };
        for n in &base.nodes[start..] {
            let b = n.rel.as_bytes();
            let below = b.starts_with(dir) && b.get(dir.len()) == Some(&b'/');
            if !dir.is_empty() && !below {
                break;
            }
            suspects.insert(b);
        }
    }
    let mut out = Vec::new();
    for rel in suspects {
        let rel_path = RelPath::from_bytes(rel)?;
        let bi = base_index(base, rel);
        let new = if scan.present.contains(rel) {
            let p = tree.join(OsStr::from_bytes(rel));
            match std::fs::symlink_metadata(&p) {
                Ok(m) => NodeKind::from_metadata(&m).map(|k| (k, m.len())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(crate::Error::io("stat", &p, e)),
            }
        } else {
            None
        };
        let old = bi.map(|i| base.nodes[i].kind);
        match (bi, new) {
            (None, None) => continue,
            (None, Some(_)) if is_ignored(&rel_path) => continue,
            (Some(i), Some((kind, len))) if old == Some(kind) => {
                let p = tree.join(OsStr::from_bytes(rel));
                let same_size = kind == NodeKind::Symlink || base.size(i).is_none_or(|s| s == len);
                if same_size && base.read(i)? == crate::tree::diff::read_node(&p, kind)? {
                    continue;
                }
            }
            _ => {}
        }
        out.push(Change {
            rel: rel_path,
            base_index: bi,
            old,
            new: new.map(|(k, _)| k),
        });
    }
    Ok(out)
}

// ---- mount helpers ------------------------------------------------------------------------

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Refuses a mount point that is not an empty, unmounted, real directory.
fn check_mount_point(mnt: &Path) -> Result<(), crate::Error> {
    let refuse = |why: &str| {
        Err(crate::Error::io(
            "mount the overlay",
            mnt,
            std::io::Error::other(format!("refused mount point: {why}")),
        ))
    };
    let m = std::fs::symlink_metadata(mnt).map_err(|e| crate::Error::io("stat", mnt, e))?;
    if !m.file_type().is_dir() {
        return refuse("not a directory");
    }
    if is_mounted(mnt)? {
        return refuse("something is mounted on it");
    }
    let mut rd = std::fs::read_dir(mnt).map_err(|e| crate::Error::io("read directory", mnt, e))?;
    if rd.next().is_some() {
        return refuse("not empty");
    }
    Ok(())
}

/// Escapes a path for OverlayFS's option string (`\`, `,` and `:` are separators).
fn escape_opt(p: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in p.as_os_str().as_bytes() {
        if matches!(b, b'\\' | b',' | b':') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

fn cstr(p: &[u8], what: &'static str, path: &Path) -> Result<CString, crate::Error> {
    CString::new(p).map_err(|_| {
        crate::Error::io(
            what,
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL byte in path"),
        )
    })
}

fn mount_kernel(lower: &Path, upper: &Path, work: &Path, mnt: &Path) -> Result<(), crate::Error> {
    let mut data = b"lowerdir=".to_vec();
    data.extend(escape_opt(lower));
    data.extend_from_slice(b",upperdir=");
    data.extend(escape_opt(upper));
    data.extend_from_slice(b",workdir=");
    data.extend(escape_opt(work));
    // Renamed lower directories and metadata-only copy-ups would hide changes from a walk
    // of the upper layer; without them a rename of a lower directory is EXDEV (tools copy).
    data.extend_from_slice(b",redirect_dir=off,metacopy=off,index=off");
    let data = cstr(&data, "mount the overlay", mnt)?;
    let target = cstr(mnt.as_os_str().as_bytes(), "mount the overlay", mnt)?;
    // SAFETY: every pointer is a NUL-terminated string that outlives the call.
    let r = unsafe {
        libc::mount(
            c"overlay".as_ptr(),
            target.as_ptr(),
            c"overlay".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            data.as_ptr().cast(),
        )
    };
    if r != 0 {
        return Err(crate::Error::io(
            "mount overlay",
            mnt,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Finds an executable on `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0))
}

/// Whether `fuse-overlayfs` can run here: installed, and `/dev/fuse` opens.
fn fuse_available() -> Result<(), crate::Error> {
    if which("fuse-overlayfs").is_none() {
        return Err(crate::Error::io(
            "find",
            "fuse-overlayfs",
            std::io::Error::new(std::io::ErrorKind::NotFound, "not installed (not on PATH)"),
        ));
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .map(drop)
        .map_err(|e| crate::Error::io("open", "/dev/fuse", e))
}

fn mount_fuse(
    lower: &Path,
    upper: &Path,
    work: &Path,
    mnt: &Path,
    log: &Path,
) -> Result<Child, crate::Error> {
    // fuse-overlayfs splits its options on ',' and its lower layers on ':' without escapes.
    for p in [lower, upper, work, mnt] {
        if p.as_os_str()
            .as_bytes()
            .iter()
            .any(|b| b",:\\\n".contains(b))
        {
            return Err(crate::Error::io(
                "mount fuse-overlayfs",
                p,
                std::io::Error::other("fuse-overlayfs cannot take a path with ',', ':' or '\\'"),
            ));
        }
    }
    let mut opts = b"lowerdir=".to_vec();
    opts.extend_from_slice(lower.as_os_str().as_bytes());
    opts.extend_from_slice(b",upperdir=");
    opts.extend_from_slice(upper.as_os_str().as_bytes());
    opts.extend_from_slice(b",workdir=");
    opts.extend_from_slice(work.as_os_str().as_bytes());
    let logf = std::fs::File::create(log).map_err(|e| crate::Error::io("create", log, e))?;
    let mut child = Command::new("fuse-overlayfs")
        .arg("-f")
        .arg("-o")
        .arg(OsStr::from_bytes(&opts))
        .arg(mnt)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(logf)
        .spawn()
        .map_err(|e| crate::Error::io("run fuse-overlayfs for", mnt, e))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if is_mounted(mnt)? {
            return Ok(child);
        }
        let exited = child
            .try_wait()
            .map_err(|e| crate::Error::io("wait for fuse-overlayfs on", mnt, e))?;
        if exited.is_some() || Instant::now() > deadline {
            if exited.is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
            let mut msg = String::new();
            if let Ok(mut f) = std::fs::File::open(log) {
                let _ = f.read_to_string(&mut msg);
            }
            return Err(crate::Error::io(
                "mount fuse-overlayfs",
                mnt,
                std::io::Error::other(format!(
                    "fuse-overlayfs did not mount ({}): {}",
                    exited.map_or("timed out".to_string(), |s| s.to_string()),
                    msg.trim()
                )),
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_or_kill(child: &mut Child, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn umount2(mnt: &Path, flags: libc::c_int) -> std::io::Result<()> {
    let target = CString::new(mnt.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `target` is NUL-terminated and outlives the call.
    if unsafe { libc::umount2(target.as_ptr(), flags) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// `fusermount3 -u` (else `fusermount -u`), `-z` when `lazy`.
fn fusermount(mnt: &Path, lazy: bool) -> std::io::Result<()> {
    let mut last = std::io::Error::from(std::io::ErrorKind::NotFound);
    for bin in ["fusermount3", "fusermount"] {
        let mut c = Command::new(bin);
        c.arg("-u");
        if lazy {
            c.arg("-z");
        }
        match c
            .arg(mnt)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
        {
            Ok(s) if s.success() => return Ok(()),
            Ok(s) => last = std::io::Error::other(format!("{bin} -u: {s}")),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Whether something is mounted on `mnt` (by `/proc/self/mountinfo`).
pub(crate) fn is_mounted(mnt: &Path) -> Result<bool, crate::Error> {
    let info = std::fs::read("/proc/self/mountinfo")
        .map_err(|e| crate::Error::io("read", "/proc/self/mountinfo", e))?;
    let want = mnt.as_os_str().as_bytes();
    Ok(info
        .split(|&b| b == b'\n')
        .filter_map(|line| line.split(|&b| b == b' ').nth(4))
        .any(|field| unescape_mountinfo(field) == want))
}

/// Undoes mountinfo's octal escapes (`\040` for a space, …).
pub(crate) fn unescape_mountinfo(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        if field[i] == b'\\' && i + 3 < field.len() {
            let oct = &field[i + 1..i + 4];
            if oct.iter().all(|b| (b'0'..=b'7').contains(b)) {
                out.push((oct[0] - b'0') * 64 + (oct[1] - b'0') * 8 + (oct[2] - b'0'));
                i += 4;
                continue;
            }
        }
        out.push(field[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape_mountinfo(br"/a\040b\134c"), b"/a b\\c".to_vec());
        assert_eq!(unescape_mountinfo(br"/a\04"), br"/a\04".to_vec());
    }

    /// fuse-overlayfs without privileges marks deletions with `.wh.<name>` files and
    /// opaque directories with `.wh..wh..opq` (no device nodes, no trusted xattrs).
    #[test]
    fn fuse_wh_files_are_deletions() {
        let t = tempfile::tempdir().unwrap();
        let (base_dir, upper, view) = (t.path().join("b"), t.path().join("u"), t.path().join("v"));
        for (rel, data) in [("keep", "k"), ("del", "x"), ("d/old", "o"), ("e/f", "f")] {
            for root in [&base_dir, &view] {
                let p = root.join(rel);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, data).unwrap();
            }
        }
        // The view after: del and d/old gone, d/new added, e/f unchanged.
        std::fs::remove_file(view.join("del")).unwrap();
        std::fs::remove_file(view.join("d/old")).unwrap();
        std::fs::write(view.join("d/new"), "n").unwrap();
        std::fs::create_dir_all(upper.join("d")).unwrap();
        std::fs::write(upper.join(".wh.del"), "").unwrap();
        std::fs::write(upper.join("d/.wh..wh..opq"), "").unwrap();
        std::fs::write(upper.join("d/new"), "n").unwrap();
        let base = tree_base::load(&base_dir).unwrap();
        let scan = scan_upper(&upper, true).unwrap();
        let changes = changes_of_scan(&base, &view, &scan, &|_| false).unwrap();
        let got: Vec<(String, bool, bool)> = changes
            .iter()
            .map(|c| {
                let p = c.rel.as_path().to_string_lossy().into_owned();
                (p, c.old.is_some(), c.new.is_some())
            })
            .collect();
        let want = [
            ("d/new", false, true),
            ("d/old", true, false),
            ("del", true, false),
        ];
        let want: Vec<(String, bool, bool)> = want
            .iter()
            .map(|(p, o, n)| (p.to_string(), *o, *n))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn option_escapes() {
        assert_eq!(escape_opt(Path::new("/a,b:c\\d")), br"/a\,b\:c\\d".to_vec());
    }
}
