//! SQLite session changesets as the plan layer uses them: decoded into rows, rendered as a
//! [`SandboxDiff`], inverted, and applied all or nothing.
//!
//! A changeset (SQLite's session extension) lists, per table, the rows a connection
//! inserted, updated or deleted, keyed by primary key: an insert carries the new row, a
//! delete the old row, an update the key and, for each changed column, its old and new
//! value (the unchanged columns are not in it). A table without a declared `PRIMARY KEY` is
//! recorded keyed by its rowid, as a leftmost column `_rowid_` (see `session`). SQLite's
//! changeset functions are reached through the small wrapper in `ffi_changeset`.

use rusqlite::Connection;

use super::ffi_changeset::{self, Change, ChangeOp, ChangesetIter, ConflictAction, ConflictKind};
use super::row_change::RowChange;
use super::value::SqlValue;
use super::{encode, rowid_apply};
use crate::plan::model::{DiffEntry, DiffOp, SandboxDiff};

fn op_of(op: Option<ChangeOp>) -> Option<DiffOp> {
    match op? {
        ChangeOp::Insert => Some(DiffOp::Added),
        ChangeOp::Update => Some(DiffOp::Modified),
        ChangeOp::Delete => Some(DiffOp::Deleted),
    }
}

/// Table, operation, key flags and both sides of the change the iterator is on.
pub(super) fn read_item(item: &Change<'_>) -> rusqlite::Result<Option<RowChange>> {
    let op = item.op()?;
    let Some(kind) = op_of(op.op) else {
        return Ok(None);
    };
    let n = op.columns;
    let table = op.table.to_string();
    let pk: Vec<bool> = item.pk()?.iter().map(|b| *b != 0).collect();
    let old = if kind == DiffOp::Added {
        vec![None; n]
    } else {
        (0..n)
            .map(|i| item.old_value(i).ok().flatten().map(SqlValue::from))
            .collect()
    };
    let mut new: Vec<Option<SqlValue>> = if kind == DiffOp::Deleted {
        vec![None; n]
    } else {
        (0..n)
            .map(|i| item.new_value(i).ok().flatten().map(SqlValue::from))
            .collect()
    };
    if kind == DiffOp::Modified {
        // An update's new side holds only the changed columns; its key is the old one's
        // (a changed key is a delete and an insert).
        for (i, is_pk) in pk.iter().enumerate() {
            if *is_pk && new.get(i).is_some_and(Option::is_none) {
                new[i] = old.get(i).cloned().flatten();
            }
        }
    }
    Ok(Some(RowChange {
        table,
        op: kind,
        pk,
        old,
        new,
    }))
}

/// The rows of a changeset, in its order (table by table).
pub fn decode(changeset: &[u8]) -> rusqlite::Result<Vec<RowChange>> {
    if changeset.is_empty() {
        return Ok(Vec::new());
    }
    let mut it = ChangesetIter::start(changeset)?;
    let mut out = Vec::new();
    while let Some(item) = it.next()? {
        if let Some(row) = read_item(&item)? {
            out.push(row);
        }
    }
    Ok(out)
}

/// The inverse of a changeset: inserts become deletes, deletes inserts, updates swap their
/// sides. Applying it undoes the changeset.
pub fn invert(changeset: &[u8]) -> rusqlite::Result<Vec<u8>> {
    if changeset.is_empty() {
        return Ok(Vec::new());
    }
    ffi_changeset::invert(changeset)
}

/// A row that could not be applied, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// `<table>/<key>`.
    pub path: String,
    /// What SQLite found (`changed since`, `deleted since`, …).
    pub why: &'static str,
}

fn why(c: ConflictKind) -> &'static str {
    match c {
        ConflictKind::Data => "changed since",
        ConflictKind::NotFound => "deleted since",
        ConflictKind::Conflict => "a row with this key was inserted since",
        ConflictKind::Constraint => "a constraint would fail",
        ConflictKind::ForeignKey => "a foreign key would fail",
        ConflictKind::Unknown(_) => "unknown conflict",
    }
}

/// Per column of `table` in `conn`'s main database as SQLite's sessions see it: whether it
/// is part of the primary key, led by the rowid for a table without a `PRIMARY KEY` (the
/// shape `sqlite3changeset_apply` compares a changeset's table with). Empty when there is
/// no such table.
fn table_shape(conn: &Connection, table: &str) -> rusqlite::Result<Vec<bool>> {
    let mut stmt = conn.prepare("SELECT pk, hidden FROM pragma_table_xinfo(?1) ORDER BY cid")?;
    let cols = stmt.query_map([table], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?;
    let mut pk = Vec::new();
    for c in cols {
        let (is_pk, hidden) = c?;
        if hidden == 0 {
            pk.push(is_pk != 0);
        }
    }
    if !pk.is_empty() && !pk.iter().any(|k| *k) {
        pk.insert(0, true);
    }
    Ok(pk)
}

/// The tables of `rows` that `conn` no longer holds as the changeset recorded them (gone,
/// fewer columns, another primary key). `sqlite3changeset_apply` skips such a table's rows
/// without a word (it only logs), so an undo would have reported success with those rows
/// left as they were.
fn schema_mismatches(conn: &Connection, rows: &[RowChange]) -> rusqlite::Result<Vec<Conflict>> {
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for r in rows {
        // SQLite gives `sqlite_stat1` a made-up key of its own (and `ANALYZE` rewrites it).
        if r.table.eq_ignore_ascii_case("sqlite_stat1") || !seen.insert(r.table.as_str()) {
            continue;
        }
        let shape = table_shape(conn, &r.table)?;
        let why = if shape.is_empty() {
            "the table is gone"
        } else if shape.len() < r.pk.len() || shape[..r.pk.len()] != r.pk[..] {
            "the table's columns or primary key changed"
        } else {
            continue;
        };
        out.push(Conflict {
            path: r.table.clone(),
            why,
        });
    }
    Ok(out)
}

/// Applies `changeset` to `conn` inside the transaction the caller opened, refusing the
/// whole of it at the first conflict of any kind (the row differs from the changeset's
/// old side, is gone, a row with its key exists, a constraint or foreign key fails), or
/// when one of its tables changed shape (gone, fewer columns, another primary key).
/// `Ok(Err(conflicts))` names the rows; the caller rolls its transaction back.
pub fn apply_or_refuse(
    conn: &Connection,
    changeset: &[u8],
) -> rusqlite::Result<Result<(), Vec<Conflict>>> {
    if changeset.is_empty() {
        return Ok(Ok(()));
    }
    let rows = decode(changeset)?;
    let gone = schema_mismatches(conn, &rows)?;
    if !gone.is_empty() {
        return Ok(Err(gone));
    }
    // Before 3.44 SQLite skips the rows of tables keyed by rowid: those are applied here.
    if rusqlite::version_number() < ROWID_SESSIONS {
        let mut by_rowid = Vec::new();
        let mut keyed = Vec::new();
        for r in rows {
            if keyed_by_rowid(conn, &r)? {
                by_rowid.push(r);
            } else {
                keyed.push(r);
            }
        }
        if !by_rowid.is_empty() {
            if let Some((row, kind)) = rowid_apply::apply(conn, &by_rowid)? {
                return Ok(Err(vec![Conflict {
                    path: row.path(),
                    why: why(kind),
                }]));
            }
            return apply_keyed(conn, &encode::encode(&keyed));
        }
    }
    apply_keyed(conn, changeset)
}

/// The SQLite version from which sessions record tables without a `PRIMARY KEY`.
pub(super) const ROWID_SESSIONS: i32 = 3_044_000;

/// Whether `r`'s table has no declared `PRIMARY KEY` (the change is keyed by rowid).
fn keyed_by_rowid(conn: &Connection, r: &RowChange) -> rusqlite::Result<bool> {
    if r.table.eq_ignore_ascii_case("sqlite_stat1") {
        return Ok(false);
    }
    let shape = table_shape(conn, &r.table)?;
    let declared: i64 = conn.query_row(
        "SELECT count(*) FROM pragma_table_info(?1, 'main') WHERE pk > 0",
        [&r.table],
        |row| row.get(0),
    )?;
    Ok(declared == 0 && shape.len() == r.pk.len())
}

/// `sqlite3changeset_apply`, all or nothing (see [`apply_or_refuse`]).
fn apply_keyed(conn: &Connection, changeset: &[u8]) -> rusqlite::Result<Result<(), Vec<Conflict>>> {
    if changeset.is_empty() {
        return Ok(Ok(()));
    }
    let mut conflicts: Vec<Conflict> = Vec::new();
    let applied = ffi_changeset::apply(conn, changeset, |kind, item| {
        let path = match read_item(item) {
            Ok(Some(row)) => row.path(),
            _ => item
                .op()
                .map(|o| format!("{}/?", o.table))
                .unwrap_or_else(|_| "?".into()),
        };
        conflicts.push(Conflict {
            path,
            why: why(kind),
        });
        ConflictAction::Abort
    });
    match applied {
        Ok(()) if conflicts.is_empty() => Ok(Ok(())),
        Ok(()) => Ok(Err(conflicts)),
        Err(_) if !conflicts.is_empty() => Ok(Err(conflicts)),
        Err(e) => Err(e),
    }
}

/// The column names of `table` in `conn`'s main database (empty when it is unknown).
pub fn column_names(conn: &Connection, table: &str) -> Vec<String> {
    let names = || -> rusqlite::Result<Vec<String>> {
        let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")?;
        let rows = stmt.query_map([table], |r| r.get::<_, String>(0))?;
        rows.collect()
    };
    names().unwrap_or_default()
}

/// A row side as a JSON object in column order, holding the columns present.
fn render_side(columns: &[String], side: &[Option<SqlValue>]) -> Vec<u8> {
    let fields: Vec<String> = side
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let v = v.as_ref()?;
            let name = columns.get(i).cloned().unwrap_or_else(|| format!("c{i}"));
            Some(format!(
                "{}: {}",
                serde_json::Value::String(name),
                v.to_json()
            ))
        })
        .collect();
    format!("{{{}}}", fields.join(", ")).into_bytes()
}

/// The diff of a changeset: one entry per row (`<table>/<key>`, sorted), each side a JSON
/// object of the columns the changeset holds (an update: the key and the changed columns),
/// and as `patch` a readable summary per table — **not** a git patch. `columns` names a
/// table's columns (see [`column_names`]); unknown ones are called `c0`, `c1`, ….
pub fn render(
    rows: &[RowChange],
    source: &str,
    columns: &mut dyn FnMut(&str) -> Vec<String>,
) -> SandboxDiff {
    let mut names: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let mut entries: Vec<DiffEntry> = rows
        .iter()
        .map(|r| {
            let cols = names.entry(r.table.clone()).or_insert_with(|| {
                let mut c = columns(&r.table);
                // A table without a `PRIMARY KEY` is recorded keyed by its rowid, as a
                // leftmost column (see `session`).
                if r.pk.len() == c.len() + 1 {
                    c.insert(0, "_rowid_".to_string());
                }
                c
            });
            DiffEntry {
                path: r.path(),
                operation: r.op,
                before: (r.op != DiffOp::Added).then(|| render_side(cols, &r.old)),
                after: (r.op != DiffOp::Deleted).then(|| render_side(cols, &r.new)),
                // Rows have no file modes.
                before_mode: None,
                after_mode: None,
            }
        })
        .collect();
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let mut patch = String::new();
    if !entries.is_empty() {
        patch.push_str(&format!(
            "# rows changed in {source} (a summary of a SQLite changeset, not a git patch)\n"
        ));
        let mut per_table: std::collections::BTreeMap<&str, [usize; 3]> = Default::default();
        for r in rows {
            let n = per_table.entry(&r.table).or_default();
            n[r.op as usize] += 1;
        }
        for (table, [a, m, d]) in &per_table {
            patch.push_str(&format!(
                "table {table}: {a} added, {m} modified, {d} deleted\n"
            ));
        }
        for e in &entries {
            let side = |s: &Option<Vec<u8>>| {
                s.as_deref()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default()
            };
            match e.operation {
                DiffOp::Added => patch.push_str(&format!("+ {} {}\n", e.path, side(&e.after))),
                DiffOp::Deleted => patch.push_str(&format!("- {} {}\n", e.path, side(&e.before))),
                DiffOp::Modified => patch.push_str(&format!(
                    "~ {} {} -> {}\n",
                    e.path,
                    side(&e.before),
                    side(&e.after)
                )),
            }
        }
    }
    SandboxDiff {
        entries,
        patch: patch.into_bytes(),
    }
}
