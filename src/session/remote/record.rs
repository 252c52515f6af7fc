//! A pending patch's record in an object store: the small JSON object whose presence makes
//! the entry exist.
//!
//! It names the patch object (and its git blob id, checked on every read) and, for each path
//! the patch touches that existed in base, the content-addressed pre-image object and its
//! mode. Paths and the project are hex-encoded bytes, so any Unix path survives the trip;
//! object ids are [`ObjectId`]s, written as their 40 hex digits.

use serde::{Deserialize, Serialize};

use crate::git::oid::{from_hex, to_hex, ObjectId};
use crate::session::provenance::Provenance;
use crate::store::{Key, StoreError, StoreResult};

/// Format version of a record; a reader refuses newer ones rather than misread them.
pub const RECORD_VERSION: u32 = 1;

/// One pre-image a record points at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreimageRef {
    /// The path, relative to the project, hex-encoded bytes.
    pub path_hex: String,
    /// git blob id of its base content (the object `objects/<oid>`).
    pub oid: ObjectId,
    /// git's mode: `0o100644`, `0o100755` or `0o120000` (a symlink, content = target).
    pub mode: u32,
}

impl PreimageRef {
    /// The path's bytes (`None` when the hex is damaged).
    pub fn path_bytes(&self) -> Option<Vec<u8>> {
        from_hex(&self.path_hex)
    }
}

/// A pending patch's record (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// [`RECORD_VERSION`] when written.
    pub version: u32,
    /// The session that produced the patch.
    pub session: String,
    /// The delegation that produced it.
    pub delegation: String,
    /// Its name in the session: the delegation id, or `<id>.2`, `<id>.3`, … for later
    /// patches of the same id (the name its record claimed).
    pub name: String,
    /// The project it was made from (on the writer's machine), hex-encoded bytes.
    pub project_hex: String,
    /// The writer's host name, for people reading a listing.
    #[serde(default)]
    pub host: String,
    /// Seconds since the Unix epoch when it was stored.
    pub created: u64,
    /// Recovered from a session that died before finishing.
    #[serde(default)]
    pub recovered: bool,
    /// Kept when its manager ended with the sandbox still open.
    #[serde(default)]
    pub abandoned: bool,
    /// What produced the patch (command, directory, exit status, times); empty when unknown
    /// (and in records written before it was kept).
    #[serde(default)]
    pub provenance: Provenance,
    /// The pending patch it is the rest of, after a partial apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_from: Option<String>,
    /// The key of the patch object.
    pub patch_key: String,
    /// git blob id of the patch bytes.
    pub patch_oid: ObjectId,
    /// Size of the patch in bytes.
    pub patch_bytes: u64,
    /// Files the patch touches.
    pub files: u64,
    /// The stored pre-images.
    pub preimages: Vec<PreimageRef>,
}

impl Record {
    /// The project path's bytes (empty when unknown or damaged).
    pub fn project_bytes(&self) -> Vec<u8> {
        from_hex(&self.project_hex).unwrap_or_default()
    }

    /// Hex of `bytes`, as the record stores paths.
    pub fn hex(bytes: &[u8]) -> String {
        to_hex(bytes)
    }

    /// The record as JSON bytes.
    pub fn encode(&self) -> Vec<u8> {
        // Serializing plain strings, numbers and vectors cannot fail.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// Parses the record stored under `key` of the store `store`.
    pub fn decode(store: &str, key: &Key, data: &[u8]) -> StoreResult<Record> {
        let corrupt = |reason: String| StoreError::Corrupt {
            store: store.to_string(),
            key: key.to_string(),
            reason,
        };
        let r: Record =
            serde_json::from_slice(data).map_err(|e| corrupt(format!("malformed record: {e}")))?;
        if r.version > RECORD_VERSION {
            return Err(corrupt(format!(
                "record version {} is newer than this patchbox reads ({RECORD_VERSION})",
                r.version
            )));
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::oid::blob_id;

    fn record() -> Record {
        Record {
            version: RECORD_VERSION,
            session: "s".into(),
            delegation: "d".into(),
            name: "d".into(),
            project_hex: Record::hex(b"/p"),
            host: "h".into(),
            created: 1,
            recovered: false,
            abandoned: false,
            provenance: Provenance::default(),
            split_from: None,
            patch_key: "pending/patches/x.patch".into(),
            patch_oid: blob_id(b"patch"),
            patch_bytes: 5,
            files: 1,
            preimages: vec![PreimageRef {
                path_hex: Record::hex(b"a.txt"),
                oid: blob_id(b""),
                mode: 0o100644,
            }],
        }
    }

    #[test]
    fn ids_are_written_as_40_hex_digits_and_read_back() {
        let r = record();
        let text = String::from_utf8(r.encode()).unwrap();
        assert!(
            text.contains("\"oid\": \"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391\""),
            "{text}"
        );
        let patch_hex = blob_id(b"patch").to_hex();
        assert!(
            text.contains(&format!("\"patch_oid\": \"{patch_hex}\"")),
            "{text}"
        );
        let key = Key::new("pending/records/s/d.json").unwrap();
        assert_eq!(Record::decode("mem://", &key, text.as_bytes()).unwrap(), r);
        // An id that is not one makes the record malformed.
        let bad = text.replace(&patch_hex, "not-an-id");
        assert!(Record::decode("mem://", &key, bad.as_bytes()).is_err());
    }
}
