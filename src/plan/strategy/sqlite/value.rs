//! The plain values statements take and return: what [`super::SqliteSandbox::execute`]
//! exchanges, in a form with no SQLite type in it, so the C++ bridge (and engines other than
//! SQLite, later) can carry it as it is.
//!
//! ```
//! use patchbox::plan::strategy::sqlite::SqlValue;
//! assert_eq!(SqlValue::from("x"), SqlValue::Text("x".into()));
//! assert_eq!(SqlValue::Integer(7).to_json(), serde_json::json!(7));
//! assert_eq!(SqlValue::Blob(vec![1, 255]).render(), "x'01ff'");
//! ```

use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};

/// One SQL value, SQLite's five storage classes.
#[derive(Clone, Debug, PartialEq)]
pub enum SqlValue {
    /// `NULL`.
    Null,
    /// A 64-bit signed integer.
    Integer(i64),
    /// A 64-bit float.
    Real(f64),
    /// UTF-8 text (invalid UTF-8 from the database is replaced, lossily).
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

impl SqlValue {
    /// The value as JSON: numbers and text as themselves, `NULL` as `null`, a blob as the
    /// string `x'<hex>'` (SQL's blob literal).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            SqlValue::Null => serde_json::Value::Null,
            SqlValue::Integer(i) => serde_json::Value::from(*i),
            SqlValue::Real(f) => serde_json::Number::from_f64(*f)
                .map(serde_json::Value::Number)
                .unwrap_or_else(|| serde_json::Value::String(f.to_string())),
            SqlValue::Text(s) => serde_json::Value::String(s.clone()),
            SqlValue::Blob(_) => serde_json::Value::String(self.render()),
        }
    }

    /// The value as one short piece of text (a row's key in a diff path): text as itself,
    /// `NULL`, numbers, and `x'<hex>'` for a blob.
    pub fn render(&self) -> String {
        match self {
            SqlValue::Null => "NULL".into(),
            SqlValue::Integer(i) => i.to_string(),
            SqlValue::Real(f) => f.to_string(),
            SqlValue::Text(s) => s.clone(),
            SqlValue::Blob(b) => {
                let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
                format!("x'{hex}'")
            }
        }
    }
}

impl From<ValueRef<'_>> for SqlValue {
    fn from(v: ValueRef<'_>) -> SqlValue {
        match v {
            ValueRef::Null => SqlValue::Null,
            ValueRef::Integer(i) => SqlValue::Integer(i),
            ValueRef::Real(f) => SqlValue::Real(f),
            ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
        }
    }
}

impl From<&str> for SqlValue {
    fn from(s: &str) -> SqlValue {
        SqlValue::Text(s.to_string())
    }
}

impl From<String> for SqlValue {
    fn from(s: String) -> SqlValue {
        SqlValue::Text(s)
    }
}

impl From<i64> for SqlValue {
    fn from(i: i64) -> SqlValue {
        SqlValue::Integer(i)
    }
}

impl From<f64> for SqlValue {
    fn from(f: f64) -> SqlValue {
        SqlValue::Real(f)
    }
}

impl From<Vec<u8>> for SqlValue {
    fn from(b: Vec<u8>) -> SqlValue {
        SqlValue::Blob(b)
    }
}

impl ToSql for SqlValue {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            SqlValue::Null => ValueRef::Null,
            SqlValue::Integer(i) => ValueRef::Integer(*i),
            SqlValue::Real(f) => ValueRef::Real(*f),
            SqlValue::Text(s) => ValueRef::Text(s.as_bytes()),
            SqlValue::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

/// What one statement returned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rows {
    /// The result's column names (empty for a statement that returns no rows).
    pub columns: Vec<String>,
    /// The rows, each with one value per column.
    pub rows: Vec<Vec<SqlValue>>,
    /// Rows inserted, updated or deleted by the statement (0 for a query).
    pub changes: u64,
}
