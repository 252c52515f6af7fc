//! The record of a plan checkpoint kept in an object store, as `patchbox plan checkpoints
//! --json --store URL` prints it (`docs/json.md`, "checkpoint").

use std::collections::BTreeMap;
use std::time::UNIX_EPOCH;

use serde::Serialize;

use crate::plan::checkpoint::Checkpoint;

/// A stored plan checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckpointRecord {
    /// Its id (a ULID): what `plan restore` takes.
    pub checkpoint_id: String,
    /// The plan it was taken in.
    pub plan_id: String,
    /// The sandbox it was taken of, on the machine that took it.
    pub sandbox_id: String,
    /// The phase it was taken at (`pre_execute`, `post_execute`, `pre_apply`, or the
    /// caller's name).
    pub phase: String,
    /// When it was taken (0 for a time before the epoch).
    pub created_ms: u64,
    /// The caller's metadata.
    pub metadata: BTreeMap<String, String>,
}

impl From<&Checkpoint> for CheckpointRecord {
    fn from(c: &Checkpoint) -> CheckpointRecord {
        CheckpointRecord {
            checkpoint_id: c.checkpoint_id.clone(),
            plan_id: c.plan_id.clone(),
            sandbox_id: c.sandbox_id.clone(),
            phase: c.phase.clone(),
            created_ms: c
                .created_at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            metadata: c.metadata.clone(),
        }
    }
}
