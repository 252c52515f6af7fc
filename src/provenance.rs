//! Provenance: what produced a delegation's work — the command and its arguments, the
//! working directory, the exit status, when it started and ended.
//!
//! Both families carry it (a session's pending patches, a plan's commits), so it stands below
//! them and imports nothing of either; `patchbox::session::provenance` names the same module.
//!
//! A reviewer deciding whether to accept a patch wants to know what ran. The pending store
//! keeps a [`Provenance`] beside each patch whose producer gave one (`patchbox run` always
//! does; an engine passes its own through
//! [`SandboxManager::write_pending_patch_with`](crate::session::manager::SandboxManager::write_pending_patch_with)),
//! and a plan's commit carries it in its `CommitResult::metadata` under the `provenance.*` keys
//! ([`Provenance::to_metadata`]). Every field is optional: recovered work has none of them.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// What produced a piece of work. Times are milliseconds since the Unix epoch (UTC).
///
/// ```
/// use patchbox::session::provenance::Provenance;
/// let p = Provenance { command: vec!["make".into(), "test".into()], exit_status: Some(0), ..Default::default() };
/// let m = p.to_metadata();
/// assert_eq!(m["provenance.command"], r#"["make","test"]"#);
/// assert_eq!(Provenance::from_metadata(&m), p);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Provenance {
    /// The program and its arguments, as given (empty when unknown).
    pub command: Vec<String>,
    /// The directory the command was started from, if known (lossily UTF-8).
    pub cwd: Option<String>,
    /// Its exit status (128 + the signal when a signal ended it), if it ended.
    pub exit_status: Option<i32>,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_ms: Option<u64>,
    /// When it ended, in milliseconds since the Unix epoch.
    pub ended_ms: Option<u64>,
}

/// The prefix of the keys [`Provenance::to_metadata`] writes.
pub const METADATA_PREFIX: &str = "provenance.";

impl Provenance {
    /// True when nothing is known.
    pub fn is_empty(&self) -> bool {
        *self == Provenance::default()
    }

    /// The current time in milliseconds since the Unix epoch (0 for a clock before it).
    pub fn now_ms() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }

    /// The fields as `provenance.<field>` entries of a string map (a plan commit's
    /// metadata): `command` as a JSON array, the others as plain text; unknown fields are
    /// left out.
    pub fn to_metadata(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            m.insert(format!("{METADATA_PREFIX}{k}"), v);
        };
        if !self.command.is_empty() {
            put(
                "command",
                serde_json::to_string(&self.command).unwrap_or_default(),
            );
        }
        if let Some(c) = &self.cwd {
            put("cwd", c.clone());
        }
        if let Some(s) = self.exit_status {
            put("exit_status", s.to_string());
        }
        if let Some(t) = self.started_ms {
            put("started_ms", t.to_string());
        }
        if let Some(t) = self.ended_ms {
            put("ended_ms", t.to_string());
        }
        m
    }

    /// Reads back what [`to_metadata`](Self::to_metadata) wrote; malformed values are left
    /// unknown.
    pub fn from_metadata(m: &BTreeMap<String, String>) -> Provenance {
        let get = |k: &str| m.get(&format!("{METADATA_PREFIX}{k}"));
        Provenance {
            command: get("command")
                .and_then(|v| serde_json::from_str(v).ok())
                .unwrap_or_default(),
            cwd: get("cwd").cloned(),
            exit_status: get("exit_status").and_then(|v| v.parse().ok()),
            started_ms: get("started_ms").and_then(|v| v.parse().ok()),
            ended_ms: get("ended_ms").and_then(|v| v.parse().ok()),
        }
    }
}
