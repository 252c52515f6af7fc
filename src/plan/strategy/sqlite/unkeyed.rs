//! Writes to tables without a `PRIMARY KEY`, which the session does not record.
//!
//! The session is not configured to key such tables by rowid (see `session`): it silently
//! skips them and TEMP triggers record them instead (`rowlog`). The session's table
//! filter — which SQLite calls the first time the transaction changes a table the session has
//! not attached yet — notes each such table written: `rowlog` learns from it which tables
//! were written before it could watch them, and the sandbox refuses a transaction that wrote
//! a table the triggers could not record (see `SqliteSandbox::run`): the actor's writes to a
//! table without a key are never committed unrecorded.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::ffi::{c_char, c_int, c_void, CStr};

use rusqlite::{ffi, Connection};

/// The tables without a `PRIMARY KEY` that the transaction changed (names in `main`).
pub(super) struct Unkeyed {
    db: *mut ffi::sqlite3,
    written: RefCell<BTreeSet<String>>,
}

impl Unkeyed {
    /// A record for the connection `db`; handed to the session as its filter's context.
    pub(super) fn new(db: *mut ffi::sqlite3) -> Box<Unkeyed> {
        Box::new(Unkeyed {
            db,
            written: RefCell::new(BTreeSet::new()),
        })
    }

    /// The tables noted so far.
    pub(super) fn written(&self) -> Vec<String> {
        self.written.borrow().iter().cloned().collect()
    }
}

/// Whether `table` of `main` declares a primary key (a `WITHOUT ROWID` table always does).
/// Unknown (an error) counts as keyed: the session then attaches it as it would unfiltered.
fn has_key(db: *mut ffi::sqlite3, table: &str) -> bool {
    // SAFETY: the live handle of the connection whose statement is running; the wrapper does
    // not own it (dropping it closes nothing). SQLite's session extension itself prepares
    // statements on this connection at this point (reading the table's columns).
    let Ok(conn) = (unsafe { Connection::from_handle(db) }) else {
        return true;
    };
    conn.query_row(
        "SELECT count(*) FROM pragma_table_info(?1, 'main') WHERE pk > 0",
        [table],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
    .unwrap_or(true)
}

/// The session's table filter: attach (1) a keyed table, note and skip (0) one without a key.
/// Never unwinds (it is called from C).
pub(super) unsafe extern "C" fn filter(ctx: *mut c_void, table: *const c_char) -> c_int {
    if ctx.is_null() || table.is_null() {
        return 1;
    }
    // SAFETY: `ctx` is the `Unkeyed` the session was given, alive as long as the session;
    // `table` is a NUL-terminated name SQLite owns for the call.
    let (me, name) = unsafe { (&*ctx.cast::<Unkeyed>(), CStr::from_ptr(table)) };
    let name = name.to_string_lossy();
    // `sqlite_stat1` (written by ANALYZE) has no declared key, but the session records it
    // keyed by its (tbl, idx) columns on every SQLite.
    if name.eq_ignore_ascii_case("sqlite_stat1") || has_key(me.db, &name) {
        return 1;
    }
    if let Ok(mut w) = me.written.try_borrow_mut() {
        w.insert(name.into_owned());
    }
    0
}
