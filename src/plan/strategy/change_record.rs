//! How a `copy_on_write` sandbox learns what changed in `tree/` without reading every
//! directory: when `tree/` is a Btrfs subvolume this process may search, the filesystem's
//! transaction ids name the inodes written since the last look ([`crate::fs::btrfs`]), and
//! the listing kept from that look is brought up to date from them alone
//! ([`crate::tree::listing`]). Anywhere else (another filesystem, no `CAP_SYS_ADMIN`, a
//! nested subvolume or an error of the record) the sandbox is walked, as before.
//!
//! The record lives in memory with the sandbox's handle: a reopened manager walks once,
//! then follows the record again.

use std::ffi::OsStr;
use std::path::Path;

use crate::fs::btrfs::{self, Generation, Tracker};
use crate::tree::listing::{Changes, Listing};
use crate::tree::snapshot::{list_tree, Node, StatKey};

/// Above this share of the listed files written since the last look, one walk is cheaper
/// than following the record file by file.
const WALK_SHARE: usize = 8;

/// The change record of one sandbox tree (see the module's docs).
#[derive(Default)]
pub(super) enum ChangeRecord {
    /// Not looked at yet.
    #[default]
    Unknown,
    /// No record here: every look walks.
    Walk,
    /// The subvolume's tracker, and the listing as of a generation (`None` until a first
    /// walk made one).
    Tracked(Tracker, Option<(Generation, Listing)>),
}

impl ChangeRecord {
    /// Calls `with` with the listing of `tree` as it is now: from the record when there is
    /// one, else from a walk.
    pub(super) fn with_listing<T>(
        &mut self,
        tree: &Path,
        with: impl FnOnce(&[(Node, StatKey)]) -> crate::Result<T>,
    ) -> crate::Result<T> {
        // The sandbox's tree replaced wholesale: follow the new one.
        if matches!(self, ChangeRecord::Tracked(t, _) if !t.still_at_path()) {
            *self = ChangeRecord::Unknown;
        }
        if matches!(self, ChangeRecord::Unknown) {
            *self = match Tracker::open(tree) {
                Some(t) => ChangeRecord::Tracked(t, None),
                None => ChangeRecord::Walk,
            };
        }
        let ChangeRecord::Tracked(tracker, state) = self else {
            return with(&list_tree(tree)?);
        };
        match refresh(tracker, state.take(), tree) {
            Ok(Some(now)) => {
                let r = with(now.1.files());
                *state = Some(now);
                r
            }
            // A nested subvolume or a mount inside: their writes are not in the tree the
            // record searches. Walk while they are there.
            Ok(None) => with(&list_tree(tree)?),
            // The record could not answer: walk now, and start the record afresh next time.
            Err(_) => with(&list_tree(tree)?),
        }
    }
}

/// The listing of `tree` now, from `last` and the record, or from a walk when there is no
/// `last` or most of the tree was written; `None` when the record cannot cover the tree.
fn refresh(
    tracker: &Tracker,
    last: Option<(Generation, Listing)>,
    tree: &Path,
) -> std::io::Result<Option<(Generation, Listing)>> {
    // The mark comes first: whatever is written after it carries a later transaction id
    // and is seen next time, whether or not this look saw it.
    let now = tracker.mark()?;
    if tracker.has_nested()? || mounted_below(tree)? {
        return Ok(None);
    }
    let listing = match last {
        Some((since, mut listing)) => {
            let changed = tracker.changed_since(since)?;
            if changed.len() > listing.files().len() / WALK_SHARE + 64 {
                walk(tree)?
            } else {
                let mut c = Changes::default();
                for ch in changed {
                    if ch.is_dir {
                        c.dirs.extend(ch.paths.into_iter().map(|p| (p, ch.ino)));
                    } else {
                        c.nodes.extend(ch.paths);
                    }
                }
                listing.update(tree, &c).map_err(std::io::Error::other)?;
                listing
            }
        }
        None => walk(tree)?,
    };
    Ok(Some((now, listing)))
}

/// Whether something is mounted below `tree`: writes there are on another filesystem.
fn mounted_below(tree: &Path) -> std::io::Result<bool> {
    let resolved = std::fs::canonicalize(tree)?;
    crate::fs::overlay::mountinfo::mounts_below(&resolved)
        .map(|m| !m.is_empty())
        .map_err(std::io::Error::other)
}

fn walk(tree: &Path) -> std::io::Result<Listing> {
    Listing::walk(tree).map_err(std::io::Error::other)
}

/// Makes `name` in `dir` a Btrfs subvolume when that can give the sandbox a change record
/// (Btrfs, and a process that may search its trees: root); `false` when it made nothing.
pub(super) fn make_subvolume(dir: &Path, name: &str) -> crate::Result<bool> {
    btrfs::create_subvolume_in(dir, OsStr::new(name))
        .map_err(|e| crate::Error::io("create subvolume", dir.join(name), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_mounted_below_a_fresh_directory() {
        let t = tempfile::tempdir().unwrap();
        assert!(!mounted_below(t.path()).unwrap());
    }
}
