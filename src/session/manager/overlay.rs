//! Overlay sandboxes of a manager (see [`crate::session::overlay`] for the layout): the
//! backend is chosen once per session by a probe mount; the snapshot is materialized whole
//! once into `.lower/` (reflinked where the filesystem shares blocks); each sandbox is then
//! a few directories and one mount. A chained sandbox stacks its predecessor's upper layer,
//! frozen, over the predecessor's own stack (OverlayFS forbids changing a lower layer under
//! a mount, and the predecessor keeps writing): an idle predecessor on the kernel backend
//! lends the layer itself and goes on with a fresh upper layer (see [`super::chain`]); else
//! the layer is copied. A stack the kernel cannot mount (too many layers, or options longer
//! than a page) is collapsed into one frozen layer.

use std::path::Path;
use std::process::Child;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::git_view::Made;
use super::*;
use crate::fs::overlay::layer;
use crate::fs::overlay::mount::{self, Backend, Layers};
use crate::id::DelegationId;
use crate::isolation::backend::{self, Mode, MODE_ENV};
use crate::session::delegation::{Isolation, IsolationMode};
use crate::session::overlay::{self as ov, Record};

/// A frozen layer, shared by every chained sandbox stacking it; removed when the last of
/// them is discarded (a kept session keeps it: recovery stacks it again).
pub(super) struct FrozenLayer {
    pub(super) path: StatePath,
    pub(super) name: String,
}

/// The frozen layers of an overlay sandbox and whether it is still mounted: read for as long
/// as its layers are read (finalize), written while they change (a chained create swapping
/// them, see [`super::chain`]) or while it is unmounted.
pub(super) struct Stack {
    /// Frozen layers over `.lower/`, top first (as its record lists them).
    pub(super) layers: Vec<Arc<FrozenLayer>>,
    /// Unmounted (discarded, or the manager ending): its layers never change again.
    pub(super) unmounted: bool,
}

/// The overlay part of a sandbox.
pub(super) struct OverlaySb {
    pub(super) backend: Backend,
    /// `.upper-<id>/`.
    pub(super) upper: PathBuf,
    /// Its frozen layers.
    pub(super) stack: RwLock<Stack>,
    /// The `fuse-overlayfs` process serving the mount.
    pub(super) server: Mutex<Option<Child>>,
    /// The mount point `d-<id>`, held since it was made: unmounted and removed only while it
    /// is proven to be this directory (another writer may rename entries of the session).
    pub(super) mount_point: state_dir::PinnedDir,
}

/// The session's immutable layers holding the snapshot's files (`.lower/`, and the shared
/// layer under it), from which finalize links pre-images into `base/` instead of copying
/// them (see [`Base::materialize_linked`]). Empty in a session without overlays.
pub(super) struct PreimageLayers {
    lower: Option<PathBuf>,
    shared_tree: Option<PathBuf>,
}

impl PreimageLayers {
    /// Where the layers hold `rel`'s snapshot content as seen through a mount: `.lower/<rel>`
    /// when `.lower/` has it (a regular file; anything else there is not linked), else the
    /// shared layer's (`.lower/` holds no opaque directories, so a path it lacks shows the
    /// shared layer's file). The caller checks size and mode before linking.
    pub(super) fn file(&self, rel: &RelPath) -> Option<PathBuf> {
        let p = self.lower.as_ref()?.join(rel.as_path());
        match std::fs::symlink_metadata(&p) {
            Ok(m) => m.file_type().is_file().then_some(p),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Some(self.shared_tree.as_ref()?.join(rel.as_path()))
            }
            Err(_) => None,
        }
    }
}

/// What the session's sandboxes are, once decided by the first create.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Decided {
    Copy,
    Overlay(Backend),
}

impl Decided {
    pub(super) fn mode(self) -> IsolationMode {
        match self {
            Decided::Copy => IsolationMode::Copy,
            Decided::Overlay(Backend::Kernel) => IsolationMode::KernelOverlay,
            Decided::Overlay(Backend::Fuse) => IsolationMode::FuseOverlay,
        }
    }
}

impl SandboxManager {
    /// What the session's sandboxes are made as: decided once, by the first create.
    pub(super) fn decide(&self) -> Result<Decided> {
        let mut guard = self.decided.lock();
        if let Some(d) = *guard {
            return Ok(d);
        }
        let d = match self.isolation {
            Isolation::Copy => Decided::Copy,
            Isolation::Overlay | Isolation::Auto => {
                let forced = Mode::forced().map_err(|bad| {
                    Error::io(
                        "choose the overlay backend",
                        MODE_ENV,
                        std::io::Error::new(std::io::ErrorKind::InvalidInput, bad.to_string()),
                    )
                })?;
                match backend::choose(forced, |b| self.probe(b)) {
                    Ok((Mode::Copy, _)) => Decided::Copy,
                    Ok((m, _)) => m.backend().map_or(Decided::Copy, Decided::Overlay),
                    // A backend forced by name that cannot be had is an error, not a copy.
                    Err(mut refusals) => match refusals.pop() {
                        Some((_, e)) => return Err(e),
                        None => Decided::Copy,
                    },
                }
            }
        };
        *guard = Some(d);
        Ok(d)
    }

    /// Mounts and unmounts an overlay of empty directories with `backend`.
    fn probe(&self, backend: Backend) -> Result<()> {
        let dir = self.path_in_state_dir(Path::new(&format!(
            "{}{}",
            layout::PROBE_PREFIX,
            ulid::Ulid::new()
        )))?;
        state_dir::create_dir_new(&dir)?;
        let run = || -> Result<()> {
            for n in ["l", "u", "w", "m"] {
                state_dir::create_dir_new(&self.path_in_state_dir(&dir.as_path().join(n))?)?;
            }
            let d = dir.as_path();
            let layers = Layers {
                lower: vec![d.join("l")],
                upper: d.join("u"),
                work: d.join("w"),
                rename_dirs: true,
            };
            let m = mount::mount(backend, &layers, &d.join("m"), &d.join("log"))?;
            mount::unmount(&d.join("m"), backend == Backend::Fuse, m.server)
        };
        let r = run();
        if r.is_ok() {
            state_dir::remove_tree(&dir)?;
        } else if !crate::fs::overlay::mountinfo::is_mounted(&dir.as_path().join("m"))? {
            let _ = state_dir::remove_tree(&dir);
        }
        r
    }

    /// The snapshot materialized whole in `.lower/`, made once — or, in a git project with
    /// many tracked files, only its difference from a layer shared with the project's other
    /// sessions (see [`Self::lower_over_shared`]). In a git project it holds
    /// the private repository too (`.lower/.git`, see [`Self::add_git_repo`]), written once
    /// here with the copy's stat data: every overlay sandbox sees it, and what git writes in
    /// a sandbox lands in that sandbox's upper layer, never in a patch (finalize skips the
    /// root `.git`) nor in a successor (freezing skips it), so creates stay a mount.
    fn ensure_lower(&self, sbase: &SessionBase) -> Result<PathBuf> {
        let base = &sbase.base;
        let mut guard = self.lower.lock();
        if let Some(p) = guard.as_ref() {
            return Ok(p.clone());
        }
        let tmp = self.path_in_state_dir(Path::new(".creating-lower"))?;
        let dir = self.path_in_state_dir(Path::new(layout::LOWER_DIR))?;
        // What a failed earlier attempt may have left.
        let shared = self.path_in_state_dir(Path::new(layout::SHARED_LOWER_FILE))?;
        state_dir::remove_file(&shared)?;
        state_dir::remove_tree(&tmp)?;
        state_dir::create_dir_new(&tmp)?;
        // The private repository's objects depend on the base alone: they are prepared on a
        // second core while `.lower/` is matched against the shared layer.
        let (view, over_shared) = crate::cores::beside(
            || self.git_view_of(sbase),
            || self.lower_over_shared(sbase, &tmp),
        );
        let made = match view.and(over_shared) {
            Ok(Some(keys)) => self.add_git_repo(sbase, &tmp, Some(Made::ByNode(&keys))),
            Ok(None) => self.copy_fresh(base, &tmp).and_then(|(entries, _)| {
                self.add_git_repo(sbase, &tmp, Some(Made::Entries(&entries)))
            }),
            Err(e) => Err(e),
        };
        if let Err(e) = made {
            let _ = state_dir::remove_tree(&tmp);
            let _ = state_dir::remove_file(&shared);
            return Err(e);
        }
        state_dir::rename(&tmp, &dir)?;
        let p = dir.as_path().to_path_buf();
        *guard = Some(p.clone());
        Ok(p)
    }

    /// The layers finalize may link pre-images from.
    pub(super) fn preimage_layers(&self) -> PreimageLayers {
        PreimageLayers {
            lower: self.lower.lock().clone(),
            shared_tree: self.shared_lower.lock().as_ref().map(|l| l.tree()),
        }
    }

    /// A new frozen layer: `srcs` merged into it bottom first.
    fn freeze(&self, srcs: &[&Path]) -> Result<Arc<FrozenLayer>> {
        let name = format!("{}{}", layout::LAYER_PREFIX, ulid::Ulid::new());
        let path = self.path_in_state_dir(Path::new(&name))?;
        state_dir::create_dir_new(&path)?;
        for s in srcs {
            if let Err(e) = layer::merge(s, &path) {
                let _ = state_dir::remove_tree(&path);
                return Err(e);
            }
        }
        Ok(Arc::new(FrozenLayer { path, name }))
    }

    /// Makes the overlay sandbox `d-<id>` (`dir`, which does not exist yet).
    pub(super) fn build_overlay(
        &self,
        id: &DelegationId,
        dir: &StatePath,
        chain_from: Option<&Arc<Sandbox>>,
        backend: Backend,
        sbase: &SessionBase,
    ) -> Result<Sandbox> {
        let base = &sbase.base;
        // The blob list (the first create's) is written meanwhile, on another core (here,
        // after `.lower/`, when no thread can be made): it is complete before the sandbox's
        // record is.
        let (listed, lower) =
            crate::cores::beside(|| self.write_blob_list(sbase), || self.ensure_lower(sbase));
        lower.and(listed)?;
        let at = |prefix: &str, suffix: &str| {
            self.path_in_state_dir(Path::new(&format!("{prefix}{id}{suffix}")))
        };
        let record = at(layout::OVERLAY_PREFIX, "")?;
        let mut layers: Vec<Arc<FrozenLayer>> = Vec::new();
        let mut durable_record = None;
        if let Some((p, o)) = chain_from.and_then(|p| p.overlay.as_ref().map(|o| (p, o))) {
            match self.swap_layers(p, o, &record)? {
                Some(swapped) => {
                    layers = swapped.layers;
                    durable_record = swapped.record;
                }
                None => {
                    let stack = o.stack.read();
                    layers.push(self.freeze(&[o.upper.as_path()])?);
                    layers.extend(stack.layers.iter().cloned());
                }
            }
        }
        let rec = |layers: &[Arc<FrozenLayer>]| Record {
            backend,
            layers: layers.iter().map(|l| l.name.clone()).collect(),
        };
        if !ov::layers_of(&self.session_dir, id.as_str(), &rec(&layers)).fits() {
            let bottom_first: Vec<&Path> = layers.iter().rev().map(|l| l.path.as_path()).collect();
            let collapsed = self.freeze(&bottom_first);
            // The new top layer was frozen for this stack alone.
            release_layers(layers);
            layers = vec![collapsed?];
        }
        let rec = rec(&layers);
        let upper = at(layout::UPPER_PREFIX, "")?;
        let work = at(layout::WORK_PREFIX, "")?;
        let log = at(layout::FUSE_LOG_PREFIX, ".log")?;
        let made = (|| -> Result<(state_dir::PinnedDir, mount::Mounted)> {
            // The record first: recovery never finds a mount point without it. A fresh
            // sandbox's record (no frozen layers) is not synced: after a power loss recovery
            // rebuilds a lost or emptied one from its upper layer (`read_record_for_recovery`),
            // and the two `fsync`s would wait for the journal, which the base's writes keep
            // busy. A chained sandbox's layers cannot be guessed: its record is made durable
            // (by the swap's `syncfs` when it wrote this very record).
            match (durable_record.as_ref() == Some(&rec), rec.layers.is_empty()) {
                (true, _) => {}
                (false, true) => state_dir::write_atomic_unsynced(&record, &rec.encode())?,
                (false, false) => state_dir::write_atomic(&record, &rec.encode())?,
            }
            state_dir::create_dir_new(&upper)?;
            state_dir::create_dir_new(&work)?;
            // The mount point is made aside and held, then named `d-<id>`: the mount lands
            // on this directory and no other (whatever is renamed in the session meanwhile),
            // and a failure removes this directory, wherever it went, and nothing else.
            let pin = state_dir::create_dir_pinned(
                dir,
                &at(".creating-", &format!(".{}", ulid::Ulid::new()))?,
            )?
            .ok_or_else(|| Error::IdInUse { id: id.to_string() })?;
            let layers = ov::layers_of(&self.session_dir, id.as_str(), &rec);
            match mount::mount_on(backend, &layers, pin.fd(), dir.as_path(), log.as_path()) {
                Ok(m) => Ok((pin, m)),
                Err(e) => {
                    // Nothing of this call is mounted (else `mount_on` said so, and the
                    // directory stays: removing it is refused while mounted on).
                    self.remove_mount_point(&pin, dir)?;
                    Err(e)
                }
            }
        })();
        let (mount_point, mounted) = match made {
            Ok(m) => m,
            Err(e) => {
                for p in [&upper, &work, &log, &record] {
                    let _ = state_dir::remove_tree(p);
                }
                release_layers(layers);
                return Err(e);
            }
        };
        let o = OverlaySb {
            backend,
            upper: upper.as_path().to_path_buf(),
            stack: RwLock::new(Stack {
                layers,
                unmounted: false,
            }),
            server: Mutex::new(mounted.server),
            mount_point,
        };
        Ok(Sandbox::new(
            id,
            dir,
            base,
            Manifest::new(Vec::new(), crate::fs::Timestamp::default()),
            Some(o),
        ))
    }

    /// Ends the overlay part of a discarded sandbox (unmounted, out of view): its layers and
    /// record removed, and the frozen layers no other sandbox stacks.
    pub(super) fn discard_overlay(&self, sb: Arc<Sandbox>) -> Result<()> {
        self.remove_overlay_state(&sb.info.delegation_id)?;
        // Held elsewhere (a finalize still running): its layers stay until the session ends.
        if let Some(sb) = Arc::into_inner(sb) {
            if let Some(o) = sb.overlay {
                release_layers(o.stack.into_inner().layers);
            }
        }
        Ok(())
    }

    /// What an overlay sandbox changed against the base, from its layers (`stack`, read
    /// locked by the caller for as long as it reads the sandbox).
    pub(super) fn overlay_changes(
        &self,
        sb: &Sandbox,
        o: &OverlaySb,
        stack: &Stack,
        base: &Base,
        is_ignored: &dyn Fn(&RelPath) -> bool,
    ) -> Result<diff::TreeDiff> {
        if stack.unmounted {
            // Its view would be the empty mount point: read as every file deleted.
            return Err(Error::io(
                "read an overlay sandbox",
                &sb.info.path,
                std::io::Error::other("not mounted (a remount failed); its layers hold the work"),
            ));
        }
        let layers: Vec<PathBuf> = stack
            .layers
            .iter()
            .map(|l| l.path.as_path().to_path_buf())
            .collect();
        let scan = ov::scan_layers(&o.upper, &layers, o.backend)?;
        ov::diff_view(&base.nodes, base, &sb.info.path, &scan, is_ignored)
    }

    /// Unmounts an overlay sandbox (a copy: nothing to do); its layers never change again.
    /// The mount is looked for where its mount point is now (read from the held directory:
    /// a directory mounted on cannot be renamed, so a mount there is this sandbox's);
    /// nothing is unmounted anywhere else.
    pub(super) fn unmount_sandbox(&self, sb: &Sandbox) -> Result<()> {
        match &sb.overlay {
            Some(o) => {
                let mut stack = o.stack.write();
                if stack.unmounted {
                    return Ok(());
                }
                let Some(at) = o.mount_point.current_path() else {
                    stack.unmounted = true;
                    return Ok(());
                };
                mount::unmount(&at, o.backend == Backend::Fuse, o.server.lock().take())?;
                stack.unmounted = true;
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Removes an overlay sandbox's mount point (unmounted), the directory `pin` holds,
    /// wherever it was renamed in the session; an error names what is left.
    pub(super) fn remove_mount_point(
        &self,
        pin: &state_dir::PinnedDir,
        dir: &StatePath,
    ) -> Result<()> {
        let private =
            self.path_in_state_dir(Path::new(&format!(".trash-{}", ulid::Ulid::new())))?;
        state_dir::remove_pinned_dir(pin, dir, &private)
    }

    /// Removes what an overlay sandbox `id` keeps beside its mount point (it is unmounted).
    pub(super) fn remove_overlay_state(&self, id: &DelegationId) -> Result<()> {
        for (prefix, suffix) in [
            (layout::UPPER_PREFIX, ""),
            (layout::WORK_PREFIX, ""),
            (layout::FUSE_LOG_PREFIX, ".log"),
            (layout::OVERLAY_PREFIX, ""),
        ] {
            state_dir::remove_tree(
                &self.path_in_state_dir(Path::new(&format!("{prefix}{id}{suffix}")))?,
            )?;
        }
        Ok(())
    }

    /// How this session's sandboxes are isolated: `None` before the first sandbox decided it
    /// (for [`Isolation::Copy`], always a copy).
    pub fn isolation_mode(&self) -> Option<IsolationMode> {
        if self.isolation == Isolation::Copy {
            return Some(IsolationMode::Copy);
        }
        self.decided.lock().map(Decided::mode)
    }
}

/// Removes the frozen layers only this caller holds (a failure leaves a `.layer-*`
/// directory, which the session's cleanup removes).
fn release_layers(layers: Vec<Arc<FrozenLayer>>) {
    for l in layers {
        if let Some(l) = Arc::into_inner(l) {
            let _ = state_dir::remove_tree(&l.path);
        }
    }
}
