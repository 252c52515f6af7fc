//! Preparing a snapshot: taken into a temporary directory of the store and renamed in
//! place when complete, so a snapshot is either ready (info, listing, files and an empty
//! holders directory) or absent; a crash leaves only a `.tmp-` directory the next prune
//! removes.

use std::path::{Path, PathBuf};

use super::{base_dir, holders, io, nodes, root_of, SnapshotInfo, BASE, INFO, NODES, TMP_PREFIX};
use crate::fs::state_dir::{self, StateDir};
use crate::fs::unix_millis;
use crate::isolation::tree_base::TreeBase;
use crate::isolation::{layered, shared_lower};

/// Takes a snapshot of `original` (canonical) into `store`, ready when this returns.
/// `exclude`: directories never entered; `plan`: the plan it serves alone, if any. Holds the
/// store's shared lock meanwhile; the caller may hold it too.
pub fn prepare(
    store: &Path,
    original: &Path,
    exclude: &[PathBuf],
    plan: Option<&str>,
) -> Result<(SnapshotInfo, TreeBase), crate::error::Error> {
    let _lock = super::lock_shared(store)?;
    let id = crate::id::next_string();
    let tmp = store.join(format!("{TMP_PREFIX}{id}"));
    std::fs::create_dir(&tmp).map_err(|e| io("create directory", &tmp, e))?;
    let made = (|| {
        let sd = StateDir::open(&tmp)?;
        let (base, layer, _) = layered::take(
            &root_of(store),
            original,
            exclude,
            &sd.join(Path::new(BASE))?,
        )?;
        if let Some(l) = &layer {
            // The snapshot's final directory holds the layer once it is renamed in place;
            // until then this process holds it.
            shared_lower::hold_for(l, &store.join(&id))?;
        }
        // Present, if empty: the snapshot's users are all recorded as holders (a snapshot
        // without the directory comes from a version that did not record them).
        state_dir::create_dir_new(&sd.join(Path::new(holders::HOLDERS))?)?;
        state_dir::write_atomic(&sd.join(Path::new(NODES))?, &nodes::encode(&base.nodes))?;
        let info = SnapshotInfo {
            id: id.clone(),
            original: original.to_path_buf(),
            // Whole milliseconds, as stored: the info read back equals this one.
            created_at: unix_millis::whole(std::time::SystemTime::now()),
            files: base.nodes.len(),
            plan: plan.map(str::to_string),
            shared: base.under.clone(),
            path: PathBuf::new(),
        };
        let json = serde_json::to_vec_pretty(&info)
            .map_err(|e| io("encode", &tmp.join(INFO), std::io::Error::other(e)))?;
        state_dir::write_atomic(&sd.join(Path::new(INFO))?, &json)?;
        Ok::<_, crate::error::Error>((info, base, layer))
    })();
    let (mut info, mut base, _layer) = match made {
        Ok(x) => x,
        Err(e) => {
            let _ = state_dir::remove_dir_tree(&tmp);
            return Err(e);
        }
    };
    let dst = store.join(&id);
    std::fs::rename(&tmp, &dst).map_err(|e| io("rename", &tmp, e))?;
    if let Ok(d) = std::fs::File::open(store) {
        let _ = d.sync_all();
    }
    info.path = base_dir(store, &id);
    base.dir = info.path.clone();
    Ok((info, base))
}
