"""Checked by mypy --strict in run-tests.sh: the stubs describe what the package exports."""

import patchbox


def describe(e: patchbox.AtomicCommitError) -> str:
    return ", ".join(e.rolled_back_ids + e.failed_rollback_ids)
