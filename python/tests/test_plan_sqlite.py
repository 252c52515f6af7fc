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


# The extension shares Python's SQLite (one SQLite per process): Debian 12's 3.40.1, whose
# session cannot record tables without a PRIMARY KEY. The sandbox records them with TEMP
# triggers: the diff, the commit and the undo are those of the bundled SQLite.
def log_lines(db: Path) -> list[tuple[int, int, str]]:
    c = sqlite3.connect(db)
    try:
        assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        return c.execute("SELECT rowid, at, msg FROM log ORDER BY rowid").fetchall()
    finally:
        c.close()


def test_a_table_without_a_primary_key_is_in_the_diff_and_undone(manager, db):
    with sqlite3.connect(db) as c:
        c.executescript("CREATE TABLE log(at INTEGER, msg TEXT UNIQUE);"
                        "INSERT INTO log VALUES (1, 'boot'), (2, 'ready');")
    c.close()
    before = log_lines(db)
    sb = manager.get_or_create_sandbox("plan-db", "appdb", db, "transaction_rollback")
    sb.execute("UPDATE users SET name = 'grace' WHERE id = 1")
    sb.execute("ANALYZE")  # sqlite_stat1 has no declared key either
    sb.execute("INSERT INTO log VALUES (3, 'work')")
    sb.execute("DELETE FROM log WHERE at = 1")
    sb.execute("INSERT OR REPLACE INTO log VALUES (4, 'ready')")  # removes rowid 2
    d = sb.diff()
    assert [(e.path, e.operation) for e in d.entries if e.path.startswith("log/")] == [
        ("log/1", "deleted"), ("log/2", "deleted"), ("log/3", "added"), ("log/4", "added")]
    assert log_lines(db) == before  # nothing visible before the commit
    manager.commit_all("plan-db")
    assert log_lines(db) == [(3, 3, "work"), (4, 4, "ready")]
    assert names(db) == {1: "grace", 2: "alan"}
    sb.rollback()
    assert log_lines(db) == before
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
