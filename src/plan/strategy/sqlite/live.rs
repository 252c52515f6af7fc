//! The open transaction of a `transaction_rollback` sandbox: one connection to the database,
//! a session recording every row it changes (with `rowlog`'s triggers for the tables without
//! a `PRIMARY KEY` where the session cannot record them), and `BEGIN` (deferred) issued on it.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::encode;
use super::rowlog::RowLog;
use super::session::RowSession;

self_cell::self_cell!(
    /// A connection and the session attached to it (the session borrows the connection).
    struct Tracked {
        owner: Connection,
        #[covariant]
        dependent: RowSession,
    }
);

/// A connection inside the sandbox's transaction, with its session.
pub(super) struct Live {
    tracked: Tracked,
    /// The triggers' record of the tables without a key (`None` only if the session records
    /// them itself).
    rowlog: Option<RowLog>,
}

// SAFETY: `Connection` is `Send` (and `RowLog` is plain data); `RowSession` is not only
// because it holds a raw pointer into that same connection. The two move together and are used by one thread at a time
// only (behind the sandbox's mutex). The bundled SQLite is built thread-safe
// (`SQLITE_THREADSAFE=1`); a connection opened with `SQLITE_OPEN_NO_MUTEX` is in
// multi-thread mode, where a connection and the objects made from it may be used from any
// thread as long as no two threads use them at once.
unsafe impl Send for Live {}

/// Opens `db` read-write (never creating it) and checks it is a SQLite database.
pub(super) fn connect(db: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })?;
    Ok(conn)
}

impl Live {
    /// A new connection to `db`, a session on all its tables (those made later too), the
    /// triggers of those without a `PRIMARY KEY` (made outside the transaction, see
    /// `rowlog`), and `BEGIN`.
    pub(super) fn begin(db: &Path) -> rusqlite::Result<Live> {
        let tracked = Tracked::try_new(connect(db)?, |conn| RowSession::new(conn))?;
        let rowlog = if tracked.borrow_dependent().records_unkeyed() {
            None
        } else {
            Some(RowLog::begin(tracked.borrow_owner(), db)?)
        };
        tracked.borrow_owner().execute_batch("BEGIN")?;
        Ok(Live { tracked, rowlog })
    }

    /// The connection.
    pub(super) fn conn(&self) -> &Connection {
        self.tracked.borrow_owner()
    }

    /// Whether the transaction is still open (the actor may have ended it itself).
    pub(super) fn in_transaction(&self) -> bool {
        !self.conn().is_autocommit()
    }

    /// Catches the record of the tables without a key up with the actor's statements (new,
    /// renamed, dropped tables); nothing where the session records them.
    pub(super) fn sync(&mut self) -> rusqlite::Result<()> {
        let written = self.tracked.borrow_dependent().unkeyed_written();
        match self.rowlog.as_mut() {
            Some(log) => log.sync(self.tracked.borrow_owner(), &written),
            None => Ok(()),
        }
    }

    /// The tables without a `PRIMARY KEY` written in the transaction that could not be
    /// recorded, each with why (see `rowlog`).
    pub(super) fn unrecorded_tables(&self) -> Vec<(String, String)> {
        match &self.rowlog {
            Some(log) => log.unrecorded(&self.tracked.borrow_dependent().unkeyed_written()),
            None => Vec::new(),
        }
    }

    /// The rows changed so far, as a changeset: the session's, then the triggers' rows of
    /// the tables without a key, encoded as SQLite 3.44's session would.
    pub(super) fn changeset(&mut self) -> rusqlite::Result<Vec<u8>> {
        let mut cs = self
            .tracked
            .with_dependent_mut(|_, session| session.changeset())?;
        if let Some(log) = &self.rowlog {
            cs.extend(encode::encode(&log.rows(self.tracked.borrow_owner())?));
        }
        Ok(cs)
    }

    /// Ends the transaction without keeping anything (closing the connection would too).
    pub(super) fn abandon(self) {
        if self.in_transaction() {
            let _ = self.conn().execute_batch("ROLLBACK");
        }
    }
}
