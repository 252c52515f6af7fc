//! A SQLite session that records every table of the `main` database that declares a
//! `PRIMARY KEY`, and notes the writes to those that do not.
//!
//! SQLite's session extension ignores a table without an explicit `PRIMARY KEY` unless the
//! session is told to key it by rowid (`SQLITE_SESSION_OBJCONFIG_ROWID`, SQLite 3.44+). That
//! option is not used: older SQLites (a system `libsqlite3` shared with the host program, see
//! the `bundled-sqlite` feature) lack it, and where it exists it is wrong past 128 changed
//! rows (see the module docs of `super`). TEMP triggers record those tables instead
//! ([`super::rowlog`]); this session notes, through its table filter, the ones the
//! transaction writes ([`super::unkeyed`]), so the sandbox can refuse a write the triggers
//! could not record. `rusqlite`'s `Session` is only built with rusqlite's `session` feature,
//! which runs bindgen (libclang) and is off here; so this is the session the strategy uses,
//! over `rusqlite::ffi`: create, configure, attach, read the changeset, delete.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr;

use rusqlite::ffi;
use rusqlite::Connection;

use super::unkeyed::{self, Unkeyed};

/// A session on every table of a connection's `main` database (tables made later too),
/// noting the writes to tables without a `PRIMARY KEY` (or, in tests, keying them by rowid).
/// Borrows the connection it records.
pub(super) struct RowSession<'conn> {
    s: *mut ffi::sqlite3_session,
    /// Where the table filter notes writes to tables without a key; `None` when this SQLite
    /// records them. Freed after the session (fields drop after `Drop::drop`).
    unkeyed: Option<Box<Unkeyed>>,
    conn: PhantomData<&'conn Connection>,
}

fn check(rc: i32) -> rusqlite::Result<()> {
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None))
    }
}

impl<'conn> RowSession<'conn> {
    /// A session recording every change `conn` makes from now on to tables with a
    /// `PRIMARY KEY`, noting the tables without one it is asked to record (see the module
    /// docs: `rowlog` records those).
    pub(super) fn new(conn: &'conn Connection) -> rusqlite::Result<RowSession<'conn>> {
        Self::create(conn, false)
    }

    /// A session that keys tables without a `PRIMARY KEY` by rowid itself, where SQLite can
    /// (3.44 or later): the oracle the tests hold `rowlog` to, on few rows.
    #[cfg(test)]
    pub(super) fn keyed_by_rowid(conn: &'conn Connection) -> rusqlite::Result<RowSession<'conn>> {
        Self::create(conn, true)
    }

    fn create(conn: &'conn Connection, by_rowid: bool) -> rusqlite::Result<RowSession<'conn>> {
        let mut s: *mut ffi::sqlite3_session = ptr::null_mut();
        // SAFETY: a valid connection handle and a NUL-terminated database name; `s` is
        // written on success only.
        check(unsafe { ffi::sqlite3session_create(conn.handle(), c"main".as_ptr(), &mut s) })?;
        // From here `Drop` deletes it, also on the errors below.
        let mut session = RowSession {
            s,
            unkeyed: None,
            conn: PhantomData,
        };
        let mut on: i32 = i32::from(by_rowid);
        if by_rowid {
            // SAFETY: a live session, before any table is attached (as the option requires),
            // and a pointer to an int. SQLite before 3.44 answers SQLITE_MISUSE.
            let rc = unsafe {
                ffi::sqlite3session_object_config(
                    session.s,
                    ffi::SQLITE_SESSION_OBJCONFIG_ROWID,
                    (&mut on as *mut i32).cast::<c_void>(),
                )
            };
            if rc != ffi::SQLITE_OK {
                on = 0;
            }
        }
        if on != 1 {
            // SAFETY: the handle of the connection this session borrows.
            let record = Unkeyed::new(unsafe { conn.handle() });
            let ctx: *const Unkeyed = &*record;
            // SAFETY: a live session; the context outlives it (dropped after the session is
            // deleted) and the filter never unwinds.
            unsafe {
                ffi::sqlite3session_table_filter(
                    session.s,
                    Some(unkeyed::filter),
                    ctx.cast_mut().cast::<c_void>(),
                );
            }
            session.unkeyed = Some(record);
        }
        // SAFETY: a live session; a null table name attaches every table.
        check(unsafe { ffi::sqlite3session_attach(session.s, ptr::null()) })?;
        Ok(session)
    }

    /// Whether this session records tables without a `PRIMARY KEY` itself (only the tests'
    /// oracle does); where it does not, `rowlog` records them.
    pub(super) fn records_unkeyed(&self) -> bool {
        self.unkeyed.is_none()
    }

    /// The tables without a `PRIMARY KEY` the transaction wrote to (empty where the session
    /// records them itself).
    pub(super) fn unkeyed_written(&self) -> Vec<String> {
        self.unkeyed
            .as_ref()
            .map(|u| u.written())
            .unwrap_or_default()
    }

    /// The rows changed so far, as a changeset.
    pub(super) fn changeset(&mut self) -> rusqlite::Result<Vec<u8>> {
        let mut n: i32 = 0;
        let mut buf: *mut c_void = ptr::null_mut();
        // SAFETY: a live session; on success `buf` holds `n` bytes from `sqlite3_malloc`.
        check(unsafe { ffi::sqlite3session_changeset(self.s, &mut n, &mut buf) })?;
        if buf.is_null() {
            return Ok(Vec::new());
        }
        let len = usize::try_from(n).unwrap_or(0);
        // SAFETY: `buf` holds `len` bytes; copied out, then freed once.
        let out = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) }.to_vec();
        // SAFETY: `buf` came from SQLite's allocator.
        unsafe { ffi::sqlite3_free(buf) };
        Ok(out)
    }
}

impl Drop for RowSession<'_> {
    fn drop(&mut self) {
        // SAFETY: created by `sqlite3session_create` and deleted once, before the connection
        // it borrows is closed (the borrow keeps the connection alive).
        unsafe { ffi::sqlite3session_delete(self.s) };
    }
}
