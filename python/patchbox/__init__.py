"""patchbox: sandboxes for agent engines.

Plan executors route every write of a plan's Execute phase through a sandbox per resource
(``SandboxManager``), checkpoint them (``CheckpointManager``) and commit them all-or-nothing
(``commit_all``); session engines delegate to sub-agents whose work comes back as a patch
(``SessionManager``); ``apply_patch`` applies a git patch atomically, with an undo record.

The compiled core is ``patchbox._native`` (Rust, through PyO3); this package re-exports it
under the names the plan-executor engines already use. The exceptions live in
``patchbox.errors`` (``PatchboxError`` > ``SandboxError`` > ...); the core raises those classes,
and they pickle.
"""

from ._native import __version__
from .errors import (
    PatchboxError,
    SandboxError,
    SandboxCreationError,
    SandboxCommitError,
    SandboxRollbackError,
    SandboxStateError,
    AtomicCommitError,
    ProtocolMismatchError,
)
from .plan import *  # noqa: F401,F403  (plan layer: SandboxManager, Sandbox, the strategy classes, ...)
from .checkpoint import *  # noqa: F401,F403  (CheckpointManager, SandboxCheckpoint)
from .custom import *  # noqa: F401,F403  (SandboxStrategyRegistry, SandboxRef, DiffView, ...)

__all__ = [
    "__version__",
    "PatchboxError",
    "SandboxError",
    "SandboxCreationError",
    "SandboxCommitError",
    "SandboxRollbackError",
    "SandboxStateError",
    "AtomicCommitError",
    "ProtocolMismatchError",
]

from .session import *  # noqa: E402,F401,F403  the session layer (patchbox/session.py)
from .session import __all__ as _session_all  # noqa: E402

__all__ += _session_all

from .review import *  # noqa: E402,F401,F403  review and accept (patchbox/review.py)
from .review import __all__ as _review_all  # noqa: E402

__all__ += _review_all

from . import plan as _plan, checkpoint as _checkpoint, custom as _custom  # noqa: E402

__all__ += _plan.__all__ + _checkpoint.__all__ + _custom.__all__
# Each name once, in order: the layers share some (``DiffEntry`` is in plan and custom).
__all__[:] = dict.fromkeys(__all__)
