"""One SessionManager shared by several Python threads: sandboxes created, edited,
finalized, completed and discarded at once, each patch exactly its own thread's work."""

from __future__ import annotations

import os
import pathlib
import threading
from typing import Dict, List

import patchbox
from session_fixtures import _root_in_tmp, git, mgr, project, root  # noqa: F401

THREADS = 8


def test_threads_share_one_manager(mgr: patchbox.SessionManager, project: pathlib.Path, root: pathlib.Path) -> None:
    patches: Dict[int, bytes] = {}
    errors: List[BaseException] = []
    start = threading.Barrier(THREADS)

    def delegation(i: int) -> None:
        try:
            start.wait()
            sb = mgr.create_sandbox(f"t{i}")
            (sb.path / f"thread-{i}.txt").write_bytes(f"{i}\n".encode())
            (sb.path / "src/util.py").write_bytes(f"X = {100 + i}\nY = 2\nZ = 3\n".encode())
            res = mgr.finalize_sandbox(sb)
            assert res.files_touched == ["src/util.py", f"thread-{i}.txt"], res.files_touched
            patches[i] = res.patch
            if i % 2:
                done = mgr.complete_sandbox(sb, lambda r: patchbox.Decision.REJECT)
                assert done.routed == patchbox.Routed.PENDING
            else:
                mgr.discard_sandbox(sb)
            assert not sb.path.exists()
        except BaseException as e:  # reported below, with the thread's number
            errors.append(e)

    threads = [threading.Thread(target=delegation, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(patches) == list(range(THREADS))
    for i, patch in patches.items():
        git(project, "apply", "--check", input=patch)
        assert f"+X = {100 + i}".encode() in patch
    pending = sorted(p.delegation for p in patchbox.list_pending(root))
    assert pending == [f"t{i}" for i in range(THREADS) if i % 2]
    for p in patchbox.list_pending(root):
        patchbox.drop_pending(p.id, root=root)


def test_close_waits_for_calls_running_on_other_threads(project: pathlib.Path, root: pathlib.Path) -> None:
    m = patchbox.SessionManager(project, root, prune_on_start=False)
    sb = m.create_sandbox("slow")
    (sb.path / "README.md").write_bytes(b"# edited\n")
    in_decide = threading.Event()
    closed = threading.Event()
    result: List[patchbox.Completion] = []

    def decide(r: patchbox.SandboxResult) -> bool:
        in_decide.set()
        closed.wait()
        return True

    t = threading.Thread(target=lambda: result.append(m.complete_sandbox(sb, decide)))
    t.start()
    in_decide.wait()
    m.close()  # returns at once; the session ends when complete_sandbox returns
    closed.set()
    t.join()
    assert result[0].routed == patchbox.Routed.ACCEPTED
    assert not m.session_base.exists()
    assert patchbox.list_pending(root) == []


def test_run_releases_the_gil_while_the_tool_runs(mgr: patchbox.SessionManager, tmp_path: pathlib.Path) -> None:
    # The tool waits for this thread to write into a FIFO: were the GIL held by run(), this
    # thread could not run Python code to write, and both would wait forever.
    sb = mgr.create_sandbox("fifo")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done: List[int] = []
    t = threading.Thread(target=lambda: done.append(mgr.run(sb, ["sh", "-c", f"cat '{fifo}' > got.txt"]).returncode))
    t.start()
    with open(fifo, "wb") as w:
        w.write(b"through the fifo\n")
    t.join(timeout=600)  # a deadlock guard, not a speed requirement
    assert not t.is_alive() and done == [0]
    assert (sb.path / "got.txt").read_bytes() == b"through the fifo\n"
