//! The commit journal of `commit_all`: which sandboxes of a plan it is committing, in order,
//! made durable before the first commit writes anything.
//!
//! While `<plan dir>/commit.journal` exists, a `commit_all` of the plan is running or was
//! interrupted. A manager that finds it when it opens (after a crash) rolls the plan back:
//! each sandbox of the journal that is `Committed` (after its own in-flight commit was
//! settled, see [`crate::plan::strategy::through_apply::reconcile`]) is rolled back in LIFO
//! order, then the journal is removed. Every original is then exactly as before the
//! `commit_all`.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::SandboxError;
use crate::fs::state_dir::{self, StateDir};
use crate::id::{PlanId, SandboxId};

/// Name of the journal in a plan's directory.
pub const JOURNAL_FILE: &str = "commit.journal";

/// What the journal holds. The ids are written as plain strings and checked again when
/// read: a journal naming something that is not an id is refused as malformed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CommitJournal {
    /// The plan.
    pub plan_id: PlanId,
    /// The sandboxes to commit, in commit order.
    pub order: Vec<SandboxId>,
}

fn io(what: &str, e: crate::Error) -> SandboxError {
    SandboxError::from_lower(None, what, e)
}

impl CommitJournal {
    /// Writes the journal durably (fsync of file and directory) into `plan_dir`.
    pub fn write(&self, plan_dir: &Path) -> Result<(), SandboxError> {
        let data = serde_json::to_vec(self)
            .map_err(|e| SandboxError::sandbox(None, format!("encode commit journal: {e}")))?;
        let dir = StateDir::open(plan_dir).map_err(|e| io("open plan directory", e))?;
        let p = dir
            .join(Path::new(JOURNAL_FILE))
            .map_err(|e| io("commit journal", e))?;
        state_dir::write_atomic(&p, &data).map_err(|e| io("write commit journal", e))
    }

    /// The journal of `plan_dir`, if one is there.
    pub fn read(plan_dir: &Path) -> Result<Option<CommitJournal>, SandboxError> {
        let p = plan_dir.join(JOURNAL_FILE);
        match std::fs::read(&p) {
            Ok(d) => serde_json::from_slice(&d).map(Some).map_err(|e| {
                SandboxError::sandbox(
                    None,
                    format!("{}: malformed commit journal: {e}", p.display()),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io("read commit journal", crate::Error::io("read", &p, e))),
        }
    }

    /// Removes the journal of `plan_dir` (the commit_all is over).
    pub fn remove(plan_dir: &Path) -> Result<(), SandboxError> {
        let dir = StateDir::open(plan_dir).map_err(|e| io("open plan directory", e))?;
        let p = dir
            .join(Path::new(JOURNAL_FILE))
            .map_err(|e| io("commit journal", e))?;
        state_dir::remove_file(&p).map_err(|e| io("remove commit journal", e))?;
        // Durable removal: a journal that came back after a power loss would roll back a
        // completed commit_all.
        std::fs::File::open(plan_dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| {
                io(
                    "sync plan directory",
                    crate::Error::io("fsync", plan_dir, e),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_round_trips_and_one_naming_a_bad_id_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let j = CommitJournal {
            plan_id: PlanId::parse("p").unwrap(),
            order: vec![SandboxId::new(), SandboxId::new()],
        };
        j.write(dir.path()).unwrap();
        assert_eq!(CommitJournal::read(dir.path()).unwrap(), Some(j));
        std::fs::write(
            dir.path().join(JOURNAL_FILE),
            r#"{"plan_id":"p","order":["../x"]}"#,
        )
        .unwrap();
        let e = CommitJournal::read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("malformed commit journal"), "{e}");
        assert!(e.contains("invalid sandbox id"), "{e}");
    }
}
