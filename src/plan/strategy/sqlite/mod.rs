//! `transaction_rollback` for SQLite: the sandbox is an open transaction on the database.
//! The actor runs its statements through the sandbox; `diff` shows the rows they changed
//! (from SQLite's session extension); `commit` is `COMMIT`, `rollback` is `ROLLBACK`, and
//! a commit can be undone afterwards by applying its inverted changeset.
//!
//! ```
//! use patchbox::plan::strategy::sqlite::SqlValue;
//! use patchbox::plan::{DiffOp, PlanManager, Status, Strategy};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let root = tempfile::tempdir()?;
//! let db = root.path().join("app.db");
//! let setup = rusqlite::Connection::open(&db)?;
//! setup.execute_batch("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT);
//!                      INSERT INTO users VALUES (1, 'ada');")?;
//!
//! let mgr = PlanManager::open(root.path().join("sandboxes"))?;
//! let sb = mgr.get_or_create_sandbox("plan-1", "appdb", &db, Strategy::TransactionRollback)?;
//! let sql = sb.sql().expect("a SQLite sandbox");
//! sql.execute("UPDATE users SET name = ?1 WHERE id = 1", &[SqlValue::from("grace")])?;
//! let n: i64 = setup.query_row("SELECT count(*) FROM users WHERE name = 'grace'", [], |r| r.get(0))?;
//! assert_eq!(n, 0);                             // not visible before the commit
//!
//! let diff = sb.diff()?;                        // one entry per changed row
//! assert_eq!(diff.entries[0].path, "users/1");
//! assert_eq!(diff.entries[0].operation, DiffOp::Modified);
//! mgr.commit_all("plan-1")?;                    // COMMIT
//! let n: i64 = setup.query_row("SELECT count(*) FROM users WHERE name = 'grace'", [], |r| r.get(0))?;
//! assert_eq!(n, 1);
//! sb.rollback()?;                               // after commit: the inverted changeset
//! assert_eq!(sb.status(), Status::RolledBack);
//! mgr.cleanup_all("plan-1")?;
//! # Ok(()) }
//! ```
//!
//! ```text
//! <plan dir>/<sandbox id>/
//!   state.json                 the lifecycle record
//!   changeset-<sha1>.bin       the committed changeset (commit_ref), while it can be undone
//! ```
//!
//! **The resource is the database file**, not a directory. [`Sandbox::get_path`](crate::plan::Sandbox::get_path) is refused:
//! the sandbox has no files; statements go through [`SqliteSandbox::execute`] (plain values,
//! what the C++ bridge carries) or [`SqliteSandbox::with_connection`] (the `rusqlite`
//! connection itself). Both make a created sandbox active. An actor that ends the
//! transaction itself (`COMMIT`/`ROLLBACK` through the connection) makes the sandbox
//! `Errored`: its writes were no longer isolated.
//!
//! **Locking.** The transaction is `BEGIN` (deferred): nothing is locked until the actor's
//! first read (a shared lock) or write. From its first write to its commit or rollback the
//! sandbox holds the database's write lock, as any SQLite writer does: other writers wait
//! (their busy timeout) and then fail with `SQLITE_BUSY`. Readers go on: in WAL mode always;
//! in rollback-journal mode until the `COMMIT`, which waits for them to finish. A `COMMIT`
//! that cannot get its lock in the connection's busy timeout (5 s unless the actor sets
//! another through [`SqliteSandbox::with_connection`]) is a [`SandboxError::Commit`] that
//! wrote nothing; the transaction stays open and the sandbox `Active`, so the commit can be
//! retried (in rollback-journal mode the failed `COMMIT` keeps its pending lock, which
//! keeps new readers out until the retry or a rollback). In WAL mode a transaction that read before another connection committed cannot
//! write at all afterwards (`SQLITE_BUSY_SNAPSHOT`): the actor's statement fails, not the
//! commit.
//!
//! **Diff.** Per changed row, from the session's changeset: `<table>/<primary key>`, added,
//! modified or deleted, with each side as a JSON object of the columns the changeset holds
//! (an update holds the key and the changed columns). `SandboxDiff::patch` is a readable
//! summary per table, not a git patch. A table without a declared `PRIMARY KEY` is keyed by
//! its rowid (`<table>/<rowid>`, the row's sides led by `_rowid_`): its rows show in the diff
//! and are undone like any other, on every SQLite. The session records the tables with a
//! key; the sandbox's connection gets TEMP triggers on those without one that log each
//! touched row as it was before the transaction (`rowlog`); the changes are computed from
//! that log as the session computes them and written into the changeset in the very format
//! SQLite 3.44's session gives such tables, and on an SQLite older than 3.44 their undo is
//! applied in SQL (`rowid_apply`), where `sqlite3changeset_apply` would skip them. Triggers,
//! because an older system SQLite (built without the `bundled-sqlite` feature, e.g. Debian
//! 12's 3.40.1, which the Python extension shares with Python's `sqlite3`) has no way to key
//! a table by rowid in a session and the preupdate hook is the session's own; and on every
//! SQLite, because its own rowid keying (`SQLITE_SESSION_OBJCONFIG_ROWID`, 3.44 to at least 3.54) files a row twice once the session holds more than 128 changes of such a table (its hash table regrows with another hash for rowid rows), which doubled the diff and made the undo refuse itself.
//! A table written before it had triggers (made in the transaction, or by another connection
//! after it began) is caught up from the committed database. What they cannot record is
//! refused: a write to such a table whose columns changed in the transaction fails naming the
//! table, the sandbox becomes `Errored` and its transaction is rolled back, so nothing
//! unrecorded is committed.
//! Only the `main` database is recorded: changes to an `ATTACH`ed one show in no diff and are
//! not undone.
//!
//! **check_commit** can check nothing without committing except that the transaction is
//! still open; `commit_all` commits this strategy after the rollbackable ones (it counts as
//! not rollbackable, since its undo can be refused), so a failed `COMMIT` rolls those back.
//!
//! **Undo after commit.** `rollback()` from `Committed` applies the inverted changeset in a
//! transaction of its own, refusing it whole ([`SandboxError::Rollback`], naming the rows)
//! when another writer changed, deleted or re-inserted any of those rows since (compared on
//! the columns the commit changed), or a constraint would fail, or one of those tables was
//! dropped or changed its columns or key (naming the table). Unlike `copy_on_write`, an
//! undone sandbox does not hold its changes any more: re-used, it starts an empty
//! transaction.
//!
//! **After a crash** the open transaction is gone: SQLite rolled it back from its journal,
//! by design. A reopened `Active` sandbox is therefore `Errored` (the reason is in its
//! metadata, `sqlite.error`); a `Created` or `RolledBack` one starts a new transaction on
//! first use; a `Committed` one keeps its changeset, so its undo still works. A commit the
//! crash interrupted is settled on reopen: if the inverted changeset applies cleanly the
//! commit landed (`Committed`), otherwise it did not (`Errored`). Dropping the sandbox (the
//! last `Arc`) closes the connection, which also rolls the transaction back.

pub mod access;
mod changeset;
mod encode;
mod ffi_changeset;
mod live;
mod row_change;
mod rowid_apply;
mod rowlog;
mod session;
mod undo;
mod unkeyed;
mod value;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use parking_lot::{Mutex, MutexGuard};
use sha1::Digest;

pub use access::SqlAccess;
pub use changeset::Conflict;
pub use row_change::RowChange;
pub use value::{Rows, SqlValue};

use self::live::Live;
use crate::id::PlanId;
use crate::plan::backend::{Backend, Checkpoints, NativeCheckpoints};
use crate::plan::error::SandboxError;
use crate::plan::model::{CommitResult, SandboxContext, SandboxDiff, Strategy};
use crate::plan::record::{Lifecycle, Record, State};
use crate::plan::status::Status;
use crate::plan::strategy::factory::FnFactory;

/// Metadata key of the reason a sandbox became `Errored`.
const ERROR_KEY: &str = "sqlite.error";

/// A `transaction_rollback` sandbox over one SQLite database file.
pub struct SqliteSandbox {
    lc: Lifecycle,
    resource_id: String,
    original: PathBuf,
    /// The open transaction, while there is one. Taken after the lifecycle lock.
    live: Mutex<Option<Live>>,
    /// An exclusive `flock` on `<sandbox dir>/owner.lock` while this process holds the
    /// transaction: another process opening the sandbox learns from it whether the
    /// transaction's process is gone (only then is an `Active` sandbox settled).
    owner: Mutex<Option<std::fs::File>>,
}

/// The file whose lock says which process holds a sandbox's transaction.
const OWNER_LOCK: &str = "owner.lock";

impl SqliteSandbox {
    /// A pending sandbox for the database at `original`.
    pub fn new(plan_dir: &Path, resource_id: &str, original: &Path) -> Self {
        SqliteSandbox {
            lc: Lifecycle::pending(Strategy::TransactionRollback, plan_dir),
            resource_id: resource_id.to_string(),
            original: original.to_path_buf(),
            live: Mutex::new(None),
            owner: Mutex::new(None),
        }
    }

    /// A sandbox found on disk. Its transaction died with the process that held it: an
    /// `Active` one becomes `Errored`; a commit in flight is settled (see the module docs).
    pub fn open(record: Record, dir: PathBuf) -> Result<Self, SandboxError> {
        let sb = SqliteSandbox {
            resource_id: record.resource_id.clone(),
            original: record.original_path.clone(),
            lc: Lifecycle::loaded(record, dir),
            live: Mutex::new(None),
            owner: Mutex::new(None),
        };
        // Settled only when the process holding the transaction is gone (its owner lock is
        // free); a live one elsewhere is left to it.
        if sb.lc.status() == Status::Active && sb.own().is_ok() {
            let mut st = sb.lc.lock();
            let settled = sb.reconcile(&mut st);
            *sb.owner.lock() = None;
            settled?;
        }
        Ok(sb)
    }

    /// Takes the owner lock for this process (see the `owner` field); refused while another
    /// process holds the sandbox's transaction.
    fn own(&self) -> Result<(), SandboxError> {
        let mut owner = self.owner.lock();
        if owner.is_some() {
            return Ok(());
        }
        let p = self.lc.dir().join(OWNER_LOCK);
        let f = crate::plan::lock::open_lock_file(&p).map_err(|e| {
            SandboxError::from_lower(
                Some(self.lc.id().as_str()),
                "open the owner lock",
                crate::Error::io("open", &p, e),
            )
        })?;
        if !crate::plan::lock::flock_exclusive_patiently(&f) {
            return Err(self.sandbox_err(
                "the sandbox's transaction is held by another process; run its statements there",
            ));
        }
        *owner = Some(f);
        Ok(())
    }

    fn sandbox_err(&self, reason: impl Into<String>) -> SandboxError {
        SandboxError::sandbox(Some(self.lc.id().as_str()), reason)
    }

    /// Moves to `Errored`, recording why.
    fn fail(&self, st: &mut State, reason: &str) -> Result<(), SandboxError> {
        if let Some(r) = st.record.as_mut() {
            r.metadata.insert(ERROR_KEY.into(), reason.to_string());
            r.commit_in_flight = None;
        }
        self.lc.advance(st, Status::Errored)
    }

    /// [`Sandbox::commit`] under the operation lock.
    fn commit_locked(&self) -> Result<CommitResult, SandboxError> {
        let mut st = self.op()?;
        if st.status == Status::Created {
            self.lc.advance(&mut st, Status::Active)?;
        }
        self.lc.check(st.status, Status::Committed)?;
        let mut live = self.live(&st)?;
        let Some(l) = live.as_mut() else {
            return Err(self
                .lc
                .commit_error("the sandbox's transaction is not open", vec![]));
        };
        let cs = l.changeset().map_err(|e| {
            self.lc
                .commit_error(format!("read the session's changeset: {e}"), vec![])
        })?;
        let hash: String = sha1::Sha1::digest(&cs)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let name = format!("changeset-{hash}.bin");
        self.write_changeset(&name, &cs)?;
        if let Some(r) = st.record.as_mut() {
            r.commit_in_flight = Some(name.clone());
        }
        self.lc.persist(&st)?;
        if let Err(e) = l.conn().execute_batch("COMMIT") {
            let still_open = l.in_transaction();
            if !still_open {
                *live = None;
            }
            drop(live);
            let _ = std::fs::remove_file(self.lc.dir().join(&name));
            if let Some(r) = st.record.as_mut() {
                r.commit_in_flight = None;
            }
            if still_open {
                self.lc.persist(&st)?;
                return Err(self.lc.commit_error(
                    format!(
                        "COMMIT failed, nothing written; the transaction is still open, so \
                         the commit can be retried: {e}"
                    ),
                    vec![],
                ));
            }
            let reason = format!("COMMIT failed and SQLite rolled the transaction back: {e}");
            self.fail(&mut st, &reason)?;
            return Err(self.lc.commit_error(reason, vec![]));
        }
        self.lc.landed();
        *live = None;
        drop(live);
        if let Some(r) = st.record.as_mut() {
            r.commit_in_flight = None;
            r.commit_ref = Some(name.clone());
        }
        self.lc.advance_committed(&mut st, true)?;
        let diff = self.render(&cs)?;
        let mut result = super::through_apply::result(self.lc.id(), Some(name), &diff);
        result
            .metadata
            .insert("sqlite.rows".into(), diff.entries.len().to_string());
        Ok(result)
    }

    /// An `Active` sandbox found on disk: settles a commit in flight, else `Errored`.
    fn reconcile(&self, st: &mut State) -> Result<(), SandboxError> {
        let in_flight = st.record.as_ref().and_then(|r| r.commit_in_flight.clone());
        let Some(name) = in_flight else {
            return self.fail(
                st,
                "the process holding the sandbox's transaction ended; SQLite rolled its \
                 uncommitted work back",
            );
        };
        let landed = std::fs::read(self.lc.dir().join(&name))
            .ok()
            .and_then(|cs| self.inverse_applies(&cs).ok())
            .unwrap_or(false);
        if landed {
            if let Some(r) = st.record.as_mut() {
                r.commit_ref = Some(name);
                r.commit_in_flight = None;
            }
            self.lc.advance(st, Status::Committed)
        } else {
            let _ = std::fs::remove_file(self.lc.dir().join(&name));
            self.fail(
                st,
                "a commit was interrupted before it landed; SQLite rolled the transaction back",
            )
        }
    }

    /// Whether the inverse of `changeset` applies cleanly now (tried, then rolled back).
    fn inverse_applies(&self, changeset: &[u8]) -> rusqlite::Result<bool> {
        let inverse = changeset::invert(changeset)?;
        let conn = live::connect(&self.original)?;
        conn.execute_batch("BEGIN")?;
        let r = changeset::apply_or_refuse(&conn, &inverse);
        let _ = conn.execute_batch("ROLLBACK");
        Ok(r?.is_ok())
    }

    /// The open transaction, begun now if there is none (a reopened or re-used sandbox).
    fn live<'a>(&'a self, st: &State) -> Result<MutexGuard<'a, Option<Live>>, SandboxError> {
        let mut live = self.live.lock();
        if live.is_none() {
            if !matches!(st.status, Status::Created | Status::Active) {
                return Err(
                    self.sandbox_err(format!("no transaction is open in status {}", st.status))
                );
            }
            self.own()?;
            let begun = Live::begin(&self.original).map_err(|e| {
                self.sandbox_err(format!(
                    "cannot begin a transaction on {}: {e}",
                    self.original.display()
                ))
            })?;
            *live = Some(begun);
        }
        Ok(live)
    }

    /// Runs `f` on the connection inside the sandbox's transaction (made active first), one
    /// caller at a time. Ending the transaction in `f` makes the sandbox `Errored`.
    fn run<R>(&self, f: impl FnOnce(&rusqlite::Connection) -> R) -> Result<R, SandboxError> {
        let mut st = self.lc.lock_for_path()?;
        super::activate_for_path(&self.lc, &mut st)?;
        let mut live = self.live(&st)?;
        let Some(l) = live.as_mut() else {
            return Err(self.sandbox_err("no transaction is open"));
        };
        let r = f(l.conn());
        if !l.in_transaction() {
            *live = None;
            drop(live);
            let reason = "the actor ended the sandbox's transaction itself (COMMIT, END or \
                          ROLLBACK through the connection); its writes were not isolated";
            self.fail(&mut st, reason)?;
            return Err(self.sandbox_err(reason));
        }
        let unrecorded = match l.sync() {
            Ok(()) => l
                .unrecorded_tables()
                .into_iter()
                .map(|(t, why)| format!("{t}, which has no PRIMARY KEY: {why}"))
                .collect::<Vec<_>>(),
            Err(e) => vec![format!(
                "the tables without a PRIMARY KEY, whose record could not be kept: {e}"
            )],
        };
        if !unrecorded.is_empty() {
            let reason = format!(
                "the actor wrote to {}; this SQLite ({}) records such tables with triggers, \
                 which could not record this; its transaction was rolled back, nothing was \
                 committed",
                unrecorded.join("; "),
                rusqlite::version()
            );
            if let Some(l) = live.take() {
                l.abandon();
            }
            drop(live);
            self.fail(&mut st, &reason)?;
            return Err(self.sandbox_err(reason));
        }
        Ok(r)
    }

    /// Runs `f` with the connection, inside the sandbox's transaction: the actor's way to
    /// use `rusqlite` directly. Makes a created sandbox active; calls are serialized.
    /// Must not end the transaction (`COMMIT`, `ROLLBACK`): doing so makes the sandbox
    /// `Errored`, and this returns an error.
    pub fn with_connection<R>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> R,
    ) -> Result<R, SandboxError> {
        self.run(f)
    }

    /// Runs one statement with positional parameters (`?1`, `?2`, …) inside the sandbox's
    /// transaction and returns its rows (and, for a statement without result columns, the
    /// number of rows it changed). Makes a created sandbox active.
    pub fn execute(&self, sql: &str, params: &[SqlValue]) -> Result<Rows, SandboxError> {
        self.run(|conn| run_statement(conn, sql, params))?
            .map_err(|e| self.sandbox_err(format!("statement failed: {e} (sql: {sql})")))
    }

    /// `SAVEPOINT <name>`: a checkpoint inside the sandbox's transaction.
    pub fn savepoint(&self, name: &str) -> Result<(), SandboxError> {
        self.savepoint_step("SAVEPOINT", name)
    }

    /// `ROLLBACK TO <name>`: back to the checkpoint; it stays, so it can be rolled back to
    /// again. Refused for an unknown name.
    pub fn rollback_to_savepoint(&self, name: &str) -> Result<(), SandboxError> {
        self.savepoint_step("ROLLBACK TO", name)
    }

    /// `RELEASE <name>`: forgets the checkpoint (and those after it), keeping the changes.
    pub fn release_savepoint(&self, name: &str) -> Result<(), SandboxError> {
        self.savepoint_step("RELEASE", name)
    }

    fn savepoint_step(&self, verb: &str, name: &str) -> Result<(), SandboxError> {
        if name.is_empty() {
            return Err(self.sandbox_err("a savepoint name must not be empty"));
        }
        let sql = format!("{verb} \"{}\"", name.replace('"', "\"\""));
        self.run(|conn| conn.execute_batch(&sql))?
            .map_err(|e| self.sandbox_err(format!("{verb} savepoint {name:?}: {e}")))
    }

    /// The changeset of the open transaction (empty when none is open).
    fn live_changeset(&self) -> Result<Vec<u8>, SandboxError> {
        match self.live.lock().as_mut() {
            Some(l) => l
                .changeset()
                .map_err(|e| self.sandbox_err(format!("read the session's changeset: {e}"))),
            None => Ok(Vec::new()),
        }
    }

    /// The diff of a changeset, with column names read from the database.
    fn render(&self, cs: &[u8]) -> Result<SandboxDiff, SandboxError> {
        let rows = changeset::decode(cs)
            .map_err(|e| self.sandbox_err(format!("decode the changeset: {e}")))?;
        if rows.is_empty() {
            return Ok(SandboxDiff::default());
        }
        let source = self.original.display().to_string();
        let live = self.live.lock();
        match live.as_ref() {
            Some(l) => Ok(changeset::render(&rows, &source, &mut |t| {
                changeset::column_names(l.conn(), t)
            })),
            None => {
                let conn = live::connect(&self.original).ok();
                Ok(changeset::render(&rows, &source, &mut |t| {
                    conn.as_ref()
                        .map(|c| changeset::column_names(c, t))
                        .unwrap_or_default()
                }))
            }
        }
    }
}

/// One statement on `conn`, its rows collected.
fn run_statement(
    conn: &rusqlite::Connection,
    sql: &str,
    params: &[SqlValue],
) -> rusqlite::Result<Rows> {
    let mut stmt = conn.prepare(sql)?;
    let columns: Vec<String> = stmt.column_names().map(String::from).collect();
    let n = columns.len();
    let mut out = Vec::new();
    {
        let mut rows = stmt.query(rusqlite::params_from_iter(params.iter()))?;
        while let Some(row) = rows.next()? {
            out.push(
                (0..n)
                    .map(|i| row.get_ref(i).map(SqlValue::from))
                    .collect::<rusqlite::Result<Vec<_>>>()?,
            );
        }
    }
    let changes = if n == 0 { conn.changes() } else { 0 };
    Ok(Rows {
        columns,
        rows: out,
        changes,
    })
}

impl Backend for SqliteSandbox {
    fn lifecycle(&self) -> &Lifecycle {
        &self.lc
    }

    /// Opens a connection to the database, attaches a session to all its tables and
    /// begins a deferred transaction.
    fn create(&self, plan_id: &PlanId) -> Result<SandboxContext, SandboxError> {
        let mut st = self.lc.lock_op(|_| Ok(()))?;
        self.lc.check(st.status, Status::Created)?;
        let creation = |reason: String| SandboxError::Creation {
            resource_id: self.resource_id.clone(),
            reason,
            source: None,
        };
        let original = std::fs::canonicalize(&self.original)
            .map_err(|e| creation(format!("resolve {}: {e}", self.original.display())))?;
        if !original.is_file() {
            return Err(creation(format!(
                "{} is not a SQLite database file",
                original.display()
            )));
        }
        let begun = Live::begin(&original).map_err(|e| {
            creation(format!(
                "open {} as a SQLite database: {e}",
                original.display()
            ))
        })?;
        let journal_mode: String = begun
            .conn()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap_or_default();
        std::fs::create_dir_all(self.lc.dir()).map_err(|e| {
            creation(format!(
                "create sandbox directory {}: {e}",
                self.lc.dir().display()
            ))
        })?;
        let mut metadata = BTreeMap::new();
        metadata.insert(
            "strategy".into(),
            Strategy::TransactionRollback.name().into(),
        );
        metadata.insert("sqlite.journal_mode".into(), journal_mode);
        let record = Record::new(
            self.lc.id(),
            plan_id,
            &self.resource_id,
            Strategy::TransactionRollback,
            &original,
            self.lc.dir(),
            metadata,
        );
        if let Err(e) = self.own() {
            begun.abandon();
            let _ = std::fs::remove_dir_all(self.lc.dir());
            return Err(creation(e.to_string()));
        }
        *self.live.lock() = Some(begun);
        super::record_created(&self.lc, &mut st, record, &self.resource_id, |_| {
            if let Some(begun) = self.live.lock().take() {
                begun.abandon();
            }
        })
    }

    /// Refused: a database sandbox has no files. Use [`SqliteSandbox::execute`] or
    /// [`SqliteSandbox::with_connection`] (through [`Sandbox::sql`](crate::plan::Sandbox::sql)).
    fn get_path(&self, rel: &Path) -> Result<PathBuf, SandboxError> {
        Err(self.sandbox_err(format!(
            "refused path {}: a transaction_rollback sandbox has no files; run statements \
             through execute() or with_connection()",
            rel.display()
        )))
    }

    fn diff(&self) -> Result<SandboxDiff, SandboxError> {
        let st = self.lc.lock();
        super::require_created(&self.lc, &st)?;
        let cs = if st.status == Status::Committed {
            self.committed_changeset(&st)?.1
        } else {
            self.live_changeset()?
        };
        self.render(&cs)
    }

    /// Only that the transaction is still open: whether `COMMIT` gets its lock cannot be
    /// known without committing.
    fn check_commit(&self) -> Result<(), SandboxError> {
        let st = self.lc.lock();
        if st.status == Status::Active
            && !self.live.lock().as_ref().is_some_and(Live::in_transaction)
        {
            return Err(self
                .lc
                .commit_error("the sandbox's transaction is not open", vec![]));
        }
        Ok(())
    }

    /// `COMMIT`, with the changeset kept first (`commit_ref` names it) for a later undo.
    fn commit(&self, _message: Option<&str>) -> Result<CommitResult, SandboxError> {
        super::settle_on_panic(
            || self.commit_locked(),
            || {
                let _ = self.settle_in_flight();
            },
        )
    }

    /// A commit in flight whose caller is gone (a panic): when the transaction is still
    /// open, `COMMIT` never ran (the sandbox stays `Active`, its transaction kept for a
    /// retry); otherwise the changeset says whether it landed, as on a reopen.
    fn settle_in_flight(&self) -> Result<(), SandboxError> {
        let mut st = self.lc.lock_op(|_| Ok(()))?;
        self.settle(&mut st)
    }

    fn rollback(&self) -> Result<(), SandboxError> {
        let mut st = self.op()?;
        if st.status == Status::Committed {
            return self.undo(&mut st);
        }
        self.lc.check(st.status, Status::RolledBack)?;
        if let Some(l) = self.live.lock().take() {
            l.abandon();
        }
        self.lc.advance(&mut st, Status::RolledBack)
    }

    fn cleanup(&self) -> Result<(), SandboxError> {
        let mut st = self.op()?;
        super::cleanup_dir(&self.lc, &mut st, || {
            if let Some(l) = self.live.lock().take() {
                l.abandon();
            }
            Ok(())
        })
    }

    /// Checkpoints are savepoints of the open transaction (`ck_<checkpoint id>`). Rolling
    /// back to one drops the savepoints taken after it (SQLite's rule), so a later
    /// checkpoint cannot be restored after an earlier one was.
    fn checkpoints(&self) -> Checkpoints<'_> {
        Checkpoints::Native(self)
    }

    fn sql(&self) -> Option<&dyn SqlAccess> {
        Some(self)
    }
}

impl NativeCheckpoints for SqliteSandbox {
    fn save(&self, id: &str) -> Result<(), SandboxError> {
        self.savepoint(&format!("ck_{id}"))
    }

    fn restore(&self, id: &str) -> Result<(), SandboxError> {
        self.rollback_to_savepoint(&format!("ck_{id}"))
    }

    /// Nothing: `RELEASE` of a savepoint also removes every savepoint taken after it, which
    /// would break the later checkpoints; savepoints end with the transaction anyway.
    fn release(&self, _id: &str) -> Result<(), SandboxError> {
        Ok(())
    }
}

impl SqliteSandbox {
    /// The hold of an operation that changes the sandbox or its database (see
    /// [`Lifecycle::lock_op`]), a commit a dead committer left in flight settled.
    fn op(&self) -> Result<crate::plan::record::OpGuard<'_>, SandboxError> {
        self.lc.lock_op(|st| self.settle(st))
    }

    /// Settles the commit `st` shows in flight (see [`Sandbox::settle_in_flight`]).
    fn settle(&self, st: &mut State) -> Result<(), SandboxError> {
        let Some(name) = st.record.as_ref().and_then(|r| r.commit_in_flight.clone()) else {
            return Ok(());
        };
        {
            let mut live = self.live.lock();
            if live.as_ref().is_some_and(|l| l.in_transaction()) {
                let _ = std::fs::remove_file(self.lc.dir().join(&name));
                if let Some(r) = st.record.as_mut() {
                    r.commit_in_flight = None;
                }
                return self.lc.persist(st);
            }
            *live = None;
        }
        self.reconcile(st)
    }
}

impl SqlAccess for SqliteSandbox {
    fn execute(&self, sql: &str, params: &[SqlValue]) -> Result<Rows, SandboxError> {
        SqliteSandbox::execute(self, sql, params)
    }

    fn savepoint(&self, name: &str) -> Result<(), SandboxError> {
        SqliteSandbox::savepoint(self, name)
    }

    fn rollback_to_savepoint(&self, name: &str) -> Result<(), SandboxError> {
        SqliteSandbox::rollback_to_savepoint(self, name)
    }

    fn release_savepoint(&self, name: &str) -> Result<(), SandboxError> {
        SqliteSandbox::release_savepoint(self, name)
    }

    fn with_connection_dyn(
        &self,
        f: &mut dyn FnMut(&rusqlite::Connection),
    ) -> Result<(), SandboxError> {
        self.run(f)
    }
}

/// How the registry makes and reopens `transaction_rollback` backends (see
/// [`builtins`](crate::plan::strategy::builtins)).
pub const FACTORY: FnFactory = FnFactory {
    new: |r| {
        Ok(Box::new(SqliteSandbox::new(
            r.plan_dir,
            r.resource_id,
            r.original,
        )))
    },
    open: |_, rec, dir| Ok(Box::new(SqliteSandbox::open(rec, dir)?)),
};
