//! Where checkpoints live: content-addressed objects and one small manifest per checkpoint,
//! inside the sandbox's own directory (so cleaning the sandbox up removes its checkpoints).
//!
//! ```text
//! <plans>/plan-<plan>/<sandbox>/checkpoints/
//!   objects/<blob id>        the content of a changed file or symlink target, stored once
//!   <checkpoint id>.json     the checkpoint: its fields and the sandbox's changes against base
//! ```
//!
//! A checkpoint records the sandbox's changes against its base (the diff every strategy
//! computes in time proportional to what changed), each changed path as an object id and a
//! git mode, or as deleted. Objects are named by git's blob id, so content that several
//! checkpoints hold is stored once, and a checkpoint of an unchanged tree costs one small
//! manifest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fs::state_dir::{self, StateDir};
use crate::git::oid::{blob_id, ObjectId};
use crate::id::{CheckpointId, PlanId, SandboxId};
use crate::plan::error::SandboxError;

/// Name of the checkpoints directory in a sandbox's directory.
pub const CHECKPOINTS_DIR: &str = "checkpoints";
const OBJECTS_DIR: &str = "objects";

/// One path's state in a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathState {
    /// The object holding the content; none when the path is deleted. Written as 40 hex
    /// digits in the manifest's JSON.
    pub oid: Option<ObjectId>,
    /// git's mode (`0o100644`, `0o100755`, `0o120000`); 0 when deleted.
    pub mode: u32,
    /// In a manifest's delta only: the path is back to the base's state (it leaves the set of
    /// changes its parent checkpoint had).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub base: bool,
}

/// A checkpoint's manifest.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// Its ULID (checked when a manifest is read).
    pub checkpoint_id: CheckpointId,
    /// The sandbox (checked when a manifest is read, as the ids below).
    pub sandbox_id: SandboxId,
    /// The plan.
    pub plan_id: PlanId,
    /// The phase (`pre_execute`, `post_execute`, `pre_apply`, or free-form).
    pub phase: String,
    /// When it was taken (milliseconds since the epoch).
    pub created_at_ms: u64,
    /// The caller's metadata.
    pub metadata: BTreeMap<String, String>,
    /// `files`: the sandbox's changes against its base; `native`: a savepoint of the
    /// sandbox's own kind.
    pub kind: String,
    /// The previous checkpoint of the sandbox, whose changes `changes` is a delta against
    /// (none for the first).
    #[serde(default)]
    pub parent: Option<CheckpointId>,
    /// The paths whose state differs from the parent's (relative to the resource).
    pub changes: BTreeMap<String, PathState>,
}

/// A sandbox's full set of changes against its base, as a checkpoint records it.
pub type Changes = BTreeMap<String, PathState>;

/// What turns `from` into `to`: the entries that differ, and `base` markers for the paths
/// `to` no longer changes.
pub fn delta(from: &Changes, to: &Changes) -> Changes {
    let mut out = Changes::new();
    for (p, s) in to {
        if from.get(p) != Some(s) {
            out.insert(p.clone(), s.clone());
        }
    }
    for p in from.keys().filter(|p| !to.contains_key(*p)) {
        out.insert(
            p.clone(),
            PathState {
                oid: None,
                mode: 0,
                base: true,
            },
        );
    }
    out
}

fn apply_delta(into: &mut Changes, d: &Changes) {
    for (p, s) in d {
        if s.base {
            into.remove(p);
        } else {
            into.insert(p.clone(), s.clone());
        }
    }
}

/// The checkpoints of one sandbox.
pub struct Store {
    dir: PathBuf,
}

fn lower(what: &str, e: crate::Error) -> SandboxError {
    SandboxError::from_lower(None, what, e)
}

impl Store {
    /// The store of the sandbox whose directory is `sandbox_dir` (made when first written).
    pub fn new(sandbox_dir: &Path) -> Store {
        Store {
            dir: sandbox_dir.join(CHECKPOINTS_DIR),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn session(&self) -> Result<StateDir, SandboxError> {
        std::fs::create_dir_all(self.dir.join(OBJECTS_DIR)).map_err(|e| {
            lower(
                "create checkpoint store",
                crate::Error::io("create directory", &self.dir, e),
            )
        })?;
        StateDir::open(&self.dir).map_err(|e| lower("open checkpoint store", e))
    }

    /// Stores `data` (once: an object already present is not written again); returns its id.
    pub fn put(&self, data: &[u8]) -> Result<ObjectId, SandboxError> {
        let oid = blob_id(data);
        let rel = Path::new(OBJECTS_DIR).join(oid.to_hex());
        if self.dir.join(&rel).exists() {
            return Ok(oid);
        }
        let sd = self.session()?;
        let p = sd.join(&rel).map_err(|e| lower("object path", e))?;
        // Renamed into place, not fsynced: one fsync per object would cost most of a
        // checkpoint. A process crash cannot leave a partial object; a power loss can leave
        // an empty one, which `get` refuses by its id (never restored as content), and the
        // manifest that names it is fsynced after the objects are written.
        state_dir::write_file_replace(&p, data, 0o644)
            .map_err(|e| lower("write checkpoint object", e))?;
        Ok(oid)
    }

    /// The content of object `oid`, checked against its id.
    pub fn get(&self, oid: &ObjectId) -> Result<Vec<u8>, SandboxError> {
        let p = self.dir.join(OBJECTS_DIR).join(oid.to_hex());
        let data = std::fs::read(&p)
            .map_err(|e| lower("read checkpoint object", crate::Error::io("read", &p, e)))?;
        if blob_id(&data) != *oid {
            return Err(SandboxError::sandbox(
                None,
                format!("checkpoint object {} is corrupt", p.display()),
            ));
        }
        Ok(data)
    }

    /// The path of checkpoint `id`'s manifest.
    pub fn manifest_path(&self, id: &CheckpointId) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Writes a manifest durably.
    pub fn write(&self, m: &Manifest) -> Result<PathBuf, SandboxError> {
        let data = serde_json::to_vec(m)
            .map_err(|e| SandboxError::sandbox(None, format!("encode checkpoint: {e}")))?;
        let sd = self.session()?;
        let name = format!("{}.json", m.checkpoint_id);
        let p = sd
            .join(Path::new(&name))
            .map_err(|e| lower("checkpoint path", e))?;
        state_dir::write_atomic(&p, &data).map_err(|e| lower("write checkpoint", e))?;
        Ok(self.manifest_path(&m.checkpoint_id))
    }

    /// Reads checkpoint `id`'s manifest; `None` when it is not there.
    pub fn read(&self, id: &CheckpointId) -> Result<Option<Manifest>, SandboxError> {
        let p = self.manifest_path(id);
        match std::fs::read(&p) {
            Ok(d) => serde_json::from_slice(&d).map(Some).map_err(|e| {
                SandboxError::sandbox(None, format!("{}: malformed checkpoint: {e}", p.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(lower("read checkpoint", crate::Error::io("read", &p, e))),
        }
    }

    /// Every manifest, oldest first (ULIDs sort by time).
    pub fn list(&self) -> Result<Vec<Manifest>, SandboxError> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return Ok(Vec::new());
        };
        // Names read from disk: only those that are checkpoint ids count.
        let mut ids: Vec<CheckpointId> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter_map(|n| n.strip_suffix(".json").map(CheckpointId::parse)?.ok())
            .collect();
        ids.sort();
        let mut out = Vec::new();
        for id in ids {
            if let Some(m) = self.read(&id)? {
                out.push(m);
            }
        }
        Ok(out)
    }

    /// The full changes checkpoint `id` records (its delta applied over its ancestors').
    pub fn full(&self, id: &CheckpointId) -> Result<Changes, SandboxError> {
        let mut chain = Vec::new();
        let mut next = Some(id.clone());
        while let Some(cur) = next {
            let m = self.read(&cur)?.ok_or_else(|| {
                SandboxError::sandbox(
                    None,
                    format!("checkpoint {cur} is missing from {}", self.dir.display()),
                )
            })?;
            if chain.len() > 100_000 {
                return Err(SandboxError::sandbox(None, "checkpoint chain does not end"));
            }
            next = m.parent.clone();
            chain.push(m.changes);
        }
        let mut out = Changes::new();
        for d in chain.iter().rev() {
            apply_delta(&mut out, d);
        }
        Ok(out)
    }

    /// Removes checkpoint `id`'s manifest (its children are re-based on its parent first, so
    /// they keep their state), then every object no remaining manifest uses.
    pub fn remove(&self, id: &CheckpointId) -> Result<bool, SandboxError> {
        let Some(gone) = self.read(id)? else {
            return Ok(false);
        };
        let base = match &gone.parent {
            Some(parent) => self.full(parent)?,
            None => Changes::new(),
        };
        for mut child in self
            .list()?
            .into_iter()
            .filter(|m| m.parent.as_ref() == Some(id))
        {
            let full = self.full(&child.checkpoint_id)?;
            child.changes = delta(&base, &full);
            child.parent = gone.parent.clone();
            self.write(&child)?;
        }
        let p = self.manifest_path(id);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => {
                return Err(lower(
                    "remove checkpoint",
                    crate::Error::io("remove", &p, e),
                ))
            }
        }
        let used: std::collections::HashSet<ObjectId> = self
            .list()?
            .into_iter()
            .flat_map(|m| m.changes.into_values().filter_map(|s| s.oid))
            .collect();
        if let Ok(rd) = std::fs::read_dir(self.dir.join(OBJECTS_DIR)) {
            for e in rd.filter_map(|e| e.ok()) {
                let name = e.file_name();
                // Anything that is not an object in use goes, a stray file included.
                let id = name.to_str().and_then(ObjectId::from_hex);
                if id.is_none_or(|id| !used.contains(&id)) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        Ok(true)
    }

    /// Bytes the store holds on disk (objects and manifests).
    pub fn disk_bytes(&self) -> u64 {
        walk_bytes(&self.dir)
    }
}

fn walk_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.filter_map(|e| e.ok())
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => walk_bytes(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifest's JSON names an object by its 40 hex digits, as it did when ids were strings.
    #[test]
    fn path_state_json_keeps_the_hex_id() {
        let hex = "ce013625030ba8dba906f756967f9e9ca394464a";
        let s = PathState {
            oid: Some(blob_id(b"hello\n")),
            mode: 0o100644,
            base: false,
        };
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, format!("{{\"oid\":\"{hex}\",\"mode\":33188}}"));
        assert_eq!(serde_json::from_str::<PathState>(&json).unwrap(), s);
        let gone = PathState {
            oid: None,
            mode: 0,
            base: true,
        };
        let json = serde_json::to_string(&gone).unwrap();
        assert_eq!(json, "{\"oid\":null,\"mode\":0,\"base\":true}");
        assert_eq!(serde_json::from_str::<PathState>(&json).unwrap(), gone);
    }
}
