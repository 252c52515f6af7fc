//! One row's change, as a changeset holds it and as the plan layer reads, renders, encodes
//! and applies it.
//!
//! Why a file of its own: the changeset reader (`changeset`), the trigger log of tables
//! without a key (`rowlog`), the changeset writer (`encode`) and the SQL apply
//! (`rowid_apply`) all speak in rows; with the type below them, none of them imports
//! another to name one.

use super::value::SqlValue;
use crate::plan::model::DiffOp;

/// One row of a changeset.
#[derive(Clone, Debug, PartialEq)]
pub struct RowChange {
    /// The table.
    pub table: String,
    /// Inserted (`Added`), updated (`Modified`) or deleted (`Deleted`).
    pub op: DiffOp,
    /// Per column: whether it is part of the primary key.
    pub pk: Vec<bool>,
    /// Per column, the value before (none for an insert, and for an update's unchanged
    /// non-key columns).
    pub old: Vec<Option<SqlValue>>,
    /// Per column, the value after (none for a delete, and for an update's unchanged
    /// non-key columns).
    pub new: Vec<Option<SqlValue>>,
}

impl RowChange {
    /// The row's key: its primary-key values, rendered and joined with `/`.
    pub fn key(&self) -> String {
        let side = if self.op == DiffOp::Added {
            &self.new
        } else {
            &self.old
        };
        self.pk
            .iter()
            .zip(side)
            .filter(|(is_pk, _)| **is_pk)
            .map(|(_, v)| v.as_ref().map_or_else(|| "?".to_string(), SqlValue::render))
            .collect::<Vec<_>>()
            .join("/")
    }

    /// `<table>/<key>`: the row's path in a diff.
    pub fn path(&self) -> String {
        format!("{}/{}", self.table, self.key())
    }
}
