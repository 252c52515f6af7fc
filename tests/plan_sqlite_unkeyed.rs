//! `transaction_rollback` on tables without a `PRIMARY KEY` (keyed by rowid): what a user sees
//! after diff, commit, rollback, checkpoints and the undo after the commit. TEMP triggers
//! record such tables; the same tests run against the bundled SQLite (3.44 or later, whose
//! `sqlite3changeset_apply` undoes them) and against an older system SQLite (`cargo test
//! --no-default-features`, Debian 12's 3.40.1, where the undo is applied in SQL): the
//! expectations are the same on both.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use patchbox::plan::checkpoint::CheckpointManager;
use patchbox::plan::strategy::sqlite::SqlValue;
use patchbox::plan::{DiffOp, PlanManager, Sandbox, Status, Strategy};
use rusqlite::Connection;

struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
    mgr: PlanManager,
    root: PathBuf,
}

/// A database with `schema` run on it, and a plan manager beside it.
fn fixture(schema: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    Connection::open(&db)
        .unwrap()
        .execute_batch(schema)
        .unwrap();
    let root = dir.path().join("root");
    let mgr = PlanManager::open(&root).unwrap();
    Fixture {
        _dir: dir,
        db,
        mgr,
        root,
    }
}

fn sandbox(f: &Fixture) -> Arc<dyn Sandbox> {
    f.mgr
        .get_or_create_sandbox("p", "appdb", &f.db, Strategy::TransactionRollback)
        .unwrap()
}

fn run(sb: &dyn Sandbox, sql: &str) {
    sb.sql().unwrap().execute(sql, &[]).unwrap();
}

/// Another connection's view of the whole table, rowid first, each value with its type:
/// `rowid|value:type|…`. The database passes `PRAGMA integrity_check` first.
fn table(db: &Path, name: &str) -> Vec<String> {
    let c = Connection::open(db).unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    let n: i64 = c
        .query_row("SELECT count(*) FROM pragma_table_info(?1)", [name], |r| {
            r.get(0)
        })
        .unwrap();
    let mut s = c
        .prepare(&format!("SELECT rowid, * FROM \"{name}\" ORDER BY rowid"))
        .unwrap();
    s.query_map([], |r| {
        let mut line = r.get::<_, i64>(0)?.to_string();
        for i in 1..=n as usize {
            let v = SqlValue::from(r.get_ref(i)?);
            let ty = match v {
                SqlValue::Null => "null",
                SqlValue::Integer(_) => "int",
                SqlValue::Real(_) => "real",
                SqlValue::Text(_) => "text",
                SqlValue::Blob(_) => "blob",
            };
            line.push_str(&format!("|{}:{ty}", v.render()));
        }
        Ok(line)
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn paths(sb: &dyn Sandbox) -> Vec<(String, DiffOp)> {
    sb.diff()
        .unwrap()
        .entries
        .into_iter()
        .map(|e| (e.path, e.operation))
        .collect()
}

fn p(path: &str, op: DiffOp) -> (String, DiffOp) {
    (path.to_string(), op)
}

const LOG: &str = "CREATE TABLE log(at INTEGER, msg TEXT UNIQUE);
                   INSERT INTO log VALUES (1, 'boot'), (2, 'ready'), (3, 'idle');";

/// `REPLACE` removes rows without a `DELETE`: through the rowid and through a `UNIQUE`
/// column. With a moved rowid and an upsert, every row shows in the diff, lands on commit
/// and comes back, rowids and all, on the undo.
#[test]
fn replace_moved_rowids_and_upserts_are_recorded_and_undone() {
    let f = fixture(LOG);
    let before = table(&f.db, "log");
    let sb = sandbox(&f);
    run(
        &*sb,
        "INSERT OR REPLACE INTO log(at, msg) VALUES (9, 'idle')",
    );
    run(
        &*sb,
        "INSERT OR REPLACE INTO log(rowid, at, msg) VALUES (1, 10, 'one')",
    );
    run(&*sb, "UPDATE log SET rowid = 50 WHERE at = 2");
    run(
        &*sb,
        "INSERT INTO log(at, msg) VALUES (0, 'one') ON CONFLICT(msg) DO UPDATE SET at = 11",
    );
    run(&*sb, "INSERT INTO log VALUES (5, 'gone')");
    run(&*sb, "DELETE FROM log WHERE msg = 'gone'");
    assert_eq!(
        paths(&*sb),
        [
            p("log/1", DiffOp::Modified),
            p("log/2", DiffOp::Deleted),
            p("log/3", DiffOp::Deleted),
            p("log/4", DiffOp::Added),
            p("log/50", DiffOp::Added),
        ]
    );
    let d = sb.diff().unwrap();
    let one = d.entries.iter().find(|e| e.path == "log/1").unwrap();
    assert_eq!(
        String::from_utf8_lossy(one.after.as_deref().unwrap()),
        r#"{"_rowid_": 1, "at": 11, "msg": "one"}"#
    );
    assert_eq!(
        table(&f.db, "log"),
        before,
        "nothing visible before the commit"
    );
    sb.commit(None).unwrap();
    assert_eq!(
        table(&f.db, "log"),
        [
            "1|11:int|one:text",
            "4|9:int|idle:text",
            "50|2:int|ready:text"
        ]
    );
    sb.rollback().unwrap();
    assert_eq!(sb.status(), Status::RolledBack);
    assert_eq!(table(&f.db, "log"), before);
}

/// Checkpoints (savepoints) and the rollback of the open transaction: the diff follows the
/// rows, the commit holds only what is left, and nothing of the sandbox's bookkeeping is left
/// in the database.
#[test]
fn checkpoints_and_rollback_leave_exactly_the_rows_kept() {
    let f = fixture(LOG);
    let before = table(&f.db, "log");
    let sb = sandbox(&f);
    let cm = CheckpointManager::new(&f.root);
    run(&*sb, "INSERT INTO log VALUES (4, 'kept')");
    let cp = cm
        .create_checkpoint(&sb, "p", "step", BTreeMap::new())
        .unwrap();
    run(&*sb, "UPDATE log SET msg = 'changed' WHERE at = 1");
    run(&*sb, "DELETE FROM log");
    run(&*sb, "INSERT INTO log VALUES (5, 'dropped')");
    assert_eq!(
        paths(&*sb).len(),
        3,
        "rowid 1 re-used: modified; 2 and 3 deleted"
    );
    assert!(cm.rollback_to(&cp).unwrap());
    assert_eq!(paths(&*sb), [p("log/4", DiffOp::Added)]);
    // Again after the checkpoint, then the whole transaction rolled back.
    run(&*sb, "DELETE FROM log WHERE at = 2");
    assert_eq!(
        paths(&*sb),
        [p("log/2", DiffOp::Deleted), p("log/4", DiffOp::Added)]
    );
    sb.rollback().unwrap();
    assert_eq!(table(&f.db, "log"), before);
    let c = Connection::open(&f.db).unwrap();
    let ours: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name LIKE 'patchbox%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(ours, 0);

    // Re-used, the sandbox starts afresh and commits only the new row.
    let sb = f
        .mgr
        .get_or_create_sandbox("p2", "appdb", &f.db, Strategy::TransactionRollback)
        .unwrap();
    run(&*sb, "INSERT INTO log VALUES (6, 'six')");
    let cp = cm
        .create_checkpoint(&sb, "p2", "step", BTreeMap::new())
        .unwrap();
    run(&*sb, "UPDATE log SET at = 7");
    assert!(cm.rollback_to(&cp).unwrap());
    f.mgr.commit_all("p2").unwrap();
    let mut after = before.clone();
    after.push("4|6:int|six:text".into());
    assert_eq!(table(&f.db, "log"), after);
}

/// Every storage class comes back as it was, type included, after an update and a delete
/// are undone.
#[test]
fn values_of_every_storage_class_are_restored_with_their_type() {
    let f = fixture(
        "CREATE TABLE v(i, r, t, b, n);
         INSERT INTO v VALUES (9223372036854775807, 2.5, 'naïve', x'00ff', NULL),
                              (-1, -0.125, '', x'', NULL);",
    );
    let before = table(&f.db, "v");
    let sb = sandbox(&f);
    run(
        &*sb,
        "UPDATE v SET i = 'text', r = NULL, t = x'01', b = 7, n = 1.5 WHERE rowid = 1",
    );
    run(&*sb, "DELETE FROM v WHERE rowid = 2");
    sb.commit(None).unwrap();
    assert_eq!(
        table(&f.db, "v"),
        ["1|text:text|NULL:null|x'01':blob|7:int|1.5:real"]
    );
    sb.rollback().unwrap();
    assert_eq!(table(&f.db, "v"), before);
}

/// A table made inside the transaction, written in the same call or a later one: its rows
/// are added, committed, and removed by the undo (the table stays: no strategy undoes DDL).
#[test]
fn tables_made_in_the_transaction_are_recorded() {
    let f = fixture(LOG);
    let sb = sandbox(&f);
    sb.sql()
        .unwrap()
        .with_connection(|c| {
            c.execute_batch(
                "CREATE TABLE made(x); INSERT INTO made VALUES ('a'), ('b');
                 UPDATE made SET x = 'B' WHERE x = 'b';",
            )
        })
        .unwrap()
        .unwrap();
    run(&*sb, "CREATE TABLE later(y)");
    run(&*sb, "INSERT INTO later VALUES (1)");
    run(&*sb, "INSERT INTO made VALUES ('c')");
    assert_eq!(
        paths(&*sb),
        [
            p("later/1", DiffOp::Added),
            p("made/1", DiffOp::Added),
            p("made/2", DiffOp::Added),
            p("made/3", DiffOp::Added),
        ]
    );
    sb.commit(None).unwrap();
    assert_eq!(table(&f.db, "made"), ["1|a:text", "2|B:text", "3|c:text"]);
    assert_eq!(table(&f.db, "later"), ["1|1:int"]);
    sb.rollback().unwrap();
    assert!(table(&f.db, "made").is_empty());
    assert!(table(&f.db, "later").is_empty());
}

/// The undo of a commit survives the process: a reopened manager undoes it, and refuses
/// it while another writer holds one of its rows changed.
#[test]
fn a_reopened_sandbox_undoes_its_commit() {
    let f = fixture(LOG);
    let before = table(&f.db, "log");
    let sb = sandbox(&f);
    run(&*sb, "UPDATE log SET msg = 'up' WHERE at = 2");
    run(&*sb, "INSERT INTO log VALUES (4, 'new')");
    sb.commit(None).unwrap();
    f.mgr.set_cleanup_on_drop(false);
    let Fixture {
        _dir,
        db,
        mgr,
        root,
    } = f;
    drop((sb, mgr));
    let mgr = PlanManager::open(&root).unwrap();
    let sb = mgr.get_sandbox("p", "appdb").unwrap();
    assert_eq!(sb.status(), Status::Committed);
    assert_eq!(
        paths(&*sb),
        [p("log/2", DiffOp::Modified), p("log/4", DiffOp::Added)]
    );
    let other = Connection::open(&db).unwrap();
    other
        .execute("UPDATE log SET at = 40 WHERE rowid = 4", [])
        .unwrap();
    let e = sb.rollback().unwrap_err();
    assert!(e.to_string().contains("log/4 (changed since)"), "{e}");
    other
        .execute("UPDATE log SET at = 4 WHERE rowid = 4", [])
        .unwrap();
    sb.rollback().unwrap();
    assert_eq!(table(&db, "log"), before);
    mgr.cleanup_all("p").unwrap();
}

/// What the triggers cannot follow — a table without a key whose columns the transaction
/// changed after writing it — is refused, never committed unrecorded: the call fails naming
/// the table, the sandbox is `Errored`, the lock is free and nothing lands.
#[test]
fn a_written_table_whose_columns_change_is_refused_not_committed_unrecorded() {
    let f = fixture(LOG);
    let before = table(&f.db, "log");
    let sb = sandbox(&f);
    let sql = sb.sql().unwrap();
    sql.execute("UPDATE log SET msg = 'up' WHERE at = 1", &[])
        .unwrap();
    let e = sql
        .execute("ALTER TABLE log ADD COLUMN extra", &[])
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("log, which has no PRIMARY KEY: its columns changed"),
        "{e}"
    );
    assert_eq!(sb.status(), Status::Errored);
    assert!(sb.commit(None).is_err());
    let other = Connection::open(&f.db).unwrap();
    other
        .execute("INSERT INTO log VALUES (4, 'free')", [])
        .unwrap();
    let mut after = before.clone();
    after.push("4|4:int|free:text".into());
    assert_eq!(table(&f.db, "log"), after);
}

/// A table another connection made after the sandbox began, written in the actor's first
/// call (before the sandbox could watch it): its rows as committed are what the diff and the
/// undo compare with, on every SQLite.
#[test]
fn a_table_made_by_another_connection_after_the_sandbox_began_is_recorded() {
    let f = fixture(LOG);
    let sb = sandbox(&f);
    Connection::open(&f.db)
        .unwrap()
        .execute_batch("CREATE TABLE late(x); INSERT INTO late VALUES ('theirs'), ('kept');")
        .unwrap();
    sb.sql()
        .unwrap()
        .with_connection(|c| {
            c.execute_batch(
                "INSERT INTO late VALUES ('ours'); UPDATE late SET x = 'THEIRS' WHERE x = 'theirs';",
            )
        })
        .unwrap()
        .unwrap();
    assert_eq!(
        paths(&*sb),
        [p("late/1", DiffOp::Modified), p("late/3", DiffOp::Added)]
    );
    sb.commit(None).unwrap();
    assert_eq!(
        table(&f.db, "late"),
        ["1|THEIRS:text", "2|kept:text", "3|ours:text"]
    );
    sb.rollback().unwrap();
    assert_eq!(table(&f.db, "late"), ["1|theirs:text", "2|kept:text"]);
}

/// Hundreds of rows inserted, then updated, in one transaction: one added row each in the
/// diff, and the undo removes them all. (SQLite's own session keying by rowid, 3.44 to at
/// least 3.54, files a row twice once it holds more than 128: its hash table regrows with
/// another hash for those rows, so the diff doubled and the undo was refused.)
#[test]
fn hundreds_of_rows_are_each_recorded_once_and_undone() {
    let f = fixture(LOG);
    let before = table(&f.db, "log");
    let sb = sandbox(&f);
    sb.sql()
        .unwrap()
        .with_connection(|c| {
            c.execute_batch(
                "WITH RECURSIVE n(i) AS (SELECT 10 UNION ALL SELECT i + 1 FROM n WHERE i < 509)
                 INSERT INTO log SELECT i, 'm' || i FROM n;
                 UPDATE log SET msg = msg || '!' WHERE at >= 10;
                 DELETE FROM log WHERE at = 1;",
            )
        })
        .unwrap()
        .unwrap();
    let d = paths(&*sb);
    assert_eq!(d.len(), 501);
    assert_eq!(d.iter().filter(|(_, op)| *op == DiffOp::Added).count(), 500);
    sb.commit(None).unwrap();
    assert_eq!(table(&f.db, "log").len(), 502);
    sb.rollback().unwrap();
    assert_eq!(table(&f.db, "log"), before);
}
