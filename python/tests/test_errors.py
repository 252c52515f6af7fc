"""The exception hierarchy is what the plan-executor engines catch."""

import patchbox


def test_hierarchy():
    assert issubclass(patchbox.SandboxError, patchbox.PatchboxError)
    for cls in (
        patchbox.SandboxCreationError,
        patchbox.SandboxCommitError,
        patchbox.SandboxRollbackError,
        patchbox.SandboxStateError,
        patchbox.AtomicCommitError,
        patchbox.ProtocolMismatchError,
    ):
        assert issubclass(cls, patchbox.SandboxError), cls
    assert patchbox.__version__
