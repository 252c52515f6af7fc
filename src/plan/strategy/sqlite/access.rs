//! [`SqlAccess`]: the SQL capability a database's sandbox offers (statements, savepoints,
//! the connection itself), reached through
//! [`Sandbox::sql`](crate::plan::sandbox::Sandbox::sql) without naming the implementation.

use super::value::{Rows, SqlValue};
use crate::plan::error::SandboxError;

/// Statements and savepoints inside a sandbox's open transaction. Every call makes a created
/// sandbox active and is serialized with the sandbox's other operations.
pub trait SqlAccess: Send + Sync {
    /// Runs one statement with positional parameters (`?1`, `?2`, …) and returns its rows
    /// (and, for a statement without result columns, the number of rows it changed).
    fn execute(&self, sql: &str, params: &[SqlValue]) -> Result<Rows, SandboxError>;

    /// `SAVEPOINT <name>`.
    fn savepoint(&self, name: &str) -> Result<(), SandboxError>;

    /// `ROLLBACK TO <name>`: the savepoint stays; refused for an unknown name.
    fn rollback_to_savepoint(&self, name: &str) -> Result<(), SandboxError>;

    /// `RELEASE <name>`: forgets the savepoint (and those after it), keeping the changes.
    fn release_savepoint(&self, name: &str) -> Result<(), SandboxError>;

    /// Runs `f` with the connection inside the transaction (the object-safe form of
    /// [`with_connection`](trait.SqlAccess.html#method.with_connection)).
    fn with_connection_dyn(
        &self,
        f: &mut dyn FnMut(&rusqlite::Connection),
    ) -> Result<(), SandboxError>;
}

impl dyn SqlAccess + '_ {
    /// Runs `f` with the connection, inside the sandbox's transaction: the actor's way to use
    /// `rusqlite` directly. `f` must not end the transaction (`COMMIT`, `ROLLBACK`): doing so
    /// makes the sandbox `Errored`, and this returns an error.
    pub fn with_connection<R>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> R,
    ) -> Result<R, SandboxError> {
        let mut f = Some(f);
        let mut out = None;
        self.with_connection_dyn(&mut |c| {
            if let Some(f) = f.take() {
                out = Some(f(c));
            }
        })?;
        out.ok_or_else(|| SandboxError::sandbox(None, "the connection was not lent"))
    }
}
