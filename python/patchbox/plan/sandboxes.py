"""The sandbox classes, one per built-in strategy, as the plan executors' documentation names
them; ``SandboxManager.get_or_create_sandbox`` returns an instance of the strategy's class.

============================  =======================  ==========================
strategy                      class                    commit can be undone
============================  =======================  ==========================
``none``                      ``NoSandbox``            no (writes are immediate)
``copy_on_write``             ``CopyOnWriteSandbox``   yes
``overlay``                   ``OverlaySandbox``       yes
``git_worktree``              ``GitWorktreeSandbox``   yes
``transaction_rollback``      ``TransactionSandbox``   yes (its changeset, inverted)
custom (registered name)      ``CustomSandbox``        as the strategy says
============================  =======================  ==========================

Each is a subclass of the native ``BaseSandbox`` (``patchbox._native.Sandbox``) and satisfies
the ``Sandbox`` protocol. They are made by the manager, not by calling the class.
"""

from .._native import (
    CopyOnWriteSandbox,
    CustomSandbox,
    GitWorktreeSandbox,
    NoSandbox,
    OverlaySandbox,
    Sandbox as BaseSandbox,
    TransactionSandbox,
)

__all__ = [
    "BaseSandbox",
    "NoSandbox",
    "CopyOnWriteSandbox",
    "OverlaySandbox",
    "GitWorktreeSandbox",
    "TransactionSandbox",
    "CustomSandbox",
]
