//! Undoing a committed `transaction_rollback` sandbox: its changeset, kept beside its state
//! since the commit (the `commit_ref`), inverted and applied to the database in one
//! transaction, or refused whole when another writer changed the commit's rows since.

use std::path::Path;

use super::{changeset, live, SqliteSandbox};
use crate::fs::state_dir;
use crate::plan::error::SandboxError;
use crate::plan::record::State;
use crate::plan::status::Status;

impl SqliteSandbox {
    pub(super) fn committed_changeset(
        &self,
        st: &State,
    ) -> Result<(String, Vec<u8>), SandboxError> {
        let name = st
            .record
            .as_ref()
            .and_then(|r| r.commit_ref.clone())
            .ok_or_else(|| self.sandbox_err("the commit has no recorded changeset"))?;
        let p = self.lc.dir().join(&name);
        let cs = std::fs::read(&p).map_err(|e| {
            self.sandbox_err(format!("read the committed changeset {}: {e}", p.display()))
        })?;
        Ok((name, cs))
    }

    pub(super) fn write_changeset(&self, name: &str, cs: &[u8]) -> Result<(), SandboxError> {
        let dir = self.lc.state_dir()?;
        let p = dir.join(Path::new(name)).map_err(|e| {
            SandboxError::from_lower(Some(self.lc.id().as_str()), "sandbox layout", e)
        })?;
        state_dir::write_atomic(&p, cs).map_err(|e| {
            SandboxError::from_lower(Some(self.lc.id().as_str()), "write the changeset", e)
        })
    }

    /// `Committed → RolledBack`: the inverted changeset, all or nothing.
    pub(super) fn undo(&self, st: &mut State) -> Result<(), SandboxError> {
        self.lc.check(st.status, Status::RolledBack)?;
        let (name, cs) = self
            .committed_changeset(st)
            .map_err(|e| self.lc.rollback_error(e.to_string(), vec![]))?;
        let lower =
            |what: &str, e: rusqlite::Error| self.lc.rollback_error(format!("{what}: {e}"), vec![]);
        let inverse = changeset::invert(&cs).map_err(|e| lower("invert the changeset", e))?;
        let conn = live::connect(&self.original)
            .map_err(|e| lower(&format!("open {}", self.original.display()), e))?;
        conn.execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| lower("begin the undo's transaction", e))?;
        match changeset::apply_or_refuse(&conn, &inverse) {
            Ok(Ok(())) => {}
            Ok(Err(conflicts)) => {
                let _ = conn.execute_batch("ROLLBACK");
                let detail: Vec<String> = conflicts
                    .iter()
                    .map(|c| format!("{} ({})", c.path, c.why))
                    .collect();
                return Err(self.lc.rollback_error(
                    format!(
                        "another writer changed rows of the commit since; nothing undone: {}",
                        detail.join(", ")
                    ),
                    conflicts.into_iter().map(|c| c.path).collect(),
                ));
            }
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(lower("apply the inverted changeset", e));
            }
        }
        if let Err(e) = conn.execute_batch("COMMIT") {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(lower("commit the undo", e));
        }
        let _ = std::fs::remove_file(self.lc.dir().join(&name));
        if let Some(r) = st.record.as_mut() {
            r.commit_ref = None;
        }
        self.lc.advance(st, Status::RolledBack)
    }
}
