//! Rows written back into SQLite's changeset format: the inverse of
//! [`super::changeset::decode`].
//!
//! `rowlog` records the rows of tables without a `PRIMARY KEY` itself (the session does
//! not) and encodes them here exactly as SQLite 3.44's session would (a leftmost `_rowid_`
//! key column), so the sandbox keeps one changeset per commit: decoded, rendered and
//! inverted by the same code, and applied by `sqlite3changeset_apply` from 3.44 on. The format
//! is SQLite's documented one (`sqlite3session_changeset`): per table a header (`'T'`, the
//! column count, one primary-key flag per column, the name), then per row the operation, the
//! "indirect" flag and the records (a delete's old row, an insert's new row, an update's old
//! then new values, an unchanged column being "undefined").

use super::row_change::RowChange;
use super::value::SqlValue;
use crate::plan::model::DiffOp;

/// SQLite's operation codes as changesets store them.
const SQLITE_DELETE: u8 = 9;
const SQLITE_INSERT: u8 = 18;
const SQLITE_UPDATE: u8 = 23;

/// SQLite's variable-length integer (`sqlite3PutVarint`): big-endian groups of 7 bits, the
/// high bit set on all but the last byte; a value needing more than 56 bits takes 9 bytes,
/// the last one holding 8.
fn put_varint(out: &mut Vec<u8>, v: u64) {
    if v & (0xff00_0000u64 << 32) != 0 {
        let mut buf = [0u8; 9];
        let mut v = v;
        buf[8] = v as u8;
        v >>= 8;
        for b in buf[..8].iter_mut().rev() {
            *b = ((v & 0x7f) as u8) | 0x80;
            v >>= 7;
        }
        out.extend_from_slice(&buf);
        return;
    }
    let mut groups = Vec::with_capacity(9);
    let mut v = v;
    loop {
        groups.push(((v & 0x7f) as u8) | 0x80);
        v >>= 7;
        if v == 0 {
            break;
        }
    }
    groups[0] &= 0x7f;
    out.extend(groups.iter().rev());
}

/// One value of a record; `None` is "undefined" (a column an update left alone).
fn put_value(out: &mut Vec<u8>, v: Option<&SqlValue>) {
    match v {
        None => out.push(0),
        Some(SqlValue::Integer(i)) => {
            out.push(1);
            out.extend_from_slice(&i.to_be_bytes());
        }
        Some(SqlValue::Real(f)) => {
            out.push(2);
            out.extend_from_slice(&f.to_bits().to_be_bytes());
        }
        Some(SqlValue::Text(s)) => {
            out.push(3);
            put_varint(out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        Some(SqlValue::Blob(b)) => {
            out.push(4);
            put_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        Some(SqlValue::Null) => out.push(5),
    }
}

fn put_record(out: &mut Vec<u8>, side: &[Option<SqlValue>]) {
    for v in side {
        put_value(out, v.as_ref());
    }
}

/// `rows` as a changeset, a table header before each run of rows of one table. An update's
/// new side leaves its key columns undefined, as SQLite writes it (the key is in the old
/// side). Empty rows give an empty changeset, which SQLite reads as "no changes".
pub(super) fn encode(rows: &[RowChange]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut current: Option<(&str, &[bool])> = None;
    for r in rows {
        if current != Some((r.table.as_str(), r.pk.as_slice())) {
            out.push(b'T');
            put_varint(&mut out, r.pk.len() as u64);
            out.extend(r.pk.iter().map(|k| u8::from(*k)));
            out.extend_from_slice(r.table.as_bytes());
            out.push(0);
            current = Some((r.table.as_str(), r.pk.as_slice()));
        }
        match r.op {
            DiffOp::Added => {
                out.extend([SQLITE_INSERT, 0]);
                put_record(&mut out, &r.new);
            }
            DiffOp::Deleted => {
                out.extend([SQLITE_DELETE, 0]);
                put_record(&mut out, &r.old);
            }
            DiffOp::Modified => {
                out.extend([SQLITE_UPDATE, 0]);
                put_record(&mut out, &r.old);
                for (v, is_pk) in r.new.iter().zip(&r.pk) {
                    put_value(&mut out, if *is_pk { None } else { v.as_ref() });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::strategy::sqlite::changeset::decode;

    fn row(op: DiffOp, old: Vec<Option<SqlValue>>, new: Vec<Option<SqlValue>>) -> RowChange {
        RowChange {
            table: "t".into(),
            op,
            pk: vec![true, false, false],
            old,
            new,
        }
    }

    #[test]
    fn varints_match_sqlite() {
        let enc = |v: u64| {
            let mut o = Vec::new();
            put_varint(&mut o, v);
            o
        };
        assert_eq!(enc(0), [0]);
        assert_eq!(enc(127), [0x7f]);
        assert_eq!(enc(128), [0x81, 0x00]);
        assert_eq!(enc(300), [0x82, 0x2c]);
        assert_eq!(enc(u64::MAX).len(), 9);
    }

    /// SQLite's own iterator reads back every operation and storage class.
    #[test]
    fn sqlite_decodes_what_is_encoded() {
        let i = |v: i64| Some(SqlValue::Integer(v));
        let rows = vec![
            row(
                DiffOp::Added,
                vec![None, None, None],
                vec![
                    i(1),
                    Some(SqlValue::Text("é".repeat(100))),
                    Some(SqlValue::Null),
                ],
            ),
            row(
                DiffOp::Modified,
                vec![i(2), Some(SqlValue::Real(1.5)), None],
                vec![i(2), Some(SqlValue::Blob(vec![0, 255])), None],
            ),
            row(
                DiffOp::Deleted,
                vec![i(-7), i(i64::MIN), Some(SqlValue::Blob(vec![]))],
                vec![None, None, None],
            ),
        ];
        assert_eq!(decode(&encode(&rows)).unwrap(), rows);
        assert!(encode(&[]).is_empty());
    }
}
