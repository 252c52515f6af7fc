//! Checkpoints in an object store, so a sandbox can be restored on another machine.
//!
//! ```text
//! <store>/checkpoints/manifests/<checkpoint id>.json   the checkpoint, its full changes
//! <store>/checkpoints/objects/<git blob id>            content, stored once for all
//! ```
//!
//! A stored manifest holds the checkpoint's full set of changes against the sandbox's base
//! (not a delta against a parent), so it is written once and never rewritten: deleting one
//! checkpoint never touches another. Objects are content-addressed and written with
//! create-only writes, so what several checkpoints (of any sandbox, on any machine) hold is
//! stored once; the manifest is written last, so a checkpoint whose upload was cut short is
//! never listed. [`RemoteCheckpoints::remove`] deletes a manifest, then the objects no
//! manifest refers to any more (older than a grace time: younger ones may belong to an
//! upload running elsewhere).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::store::{Manifest, Store};
use crate::git::oid::{blob_id, ObjectId};
use crate::id::CheckpointId;
use crate::plan::error::SandboxError;
use crate::store::{Key, Objects, StoreError, StoreUrl};

const MANIFESTS: &str = "checkpoints/manifests";
const OBJECTS: &str = "checkpoints/objects";

/// How old an unreferenced object must be before a removal takes it.
pub const GC_GRACE: Duration = Duration::from_secs(3600);

fn err(e: StoreError) -> SandboxError {
    SandboxError::from_lower(None, "checkpoint store", e.into())
}

/// Checkpoints in an object store (see the module docs). `Send + Sync`.
#[derive(Clone)]
pub struct RemoteCheckpoints {
    objects: Arc<dyn Objects>,
}

impl RemoteCheckpoints {
    /// The checkpoints in `objects`.
    pub fn new(objects: Arc<dyn Objects>) -> RemoteCheckpoints {
        RemoteCheckpoints { objects }
    }

    /// Opens the store a URL names. Nothing is sent until the first operation.
    pub fn open(url: &StoreUrl) -> Result<RemoteCheckpoints, SandboxError> {
        Ok(RemoteCheckpoints::new(
            crate::store::open_url(url).map_err(err)?,
        ))
    }

    /// The store's URL.
    pub fn url(&self) -> String {
        self.objects.url()
    }

    fn manifest_key(id: &CheckpointId) -> Result<Key, SandboxError> {
        Key::new(format!("{MANIFESTS}/{id}.json")).map_err(err)
    }

    fn object_key(oid: &ObjectId) -> Result<Key, SandboxError> {
        Key::new(format!("{OBJECTS}/{oid}")).map_err(err)
    }

    /// Uploads checkpoint `m` (its changes made full: `full` is what
    /// [`Store::full`] gives for it) with the objects of `local` it uses. Uploading one that
    /// is there already changes nothing.
    pub fn publish(
        &self,
        local: &Store,
        m: &Manifest,
        full: super::store::Changes,
    ) -> Result<(), SandboxError> {
        let oids: Vec<&ObjectId> = full.values().filter_map(|s| s.oid.as_ref()).collect();
        // A batch at a time: the store may take a batch's writes at once.
        for batch in oids.chunks(32) {
            let mut items = Vec::new();
            for oid in batch {
                items.push((Self::object_key(oid)?, local.get(oid)?));
            }
            self.objects.put_new_all(&items).map_err(err)?;
        }
        let stored = Manifest {
            parent: None,
            changes: full,
            ..m.clone()
        };
        let data = serde_json::to_vec(&stored)
            .map_err(|e| SandboxError::sandbox(None, format!("encode checkpoint: {e}")))?;
        self.objects
            .put_new(&Self::manifest_key(&m.checkpoint_id)?, &data)
            .map_err(err)?;
        Ok(())
    }

    /// Checkpoint `id`'s stored manifest (full changes, no parent); `None` when the store
    /// has none.
    pub fn read(&self, id: &CheckpointId) -> Result<Option<Manifest>, SandboxError> {
        let key = Self::manifest_key(id)?;
        match self.objects.get(&key).map_err(err)? {
            Some(d) => serde_json::from_slice(&d).map(Some).map_err(|e| {
                err(StoreError::Corrupt {
                    store: self.url(),
                    key: key.to_string(),
                    reason: format!("malformed checkpoint: {e}"),
                })
            }),
            None => Ok(None),
        }
    }

    /// Every stored checkpoint (of every plan and sandbox), oldest first.
    pub fn list(&self) -> Result<Vec<Manifest>, SandboxError> {
        let mut out = Vec::new();
        for l in self
            .objects
            .list(&Key::new(MANIFESTS).map_err(err)?)
            .map_err(err)?
        {
            let Some(id) = l.key.file_name().strip_suffix(".json") else {
                continue;
            };
            // A key listed in the store: its name is parsed here (a stray one is refused).
            if let Some(m) = self.read(&CheckpointId::parse(id)?)? {
                out.push(m);
            }
        }
        out.sort_by(|a, b| a.checkpoint_id.cmp(&b.checkpoint_id));
        Ok(out)
    }

    /// Downloads the objects stored manifest `m` uses into `local` (those it lacks), each
    /// checked against its id.
    pub fn fetch_into(&self, m: &Manifest, local: &Store) -> Result<(), SandboxError> {
        for s in m.changes.values() {
            let Some(oid) = &s.oid else { continue };
            if local.get(oid).is_ok() {
                continue;
            }
            let key = Self::object_key(oid)?;
            let data = self.objects.get(&key).map_err(err)?.ok_or_else(|| {
                err(StoreError::Corrupt {
                    store: self.url(),
                    key: key.to_string(),
                    reason: format!("object of checkpoint {} is missing", m.checkpoint_id),
                })
            })?;
            if blob_id(&data) != *oid {
                return Err(err(StoreError::Corrupt {
                    store: self.url(),
                    key: key.to_string(),
                    reason: "content does not match its id".into(),
                }));
            }
            local.put(&data)?;
        }
        Ok(())
    }

    /// Removes checkpoint `id`'s manifest, then the objects nothing refers to any more
    /// (older than [`GC_GRACE`]). `Ok(false)` when the store did not have it.
    pub fn remove(&self, id: &CheckpointId) -> Result<bool, SandboxError> {
        let key = Self::manifest_key(id)?;
        if self.objects.get(&key).map_err(err)?.is_none() {
            return Ok(false);
        }
        self.objects.delete(&key).map_err(err)?;
        self.prune(GC_GRACE)?;
        Ok(true)
    }

    /// Removes the objects no stored checkpoint refers to and older than `grace`; returns
    /// how many went.
    pub fn prune(&self, grace: Duration) -> Result<usize, SandboxError> {
        let used: HashSet<ObjectId> = self
            .list()?
            .into_iter()
            .flat_map(|m| m.changes.into_values().filter_map(|s| s.oid))
            .collect();
        let cutoff = SystemTime::now()
            .checked_sub(grace)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let mut removed = 0;
        for l in self
            .objects
            .list(&Key::new(OBJECTS).map_err(err)?)
            .map_err(err)?
        {
            let id = ObjectId::from_hex(l.key.file_name());
            if id.is_none_or(|id| !used.contains(&id)) && l.modified < cutoff {
                self.objects.delete(&l.key).map_err(err)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Bytes the store's checkpoints take (manifests and objects).
    pub fn stored_bytes(&self) -> Result<u64, SandboxError> {
        let mut n = 0;
        for p in [MANIFESTS, OBJECTS] {
            for l in self.objects.list(&Key::new(p).map_err(err)?).map_err(err)? {
                n += l.size;
            }
        }
        Ok(n)
    }
}
