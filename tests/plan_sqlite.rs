//! `transaction_rollback` against real SQLite database files: the actor's statements stay in
//! the sandbox's transaction until the commit, the diff lists the rows, rollback before and
//! undo after the commit, savepoints, `commit_all` with a copy_on_write sandbox, reopening.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use patchbox::plan::strategy::sqlite::SqlValue;
use patchbox::plan::{DiffOp, PlanManager, Sandbox, SandboxError, Status, Strategy};
use rusqlite::Connection;

/// A database with `users(id PK, name, age)` holding ada (1) and bob (2), and a second
/// table `notes(id PK, body)` holding one note.
fn database(dir: &Path) -> PathBuf {
    let db = dir.join("app.db");
    let c = Connection::open(&db).unwrap();
    c.execute_batch(
        "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER);
         INSERT INTO users VALUES (1, 'ada', 36), (2, 'bob', 41);
         CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT);
         INSERT INTO notes VALUES (1, 'first');",
    )
    .unwrap();
    db
}

/// Another connection's view: the rows of `sql` (an integer, then a text) as `n:text`.
fn pairs(db: &Path, sql: &str) -> Vec<String> {
    let c = Connection::open(db).unwrap();
    let mut s = c.prepare(sql).unwrap();
    s.query_map([], |r| {
        Ok(format!(
            "{}:{}",
            r.get::<_, i64>(0)?,
            r.get::<_, String>(1)?
        ))
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// `SELECT id, name FROM users ORDER BY id`, as `id:name`.
fn users(db: &Path) -> Vec<String> {
    pairs(db, "SELECT id, name FROM users ORDER BY id")
}

fn text(s: &str) -> SqlValue {
    SqlValue::from(s)
}

struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
    mgr: PlanManager,
    root: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path());
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

/// The actor's three changes: one insert, one update, one delete.
fn act(sb: &dyn Sandbox) {
    let sql = sb.sql().unwrap();
    sql.execute(
        "INSERT INTO users(id, name, age) VALUES (?1, ?2, ?3)",
        &[SqlValue::Integer(3), text("cy"), SqlValue::Null],
    )
    .unwrap();
    let r = sql
        .execute("UPDATE users SET name = ?1 WHERE id = 1", &[text("grace")])
        .unwrap();
    assert_eq!(r.changes, 1);
    sql.execute("DELETE FROM notes WHERE id = 1", &[]).unwrap();
}

#[test]
fn execute_diff_and_commit_visible_only_after_commit() {
    let f = fixture();
    let sb = sandbox(&f);
    assert_eq!(sb.status(), Status::Created);
    assert_eq!(sb.strategy().name(), "transaction_rollback");
    act(&*sb);
    assert_eq!(sb.status(), Status::Active);

    // The actor reads its own writes; another connection does not see them.
    let mine = sb
        .sql()
        .unwrap()
        .execute("SELECT id, name FROM users ORDER BY id", &[])
        .unwrap();
    assert_eq!(mine.columns, ["id", "name"]);
    assert_eq!(mine.rows.len(), 3);
    assert_eq!(mine.rows[0], [SqlValue::Integer(1), text("grace")]);
    assert_eq!(users(&f.db), ["1:ada", "2:bob"]);

    let diff = sb.diff().unwrap();
    let got: Vec<(&str, DiffOp)> = diff
        .entries
        .iter()
        .map(|e| (e.path.as_str(), e.operation))
        .collect();
    assert_eq!(
        got,
        [
            ("notes/1", DiffOp::Deleted),
            ("users/1", DiffOp::Modified),
            ("users/3", DiffOp::Added)
        ]
    );
    let side = |b: &Option<Vec<u8>>| b.as_deref().map(|b| String::from_utf8(b.to_vec()).unwrap());
    assert_eq!(
        side(&diff.entries[0].before).as_deref(),
        Some(r#"{"id": 1, "body": "first"}"#)
    );
    assert_eq!(diff.entries[0].after, None);
    assert_eq!(
        side(&diff.entries[1].before).as_deref(),
        Some(r#"{"id": 1, "name": "ada"}"#)
    );
    assert_eq!(
        side(&diff.entries[1].after).as_deref(),
        Some(r#"{"id": 1, "name": "grace"}"#)
    );
    assert_eq!(diff.entries[2].before, None);
    assert_eq!(
        side(&diff.entries[2].after).as_deref(),
        Some(r#"{"id": 3, "name": "cy", "age": null}"#)
    );
    let summary = String::from_utf8(diff.patch.clone()).unwrap();
    assert!(summary.contains("not a git patch"), "{summary}");
    assert!(
        summary.contains("table users: 1 added, 1 modified, 0 deleted"),
        "{summary}"
    );
    assert!(
        summary.contains("table notes: 0 added, 0 modified, 1 deleted"),
        "{summary}"
    );

    let results = f.mgr.commit_all("p").unwrap();
    assert_eq!(results.len(), 1);
    let r = &results[0];
    assert!(r.success);
    assert_eq!(r.added_files, ["users/3"]);
    assert_eq!(r.changed_files, ["users/1"]);
    assert_eq!(r.deleted_files, ["notes/1"]);
    let commit_ref = r.commit_ref.clone().unwrap();
    assert!(commit_ref.starts_with("changeset-"), "{commit_ref}");
    assert!(sb
        .context()
        .unwrap()
        .sandbox_path
        .join(&commit_ref)
        .is_file());
    assert_eq!(sb.status(), Status::Committed);
    assert_eq!(users(&f.db), ["1:grace", "2:bob", "3:cy"]);
    // The committed sandbox's diff is still its changeset.
    assert_eq!(sb.diff().unwrap().entries.len(), 3);
}

#[test]
fn rollback_before_commit_leaves_nothing_and_reuse_starts_fresh() {
    let f = fixture();
    let sb = sandbox(&f);
    act(&*sb);
    sb.rollback().unwrap();
    assert_eq!(sb.status(), Status::RolledBack);
    assert_eq!(users(&f.db), ["1:ada", "2:bob"]);
    let c = Connection::open(&f.db).unwrap();
    let notes: i64 = c
        .query_row("SELECT count(*) FROM notes", [], |r| r.get(0))
        .unwrap();
    assert_eq!(notes, 1);
    assert!(sb.diff().unwrap().entries.is_empty());

    // Re-used: a new transaction, with a new session.
    let sql = sb.sql().unwrap();
    sql.execute("UPDATE users SET age = 37 WHERE id = 1", &[])
        .unwrap();
    assert_eq!(sb.status(), Status::Active);
    let d = sb.diff().unwrap();
    assert_eq!(d.paths(DiffOp::Modified), ["users/1"]);
    sb.commit(None).unwrap();
    let age: i64 = c
        .query_row("SELECT age FROM users WHERE id = 1", [], |r| r.get(0))
        .unwrap();
    assert_eq!(age, 37);
}

#[test]
fn undo_after_commit_restores_the_rows() {
    let f = fixture();
    let sb = sandbox(&f);
    act(&*sb);
    let r = sb.commit(None).unwrap();
    let file = sb
        .context()
        .unwrap()
        .sandbox_path
        .join(r.commit_ref.unwrap());
    assert_eq!(users(&f.db), ["1:grace", "2:bob", "3:cy"]);
    // Another writer changes an unrelated row: the undo does not care.
    Connection::open(&f.db)
        .unwrap()
        .execute("UPDATE users SET name = 'bobby' WHERE id = 2", [])
        .unwrap();
    sb.rollback().unwrap();
    assert_eq!(sb.status(), Status::RolledBack);
    assert_eq!(users(&f.db), ["1:ada", "2:bobby"]);
    let c = Connection::open(&f.db).unwrap();
    let body: String = c
        .query_row("SELECT body FROM notes WHERE id = 1", [], |r| r.get(0))
        .unwrap();
    assert_eq!(body, "first");
    assert!(!file.exists(), "the undone changeset is removed");
}

#[test]
fn undo_refused_when_another_writer_changed_those_rows() {
    let f = fixture();
    let sb = sandbox(&f);
    act(&*sb);
    sb.commit(None).unwrap();
    let other = Connection::open(&f.db).unwrap();
    other
        .execute("UPDATE users SET name = 'GRACE' WHERE id = 1", [])
        .unwrap();
    let e = sb.rollback().unwrap_err();
    match &e {
        SandboxError::Rollback { files, reason, .. } => {
            assert_eq!(files, &["users/1"], "{e}");
            assert!(reason.contains("changed since"), "{e}");
        }
        other => panic!("expected a Rollback error, got {other}"),
    }
    // Nothing undone: the commit's other rows are still there, and so is the writer's.
    assert_eq!(users(&f.db), ["1:GRACE", "2:bob", "3:cy"]);
    let notes: i64 = other
        .query_row("SELECT count(*) FROM notes", [], |r| r.get(0))
        .unwrap();
    assert_eq!(notes, 0);
    assert_eq!(sb.status(), Status::Committed);

    // A deleted row is a conflict too; once the rows are as the commit left them, it undoes.
    other
        .execute("UPDATE users SET name = 'grace' WHERE id = 1", [])
        .unwrap();
    other.execute("DELETE FROM users WHERE id = 3", []).unwrap();
    let e = sb.rollback().unwrap_err();
    assert!(e.to_string().contains("users/3 (deleted since)"), "{e}");
    other
        .execute("INSERT INTO users VALUES (3, 'cy', NULL)", [])
        .unwrap();
    sb.rollback().unwrap();
    assert_eq!(users(&f.db), ["1:ada", "2:bob"]);
}

/// `log(at, msg)`: a table without a `PRIMARY KEY`, as `at:msg` lines in rowid order.
fn log_lines(db: &Path) -> Vec<String> {
    pairs(db, "SELECT at, msg FROM log ORDER BY rowid")
}

/// SQLite's sessions skip a table without a `PRIMARY KEY` unless told to key it by rowid:
/// before, such rows were committed but showed in no diff and survived the undo. Keying by
/// rowid takes SQLite 3.44 (and is wrong past 128 rows); TEMP triggers record the rows
/// instead, on the bundled SQLite and on an older system one (`--no-default-features`): the
/// same diff, commit and undo on both.
#[test]
fn a_table_without_a_primary_key_shows_in_the_diff_and_is_undone() {
    let f = fixture();
    Connection::open(&f.db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE log(at INTEGER, msg TEXT);
             INSERT INTO log VALUES (1, 'boot'), (2, 'ready');",
        )
        .unwrap();
    let sb = sandbox(&f);
    let sql = sb.sql().unwrap();
    sql.execute("INSERT INTO log VALUES (3, 'work')", &[])
        .unwrap();
    sql.execute("UPDATE log SET msg = 'up' WHERE at = 2", &[])
        .unwrap();
    sql.execute("DELETE FROM log WHERE at = 1", &[]).unwrap();
    let d = sb.diff().unwrap();
    let rows: Vec<(String, DiffOp)> = d
        .entries
        .iter()
        .map(|e| (e.path.clone(), e.operation))
        .collect();
    assert_eq!(
        rows,
        [
            ("log/1".to_string(), DiffOp::Deleted),
            ("log/2".to_string(), DiffOp::Modified),
            ("log/3".to_string(), DiffOp::Added),
        ]
    );
    let added = d.entries.iter().find(|e| e.path == "log/3").unwrap();
    assert_eq!(
        String::from_utf8_lossy(added.after.as_deref().unwrap()),
        r#"{"_rowid_": 3, "at": 3, "msg": "work"}"#
    );
    let patch = String::from_utf8_lossy(&d.patch);
    assert!(
        patch.contains("table log: 1 added, 1 modified, 1 deleted"),
        "{patch}"
    );
    // Invisible to others until the commit.
    assert_eq!(log_lines(&f.db), ["1:boot", "2:ready"]);
    sb.commit(None).unwrap();
    assert_eq!(log_lines(&f.db), ["2:up", "3:work"]);

    // The undo is refused while another writer has changed one of those rows…
    let other = Connection::open(&f.db).unwrap();
    other
        .execute("UPDATE log SET msg = 'UP' WHERE at = 2", [])
        .unwrap();
    let e = sb.rollback().unwrap_err();
    assert!(e.to_string().contains("log/2 (changed since)"), "{e}");
    assert_eq!(log_lines(&f.db), ["2:UP", "3:work"]);
    // …and restores every row once they are as the commit left them.
    other
        .execute("UPDATE log SET msg = 'up' WHERE at = 2", [])
        .unwrap();
    sb.rollback().unwrap();
    assert_eq!(log_lines(&f.db), ["1:boot", "2:ready"]);
}

#[test]
fn savepoints_restore_and_release() {
    let f = fixture();
    let sb = sandbox(&f);
    let sql = sb.sql().unwrap();
    sql.execute("UPDATE users SET name = 'one' WHERE id = 1", &[])
        .unwrap();
    sql.savepoint("cp1").unwrap();
    sql.execute("UPDATE users SET name = 'two' WHERE id = 1", &[])
        .unwrap();
    sql.execute("DELETE FROM users WHERE id = 2", &[]).unwrap();
    sql.rollback_to_savepoint("cp1").unwrap();
    let rows = sql
        .execute("SELECT name FROM users ORDER BY id", &[])
        .unwrap();
    assert_eq!(rows.rows, [[text("one")], [text("bob")]]);
    // The diff follows: users/2 is untouched again.
    assert_eq!(sb.diff().unwrap().paths(DiffOp::Modified), ["users/1"]);
    assert!(sb.diff().unwrap().paths(DiffOp::Deleted).is_empty());
    // Rolled back to, the savepoint stays; released, it is gone (the changes stay).
    sql.execute("INSERT INTO users VALUES (5, 'e', 1)", &[])
        .unwrap();
    sql.rollback_to_savepoint("cp1").unwrap();
    sql.release_savepoint("cp1").unwrap();
    let e = sql.rollback_to_savepoint("cp1").unwrap_err();
    assert!(e.to_string().contains("cp1"), "{e}");
    // A quote in a name is quoted, not SQL.
    sql.savepoint("a\"b").unwrap();
    sql.release_savepoint("a\"b").unwrap();
    assert_eq!(sb.status(), Status::Active);
    sb.commit(None).unwrap();
    assert_eq!(users(&f.db), ["1:one", "2:bob"]);
}

#[test]
fn with_connection_gives_rusqlite_and_ending_the_transaction_is_an_error() {
    let f = fixture();
    let sb = sandbox(&f);
    let sql = sb.sql().unwrap();
    let n = sql
        .with_connection(|c| c.execute("UPDATE users SET age = age + 1", []))
        .unwrap()
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(sb.diff().unwrap().entries.len(), 2);
    let e = sql
        .with_connection(|c| c.execute_batch("COMMIT"))
        .unwrap_err();
    assert!(
        e.to_string().contains("ended the sandbox's transaction"),
        "{e}"
    );
    assert_eq!(sb.status(), Status::Errored);
    assert!(sb.context().unwrap().metadata["sqlite.error"].contains("not isolated"));
    sb.cleanup().unwrap();
}

#[test]
fn a_database_sandbox_has_no_files_and_wants_a_file() {
    let f = fixture();
    let sb = sandbox(&f);
    let e = sb.get_path(Path::new("x")).unwrap_err();
    assert!(e.to_string().contains("has no files"), "{e}");
    assert_eq!(sb.status(), Status::Created);
    // A directory is refused for this strategy, a file for the others.
    let dir = f.db.parent().unwrap();
    let e = f
        .mgr
        .get_or_create_sandbox("p", "d", dir, Strategy::TransactionRollback)
        .err()
        .unwrap();
    assert_eq!(e.kind(), "creation");
    assert!(e.to_string().contains("is not a file"), "{e}");
    let e = f
        .mgr
        .get_or_create_sandbox("p", "f", &f.db, Strategy::CopyOnWrite)
        .err()
        .unwrap();
    assert!(e.to_string().contains("is not a directory"), "{e}");
    // A file that is not a database.
    let junk = dir.join("junk.db");
    std::fs::write(&junk, vec![7u8; 4096]).unwrap();
    let e = f
        .mgr
        .get_or_create_sandbox("p", "junk", &junk, Strategy::TransactionRollback)
        .err()
        .unwrap();
    assert_eq!(e.kind(), "creation");
    assert!(e.to_string().contains("SQLite database"), "{e}");
    assert_eq!(
        Strategy::from_name("transaction_rollback").unwrap(),
        Strategy::TransactionRollback
    );
    assert!(!Strategy::TransactionRollback.is_rollbackable());
}

#[test]
fn state_errors_on_a_cleaned_up_sandbox() {
    let f = fixture();
    let sb = sandbox(&f);
    act(&*sb);
    let dir = sb.context().unwrap().sandbox_path;
    sb.cleanup().unwrap();
    assert_eq!(sb.status(), Status::CleanedUp);
    assert!(!dir.exists());
    assert_eq!(
        users(&f.db),
        ["1:ada", "2:bob"],
        "cleanup discards the work"
    );
    let sql = sb.sql().unwrap();
    for e in [
        sql.execute("SELECT 1", &[]).unwrap_err(),
        sql.savepoint("x").unwrap_err(),
        sb.diff().unwrap_err(),
        sb.commit(None).unwrap_err(),
        sb.rollback().unwrap_err(),
        sb.check_commit().unwrap_err(),
    ] {
        assert_eq!(e.kind(), "state", "{e}");
    }
    sb.cleanup().unwrap();
}

/// commit_all commits the copy_on_write sandbox first, the database last; the COMMIT fails
/// (a reader holds a shared lock the COMMIT cannot wait out), so the copy_on_write commit
/// is rolled back, and the database is untouched with its transaction still open.
#[test]
fn commit_all_rolls_back_copy_on_write_when_the_database_commit_fails() {
    let f = fixture();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("notes.txt"), "one\n").unwrap();
    let sql_sb = sandbox(&f); // made first: the order is still copy_on_write, then SQLite
    let cow = f
        .mgr
        .get_or_create_sandbox("p", "docs", project.path(), Strategy::CopyOnWrite)
        .unwrap();
    std::fs::write(cow.get_path(Path::new("notes.txt")).unwrap(), "two\n").unwrap();
    act(&*sql_sb);
    let journal: String = sql_sb
        .sql()
        .unwrap()
        .with_connection(|c| {
            // The pragma rather than `Connection::busy_timeout`, which needs SQLite 3.44 (it
            // keeps rusqlite's handler in the connection's client data): this suite also runs
            // against an older system SQLite (`--no-default-features`).
            c.pragma_update(None, "busy_timeout", 0).unwrap();
            c.query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap()
        })
        .unwrap();
    assert_eq!(
        journal, "delete",
        "the rollback journal: a reader blocks COMMIT"
    );

    let reader = Connection::open(&f.db).unwrap();
    reader.pragma_update(None, "busy_timeout", 0).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    let n: i64 = reader
        .query_row("SELECT count(*) FROM users", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 2);
    // And a second writer cannot even begin: the sandbox holds the write lock.
    let writer = Connection::open(&f.db).unwrap();
    writer.pragma_update(None, "busy_timeout", 0).unwrap();
    assert!(writer.execute_batch("BEGIN IMMEDIATE").is_err());

    let e = common::as_failure(f.mgr.commit_all("p")).unwrap_err();
    match &e {
        SandboxError::AtomicCommit {
            rolled_back_ids,
            failed_rollback_ids,
            failed_sandbox_id,
            ..
        } => {
            assert_eq!(rolled_back_ids, &[cow.sandbox_id().to_string()], "{e}");
            assert!(failed_rollback_ids.is_empty(), "{e}");
            assert_eq!(
                failed_sandbox_id.as_deref(),
                Some(sql_sb.sandbox_id()),
                "{e}"
            );
        }
        other => panic!("expected AtomicCommit, got {other}"),
    }
    assert!(e.to_string().contains("COMMIT failed"), "{e}");
    assert_eq!(
        std::fs::read_to_string(project.path().join("notes.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(
        cow.status(),
        Status::Active,
        "made active again, its work kept"
    );
    assert_eq!(sql_sb.status(), Status::Active);
    reader.execute_batch("COMMIT").unwrap();
    // The transaction is still open (the actor still sees its rows) and nothing reached
    // the database. Until the retry, the failed COMMIT's pending lock keeps new readers out.
    let fresh = Connection::open(&f.db).unwrap();
    fresh.pragma_update(None, "busy_timeout", 0).unwrap();
    let blocked = fresh.query_row("SELECT count(*) FROM users", [], |r| r.get::<_, i64>(0));
    assert!(blocked.is_err(), "{blocked:?}");
    let mine = sql_sb
        .sql()
        .unwrap()
        .execute("SELECT count(*) FROM users", &[])
        .unwrap();
    assert_eq!(mine.rows, [[SqlValue::Integer(3)]]);

    // The reader gone, the same plan commits whole: the transaction was kept.
    let results = f.mgr.commit_all("p").unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(
        results[1].sandbox_id,
        sql_sb.sandbox_id(),
        "SQLite commits last"
    );
    assert_eq!(users(&f.db), ["1:grace", "2:bob", "3:cy"]);
    assert_eq!(
        std::fs::read_to_string(project.path().join("notes.txt")).unwrap(),
        "two\n"
    );
}

#[test]
fn reopened_committed_sandbox_still_undoes_and_active_one_is_errored() {
    let f = fixture();
    let committed = sandbox(&f);
    act(&*committed);
    committed.commit(None).unwrap();
    let other_db = f.db.parent().unwrap().join("other.db");
    Connection::open(&other_db)
        .unwrap()
        .execute_batch("CREATE TABLE t(k TEXT PRIMARY KEY); INSERT INTO t VALUES ('a');")
        .unwrap();
    let active = f
        .mgr
        .get_or_create_sandbox("p", "other", &other_db, Strategy::TransactionRollback)
        .unwrap();
    active.sql().unwrap().execute("DELETE FROM t", &[]).unwrap();
    let (cid, aid) = (
        committed.sandbox_id().to_string(),
        active.sandbox_id().to_string(),
    );
    // The engine goes away: its connections close, the open transaction with them.
    f.mgr.set_cleanup_on_drop(false);
    let Fixture {
        _dir,
        db,
        mgr,
        root,
    } = f;
    drop((committed, active, mgr));
    let k: i64 = Connection::open(&other_db)
        .unwrap()
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(k, 1, "the uncommitted delete died with its connection");

    let mgr = PlanManager::open(&root).unwrap();
    let committed = mgr.get_sandbox("p", "appdb").unwrap();
    assert_eq!(committed.sandbox_id(), cid);
    assert_eq!(committed.status(), Status::Committed);
    assert_eq!(committed.diff().unwrap().entries.len(), 3);
    committed.rollback().unwrap();
    assert_eq!(users(&db), ["1:ada", "2:bob"]);

    let active = mgr.get_sandbox("p", "other").unwrap();
    assert_eq!(active.sandbox_id(), aid);
    assert_eq!(active.status(), Status::Errored);
    assert!(active.context().unwrap().metadata["sqlite.error"]
        .contains("rolled its uncommitted work back"));
    mgr.cleanup_all("p").unwrap();
}

/// Rewrites a sandbox's state.json as a crash in the middle of its commit would leave it:
/// `active`, with the changeset noted as in flight.
fn as_if_crashed_in_commit(state: &Path, changeset: &str) {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(state).unwrap()).unwrap();
    v["status"] = "active".into();
    v["commit_ref"] = serde_json::Value::Null;
    v["commit_in_flight"] = changeset.into();
    std::fs::write(state, serde_json::to_vec(&v).unwrap()).unwrap();
}

#[test]
fn a_commit_interrupted_by_a_crash_is_settled_on_reopen() {
    let f = fixture();
    let sb = sandbox(&f);
    act(&*sb);
    let name = sb.commit(None).unwrap().commit_ref.unwrap();
    let dir = sb.context().unwrap().sandbox_path;
    let cs = std::fs::read(dir.join(&name)).unwrap();
    f.mgr.set_cleanup_on_drop(false);
    let Fixture {
        _dir,
        db,
        mgr,
        root,
    } = f;
    drop((sb, mgr));

    // The COMMIT had landed: the sandbox is Committed, and its undo works.
    as_if_crashed_in_commit(&dir.join("state.json"), &name);
    let mgr = PlanManager::open(&root).unwrap();
    let sb = mgr.get_sandbox("p", "appdb").unwrap();
    assert_eq!(sb.status(), Status::Committed);
    assert_eq!(sb.context().unwrap().metadata.get("sqlite.error"), None);
    sb.rollback().unwrap();
    assert_eq!(users(&db), ["1:ada", "2:bob"]);
    mgr.set_cleanup_on_drop(false);
    drop((sb, mgr));

    // The COMMIT had not landed (the rows are as before it): Errored, the changeset gone.
    std::fs::write(dir.join(&name), &cs).unwrap();
    as_if_crashed_in_commit(&dir.join("state.json"), &name);
    let mgr = PlanManager::open(&root).unwrap();
    let sb = mgr.get_sandbox("p", "appdb").unwrap();
    assert_eq!(sb.status(), Status::Errored);
    assert!(sb.context().unwrap().metadata["sqlite.error"].contains("interrupted"));
    assert!(!dir.join(&name).exists());
    assert_eq!(users(&db), ["1:ada", "2:bob"]);
    mgr.cleanup_all("p").unwrap();
}

#[test]
fn threads_share_one_sandbox_and_wal_mode_works() {
    let f = fixture();
    Connection::open(&f.db)
        .unwrap()
        .query_row("PRAGMA journal_mode = wal", [], |r| r.get::<_, String>(0))
        .unwrap();
    let sb = sandbox(&f);
    assert_eq!(sb.context().unwrap().metadata["sqlite.journal_mode"], "wal");
    std::thread::scope(|s| {
        for t in 0..4i64 {
            let sb = sb.clone();
            s.spawn(move || {
                for i in 0..25i64 {
                    let id = 100 + t * 25 + i;
                    sb.sql()
                        .unwrap()
                        .execute(
                            "INSERT INTO users(id, name) VALUES (?1, ?2)",
                            &[SqlValue::Integer(id), text(&format!("u{id}"))],
                        )
                        .unwrap();
                }
            });
        }
    });
    assert_eq!(sb.diff().unwrap().paths(DiffOp::Added).len(), 100);
    // WAL: a reader sees the committed state while the transaction is open.
    assert_eq!(users(&f.db), ["1:ada", "2:bob"]);
    sb.commit(None).unwrap();
    assert_eq!(users(&f.db).len(), 102);
    sb.rollback().unwrap();
    assert_eq!(users(&f.db), ["1:ada", "2:bob"]);
}

/// `sqlite3changeset_apply` skips the rows of a table whose shape no longer matches the
/// changeset, with nothing but a log line: the undo reported success and left those rows.
/// Now it is refused whole, naming the table.
#[test]
fn undo_refused_when_a_table_is_gone_or_changed_shape() {
    let f = fixture();
    let sb = sandbox(&f);
    act(&*sb);
    sb.commit(None).unwrap();
    let other = Connection::open(&f.db).unwrap();
    other.execute_batch("DROP TABLE notes;").unwrap();
    let e = sb.rollback().unwrap_err();
    assert!(e.to_string().contains("notes (the table is gone)"), "{e}");
    assert_eq!(sb.status(), Status::Committed);
    assert_eq!(users(&f.db), ["1:grace", "2:bob", "3:cy"], "nothing undone");

    other
        .execute_batch("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT);")
        .unwrap();
    other
        .execute_batch("ALTER TABLE users DROP COLUMN age;")
        .unwrap();
    let e = sb.rollback().unwrap_err();
    assert!(
        e.to_string()
            .contains("users (the table's columns or primary key changed)"),
        "{e}"
    );
    assert_eq!(users(&f.db), ["1:grace", "2:bob", "3:cy"], "nothing undone");

    // Back in the shape the commit saw: the undo goes through.
    other
        .execute_batch("ALTER TABLE users ADD COLUMN age INTEGER;")
        .unwrap();
    sb.rollback().unwrap();
    assert_eq!(users(&f.db), ["1:ada", "2:bob"]);
    let body: String = other
        .query_row("SELECT body FROM notes WHERE id = 1", [], |r| r.get(0))
        .unwrap();
    assert_eq!(body, "first");
}

/// A `COMMIT` that went through but whose `Committed` state could not be written is
/// reported as failed and is `Committed` all the same: its rollback undoes the rows.
#[cfg(feature = "fault-injection")]
#[test]
fn a_landed_commit_whose_state_cannot_be_written_is_committed_and_rolls_back() {
    let f = fixture();
    let sb = sandbox(&f);
    act(&*sb);
    patchbox::plan::fault::fail_next_committed_state_write(sb.sandbox_id());
    let e = sb.commit(None).unwrap_err();
    assert!(e.to_string().contains("injected failure"), "{e}");
    assert_eq!(sb.status(), Status::Committed);
    assert_eq!(users(&f.db), ["1:grace", "2:bob", "3:cy"]);
    sb.rollback().unwrap();
    assert_eq!(users(&f.db), ["1:ada", "2:bob"]);
}

/// A panic right after `COMMIT` went through, before the status said so: the panic reaches
/// the caller, the sandbox is settled as `Committed` (its changeset's inverse applies) and
/// its rollback undoes the rows. Before, it stayed `Active` with the commit in flight.
#[cfg(feature = "fault-injection")]
#[test]
fn a_commit_that_panics_after_landing_is_settled() {
    let f = fixture();
    let sb = sandbox(&f);
    act(&*sb);
    patchbox::plan::fault::panic_after_next_landing(sb.sandbox_id());
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sb.commit(None)));
    assert!(caught.is_err(), "the injected panic reaches the caller");
    assert_eq!(sb.status(), Status::Committed);
    assert_eq!(users(&f.db), ["1:grace", "2:bob", "3:cy"]);
    sb.rollback().unwrap();
    assert_eq!(users(&f.db), ["1:ada", "2:bob"]);
}
