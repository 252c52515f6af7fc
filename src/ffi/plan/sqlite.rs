//! The bridge behind `<patchbox/sqlite.hpp>`: SQL run in a `transaction_rollback` sandbox
//! (`SqliteSandbox::execute`), its values crossing as a tagged shared struct. A sandbox of
//! another strategy refuses with a `plan_sandbox` error.

use super::bridge;
use super::error::{encode, plan};
use super::sandbox::PlanSandbox;
use crate::ffi::{guarded, internal};
use crate::plan::strategy::sqlite::SqlValue;
use crate::plan::SandboxError;

fn sql_value_in(v: bridge::FfiSqlValue) -> Result<SqlValue, String> {
    Ok(match v.kind {
        0 => SqlValue::Null,
        1 => SqlValue::Integer(v.integer),
        2 => SqlValue::Real(v.real),
        3 => SqlValue::Text(v.text),
        4 => SqlValue::Blob(v.blob),
        k => return Err(internal(&format!("unknown SQL value kind {k}"))),
    })
}

fn sql_value_out(v: SqlValue) -> bridge::FfiSqlValue {
    let mut out = bridge::FfiSqlValue {
        kind: 0,
        integer: 0,
        real: 0.0,
        text: String::new(),
        blob: Vec::new(),
    };
    match v {
        SqlValue::Null => {}
        SqlValue::Integer(i) => {
            out.kind = 1;
            out.integer = i;
        }
        SqlValue::Real(f) => {
            out.kind = 2;
            out.real = f;
        }
        SqlValue::Text(t) => {
            out.kind = 3;
            out.text = t;
        }
        SqlValue::Blob(b) => {
            out.kind = 4;
            out.blob = b;
        }
    }
    out
}

impl PlanSandbox {
    pub(super) fn sqlite_execute(
        &self,
        sql: &str,
        params: Vec<bridge::FfiSqlValue>,
    ) -> Result<bridge::FfiSqlRows, String> {
        guarded(|| {
            let sb = self.sb()?;
            let Some(db) = sb.sql() else {
                return Err(encode(&SandboxError::sandbox(
                    Some(sb.sandbox_id()),
                    format!(
                        "not a SQLite sandbox (its strategy is {})",
                        sb.strategy().name()
                    ),
                )));
            };
            let params = params
                .into_iter()
                .map(sql_value_in)
                .collect::<Result<Vec<_>, _>>()?;
            let rows = plan(db.execute(sql, &params))?;
            let width = rows.columns.len();
            Ok(bridge::FfiSqlRows {
                columns: rows.columns,
                width,
                values: rows.rows.into_iter().flatten().map(sql_value_out).collect(),
                changes: rows.changes,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::sandbox::boxed;
    use super::*;
    use crate::plan::{PlanManager, Strategy};

    #[test]
    fn sql_values_cross_both_ways() {
        let values = [
            SqlValue::Null,
            SqlValue::Integer(-7),
            SqlValue::Real(1.5),
            SqlValue::Text("ada".into()),
            SqlValue::Blob(vec![0, 255]),
        ];
        for v in values {
            assert_eq!(sql_value_in(sql_value_out(v.clone())).unwrap(), v);
        }
        let mut bad = sql_value_out(SqlValue::Null);
        bad.kind = 9;
        assert!(sql_value_in(bad).is_err());
    }

    #[test]
    fn execute_runs_in_sqlite_sandboxes_only() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("app.db");
        std::fs::write(&db, b"").unwrap();
        let dir = tmp.path().join("dir");
        std::fs::create_dir(&dir).unwrap();
        let mgr = PlanManager::open(tmp.path().join("root")).unwrap();
        let sql = boxed(
            mgr.get_or_create_sandbox("p", "db", &db, Strategy::TransactionRollback)
                .unwrap(),
        );
        sql.sqlite_execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)", Vec::new())
            .unwrap();
        let params = vec![
            sql_value_out(SqlValue::Integer(1)),
            sql_value_out(SqlValue::Text("x".into())),
        ];
        assert_eq!(
            sql.sqlite_execute("INSERT INTO t VALUES (?1, ?2)", params)
                .unwrap()
                .changes,
            1
        );
        let rows = sql
            .sqlite_execute("SELECT id, v FROM t", Vec::new())
            .unwrap();
        assert_eq!(rows.columns, ["id", "v"]);
        assert_eq!(rows.width, 2);
        assert_eq!(rows.values.len(), 2);
        assert_eq!(rows.values[1].text, "x");

        let cow = boxed(
            mgr.get_or_create_sandbox("p", "dir", &dir, Strategy::CopyOnWrite)
                .unwrap(),
        );
        let Err(err) = cow.sqlite_execute("SELECT 1", Vec::new()) else {
            panic!("a copy_on_write sandbox ran SQL");
        };
        assert!(err.starts_with("plan_sandbox\x1f"), "{err}");
        assert!(err.contains("not a SQLite sandbox"), "{err}");
        mgr.cleanup_all("p").unwrap();
    }
}
