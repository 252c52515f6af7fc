//! Chained overlay creates without a copy: when the predecessor is idle, its upper layer
//! *becomes* the frozen layer both sandboxes stack, and the predecessor goes on with a fresh
//! empty upper layer over it (see [`crate::fs::overlay::swap`] for the mount side).
//!
//! The copy semantics are kept: the successor sees the predecessor's state at the moment of
//! the chained create; neither sees what the other writes afterwards (each writes its own
//! upper layer; the shared layer is never written again). The predecessor's view is the same
//! before and after (same files, same inodes: only the overlay's device number changes), and
//! its finalize reads all its layers above `.lower/`, so its patch is the same.
//!
//! Steps, with what a crash after each leaves (recovery mounts what the record says):
//!
//! 1. `X` = a new empty `.layer-<ulid>/`: an orphan layer, removed with the session.
//! 2. The predecessor's record lists `X` on top of its frozen layers: `X` is empty, so the
//!    recorded stack shows what the old one showed. The successor's record (`X` over the
//!    same frozen layers) is written too; it has no upper layer yet, so recovery passes over
//!    it.
//! 3. The new overlay is configured: upper `X`, lowers `.upper-<id>/` and the old ones.
//! 4. One `syncfs`, on a second thread while step 3 runs and the upper layer is checked for
//!    hard links, makes both records durable (and shortens the unmount, which writes back
//!    the session's filesystem too); then the old overlay is unmounted, plainly: `EBUSY`
//!    (somebody has a file, a working directory or a mount in it) undoes 1–2 and the caller
//!    copies the layer as before.
//! 5. `.upper-<id>/.git` (what git wrote in the sandbox: its private repository, never part
//!    of a patch nor of a successor) is renamed into `X` (still the predecessor's view: `.git`
//!    is in a layer above the rest).
//! 6. `.upper-<id>/` and `X` swap names (`renameat2` `RENAME_EXCHANGE`, atomic): `X` now
//!    holds what the predecessor wrote, `.upper-<id>/` its `.git` only; the record is exact.
//! 7. The new overlay is created and mounted on `d-<id>/`.
//!
//! Steps 4–7 are the window in which `d-<id>/` shows no overlay (a few system calls, and the
//! write-back of what was written to the session's filesystem since the `syncfs` just before
//! step 4: see the swap module). Only the kernel backend swaps: a `fuse-overlayfs` server would have to
//! be restarted on the new stack, so chained creates from it keep copying the layer.

use std::path::Path;
use std::sync::Arc;

use super::overlay::{FrozenLayer, OverlaySb};
use super::*;
use crate::fs::overlay::mount::{self, Backend};
use crate::fs::overlay::swap;
use crate::session::overlay::{self as ov, Record};

impl SandboxManager {
    /// The frozen layers a sandbox chained from `pred` stacks, got by swapping `pred`'s
    /// layers (see the module docs); `Ok(None)` when that cannot be done (a FUSE backend, a
    /// predecessor in use, finalizing or discarded, a stack that would not fit, hard links in
    /// its upper layer) and `pred` shows what it showed: the caller then copies the layer. An
    /// error means `pred` could not be mounted again (its layers on disk are whole and
    /// recorded: recovery reads them).
    pub(super) fn swap_layers(
        &self,
        pred: &Sandbox,
        o: &OverlaySb,
        successor: &StatePath,
    ) -> Result<Option<Swapped>> {
        if o.backend != Backend::Kernel {
            return Ok(None);
        }
        // A finalize reading the layers, or a discard under way: copy instead of waiting.
        let Some(mut stack) = o.stack.try_write() else {
            return Ok(None);
        };
        if stack.unmounted {
            return Ok(None);
        }
        let id = &pred.info.delegation_id;
        let old_rec = Record {
            backend: o.backend,
            layers: stack.layers.iter().map(|l| l.name.clone()).collect(),
        };
        let name = format!("{}{}", layout::LAYER_PREFIX, ulid::Ulid::new());
        let mut new_rec = old_rec.clone();
        new_rec.layers.insert(0, name.clone());
        if !ov::layers_of(&self.session_dir, id.as_str(), &new_rec).fits() {
            return Ok(None);
        }
        let at = |p: String| self.path_in_state_dir(Path::new(&p));
        let x = at(name.clone())?;
        let upper = at(format!("{}{id}", layout::UPPER_PREFIX))?;
        let record = at(format!("{}{id}", layout::OVERLAY_PREFIX))?;
        let mnt = pred.info.path.as_path();

        // The successor's record as it will be when nothing needs collapsing: `X` over the
        // predecessor's frozen layers.
        let succ_rec = Record {
            backend: o.backend,
            layers: new_rec.layers.clone(),
        };
        // 1–3, undone on a refusal.
        state_dir::create_dir_new(&x)?;
        let undo = |x: &StatePath| {
            let _ = state_dir::write_atomic(&record, &old_rec.encode());
            let _ = state_dir::remove_file(successor);
            let _ = state_dir::remove_tree(x);
        };
        // Both records are written without a sync of their own: the `syncfs` of step 4
        // makes them durable, in one journal commit instead of four `fsync`s (which took
        // most of a chained create on a journaled ext4). Until it returns, a crash may leave
        // either record empty or missing. The predecessor's is then read as a fresh
        // sandbox's (see `read_record_for_recovery`), which is right only for a predecessor
        // without frozen layers (`X` is still empty): one with frozen layers writes its
        // record durably first, as before. The successor has no upper layer yet, so
        // recovery passes over its record whatever it holds.
        let written = if old_rec.layers.is_empty() {
            state_dir::write_atomic_unsynced(&record, &new_rec.encode())
        } else {
            state_dir::write_atomic(&record, &new_rec.encode())
        };
        if written
            .and_then(|()| state_dir::write_atomic_unsynced(successor, &succ_rec.encode()))
            .is_err()
        {
            undo(&x);
            return Ok(None);
        }
        // 4. The write-back, which also makes both records durable, runs on a thread of its
        // own while this one checks the upper layer for hard links (they would break once it
        // is a lower layer, see `has_hard_links`: then it is copied instead, as before) and
        // configures the new overlay: on two cores the walk costs no time of its own.
        let sync = || swap::sync_filesystem_of(&o.upper).is_ok();
        let (synced, prepared) =
            crate::cores::beside(sync, || match swap::has_hard_links(&o.upper) {
                Ok(false) => {
                    let mut l = ov::layers_of(&self.session_dir, id.as_str(), &old_rec);
                    l.lower.insert(0, l.upper.clone());
                    l.upper = x.as_path().to_path_buf();
                    swap::prepare(&l).ok()
                }
                _ => None,
            });
        let Some(prepared) = prepared else {
            undo(&x);
            return Ok(None);
        };
        // Where the write-back failed, the records are made durable one by one before
        // anything moves; the caller rewrites the successor's.
        if !synced && state_dir::write_atomic(&record, &new_rec.encode()).is_err() {
            undo(&x);
            return Ok(None);
        }
        match swap::unmount_if_idle(mnt) {
            Ok(true) => {}
            Ok(false) | Err(_) => {
                undo(&x);
                return Ok(None);
            }
        }
        // 5–7. Until the new mount is in place `d-<id>/` shows nothing: any failure mounts
        // the recorded stack back, which shows what the old one did at every step.
        let swapped = (|| -> Result<()> {
            let git = |dir: &StatePath| self.path_in_state_dir(&dir.as_path().join(".git"));
            match state_dir::rename(&git(&upper)?, &git(&x)?) {
                Ok(()) => {}
                Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            state_dir::exchange(&upper, &x)?;
            swap::attach(prepared, mnt)
        })();
        let layer = Arc::new(FrozenLayer {
            path: x,
            name: name.clone(),
        });
        if let Err(e) = swapped {
            // Where the failure left the directories, the record describes the stack.
            let back = ov::read_record(&self.session_dir, id.as_str()).and_then(|rec| {
                let rec = rec.unwrap_or(new_rec);
                let l = ov::layers_of(&self.session_dir, id.as_str(), &rec);
                // The kernel backend (checked above) writes no server log.
                mount::mount(o.backend, &l, mnt, Path::new("/dev/null")).map(drop)
            });
            // The layer is part of the predecessor's stack from now on, whatever happened.
            stack.layers.insert(0, layer);
            return match back {
                Ok(()) => Ok(None),
                Err(_) => {
                    let _ = state_dir::remove_file(successor);
                    // Not mounted: finalize refuses rather than read an empty view; the
                    // layers and the record keep the work for the session's cleanup, which
                    // recovers it as pending.
                    stack.unmounted = true;
                    Err(e)
                }
            };
        }
        stack.layers.insert(0, layer);
        Ok(Some(Swapped {
            layers: stack.layers.clone(),
            record: synced.then_some(succ_rec),
        }))
    }
}

/// What a swap gives the chained sandbox.
pub(super) struct Swapped {
    /// The frozen layers it stacks, top first.
    pub(super) layers: Vec<Arc<FrozenLayer>>,
    /// The record already written, and made durable, for it (when the swap's `syncfs`
    /// succeeded): its creator writes it again only if its stack turns out different.
    pub(super) record: Option<Record>,
}
