"""Type stubs of the compiled module ``patchbox._native``."""

from typing import List, Optional

__version__: str

# ---------------------------------------------------------------- errors (errors.rs)

class PatchboxError(Exception):
    kind: str

class SandboxError(PatchboxError):
    sandbox_id: Optional[str]

class SandboxCreationError(SandboxError):
    resource_id: str

class SandboxCommitError(SandboxError):
    files: List[str]

class SandboxRollbackError(SandboxError):
    files: List[str]

class SandboxStateError(SandboxError):
    from_status: str
    to_status: str

class AtomicCommitError(SandboxError):
    plan_id: str
    rolled_back_ids: List[str]
    failed_rollback_ids: List[str]

class ProtocolMismatchError(SandboxError): ...

# ---------------------------------------------------------------- plan layer (plan.rs, checkpoint.rs, custom.rs)

# ---------------------------------------------------------------- (end of plan layer)




# ---------------------------------------------------------------- session layer (session.rs, apply.rs)

# ---------------------------------------------------------------- (end of session layer)
