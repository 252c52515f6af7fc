"""Peak resident memory of the Python face's plan steps on a large tree.

    python examples/plan_rss.py ROOT PROJECT make [PLAN]   # an overlay sandbox, one edit
    python examples/plan_rss.py ROOT PROJECT reopen [PLAN] # reopen, checkpoint, roll back,
                                                           # clean the plan up

``make`` leaves the process without cleaning up (as an engine that stops with its sandbox
open), so ``reopen`` in a fresh process finds the sandbox from disk. Each line prints the
process's peak resident set so far (``ru_maxrss``), after the interpreter and the import.
"""

import os
import resource
import sys
from pathlib import Path

import patchbox.plan as plan


def peak_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def main() -> None:
    root, project, step = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    plan_id = sys.argv[4] if len(sys.argv) > 4 else "p"
    print(f"interpreter and import: {peak_mb()} MB")
    mgr = plan.Manager(root)
    if step == "make":
        sb = mgr.get_or_create_sandbox(plan_id, "tree", project, "overlay")
        with open(sb.get_path("README"), "a") as f:
            f.write("edit\n")
        print(f"create and one edit: {peak_mb()} MB", flush=True)
        os._exit(0)
    print(f"reopened: {peak_mb()} MB")
    sb = mgr.get_sandbox(plan_id, "tree")
    if sb is None:
        sys.exit(f"no sandbox of plan {plan_id} under {root}: run make first")
    cm = plan.CheckpointManager(mgr)
    cp = cm.create_checkpoint(sb, plan_id, "execute")
    with open(sb.get_path("README"), "a") as f:
        f.write("more\n")
    cm.rollback_to(cp)
    print(f"checkpoint and rollback: {peak_mb()} MB")
    mgr.cleanup_all(plan_id)
    mgr.close()


if __name__ == "__main__":
    main()
