//! Who uses a snapshot: every sandbox that takes one records its directory among the
//! snapshot's holders (see [`super::super::holders`]) while it holds the store's shared
//! lock, so a prune, which takes the exclusive lock, sees every user and removes a snapshot
//! only once none of their directories exists.

use std::path::{Path, PathBuf};

use crate::isolation::holders as records;

/// A snapshot's directory of holder records.
pub(super) const HOLDERS: &str = "holders";

fn dir(store: &Path, id: &str) -> PathBuf {
    store.join(id).join(HOLDERS)
}

/// Records `holder` (a sandbox's directory) as using snapshot `id` of `store`. Called with
/// the store's shared lock held, before the holder's state names the snapshot.
pub fn hold_for(store: &Path, id: &str, holder: &Path) -> Result<(), crate::error::Error> {
    records::record(&dir(store, id), holder)
}

/// The directories recorded as using snapshot `id`; `None` when the snapshot has no records
/// (one an earlier version made) or they cannot be read.
pub fn holders(store: &Path, id: &str) -> Option<Vec<PathBuf>> {
    records::list(&dir(store, id))
}

/// Whether snapshot `id` is in use: a holder exists, or its users are unknown (no records).
pub(crate) fn held(store: &Path, id: &str) -> bool {
    records::held(&dir(store, id), true)
}

/// Whether snapshot `id` has holder records at all (an earlier version's have none until a
/// plan manager records their users, see [`hold_for`]).
pub(crate) fn recorded(store: &Path, id: &str) -> bool {
    dir(store, id).is_dir()
}

/// Records the users of the snapshots an earlier version made, which have no holder
/// records: `users` gives, per snapshot id, the directories whose state names it (every
/// one, read under `locked`). Each snapshot without records then gets them, and the prune
/// may judge it as any other. Snapshots that have records are left as they are.
pub fn adopt(
    locked: &super::Exclusive,
    users: &[(String, PathBuf)],
) -> Result<(), crate::error::Error> {
    let store = locked.store();
    for s in super::list(store) {
        if recorded(store, &s.id) {
            continue;
        }
        for (_, dir) in users.iter().filter(|(id, _)| *id == s.id) {
            hold_for(store, &s.id, dir)?;
        }
        let d = dir(store, &s.id);
        std::fs::create_dir_all(&d)
            .map_err(|e| crate::error::Error::io("create directory", &d, e))?;
    }
    Ok(())
}

/// Whether a ready snapshot of the store has no holder records (see [`adopt`]).
pub fn needs_adoption(locked: &super::Exclusive) -> bool {
    let store = locked.store();
    super::list(store).iter().any(|s| !recorded(store, &s.id))
}
