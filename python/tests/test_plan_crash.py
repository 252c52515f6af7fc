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
