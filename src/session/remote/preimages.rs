//! Pre-images in an object store: uploaded content-addressed (so patches that touch the
//! same base content share one object), and laid out again as a directory tree for a 3-way
//! apply on the reviewer's machine.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::record::{PreimageRef, Record};
use crate::error::{Error, IoContext, Result};
use crate::fs::relpath::RelPath;
use crate::git::oid::{blob_id, ObjectId};
use crate::session::pending::PreimageFn;
use crate::store::{Key, Objects, StoreError};
use crate::tree::snapshot::NodeKind;

/// Where pre-image objects live, under the store's root.
pub const OBJECTS_PREFIX: &str = "pending/objects";

/// How many pre-images are read and sent together.
const UPLOAD_BATCH: usize = 32;

/// The key of the object holding content `oid`.
pub fn object_key(oid: &ObjectId) -> Result<Key> {
    Ok(Key::new(format!("{OBJECTS_PREFIX}/{oid}"))?)
}

/// Uploads the base version of each of `paths` (those that existed in base) and returns
/// the references a record keeps. An object already there (the same content, stored by any
/// patch) is not written again: the create-only write reports it and is done.
pub fn upload(
    objects: &dyn Objects,
    paths: &[RelPath],
    read: PreimageFn<'_>,
) -> Result<Vec<PreimageRef>> {
    let mut out = Vec::new();
    // Sent a batch at a time: the store may take a batch's writes at once, and at most one
    // batch of content is held in memory.
    for batch in paths.chunks(UPLOAD_BATCH) {
        let mut items = Vec::new();
        for rel in batch {
            let Some((kind, data)) = read(rel)? else {
                continue; // added by the patch: no pre-image
            };
            let oid = blob_id(&data);
            out.push(PreimageRef {
                path_hex: Record::hex(rel.as_path().as_os_str().as_bytes()),
                oid,
                mode: match kind {
                    NodeKind::Symlink => 0o120000,
                    NodeKind::File { executable: true } => 0o100755,
                    NodeKind::File { executable: false } => 0o100644,
                },
            });
            items.push((object_key(&oid)?, data));
        }
        objects.put_new_all(&items)?;
    }
    Ok(out)
}

/// Downloads a record's pre-images into the empty directory `dir` as the tree a 3-way apply
/// reads (`ApplyOptions::preimages`): files with their modes, symlinks as links. Each object
/// is checked against its id.
pub fn materialize(objects: &dyn Objects, record: &Record, dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for p in &record.preimages {
        let bytes = p
            .path_bytes()
            .ok_or_else(|| corrupt(objects, record, "damaged path"))?;
        let rel = RelPath::new(std::ffi::OsStr::from_bytes(&bytes))?;
        let key = object_key(&p.oid)?;
        let data = objects.get(&key)?.ok_or_else(|| StoreError::Corrupt {
            store: objects.url(),
            key: key.to_string(),
            reason: format!("pre-image of pending patch {} is missing", record.name),
        })?;
        if blob_id(&data) != p.oid {
            return Err(StoreError::Corrupt {
                store: objects.url(),
                key: key.to_string(),
                reason: "content does not match its id".into(),
            }
            .into());
        }
        let dst = dir.join(rel.as_path());
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent).ctx("create pre-image directory", parent)?;
        }
        if p.mode == 0o120000 {
            std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&data), &dst)
                .ctx("create pre-image symlink", &dst)?;
        } else {
            std::fs::write(&dst, &data).ctx("write pre-image", &dst)?;
            let mode = if p.mode == 0o100755 { 0o755 } else { 0o644 };
            std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(mode))
                .ctx("set pre-image mode", &dst)?;
        }
    }
    Ok(())
}

fn corrupt(objects: &dyn Objects, record: &Record, reason: &str) -> Error {
    StoreError::Corrupt {
        store: objects.url(),
        key: record.name.clone(),
        reason: reason.into(),
    }
    .into()
}
