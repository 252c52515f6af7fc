"""SandboxStatus: the lifecycle table, as the plan executors check it."""

import pytest

import patchbox
from patchbox import SandboxStatus


def test_lifecycle_table():
    assert SandboxStatus.can_transition(SandboxStatus.ACTIVE, SandboxStatus.COMMITTED)
    assert not SandboxStatus.can_transition(SandboxStatus.CLEANED_UP, SandboxStatus.ACTIVE)
    assert SandboxStatus.can_transition(SandboxStatus.ROLLED_BACK, SandboxStatus.ACTIVE)
    assert not SandboxStatus.can_transition(SandboxStatus.PENDING, SandboxStatus.COMMITTED)
    for s in SandboxStatus.members():
        assert not SandboxStatus.can_transition(SandboxStatus.CLEANED_UP, s)


def test_assert_transition_raises_state_error():
    SandboxStatus.assert_transition(SandboxStatus.ACTIVE, SandboxStatus.COMMITTED)
    with pytest.raises(patchbox.SandboxStateError, match="pending -> committed") as e:
        SandboxStatus.assert_transition(SandboxStatus.PENDING, SandboxStatus.COMMITTED)
    assert (e.value.from_status, e.value.to_status) == ("pending", "committed")


def test_values_and_hashing():
    assert [s.value for s in SandboxStatus.members()] == [
        "pending", "created", "active", "committed", "rolled_back", "cleaned_up", "errored"]
    assert len({SandboxStatus.ACTIVE, SandboxStatus.ACTIVE, SandboxStatus.ERRORED}) == 2
    assert str(SandboxStatus.ROLLED_BACK) == "rolled_back"
    assert [s.value for s in (patchbox.SandboxStrategy.NONE, patchbox.SandboxStrategy.COPY_ON_WRITE,
            patchbox.SandboxStrategy.OVERLAY, patchbox.SandboxStrategy.GIT_WORKTREE,
            patchbox.SandboxStrategy.TRANSACTION_ROLLBACK)] == [
        "none", "copy_on_write", "overlay", "git_worktree", "transaction_rollback"]
