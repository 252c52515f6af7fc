"""One SQLite per process: a transaction_rollback sandbox and Python's own sqlite3 module on
the same database file, in the same process, see each other's locks.

POSIX advisory locks belong to the process, so two copies of SQLite in one process would not
see each other's locks, and closing a file through one copy would drop the locks the other
holds on it (SQLite's "How To Corrupt An SQLite Database File", section 2.2). Every test
below fails when the extension carries its own SQLite: the other copy's lock would not stop
the write, or would be lost when Python closes its connection. The database is in
rollback-journal mode, where those locks are all there is."""

from __future__ import annotations

import ctypes
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import patchbox
from patchbox import SandboxStatus
from _plan_fixtures import manager, root  # noqa: F401

# A second process tries to take the write lock without waiting: "busy" or "free".
CHILD_WRITER = """
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
try:
    c.execute("BEGIN IMMEDIATE")
except sqlite3.OperationalError as e:
    print("busy" if "locked" in str(e) else f"error: {e}")
else:
    c.execute("ROLLBACK")
    print("free")
"""


def writer_in_another_process(db: Path) -> str:
    out = subprocess.run([sys.executable, "-c", CHILD_WRITER, str(db)],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def connect(db: Path) -> sqlite3.Connection:
    """Python's connection: autocommit (explicit BEGIN), never waiting for a lock."""
    return sqlite3.connect(db, timeout=0, isolation_level=None)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    p = tmp_path / "app.db"
    c = connect(p)
    c.executescript("PRAGMA journal_mode = DELETE;"
                    "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT);"
                    "INSERT INTO users VALUES (1, 'ada'), (2, 'alan');")
    c.close()
    return p


def sandbox(manager: patchbox.SandboxManager, db: Path, plan: str = "plan-db") -> patchbox.Sandbox:
    sb = manager.get_or_create_sandbox(plan, "appdb", db, "transaction_rollback")
    sb.execute("PRAGMA busy_timeout = 0")  # a lock it cannot get fails at once
    return sb


def rows(db: Path) -> list[tuple[int, str]]:
    c = sqlite3.connect(db)
    try:
        assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        return c.execute("SELECT id, name FROM users ORDER BY id").fetchall()
    finally:
        c.close()


def test_the_extension_resolves_sqlite_to_the_library_python_loaded() -> None:
    import _sqlite3

    def address(lib_path: str) -> int | None:
        # dlsym through the object's handle: the object, then the libraries it needs.
        try:
            fn = getattr(ctypes.CDLL(lib_path), "sqlite3_libversion")
        except AttributeError:
            return None
        return ctypes.cast(fn, ctypes.c_void_p).value

    assert address(_sqlite3.__file__) is not None
    assert address(patchbox._native.__file__) == address(_sqlite3.__file__)
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "/libsqlite3" in line}
    assert len(libs) == 1, libs


def test_python_holds_the_write_lock_then_the_sandbox_writes_and_commits(manager, db) -> None:
    py = connect(db)
    py.execute("BEGIN IMMEDIATE")
    py.execute("INSERT INTO users VALUES (10, 'from python')")
    sb = sandbox(manager, db)
    with pytest.raises(patchbox.SandboxError, match="locked"):
        sb.execute("UPDATE users SET name = 'grace' WHERE id = 1")
    py.execute("COMMIT")
    sb.execute("UPDATE users SET name = 'grace' WHERE id = 1")
    manager.commit_all("plan-db")
    py.close()
    assert rows(db) == [(1, "grace"), (2, "alan"), (10, "from python")]
    manager.cleanup_all("plan-db")


def test_a_python_reader_makes_the_commit_fail_busy_until_it_ends(manager, db) -> None:
    sb = sandbox(manager, db)
    sb.execute("INSERT INTO users VALUES (3, 'edsger')")
    py = connect(db)
    py.execute("BEGIN")
    assert py.execute("SELECT count(*) FROM users").fetchone() == (2,)  # a shared lock
    with pytest.raises(patchbox.SandboxCommitError, match="locked"):
        sb.commit()
    assert sb.status == SandboxStatus.ACTIVE  # still open, nothing written
    assert py.execute("SELECT count(*) FROM users").fetchone() == (2,)
    py.execute("COMMIT")
    sb.commit()
    assert py.execute("SELECT count(*) FROM users").fetchone() == (3,)
    py.close()
    assert rows(db) == [(1, "ada"), (2, "alan"), (3, "edsger")]
    manager.cleanup_all("plan-db")


def test_the_sandbox_holds_the_write_lock_and_python_gets_busy(manager, db) -> None:
    sb = sandbox(manager, db)
    sb.execute("DELETE FROM users WHERE id = 2")
    py = connect(db)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        py.execute("INSERT INTO users VALUES (20, 'from python')")
    assert py.execute("SELECT id FROM users ORDER BY id").fetchall() == [(1,), (2,)]
    manager.commit_all("plan-db")
    py.execute("INSERT INTO users VALUES (20, 'from python')")
    py.close()
    assert rows(db) == [(1, "ada"), (20, "from python")]
    manager.cleanup_all("plan-db")


def test_closing_python_connections_keeps_the_sandbox_locks(manager, db) -> None:
    sb = sandbox(manager, db)
    sb.execute("UPDATE users SET name = 'grace' WHERE id = 1")
    assert writer_in_another_process(db) == "busy"
    for _ in range(3):  # each opens the file, reads, and closes it
        c = connect(db)
        assert c.execute("SELECT name FROM users WHERE id = 1").fetchone() == ("ada",)
        c.close()
    # With a second SQLite in the process, the closes above would have dropped the
    # sandbox's locks and the other process would take the write lock.
    assert writer_in_another_process(db) == "busy"
    manager.commit_all("plan-db")
    assert writer_in_another_process(db) == "free"
    assert rows(db) == [(1, "grace"), (2, "alan")]
    manager.cleanup_all("plan-db")


def test_closing_a_sandbox_connection_keeps_python_locks(manager, db) -> None:
    py = connect(db)
    py.execute("BEGIN IMMEDIATE")
    py.execute("INSERT INTO users VALUES (30, 'from python')")
    assert writer_in_another_process(db) == "busy"
    sb = sandbox(manager, db)
    assert sb.execute("SELECT count(*) FROM users") == [(2,)]
    sb.rollback()  # closes the sandbox's connection to the file
    manager.cleanup_all("plan-db")
    assert writer_in_another_process(db) == "busy"
    py.execute("COMMIT")
    py.close()
    assert writer_in_another_process(db) == "free"
    assert rows(db) == [(1, "ada"), (2, "alan"), (30, "from python")]


def test_a_table_without_a_primary_key_with_python_writing_beside_the_sandbox(manager, db) -> None:
    """On the system SQLite (3.40 on Debian 12: its session cannot record such a table) the
    sandbox's triggers record it; Python's connection neither sees nor trips over them."""
    py = connect(db)
    py.executescript("CREATE TABLE log(at INTEGER, msg TEXT); INSERT INTO log VALUES (1, 'boot');")
    sb = sandbox(manager, db)
    sb.execute("INSERT INTO log VALUES (2, 'sandbox')")
    sb.execute("UPDATE log SET msg = 'booted' WHERE at = 1")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        py.execute("INSERT INTO log VALUES (9, 'from python')")
    assert py.execute("SELECT at, msg FROM log ORDER BY rowid").fetchall() == [(1, "boot")]
    assert [e.path for e in sb.diff().entries] == ["log/1", "log/2"]
    manager.commit_all("plan-db")
    py.execute("INSERT INTO log VALUES (3, 'from python')")
    assert py.execute("SELECT at, msg FROM log ORDER BY rowid").fetchall() == [
        (1, "booted"), (2, "sandbox"), (3, "from python")]
    sb.rollback()  # the undo leaves Python's row alone
    assert py.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert py.execute("SELECT at, msg FROM log ORDER BY rowid").fetchall() == [
        (1, "boot"), (3, "from python")]
    # The triggers lived in the sandbox connection's TEMP schema: nothing of them is left.
    assert py.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall() == []
    py.close()
    manager.cleanup_all("plan-db")
