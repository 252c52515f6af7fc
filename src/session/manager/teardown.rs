//! How a manager ends: kept for debugging, handed to a reaper, or dropped — and on drop, the
//! work of sandboxes neither completed nor discarded is stored as abandoned pending patches
//! before anything is removed; sandboxes leave view by rename before they are deleted; the
//! session lock is released last.

use std::path::Path;

use super::*;

impl SandboxManager {
    /// Keeps the whole session directory on drop (for debugging): nothing is removed. A
    /// later start or prune recovers its delegations into pending patches.
    pub fn keep(self) -> PathBuf {
        self.keep.store(true, std::sync::atomic::Ordering::SeqCst);
        self.session_dir.clone()
    }

    /// Ends this manager without waiting for its cleanup: discarded sandboxes still being
    /// deleted, the base and the session directory are left to a process that waits for the
    /// session lock and then cleans the session like a prune does (`patchbox sessions reap
    /// <session>`, started by the caller before this call). For a process about to exit (the
    /// CLI's `run`): its user gets the prompt back while thousands of files are deleted.
    ///
    /// Nothing is lost: pending patches stay, and a sandbox not discarded is recovered into a
    /// pending patch by whoever cleans the session (the reaper, or else the next prune).
    ///
    /// ```
    /// use patchbox::{Options, SandboxManager};
    /// let project = tempfile::tempdir().unwrap();
    /// let root = tempfile::tempdir().unwrap();
    /// // No start-up recovery thread: it could clean the session first, once let go.
    /// let opts = Options {
    ///     root: Some(root.path().to_path_buf()),
    ///     no_prune_on_start: true,
    ///     ..Options::default()
    /// };
    /// let mgr = SandboxManager::with_options(project.path(), opts).unwrap();
    /// let session = mgr.session_id().to_string();
    /// mgr.leave_cleanup_to_reaper();
    /// // No reaper was started here: the session is left as it was, for a prune to clean.
    /// let report = patchbox::session::recover::reap(root.path(), &session).unwrap();
    /// assert_eq!(report.pruned, [session.clone()]);
    /// assert!(!root.path().join(&session).exists());
    /// ```
    pub fn leave_cleanup_to_reaper(self) {
        self.handed_off
            .store(true, std::sync::atomic::Ordering::SeqCst);
        // What a drop does for a handed-off session, done here: the reaper may take the
        // session as soon as this returns.
        self.unmount_all();
        drop(self.lock.lock().take());
        // What is left is memory (the snapshot's lists, the private repository's entries:
        // tens of MB and ~150,000 allocations on the Linux tree), freed on a thread of its
        // own so that the caller — most often a process about to exit — does not wait for
        // it. Should no thread be made, it is freed here.
        let _ = std::thread::Builder::new()
            .name("patchbox-free".into())
            .spawn(move || drop(self));
    }

    /// Stores the work of every sandbox neither completed nor discarded as a pending patch
    /// marked abandoned (the patch a crash recovery would store; an unchanged sandbox, or one
    /// whose exact patch the engine already stored as pending, stores nothing). False when
    /// some work could not be stored.
    fn save_abandoned(&self) -> bool {
        let open: Vec<SandboxInfo> = self
            .sandboxes
            .lock()
            .values()
            .filter_map(|s| match s {
                Slot::Ready(sb) => Some(sb.info.clone()),
                Slot::Creating => None,
            })
            .collect();
        let mut all_saved = true;
        for info in open {
            let saved = catch_unwind(AssertUnwindSafe(|| -> Result<()> {
                let res = self.finalize_sandbox(&info)?;
                let stored = pending::find_identical(
                    &self.session_dir,
                    self.session_id.as_str(),
                    info.delegation_id.as_str(),
                    &res.patch,
                )?;
                if !res.patch.is_empty() && stored.is_none() {
                    self.write_pending_inner(
                        &info.delegation_id,
                        &res.patch,
                        true,
                        &Default::default(),
                    )?;
                }
                Ok(())
            }));
            all_saved &= matches!(saved, Ok(Ok(())));
        }
        all_saved
    }

    fn cleanup(&self) -> Result<()> {
        let mut first_err = None;
        let mut note = |r: Result<()>| {
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        };
        // Nothing stays mounted: every overlay sandbox is unmounted before anything moves
        // (its server ended with it), then whatever else is mounted below the session.
        if !self.unmount_all() {
            note(Err(Error::io(
                "unmount",
                &self.session_dir,
                std::io::Error::other("an overlay sandbox stays mounted"),
            )));
        }
        note(crate::session::overlay::unmount_all_below(
            &self.session_dir,
        ));
        let names: Vec<String> = self
            .handle
            .names()?
            .into_iter()
            .filter_map(|n| n.into_string().ok())
            .collect();
        // Sandboxes leave view first, each in one rename: a process killed while deleting
        // must not leave a half-deleted sandbox (or a sandbox without its base) that the
        // next recovery would take for work.
        let names: Vec<String> = names
            .into_iter()
            .map(|n| {
                if !n.starts_with("d-") {
                    return n;
                }
                // A mount this manager does not know of (a create cut short): unmounted too.
                if let Err(e) = crate::session::overlay::unmount_entry(&self.session_dir, &n) {
                    note(Err(e));
                    return n;
                }
                let trash = format!(".trash-{}", ulid::Ulid::new());
                let moved = self.path_in_state_dir(Path::new(&n)).and_then(|from| {
                    state_dir::rename(&from, &self.path_in_state_dir(Path::new(&trash))?)
                });
                match moved {
                    Ok(()) => trash,
                    Err(e) => {
                        note(Err(e));
                        n
                    }
                }
            })
            .collect();
        for n in names {
            if n == layout::BASE_DIR
                || n == crate::tree::base::BLOBS_FILE
                || n == layout::GIT_OBJECTS_DIR
                || n.starts_with("d-")
                || n.starts_with(".trash-")
                || n.starts_with(layout::TMP_PREFIX)
                || n.starts_with(layout::MANIFEST_PREFIX)
                || n == layout::SCRATCH_DIR
                || n.starts_with(".creating-")
                || n.starts_with(".clock-")
                || layout::is_overlay_state(&n)
            {
                if n.starts_with(layout::PROBE_PREFIX) {
                    note(crate::session::overlay::unmount_entry(
                        &self.session_dir,
                        &n,
                    ));
                }
                note(
                    self.path_in_state_dir(Path::new(&n))
                        .and_then(|p| state_dir::remove_tree(&p)),
                );
            }
        }
        let has_pending =
            !pending::list_session(&self.session_dir, self.session_id.as_str())?.is_empty();
        if !has_pending {
            note(
                self.path_in_state_dir(Path::new(pending::PENDING_DIR))
                    .and_then(|p| state_dir::remove_tree(&p)),
            );
            note(
                self.path_in_state_dir(Path::new(layout::META_FILE))
                    .and_then(|p| state_dir::remove_file(&p)),
            );
        }
        note(
            self.path_in_state_dir(Path::new(layout::LOCK_FILE))
                .and_then(|p| state_dir::remove_file(&p)),
        );
        if !has_pending {
            note(
                self.path_in_state_dir(&self.session_dir)
                    .and_then(|p| state_dir::remove_empty_dir(&p).map(|_| ())),
            );
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl SandboxManager {
    /// Unmounts every overlay sandbox (their upper layers keep the work): whatever becomes of
    /// the session, nothing of it stays mounted after the manager. False when one remains.
    fn unmount_all(&self) -> bool {
        let open: Vec<Arc<Sandbox>> = self
            .sandboxes
            .lock()
            .values()
            .filter_map(|s| match s {
                Slot::Ready(sb) => Some(sb.clone()),
                Slot::Creating => None,
            })
            .collect();
        open.iter().all(|sb| self.unmount_sandbox(sb).is_ok())
    }
}

impl Drop for SandboxManager {
    fn drop(&mut self) {
        if self.handed_off.load(std::sync::atomic::Ordering::SeqCst) {
            // The reaper mounts again what it must recover.
            self.unmount_all();
            // Removal threads run on (or end with the process); the reaper finishes their work.
            drop(self.lock.lock().take());
            return;
        }
        for h in self.removals.lock().drain(..) {
            let _ = h.join();
        }
        // The recovery thread works on other sessions; it is waited for so that no work of
        // this library outlives its manager.
        let _ = self.startup_recovery();
        // Work not stored is never removed: when a sandbox's work cannot be saved, the whole
        // session stays for the next start or prune to recover, as after a crash.
        if !self.keep.load(std::sync::atomic::Ordering::SeqCst) && self.save_abandoned() {
            // Drop cannot report; a failure leaves files that the next prune recovers.
            let _ = self.cleanup();
        } else {
            // Kept (for debugging, or because work could not be stored): the upper layers
            // hold the work, and recovery mounts them again.
            self.unmount_all();
        }
        // Releasing the lock last: until now no pruner may touch this session.
        drop(self.lock.lock().take());
    }
}
