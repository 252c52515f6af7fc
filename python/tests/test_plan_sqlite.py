"""transaction_rollback sandboxes on a real SQLite file, with Python's sqlite3 as the oracle."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import patchbox
from patchbox import SandboxStatus
from _plan_fixtures import manager, project, root, write  # noqa: F401


@pytest.fixture
def db(tmp_path: Path) -> Path:
    p = tmp_path / "app.db"
    with sqlite3.connect(p) as c:
        c.executescript("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT, photo BLOB);"
                        "INSERT INTO users VALUES (1, 'ada', NULL), (2, 'alan', NULL);")
    c.close()
    return p


def names(db: Path) -> dict[int, str]:
    c = sqlite3.connect(db)
    try:
        return dict(c.execute("SELECT id, name FROM users ORDER BY id").fetchall())
    finally:
        c.close()


def test_transaction_commit_and_undo(manager, db):
    sb = manager.get_or_create_sandbox("plan-db", "appdb", db, "transaction_rollback")
    sb.execute("UPDATE users SET name = ?1 WHERE id = 1", ["grace"])
    sb.execute("INSERT INTO users VALUES (?1, ?2, ?3)", [3, "edsger", b"\x00\xff"])
    sb.execute("DELETE FROM users WHERE id = 2")
    assert sb.execute("SELECT name, photo FROM users WHERE id = 3") == [("edsger", b"\x00\xff")]
    assert names(db) == {1: "ada", 2: "alan"}  # not visible before the commit
    d = sb.diff()
    assert [(e.path, e.operation) for e in d.entries] == [
        ("users/1", "modified"), ("users/2", "deleted"), ("users/3", "added")]
    with pytest.raises(patchbox.SandboxError):
        sb.get_path("users")  # a database has no files
    [r] = manager.commit_all("plan-db")
    assert r.success and r.commit_ref
    assert names(db) == {1: "grace", 3: "edsger"}
    sb.rollback()  # after commit: the inverted changeset
    assert sb.status == SandboxStatus.ROLLED_BACK
    assert names(db) == {1: "ada", 2: "alan"}
    manager.cleanup_all("plan-db")


# The extension shares Python's SQLite (one SQLite per process), and SQLite's session
# extension records tables without a PRIMARY KEY from 3.44 on; before, writes to them are
# refused rather than committed unrecorded.
ROWID_SESSIONS = sqlite3.sqlite_version_info >= (3, 44, 0)


@pytest.mark.skipif(not ROWID_SESSIONS, reason=f"SQLite {sqlite3.sqlite_version} < 3.44")
def test_a_table_without_a_primary_key_is_in_the_diff_and_undone(manager, db):
    with sqlite3.connect(db) as c:
        c.executescript("CREATE TABLE log(at INTEGER, msg TEXT); INSERT INTO log VALUES (1, 'boot');")
    c.close()
    sb = manager.get_or_create_sandbox("plan-db", "appdb", db, "transaction_rollback")
    sb.execute("INSERT INTO log VALUES (2, 'work')")
    sb.execute("DELETE FROM log WHERE at = 1")
    d = sb.diff()
    assert [(e.path, e.operation) for e in d.entries] == [("log/1", "deleted"), ("log/2", "added")]
    manager.commit_all("plan-db")
    lines = lambda: sqlite3.connect(db).execute("SELECT at, msg FROM log ORDER BY rowid").fetchall()
    assert lines() == [(2, "work")]
    sb.rollback()
    assert lines() == [(1, "boot")]
    manager.cleanup_all("plan-db")


@pytest.mark.skipif(ROWID_SESSIONS, reason=f"SQLite {sqlite3.sqlite_version} records them")
def test_a_write_to_a_table_without_a_primary_key_is_refused_before_sqlite_3_44(manager, db):
    with sqlite3.connect(db) as c:
        c.executescript("CREATE TABLE log(at INTEGER, msg TEXT); INSERT INTO log VALUES (1, 'boot');")
    c.close()
    sb = manager.get_or_create_sandbox("plan-db", "appdb", db, "transaction_rollback")
    sb.execute("UPDATE users SET name = 'grace' WHERE id = 1")
    sb.execute("ANALYZE")  # sqlite_stat1 has no declared key but is recorded: not refused
    with pytest.raises(patchbox.SandboxError, match=r"log, which has no PRIMARY KEY.*3\.44"):
        sb.execute("INSERT INTO log VALUES (2, 'work')")
    assert sb.status == SandboxStatus.ERRORED
    with pytest.raises(patchbox.SandboxError):
        sb.commit()
    c = sqlite3.connect(db, timeout=0)  # the refused transaction was rolled back: no lock
    c.execute("INSERT INTO log VALUES (3, 'free')")
    c.commit()
    assert c.execute("SELECT at FROM log ORDER BY rowid").fetchall() == [(1,), (3,)]
    c.close()
    assert names(db) == {1: "ada", 2: "alan"}
    manager.cleanup_all("plan-db")


def test_rollback_of_the_open_transaction(manager, db):
    sb = manager.get_or_create_sandbox("plan-db", "appdb", db, "transaction_rollback")
    sb.execute("DELETE FROM users")
    sb.rollback()
    assert names(db) == {1: "ada", 2: "alan"}
    manager.cleanup_all("plan-db")


def test_savepoints(manager, db):
    sb = manager.get_or_create_sandbox("plan-db", "appdb", db, "transaction_rollback")
    sb.execute("UPDATE users SET name = 'x' WHERE id = 1")
    sb.savepoint("sp1")
    sb.execute("UPDATE users SET name = 'y' WHERE id = 1")
    sb.rollback_to_savepoint("sp1")
    assert sb.execute("SELECT name FROM users WHERE id = 1") == [("x",)]
    manager.commit_all("plan-db")
    assert names(db)[1] == "x"
    manager.cleanup_all("plan-db")


def test_sql_errors_and_types(manager, db, project):
    sb = manager.get_or_create_sandbox("plan-db", "appdb", db, "transaction_rollback")
    with pytest.raises(patchbox.SandboxError, match="no_such_table"):
        sb.execute("SELECT * FROM no_such_table")
    with pytest.raises(TypeError):
        sb.execute("SELECT ?1", [object()])
    assert sb.execute("SELECT ?1, ?2, ?3", [None, 1.5, True]) == [(None, 1.5, 1)]
    files = manager.get_or_create_sandbox("plan-db", "files", project, "copy_on_write")
    with pytest.raises(patchbox.SandboxError, match="transaction_rollback"):
        files.execute("SELECT 1")
    manager.cleanup_all("plan-db")


def test_database_resource_must_be_a_file(manager, project):
    with pytest.raises(patchbox.SandboxCreationError, match="not a file"):
        manager.get_or_create_sandbox("plan-db", "appdb", project, "transaction_rollback")
