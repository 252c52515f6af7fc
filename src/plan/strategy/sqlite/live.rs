//! The open transaction of a `transaction_rollback` sandbox: one connection to the database,
//! a session recording every row it changes, and `BEGIN` (deferred) issued on it.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

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
pub(super) struct Live(Tracked);

// SAFETY: `Connection` is `Send`; `RowSession` is not only because it holds a raw pointer
// into that same connection. The two move together and are used by one thread at a time
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
    /// A new connection to `db`, a session on all its tables (those made later too, and
    /// those without a `PRIMARY KEY`, keyed by rowid), and `BEGIN`.
    pub(super) fn begin(db: &Path) -> rusqlite::Result<Live> {
        let tracked = Tracked::try_new(connect(db)?, |conn| RowSession::new(conn))?;
        tracked.borrow_owner().execute_batch("BEGIN")?;
        Ok(Live(tracked))
    }

    /// The connection.
    pub(super) fn conn(&self) -> &Connection {
        self.0.borrow_owner()
    }

    /// Whether the transaction is still open (the actor may have ended it itself).
    pub(super) fn in_transaction(&self) -> bool {
        !self.conn().is_autocommit()
    }

    /// The tables without a `PRIMARY KEY` written in the transaction that the session cannot
    /// record (an SQLite older than 3.44; see `unkeyed`).
    pub(super) fn unrecorded_tables(&self) -> Vec<String> {
        self.0.borrow_dependent().unrecorded_tables()
    }

    /// The rows changed so far, as a changeset.
    pub(super) fn changeset(&mut self) -> rusqlite::Result<Vec<u8>> {
        self.0.with_dependent_mut(|_, session| session.changeset())
    }

    /// Ends the transaction without keeping anything (closing the connection would too).
    pub(super) fn abandon(self) {
        if self.in_transaction() {
            let _ = self.conn().execute_batch("ROLLBACK");
        }
    }
}
