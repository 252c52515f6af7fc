"""A process that dies inside commit_all: the next SandboxManager over the root rolls the
plan back (the commit journal), so no original is left half-committed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import patchbox
from _plan_fixtures import root, write  # noqa: F401

SCRIPT = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    import patchbox

    class DiesInCommit:
        is_rollbackable = False  # committed last: after the directory's commit
        def create(self, plan_id, resource): return None
        def read(self, ref, path): return None
        def write(self, ref, path, content): return None
        def diff(self, ref): return patchbox.DiffView(ref.sandbox_id, [])
        def commit(self, ref): os._exit(3)  # the process dies mid commit_all
        def rollback(self, ref): return None
        def checkpoint(self, ref, checkpoint_id): return None
        def restore_checkpoint(self, ref, checkpoint_id): return None
        def cleanup(self, ref): return None

    root, project = sys.argv[1], sys.argv[2]
    registry = patchbox.SandboxStrategyRegistry()
    registry.register_class("dies", DiesInCommit)
    m = patchbox.SandboxManager(root, custom_registry=registry)
    sb = m.get_or_create_sandbox("p", "docs", project, "copy_on_write")
    Path(sb.get_path("notes.txt")).write_text("committed, then the crash\\n")
    m.get_or_create_sandbox("p", "remote", project, "dies")
    print(sb.sandbox_id, flush=True)
    m.commit_all("p")
""")


def test_interrupted_commit_all_is_rolled_back_on_reopen(root, tmp_path):
    project = tmp_path / "project"
    write(project / "notes.txt", "one\n")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(root), str(project)],
                          capture_output=True, text=True)
    assert proc.returncode == 3, proc.stderr
    sandbox_id = proc.stdout.strip()
    # the directory's commit landed before the crash
    assert (project / "notes.txt").read_text() == "committed, then the crash\n"

    with patchbox.SandboxManager(root) as m:
        rolled_back, warnings = m.recovery()
        assert rolled_back == [("p", [sandbox_id])]
        assert (project / "notes.txt").read_text() == "one\n"
        sb = m.get_sandbox("p", "docs")
        assert sb is not None and sb.read("notes.txt") == b"committed, then the crash\n"  # work kept
        assert any("dies" in w for w in warnings)  # the custom sandbox waits for its strategy
        sb.cleanup()


CREATE = textwrap.dedent("""
    import sys
    from pathlib import Path
    import patchbox
    root, project = sys.argv[1], sys.argv[2]
    m = patchbox.SandboxManager(root)
    sb = m.get_or_create_sandbox("p", "docs", project, "copy_on_write")
    Path(sb.get_path("f0.txt")).write_text("edited\\n")  # work: kept when the manager ends
    print(sb.sandbox_id, flush=True)
""")


def test_two_processes_get_one_sandbox_per_resource(root, tmp_path):
    project = tmp_path / "project"
    for i in range(200):
        write(project / f"f{i}.txt", "x\n")
    procs = [subprocess.Popen([sys.executable, "-c", CREATE, str(root), str(project)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    ids = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        ids.append(out.strip())
    assert ids[0] == ids[1]
    with patchbox.SandboxManager(root) as m:
        assert [s.sandbox_id for s in m.list_sandboxes("p")] == [ids[0]]


HOLD = textwrap.dedent("""
    import fcntl, sys, time
    from pathlib import Path
    lock = Path(sys.argv[1]) / "plans" / "plan-p" / "commit.lock"
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        print("held", flush=True)
        time.sleep(1.5)
""")


def test_a_manager_beside_a_held_plan_lock_leaves_the_plan_alone(root, tmp_path):
    project = tmp_path / "project"
    write(project / "notes.txt", "one\n")
    with patchbox.SandboxManager(root) as m:
        sb = m.get_or_create_sandbox("p", "docs", project, "copy_on_write")
        Path(sb.get_path("notes.txt")).write_text("two\n")  # work: kept when the manager ends
    # A journal as an interrupted commit_all leaves it, while "its process" still holds the lock.
    (root / "plans" / "plan-p" / "commit.journal").write_text('{"plan_id": "p", "order": []}')
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(root)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    with patchbox.SandboxManager(root) as m:
        assert m.busy_plans() == ["p"]
        assert m.recovery() == ([], [])
        assert (root / "plans" / "plan-p" / "commit.journal").exists()  # not touched
        rolled_back, _ = m.recover("p")  # waits for the holder to go, then settles
        assert rolled_back == [("p", [])]
    holder.wait(timeout=30)
    assert not (root / "plans" / "plan-p" / "commit.journal").exists()
