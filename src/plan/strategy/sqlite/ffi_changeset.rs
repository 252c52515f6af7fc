//! A small safe wrapper over SQLite's changeset functions (`sqlite3changeset_*`), called
//! through `rusqlite::ffi`: iterate a changeset's changes, invert a changeset, apply one with
//! a conflict handler.
//!
//! rusqlite has a wrapper of its own (`rusqlite::session`), but only behind its `session`
//! feature, which regenerates SQLite's bindings with bindgen at build time and so needs
//! libclang on every machine that builds patchbox. libsqlite3-sys's prebuilt bundled bindings
//! already declare these functions; the bundled SQLite compiles them when `LIBSQLITE3_FLAGS`
//! enables the session extension (`.cargo/config.toml`, checked by `build.rs`). The session
//! itself is in `session`.
//!
//! Everything here is synchronous: a [`Change`] borrows the iterator it was read from (or the
//! one SQLite hands the conflict handler) and its values borrow the change, so nothing is
//! read after SQLite moved on or freed it. The conflict handler is a Rust closure reached
//! through a trampoline; a panic in it is caught there, aborts the apply and comes back as an
//! error, and never unwinds through SQLite's C frames.

use std::any::Any;
use std::ffi::{c_int, c_void, CStr};
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};

use rusqlite::ffi;
use rusqlite::types::ValueRef;
use rusqlite::Connection;

fn check(rc: c_int) -> rusqlite::Result<()> {
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None))
    }
}

/// A changeset's length as the C API takes it (an `int`).
fn c_len(changeset: &[u8]) -> rusqlite::Result<c_int> {
    c_int::try_from(changeset.len()).map_err(|_| {
        rusqlite::Error::SqliteFailure(
            ffi::Error::new(ffi::SQLITE_TOOBIG),
            Some(format!("a changeset of {} bytes", changeset.len())),
        )
    })
}

/// What a change does to its row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ChangeOp {
    /// `INSERT`: the change has the new row.
    Insert,
    /// `UPDATE`: the key, and the old and new values of the columns that changed.
    Update,
    /// `DELETE`: the change has the old row.
    Delete,
}

/// The table, column count and operation of a change.
#[derive(Debug)]
pub(super) struct Operation<'c> {
    /// The table's name.
    pub table: &'c str,
    /// The table's columns, as the changeset records them.
    pub columns: usize,
    /// The operation; `None` for a code SQLite does not document for changesets.
    pub op: Option<ChangeOp>,
}

/// One change: the row an iterator is on, or the one a conflict is about. Valid until the
/// iterator moves on (the borrow sees to it).
pub(super) struct Change<'it> {
    it: NonNull<ffi::sqlite3_changeset_iter>,
    iter: PhantomData<&'it mut ffi::sqlite3_changeset_iter>,
}

/// A value SQLite handed out, as a `ValueRef` borrowing it.
///
/// # Safety
///
/// `v` points to a live `sqlite3_value` that is neither freed nor set to another value for
/// `'a`.
unsafe fn value_ref<'a>(v: NonNull<ffi::sqlite3_value>) -> rusqlite::Result<ValueRef<'a>> {
    let v = v.as_ptr();
    // SAFETY: a live value (the caller's contract).
    let kind = unsafe { ffi::sqlite3_value_type(v) };
    let data: *const u8 = match kind {
        ffi::SQLITE_INTEGER => {
            // SAFETY: a live integer value.
            return Ok(ValueRef::Integer(unsafe { ffi::sqlite3_value_int64(v) }));
        }
        ffi::SQLITE_FLOAT => {
            // SAFETY: a live float value.
            return Ok(ValueRef::Real(unsafe { ffi::sqlite3_value_double(v) }));
        }
        // SAFETY: a live text value. Its UTF-8 form stays valid until the value is freed or
        // set again (a later call finds it and converts nothing), which the caller rules out.
        ffi::SQLITE_TEXT => unsafe { ffi::sqlite3_value_text(v) },
        // SAFETY: a live blob value; the bytes stay valid as the text's do.
        ffi::SQLITE_BLOB => unsafe { ffi::sqlite3_value_blob(v) }.cast::<u8>(),
        _ => return Ok(ValueRef::Null),
    };
    // SAFETY: a live value; asked after the pointer above was fetched, as SQLite requires.
    let len = usize::try_from(unsafe { ffi::sqlite3_value_bytes(v) }).unwrap_or(0);
    let bytes: &'a [u8] = if len == 0 {
        // An empty blob's pointer is null.
        &[]
    } else if data.is_null() {
        // Out of memory while converting.
        return Err(rusqlite::Error::SqliteFailure(
            ffi::Error::new(ffi::SQLITE_NOMEM),
            None,
        ));
    } else {
        // SAFETY: SQLite's buffer of `len` bytes, valid for `'a` (see above).
        unsafe { std::slice::from_raw_parts(data, len) }
    };
    Ok(if kind == ffi::SQLITE_TEXT {
        ValueRef::Text(bytes)
    } else {
        ValueRef::Blob(bytes)
    })
}

type ValueFn = unsafe extern "C" fn(
    *mut ffi::sqlite3_changeset_iter,
    c_int,
    *mut *mut ffi::sqlite3_value,
) -> c_int;

impl Change<'_> {
    /// The change's table, column count and operation.
    pub(super) fn op(&self) -> rusqlite::Result<Operation<'_>> {
        let mut table: *const std::ffi::c_char = ptr::null();
        let mut columns: c_int = 0;
        let mut op: c_int = 0;
        let mut indirect: c_int = 0;
        // SAFETY: a live iterator on a change; the out-pointers are to locals.
        check(unsafe {
            ffi::sqlite3changeset_op(
                self.it.as_ptr(),
                &mut table,
                &mut columns,
                &mut op,
                &mut indirect,
            )
        })?;
        if table.is_null() {
            return Err(rusqlite::Error::SqliteFailure(
                ffi::Error::new(ffi::SQLITE_MISUSE),
                None,
            ));
        }
        // SAFETY: on success the table name is a NUL-terminated string the iterator owns
        // until it moves on, which the borrow of `self` prevents.
        let table = unsafe { CStr::from_ptr(table) }.to_str()?;
        Ok(Operation {
            table,
            columns: usize::try_from(columns).unwrap_or(0),
            op: match op {
                ffi::SQLITE_INSERT => Some(ChangeOp::Insert),
                ffi::SQLITE_UPDATE => Some(ChangeOp::Update),
                ffi::SQLITE_DELETE => Some(ChangeOp::Delete),
                _ => None,
            },
        })
    }

    /// Per column of the table: non-zero if it is part of the primary key.
    pub(super) fn pk(&self) -> rusqlite::Result<&[u8]> {
        let mut flags: *mut u8 = ptr::null_mut();
        let mut columns: c_int = 0;
        // SAFETY: a live iterator on a change; the out-pointers are to locals.
        check(unsafe { ffi::sqlite3changeset_pk(self.it.as_ptr(), &mut flags, &mut columns) })?;
        let n = usize::try_from(columns).unwrap_or(0);
        if flags.is_null() || n == 0 {
            return Ok(&[]);
        }
        // SAFETY: on success, `n` flags the iterator owns until it moves on (borrow of `self`).
        Ok(unsafe { std::slice::from_raw_parts(flags, n) })
    }

    fn value(&self, get: ValueFn, col: usize) -> rusqlite::Result<Option<ValueRef<'_>>> {
        let Ok(col) = c_int::try_from(col) else {
            return Ok(None);
        };
        let mut v: *mut ffi::sqlite3_value = ptr::null_mut();
        // SAFETY: a live iterator on a change and an out-pointer to a local; SQLite checks
        // the column index and whether the operation has this side (`SQLITE_RANGE`,
        // `SQLITE_MISUSE`).
        check(unsafe { get(self.it.as_ptr(), col, &mut v) })?;
        match NonNull::new(v) {
            // SAFETY: the value belongs to the iterator and stays as it is until the iterator
            // moves on, which the borrow of `self` prevents.
            Some(v) => unsafe { value_ref(v) }.map(Some),
            None => Ok(None),
        }
    }

    /// The value of column `col` before the change (a delete's or an update's), `None` when
    /// the change has none (an update's unchanged non-key column).
    pub(super) fn old_value(&self, col: usize) -> rusqlite::Result<Option<ValueRef<'_>>> {
        self.value(ffi::sqlite3changeset_old, col)
    }

    /// The value of column `col` after the change (an insert's or an update's), `None` when
    /// the change has none (an update's unchanged column).
    pub(super) fn new_value(&self, col: usize) -> rusqlite::Result<Option<ValueRef<'_>>> {
        self.value(ffi::sqlite3changeset_new, col)
    }
}

/// An iterator over a changeset's changes, in its order (table by table). Holds its own copy
/// of the changeset, which SQLite reads from while iterating.
pub(super) struct ChangesetIter {
    it: NonNull<ffi::sqlite3_changeset_iter>,
    // Read by SQLite through `it`; dropped after `it` is finalized (`Drop` runs first). A
    // boxed slice: moving the iterator does not move the bytes.
    _bytes: Box<[u8]>,
}

impl ChangesetIter {
    /// An iterator over `changeset` (not empty).
    pub(super) fn start(changeset: &[u8]) -> rusqlite::Result<ChangesetIter> {
        let mut bytes: Box<[u8]> = changeset.into();
        let n = c_len(&bytes)?;
        let mut it: *mut ffi::sqlite3_changeset_iter = ptr::null_mut();
        // SAFETY: `n` bytes at a pointer that stays valid until the iterator is finalized
        // (they live in `_bytes` beside it); `it` is an out-pointer to a local.
        let rc =
            unsafe { ffi::sqlite3changeset_start(&mut it, n, bytes.as_mut_ptr().cast::<c_void>()) };
        if rc != ffi::SQLITE_OK {
            if !it.is_null() {
                // SAFETY: an iterator SQLite made, finalized once, never used again.
                unsafe { ffi::sqlite3changeset_finalize(it) };
            }
            return Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None));
        }
        let Some(it) = NonNull::new(it) else {
            return Err(rusqlite::Error::SqliteFailure(
                ffi::Error::new(ffi::SQLITE_NOMEM),
                None,
            ));
        };
        Ok(ChangesetIter { it, _bytes: bytes })
    }

    /// The next change, `None` after the last one.
    pub(super) fn next(&mut self) -> rusqlite::Result<Option<Change<'_>>> {
        // SAFETY: a live iterator; the previous `Change` (and its values) can no longer be
        // used, since it borrowed `self` mutably.
        match unsafe { ffi::sqlite3changeset_next(self.it.as_ptr()) } {
            ffi::SQLITE_ROW => Ok(Some(Change {
                it: self.it,
                iter: PhantomData,
            })),
            ffi::SQLITE_DONE => Ok(None),
            rc => Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None)),
        }
    }
}

impl Drop for ChangesetIter {
    fn drop(&mut self) {
        // SAFETY: made by `sqlite3changeset_start`, finalized once; no `Change` outlives
        // `self`.
        unsafe { ffi::sqlite3changeset_finalize(self.it.as_ptr()) };
    }
}

/// The inverse of `changeset`: inserts become deletes, deletes inserts, updates swap their
/// sides.
pub(super) fn invert(changeset: &[u8]) -> rusqlite::Result<Vec<u8>> {
    let n = c_len(changeset)?;
    let mut out_n: c_int = 0;
    let mut out: *mut c_void = ptr::null_mut();
    // SAFETY: `n` readable bytes (SQLite takes them as `const`); out-pointers to locals.
    check(unsafe {
        ffi::sqlite3changeset_invert(n, changeset.as_ptr().cast::<c_void>(), &mut out_n, &mut out)
    })?;
    if out.is_null() {
        return Ok(Vec::new());
    }
    let len = usize::try_from(out_n).unwrap_or(0);
    // SAFETY: on success `out` holds `out_n` bytes from `sqlite3_malloc`; copied out here,
    // then freed once below.
    let inverse = unsafe { std::slice::from_raw_parts(out.cast::<u8>(), len) }.to_vec();
    // SAFETY: `out` came from SQLite's allocator and is not used again.
    unsafe { ffi::sqlite3_free(out) };
    Ok(inverse)
}

/// Why SQLite calls the conflict handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ConflictKind {
    /// The row to update or delete differs from the change's old side.
    Data,
    /// The row to update or delete is gone.
    NotFound,
    /// A row with the inserted key exists.
    Conflict,
    /// A constraint fails.
    Constraint,
    /// Foreign keys fail once the whole changeset is applied.
    ForeignKey,
    /// A code SQLite does not document.
    Unknown(c_int),
}

impl From<c_int> for ConflictKind {
    fn from(code: c_int) -> ConflictKind {
        match code {
            ffi::SQLITE_CHANGESET_DATA => ConflictKind::Data,
            ffi::SQLITE_CHANGESET_NOTFOUND => ConflictKind::NotFound,
            ffi::SQLITE_CHANGESET_CONFLICT => ConflictKind::Conflict,
            ffi::SQLITE_CHANGESET_CONSTRAINT => ConflictKind::Constraint,
            ffi::SQLITE_CHANGESET_FOREIGN_KEY => ConflictKind::ForeignKey,
            other => ConflictKind::Unknown(other),
        }
    }
}

/// What the conflict handler tells SQLite to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ConflictAction {
    /// Skip this change and go on.
    #[allow(
        dead_code,
        reason = "part of SQLite's answer set; the strategy only aborts"
    )]
    Omit,
    /// Overwrite the row (for `Data` and `Conflict` only).
    #[allow(
        dead_code,
        reason = "part of SQLite's answer set; the strategy only aborts"
    )]
    Replace,
    /// Stop: SQLite undoes what the apply did and it fails with `SQLITE_ABORT`.
    Abort,
}

impl ConflictAction {
    fn code(self) -> c_int {
        match self {
            ConflictAction::Omit => ffi::SQLITE_CHANGESET_OMIT,
            ConflictAction::Replace => ffi::SQLITE_CHANGESET_REPLACE,
            ConflictAction::Abort => ffi::SQLITE_CHANGESET_ABORT,
        }
    }
}

type Handler<'h> = dyn FnMut(ConflictKind, &Change<'_>) -> ConflictAction + 'h;

/// What the trampoline reaches through SQLite's context pointer.
struct Context<'h> {
    handler: &'h mut Handler<'h>,
    /// A panic the handler raised (the apply was aborted).
    panicked: Option<Box<dyn Any + Send>>,
}

/// The conflict callback SQLite calls: runs the closure in `ctx`, catching any panic.
///
/// # Safety
///
/// `ctx` is the `Context` [`apply`] passed with this function, alive for the call; `it` is
/// the iterator SQLite hands the callback.
unsafe extern "C" fn on_conflict(
    ctx: *mut c_void,
    kind: c_int,
    it: *mut ffi::sqlite3_changeset_iter,
) -> c_int {
    if ctx.is_null() {
        return ffi::SQLITE_CHANGESET_ABORT;
    }
    // SAFETY: `apply` passed a `&mut Context` that outlives `sqlite3changeset_apply`, and
    // SQLite calls this on the applying thread, one call at a time, so the reference is
    // unique while it lives.
    let ctx = unsafe { &mut *ctx.cast::<Context<'_>>() };
    if ctx.panicked.is_some() {
        return ffi::SQLITE_CHANGESET_ABORT;
    }
    let Some(it) = NonNull::new(it) else {
        return ffi::SQLITE_CHANGESET_ABORT;
    };
    // The iterator is valid for this call only; the `Change` is dropped before it returns.
    let change = Change {
        it,
        iter: PhantomData,
    };
    let handler = &mut *ctx.handler;
    match catch_unwind(AssertUnwindSafe(|| {
        handler(ConflictKind::from(kind), &change)
    })) {
        Ok(action) => action.code(),
        Err(payload) => {
            ctx.panicked = Some(payload);
            ffi::SQLITE_CHANGESET_ABORT
        }
    }
}

/// The text of a panic's payload, when it has one.
fn panic_text(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// Applies `changeset` (every table) to `conn`'s main database, asking `handler` what to do
/// at each conflict. SQLite applies it inside a savepoint of its own: on `Abort` what it
/// applied is undone and this fails with `SQLITE_ABORT`. A panicking handler aborts the same
/// way, with the panic's message in the error.
pub(super) fn apply<F>(conn: &Connection, changeset: &[u8], mut handler: F) -> rusqlite::Result<()>
where
    F: FnMut(ConflictKind, &Change<'_>) -> ConflictAction,
{
    let mut bytes: Box<[u8]> = changeset.into();
    let n = c_len(&bytes)?;
    let mut ctx = Context {
        handler: &mut handler,
        panicked: None,
    };
    // SAFETY: only reads the handle; the connection stays open while `conn` is borrowed.
    let db = unsafe { conn.handle() };
    // SAFETY: a live connection handle, used on this thread only (`Connection` is not
    // `Sync`); `n` bytes SQLite may read for the whole call; the callback's contract holds:
    // `ctx` is a `Context` that outlives the call and is not touched here until it returns.
    let rc = unsafe {
        ffi::sqlite3changeset_apply(
            db,
            n,
            bytes.as_mut_ptr().cast::<c_void>(),
            None,
            Some(on_conflict),
            (&mut ctx as *mut Context<'_>).cast::<c_void>(),
        )
    };
    if let Some(payload) = ctx.panicked.take() {
        return Err(rusqlite::Error::SqliteFailure(
            ffi::Error::new(ffi::SQLITE_ABORT),
            Some(format!(
                "the changeset's conflict handler panicked: {}",
                panic_text(payload.as_ref())
            )),
        ));
    }
    check(rc)
}

#[cfg(test)]
mod tests {
    use super::super::session::RowSession;
    use super::super::value::SqlValue;
    use super::*;
    use SqlValue::{Blob, Integer, Null, Real, Text};

    /// A database with `t(id PRIMARY KEY, v)` and `k(v)` (no primary key), and the changeset
    /// of `sql` run on it.
    fn recorded(sql: &str) -> (Connection, Vec<u8>) {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, v); CREATE TABLE k(v);
             INSERT INTO t VALUES (1, 'one'), (2, x'00ff'); INSERT INTO k VALUES (1.5);",
        )
        .unwrap();
        let cs = {
            let mut s = RowSession::keyed_by_rowid(&conn).unwrap();
            conn.execute_batch(sql).unwrap();
            s.changeset().unwrap()
        };
        (conn, cs)
    }

    type Row = (
        String,
        ChangeOp,
        Vec<u8>,
        Vec<Option<SqlValue>>,
        Vec<Option<SqlValue>>,
    );

    fn rows(cs: &[u8]) -> Vec<Row> {
        let show = |v: Option<ValueRef<'_>>| v.map(SqlValue::from);
        let mut it = ChangesetIter::start(cs).unwrap();
        let mut out = Vec::new();
        while let Some(c) = it.next().unwrap() {
            let op = c.op().unwrap();
            let n = op.columns;
            out.push((
                op.table.to_string(),
                op.op.unwrap(),
                c.pk().unwrap().to_vec(),
                (0..n)
                    .map(|i| show(c.old_value(i).ok().flatten()))
                    .collect(),
                (0..n)
                    .map(|i| show(c.new_value(i).ok().flatten()))
                    .collect(),
            ));
        }
        out
    }

    #[test]
    fn iterates_every_operation_and_value_type() {
        let (_c, cs) = recorded(
            "INSERT INTO t VALUES (3, NULL); UPDATE t SET v = 'zwei' WHERE id = 2;
             DELETE FROM t WHERE id = 1; INSERT INTO k VALUES (x'');
             UPDATE k SET v = 2.5 WHERE v = 1.5;",
        );
        let got = rows(&cs);
        let text = |x: &str| Some(Text(x.into()));
        assert!(got.contains(&(
            "t".into(),
            ChangeOp::Insert,
            vec![1, 0],
            vec![None, None],
            vec![Some(Integer(3)), Some(Null)],
        )));
        assert!(got.contains(&(
            "t".into(),
            ChangeOp::Update,
            vec![1, 0],
            vec![Some(Integer(2)), Some(Blob(vec![0, 255]))],
            vec![None, text("zwei")],
        )));
        assert!(got.contains(&(
            "t".into(),
            ChangeOp::Delete,
            vec![1, 0],
            vec![Some(Integer(1)), text("one")],
            vec![None, None],
        )));
        // Keyed by rowid, as a leftmost column.
        assert!(got.contains(&(
            "k".into(),
            ChangeOp::Insert,
            vec![1, 0],
            vec![None, None],
            vec![Some(Integer(2)), Some(Blob(vec![]))],
        )));
        assert!(got.contains(&(
            "k".into(),
            ChangeOp::Update,
            vec![1, 0],
            vec![Some(Integer(1)), Some(Real(1.5))],
            vec![None, Some(Real(2.5))],
        )));
        assert_eq!(got.len(), 5);
    }

    #[test]
    fn a_corrupt_changeset_is_an_error_not_a_crash() {
        let (_c, cs) = recorded("INSERT INTO t VALUES (3, 'x')");
        let mut it = ChangesetIter::start(&cs[..cs.len() - 3]).unwrap();
        let mut r = Ok(None);
        for _ in 0..4 {
            r = it.next().map(|c| c.map(|_| ()));
            if r.is_err() {
                break;
            }
        }
        assert!(r.is_err(), "{r:?}");
    }

    #[test]
    fn the_inverse_undoes_and_a_conflict_reaches_the_handler() {
        let (conn, cs) = recorded("UPDATE t SET v = 'uno' WHERE id = 1; DELETE FROM k");
        let inverse = invert(&cs).unwrap();
        apply(&conn, &inverse, |_, _| ConflictAction::Abort).unwrap();
        let v: String = conn
            .query_row("SELECT v FROM t WHERE id = 1", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, "one");
        assert_eq!(
            conn.query_row("SELECT count(*) FROM k", [], |r| r.get::<_, i64>(0))
                .unwrap(),
            1
        );
        // Applied twice: the row no longer matches, the deleted one is back.
        let mut seen = Vec::new();
        let r = apply(&conn, &inverse, |kind, change| {
            seen.push((kind, change.op().unwrap().table.to_string()));
            ConflictAction::Omit
        });
        r.unwrap();
        seen.sort_by(|a, b| a.1.cmp(&b.1));
        assert_eq!(
            seen,
            [
                (ConflictKind::Conflict, "k".to_string()),
                (ConflictKind::Data, "t".to_string())
            ]
        );
        let err = apply(&conn, &inverse, |_, _| ConflictAction::Abort).unwrap_err();
        assert_eq!(
            err.sqlite_error_code(),
            Some(rusqlite::ErrorCode::OperationAborted)
        );
    }

    #[test]
    fn a_panicking_handler_aborts_the_apply_with_an_error() {
        let (conn, cs) = recorded("UPDATE t SET v = 'uno' WHERE id = 1");
        conn.execute_batch("UPDATE t SET v = 'changed' WHERE id = 1")
            .unwrap();
        let err = apply(&conn, &invert(&cs).unwrap(), |_, _| panic!("boom")).unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");
        let v: String = conn
            .query_row("SELECT v FROM t WHERE id = 1", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, "changed");
    }
}
