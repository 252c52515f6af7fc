//! Applying the changes of tables without a `PRIMARY KEY` (keyed by rowid) where SQLite's
//! `sqlite3changeset_apply` cannot: before 3.44 it takes such a table's rowid column for a
//! missing one and skips the table's rows (with only a log line). Same rules as SQLite's
//! apply with a handler that aborts at the first conflict: a delete or update needs the row
//! as the change's old side has it (else "changed since", or "deleted since" when it is
//! gone), an insert needs its rowid free (else "a row with this key was inserted since"), and
//! a failing constraint is a conflict once retrying it after the other rows does not help. Values compare as SQLite's session compares them:
//! storage class and value, no collation.

use rusqlite::Connection;

use super::ffi_changeset::ConflictKind;
use super::row_change::RowChange;
use super::rowlog;
use super::value::SqlValue;
use crate::plan::model::DiffOp;

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The recorded (not hidden) columns of `table`, in order.
fn columns(conn: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    conn.prepare("SELECT name FROM pragma_table_xinfo(?1, 'main') WHERE hidden = 0 ORDER BY cid")?
        .query_map([table], |r| r.get(0))?
        .collect()
}

/// Applies `rows` (all of tables without a key, their first column the rowid) inside the
/// caller's transaction, stopping at the first conflict: `Ok(Some((row, kind)))`. The caller
/// checked the tables' shapes and rolls back on a conflict.
pub(super) fn apply<'r>(
    conn: &Connection,
    rows: &'r [RowChange],
) -> rusqlite::Result<Option<(&'r RowChange, ConflictKind)>> {
    let mut shapes: std::collections::BTreeMap<&str, (Vec<String>, &'static str)> =
        Default::default();
    for r in rows {
        if !shapes.contains_key(r.table.as_str()) {
            let rowid = rowlog::rowid_name(conn, &r.table)?.unwrap_or("rowid");
            shapes.insert(&r.table, (columns(conn, &r.table)?, rowid));
        }
    }
    // A row a constraint refuses is tried again after the others, as long as that makes
    // progress (SQLite's apply does the same): undoing a move of a `UNIQUE` value needs the
    // row that holds it now out of the way first.
    let mut pending: Vec<&RowChange> = rows.iter().collect();
    loop {
        let mut refused = Vec::new();
        for r in &pending {
            let (cols, rowid) = &shapes[r.table.as_str()];
            match apply_one(conn, r, cols, rowid)? {
                None => {}
                Some(ConflictKind::Constraint) => refused.push(*r),
                Some(kind) => return Ok(Some((r, kind))),
            }
        }
        if refused.is_empty() {
            return Ok(None);
        }
        if refused.len() == pending.len() {
            return Ok(Some((refused[0], ConflictKind::Constraint)));
        }
        pending = refused;
    }
}

fn apply_one(
    conn: &Connection,
    r: &RowChange,
    cols: &[String],
    rowid: &str,
) -> rusqlite::Result<Option<ConflictKind>> {
    let side = if r.op == DiffOp::Added {
        &r.new
    } else {
        &r.old
    };
    let Some(Some(rid)) = side.first() else {
        return Ok(Some(ConflictKind::NotFound));
    };
    let table = format!("main.{}", quote(&r.table));
    let names: Vec<String> = cols.iter().map(|c| quote(c)).collect();
    let current: Option<Vec<SqlValue>> = {
        let sql = format!(
            "SELECT {} FROM {table} WHERE {rowid} = ?1",
            names.join(", ")
        );
        let mut stmt = conn.prepare(&sql)?;
        let mut found = stmt.query([rid])?;
        match found.next()? {
            Some(row) => Some(
                (0..cols.len())
                    .map(|i| row.get_ref(i).map(SqlValue::from))
                    .collect::<rusqlite::Result<_>>()?,
            ),
            None => None,
        }
    };
    // The row as the change's old side has it: every column it holds (after the rowid).
    let matches = |now: &[SqlValue]| {
        r.old
            .iter()
            .skip(1)
            .zip(now)
            .all(|(want, is)| want.as_ref().is_none_or(|w| w == is))
    };
    let (sql, params): (String, Vec<&SqlValue>) = match (r.op, &current) {
        (DiffOp::Added, Some(_)) => return Ok(Some(ConflictKind::Conflict)),
        (DiffOp::Added, None) => {
            let marks: Vec<String> = (1..=cols.len() + 1).map(|i| format!("?{i}")).collect();
            let values: Vec<&SqlValue> = r
                .new
                .iter()
                .map(|v| v.as_ref().unwrap_or(&SqlValue::Null))
                .collect();
            (
                format!(
                    "INSERT INTO {table}({rowid}, {}) VALUES ({})",
                    names.join(", "),
                    marks.join(", ")
                ),
                values,
            )
        }
        (_, None) => return Ok(Some(ConflictKind::NotFound)),
        (_, Some(now)) if !matches(now) => return Ok(Some(ConflictKind::Data)),
        (DiffOp::Deleted, Some(_)) => {
            (format!("DELETE FROM {table} WHERE {rowid} = ?1"), vec![rid])
        }
        (DiffOp::Modified, Some(_)) => {
            let mut params = vec![rid];
            let mut sets = Vec::new();
            for (name, v) in names.iter().zip(r.new.iter().skip(1)) {
                if let Some(v) = v {
                    params.push(v);
                    sets.push(format!("{name} = ?{}", params.len()));
                }
            }
            if sets.is_empty() {
                return Ok(None);
            }
            (
                format!("UPDATE {table} SET {} WHERE {rowid} = ?1", sets.join(", ")),
                params,
            )
        }
    };
    match conn.execute(&sql, rusqlite::params_from_iter(params)) {
        Ok(_) => Ok(None),
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            Ok(Some(ConflictKind::Constraint))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::strategy::sqlite::changeset::{self, ROWID_SESSIONS};
    use crate::plan::strategy::sqlite::ffi_changeset::{self as ffi_cs, ConflictAction};
    use crate::plan::strategy::sqlite::session::RowSession;

    fn dump(conn: &Connection) -> Vec<String> {
        conn.prepare("SELECT rowid, quote(at), quote(msg) FROM log ORDER BY rowid")
            .unwrap()
            .query_map([], |r| {
                Ok(format!(
                    "{}|{}|{}",
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?
                ))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// A committed changeset of moves, replaces and updates on `log(at, msg UNIQUE)`, and
    /// the rows before it.
    fn committed(dir: &std::path::Path) -> (Vec<u8>, Vec<String>) {
        let db = dir.join("a.db");
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE log(at INTEGER, msg TEXT UNIQUE);
             INSERT INTO log VALUES (1, 'boot'), (2, 'ready'), (3, 'idle');",
        )
        .unwrap();
        let before = dump(&conn);
        let mut session = RowSession::keyed_by_rowid(&conn).unwrap();
        let log = crate::plan::strategy::sqlite::rowlog::RowLog::begin(&conn, &db).unwrap();
        conn.execute_batch(
            "BEGIN;
             INSERT OR REPLACE INTO log(at, msg) VALUES (9, 'idle');
             UPDATE log SET rowid = 50 WHERE at = 2;
             UPDATE log SET msg = 'ready2', at = NULL WHERE at = 1;
             INSERT INTO log VALUES (7, 'new');",
        )
        .unwrap();
        let cs = if rusqlite::version_number() >= ROWID_SESSIONS {
            session.changeset().unwrap()
        } else {
            crate::plan::strategy::sqlite::encode::encode(&log.rows(&conn).unwrap())
        };
        conn.execute_batch("COMMIT").unwrap();
        drop(session);
        (cs, before)
    }

    /// The oracle is `sqlite3changeset_apply` of SQLite 3.44 or later (the bundled SQLite):
    /// the rows it leaves, and the first conflict it reports, are this module's too.
    #[test]
    fn undoes_as_sqlite_applies_and_stops_at_the_same_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let (cs, before) = committed(dir.path());
        let inverse = changeset::invert(&cs).unwrap();
        let rows = changeset::decode(&inverse).unwrap();
        let copy = |name: &str| {
            let p = dir.path().join(name);
            std::fs::copy(dir.path().join("a.db"), &p).unwrap();
            Connection::open(p).unwrap()
        };
        let ours = copy("ours.db");
        ours.execute_batch("BEGIN").unwrap();
        assert!(apply(&ours, &rows).unwrap().is_none());
        ours.execute_batch("COMMIT").unwrap();
        assert_eq!(dump(&ours), before);

        // Another writer changed a row since: a conflict, nothing applied once rolled back.
        let ours = copy("ours2.db");
        ours.execute("UPDATE log SET at = 70 WHERE at = 7", [])
            .unwrap();
        let changed = dump(&ours);
        ours.execute_batch("BEGIN").unwrap();
        let (row, kind) = apply(&ours, &rows).unwrap().expect("a conflict");
        ours.execute_batch("ROLLBACK").unwrap();
        assert_eq!(dump(&ours), changed);
        if rusqlite::version_number() < ROWID_SESSIONS {
            assert_eq!(kind, ConflictKind::Data);
            return;
        }
        let theirs = copy("theirs.db");
        theirs.execute_batch("BEGIN").unwrap();
        ffi_cs::apply(&theirs, &inverse, |_, _| ConflictAction::Abort).unwrap();
        theirs.execute_batch("COMMIT").unwrap();
        assert_eq!(dump(&theirs), before);
        let theirs = copy("theirs2.db");
        theirs
            .execute("UPDATE log SET at = 70 WHERE at = 7", [])
            .unwrap();
        let mut seen = Vec::new();
        let _ = ffi_cs::apply(&theirs, &inverse, |k, item| {
            let path = changeset::read_item(item).unwrap().unwrap().path();
            seen.push((path, k));
            ConflictAction::Abort
        });
        assert_eq!(seen.first(), Some(&(row.path(), kind)));
    }
}
