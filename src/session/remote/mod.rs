//! The pending store on an object store: pending patches that outlive the machine that made
//! them, listed, shown, applied and dropped from any other.
//!
//! ```text
//! <store>/pending/records/<session>/<name>.json   the entry: meta, patch key, pre-images
//! <store>/pending/patches/<ulid>.patch            the patch bytes, one object per upload
//! <store>/pending/objects/<git blob id>           pre-image content, shared by all patches
//! ```
//!
//! Every object is written once with a create-only write and never replaced. A patch is
//! uploaded in this order: its pre-images, its patch object, then its record, whose
//! create-only write claims the name `<delegation>` (or `<delegation>.2`, `.3`, … when the
//! name is taken, as in the local store): eight writers of one delegation id in one session
//! get eight names, and writers in different sessions never meet. Listing reads records
//! only, so an upload cut short (the store down, the writer killed) is never listed; what it
//! left is unreferenced and [`RemotePending::gc`] removes it once it is old enough not to
//! belong to an upload still running.
//!
//! Ids are `<session>/<name>` as in the local store; a bare name that only one entry has
//! works too.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::apply::store::UndoStore;
use crate::apply::{ApplyOptions, ApplyReport, Outcome};
use crate::error::{Error, Result};
use crate::fs::relpath::RelPath;
use crate::git::oid::{blob_id, ObjectId};
use crate::id::{DelegationId, SessionId};
use crate::session::pending::{PendingMeta, PreimageFn};
use crate::store::{Key, Objects, Put, StoreError, StoreUrl};

pub mod preimages;
pub mod push;
pub mod record;

pub use record::{PreimageRef, Record};

/// Where records live, under the store's root.
pub const RECORDS_PREFIX: &str = "pending/records";
/// Where patch objects live, under the store's root.
pub const PATCHES_PREFIX: &str = "pending/patches";

/// One pending patch found in a store.
#[derive(Clone, Debug)]
pub struct RemoteEntry {
    /// `<session>/<name>`, unique in the store.
    pub id: String,
    /// Its record.
    pub record: Record,
}

/// What a store holds, for a listing of costs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Pending patches listed.
    pub entries: u64,
    /// Bytes of records.
    pub record_bytes: u64,
    /// Bytes of patch objects.
    pub patch_bytes: u64,
    /// Bytes of pre-image objects as stored (each content once).
    pub object_bytes: u64,
    /// Bytes the pre-images would take with one copy per patch (no sharing).
    pub object_bytes_unshared: u64,
}

/// The pending store in an object store (see the module docs). `Send + Sync`.
#[derive(Clone)]
pub struct RemotePending {
    objects: Arc<dyn Objects>,
}

impl RemotePending {
    /// The pending store in `objects`.
    pub fn new(objects: Arc<dyn Objects>) -> RemotePending {
        RemotePending { objects }
    }

    /// Opens the store a URL names (`s3://bucket/prefix` or a directory). Nothing is sent
    /// until the first operation.
    pub fn open(url: &StoreUrl) -> Result<RemotePending> {
        Ok(RemotePending::new(crate::store::open_url(url)?))
    }

    /// The store's URL.
    pub fn url(&self) -> String {
        self.objects.url()
    }

    /// The object store underneath.
    pub fn objects(&self) -> &Arc<dyn Objects> {
        &self.objects
    }

    /// Stores `patch` as a pending patch of `meta.delegation` in `meta.session` and returns
    /// its id. `preimages`: the paths whose base versions to keep, and a reader of each one's
    /// base node. Nothing is overwritten, also against concurrent writers (see the module
    /// docs); a failure part-way leaves no entry.
    pub fn store(
        &self,
        meta: &PendingMeta,
        patch: &[u8],
        preimages: Option<(&[RelPath], PreimageFn<'_>)>,
    ) -> Result<String> {
        // The meta's ids are text: parsed here, where they come in.
        let delegation = DelegationId::parse(&meta.delegation)?;
        let session = SessionId::parse(&meta.session)?;
        self.store_inner(&session, &delegation, meta, patch, preimages, false)
    }

    /// [`RemotePending::store`] with the meta's ids already parsed (`session` and
    /// `delegation` are `meta.session` and `meta.delegation`). `same_is_done`: a record
    /// already there for the same patch counts as stored (a push cut short).
    pub(crate) fn store_inner(
        &self,
        session: &SessionId,
        delegation: &DelegationId,
        meta: &PendingMeta,
        patch: &[u8],
        preimages: Option<(&[RelPath], PreimageFn<'_>)>,
        same_is_done: bool,
    ) -> Result<String> {
        let pre = match preimages {
            Some((paths, read)) => preimages::upload(self.objects.as_ref(), paths, read)?,
            None => Vec::new(),
        };
        let patch_oid = blob_id(patch);
        let patch_key = Key::new(format!("{PATCHES_PREFIX}/{}.patch", ulid::Ulid::new()))?;
        self.objects.put_new(&patch_key, patch)?;
        let mut record = Record {
            version: record::RECORD_VERSION,
            session: session.to_string(),
            delegation: delegation.to_string(),
            name: String::new(),
            project_hex: Record::hex(std::os::unix::ffi::OsStrExt::as_bytes(
                meta.project.as_os_str(),
            )),
            host: host_name(),
            created: meta.created,
            recovered: meta.recovered,
            abandoned: meta.abandoned,
            provenance: meta.provenance.clone(),
            split_from: meta.split_from.clone(),
            patch_key: patch_key.to_string(),
            patch_oid,
            patch_bytes: patch.len() as u64,
            files: count_files(patch),
            preimages: pre,
        };
        for n in 1..=1000u32 {
            // `<id>.<n>` is a name of its own: it must still fit the rule (a long id may
            // leave no room for the suffix).
            let name = if n == 1 {
                delegation.clone()
            } else {
                DelegationId::parse(&format!("{delegation}.{n}"))?
            };
            record.name = name.to_string();
            let key = key_of(session, &name)?;
            match self.objects.put_new(&key, &record.encode())? {
                Put::Created => return Ok(format!("{session}/{}", record.name)),
                Put::Exists if same_is_done => {
                    // A push cut short after its record landed: the same patch is there.
                    if let Some(d) = self.objects.get(&key)? {
                        let there = Record::decode(&self.url(), &key, &d)?;
                        if there.patch_oid == record.patch_oid {
                            let _ = self.objects.delete(&patch_key);
                            return Ok(format!("{session}/{}", there.name));
                        }
                    }
                }
                Put::Exists => {}
            }
        }
        let _ = self.objects.delete(&patch_key);
        Err(Error::Pending {
            id: delegation.to_string(),
            reason: "no free name left to store it (1,000 pending patches of this id)".into(),
        })
    }

    /// Every pending patch in the store, by session, then delegation, then `<id>`, `<id>.2`, ….
    pub fn list(&self) -> Result<Vec<RemoteEntry>> {
        let prefix = Key::new(RECORDS_PREFIX)?;
        let mut out = Vec::new();
        for l in self.objects.list(&prefix)? {
            let Some(rest) = l.key.strip_prefix(&prefix) else {
                continue;
            };
            let Some((session, name)) = rest.strip_suffix(".json").and_then(|r| r.split_once('/'))
            else {
                continue;
            };
            // Dropped between the listing and the read: gone, not an error.
            let Some(data) = self.objects.get(&l.key)? else {
                continue;
            };
            let record = Record::decode(&self.url(), &l.key, &data)?;
            out.push(RemoteEntry {
                id: format!("{session}/{name}"),
                record,
            });
        }
        // As the local store lists them: `d1` before `d1.2` before `d1.10`.
        out.sort_by_cached_key(|e| {
            let r = &e.record;
            let n: u32 = r
                .name
                .strip_prefix(&r.delegation)
                .and_then(|rest| rest.strip_prefix('.'))
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            (r.session.clone(), r.delegation.clone(), n)
        });
        Ok(out)
    }

    /// Finds one pending patch by its id `<session>/<name>`, or by a name only one entry has.
    pub fn find(&self, id: &str) -> Result<RemoteEntry> {
        if let Some((session, name)) = id.split_once('/') {
            let key = record_key(session, name).map_err(|_| not_found(id, &self.url()))?;
            let data = self
                .objects
                .get(&key)?
                .ok_or_else(|| not_found(id, &self.url()))?;
            return Ok(RemoteEntry {
                id: id.to_string(),
                record: Record::decode(&self.url(), &key, &data)?,
            });
        }
        let mut matches: Vec<RemoteEntry> = self
            .list()?
            .into_iter()
            .filter(|e| e.record.name == id)
            .collect();
        match matches.len() {
            0 => Err(not_found(id, &self.url())),
            1 => Ok(matches.remove(0)),
            n => Err(Error::Pending {
                id: id.to_string(),
                reason: format!("{n} pending patches match; use the full <session>/<name> id"),
            }),
        }
    }

    /// The bytes of a found entry's patch, checked against the id its record holds.
    pub fn patch_of(&self, e: &RemoteEntry) -> Result<Vec<u8>> {
        let key = Key::new(e.record.patch_key.clone())?;
        let data = self.objects.get(&key)?.ok_or_else(|| StoreError::Corrupt {
            store: self.url(),
            key: key.to_string(),
            reason: format!("the patch of pending patch {} is missing", e.id),
        })?;
        if blob_id(&data) != e.record.patch_oid {
            return Err(StoreError::Corrupt {
                store: self.url(),
                key: key.to_string(),
                reason: "the patch does not match the id its record holds".into(),
            }
            .into());
        }
        Ok(data)
    }

    /// The bytes of pending patch `id`.
    pub fn read(&self, id: &str) -> Result<Vec<u8>> {
        self.patch_of(&self.find(id)?)
    }

    /// Removes pending patch `id`: its record (the entry is gone from then on), then its
    /// patch object. Pre-images stay, as other patches may share them ([`Self::gc`]).
    pub fn drop_pending(&self, id: &str) -> Result<()> {
        let e = self.find(id)?;
        self.objects
            .delete(&record_key(&e.record.session, &e.record.name)?)?;
        self.objects
            .delete(&Key::new(e.record.patch_key.clone())?)?;
        Ok(())
    }

    /// Applies pending patch `id` to `project` (the caller's own copy), merging 3-way
    /// against the pre-images stored with it unless `options` names others, with an undo
    /// record in `root`'s [`UndoStore`]. Once applied for real it is dropped from the store;
    /// conflicts and refusals are in the report and keep it. The pre-images are laid out in
    /// a temporary directory under `root`, removed afterwards.
    pub fn apply(
        &self,
        id: &str,
        project: &Path,
        root: &Path,
        options: &ApplyOptions,
    ) -> Result<ApplyReport> {
        let e = self.find(id)?;
        let patch = self.patch_of(&e)?;
        let mut options = options.clone();
        let tmp: Option<PathBuf> = if options.preimages.is_none() && !e.record.preimages.is_empty()
        {
            let dir = root.join(format!(".store-preimages-{}", ulid::Ulid::new()));
            std::fs::create_dir_all(&dir)
                .map_err(|err| Error::io("create directory", &dir, err))?;
            Some(dir)
        } else {
            None
        };
        let result = (|| {
            if let Some(dir) = &tmp {
                preimages::materialize(self.objects.as_ref(), &e.record, dir)?;
                options.preimages = Some(dir.clone());
            }
            UndoStore::new(root).apply(project, &patch, &options)
        })();
        if let Some(dir) = &tmp {
            let _ = std::fs::remove_dir_all(dir);
        }
        let report = result?;
        let applied = matches!(report.outcome, Outcome::Applied | Outcome::AlreadyApplied);
        if applied && !options.check {
            self.drop_pending(&e.id)?;
        }
        Ok(report)
    }

    /// Removes patch and pre-image objects no record refers to and older than `grace`
    /// (younger ones may belong to an upload still running); returns how many went.
    pub fn gc(&self, grace: Duration) -> Result<usize> {
        let entries = self.list()?;
        let mut used: std::collections::HashSet<String> = std::collections::HashSet::new();
        for e in &entries {
            used.insert(e.record.patch_key.clone());
            for p in &e.record.preimages {
                used.insert(preimages::object_key(&p.oid)?.to_string());
            }
        }
        let cutoff = SystemTime::now()
            .checked_sub(grace)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let mut removed = 0;
        for prefix in [PATCHES_PREFIX, preimages::OBJECTS_PREFIX] {
            for l in self.objects.list(&Key::new(prefix)?)? {
                if !used.contains(l.key.as_str()) && l.modified < cutoff {
                    self.objects.delete(&l.key)?;
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }

    /// What the store holds: entries, bytes of records, patches and pre-images, and what the
    /// pre-images would take with no sharing.
    pub fn usage(&self) -> Result<Usage> {
        let mut u = Usage::default();
        let objects = self.objects.list(&Key::new(preimages::OBJECTS_PREFIX)?)?;
        u.object_bytes = objects.iter().map(|l| l.size).sum();
        // Pre-image objects are named by their id; a name that is not one is no pre-image.
        let sizes: std::collections::HashMap<ObjectId, u64> = objects
            .iter()
            .filter_map(|l| Some((ObjectId::from_hex(l.key.file_name())?, l.size)))
            .collect();
        for l in self.objects.list(&Key::new(RECORDS_PREFIX)?)? {
            u.record_bytes += l.size;
        }
        for l in self.objects.list(&Key::new(PATCHES_PREFIX)?)? {
            u.patch_bytes += l.size;
        }
        for e in self.list()? {
            u.entries += 1;
            for p in &e.record.preimages {
                u.object_bytes_unshared += sizes.get(&p.oid).copied().unwrap_or(0);
            }
        }
        Ok(u)
    }
}

/// The key of the record of `<session>/<name>`.
pub fn record_key(session: &str, name: &str) -> Result<Key> {
    let name = DelegationId::parse(name)?;
    key_of(&SessionId::parse(session)?, &name)
}

/// [`record_key`] of ids already parsed.
fn key_of(session: &SessionId, name: &DelegationId) -> Result<Key> {
    Ok(Key::new(format!("{RECORDS_PREFIX}/{session}/{name}.json"))?)
}

fn not_found(id: &str, url: &str) -> Error {
    Error::Pending {
        id: id.to_string(),
        reason: format!("no pending patch with this id in {url}"),
    }
}

fn count_files(patch: &[u8]) -> u64 {
    patch
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"diff --git "))
        .count() as u64
}

/// This machine's name (for listings); empty when unknown.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}
