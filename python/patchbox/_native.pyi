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

import os
import pathlib
import subprocess
from typing import Callable, ClassVar, Mapping, Sequence, Tuple, Union

_Path = Union[str, "os.PathLike[str]"]
_Patch = Union[bytes, bytearray, str]

class SandboxInfo:
    """A delegation's sandbox: the directory the sub-agent works in."""
    def __init__(self, path: _Path, delegation_id: str, base_dir: _Path) -> None: ...
    @property
    def path(self) -> pathlib.Path: ...
    @property
    def delegation_id(self) -> str: ...
    @property
    def base_dir(self) -> pathlib.Path: ...
    def __eq__(self, other: object) -> bool: ...

class SandboxResult:
    """What a delegation changed; relative paths are str, as git prints them."""
    @property
    def patch(self) -> bytes: ...
    @property
    def patch_text(self) -> str: ...
    @property
    def files_touched(self) -> List[str]: ...
    @property
    def added(self) -> List[str]: ...
    @property
    def modified(self) -> List[str]: ...
    @property
    def deleted(self) -> List[str]: ...
    @property
    def ignored(self) -> List[str]: ...
    @property
    def base_dir(self) -> pathlib.Path: ...
    @property
    def head_dir(self) -> pathlib.Path: ...

class Decision:
    ACCEPT: ClassVar[Decision]
    REJECT: ClassVar[Decision]

class Routed:
    ACCEPTED: ClassVar[Routed]
    PENDING: ClassVar[Routed]
    UNCHANGED: ClassVar[Routed]

class Completion:
    @property
    def result(self) -> SandboxResult: ...
    @property
    def routed(self) -> Routed: ...
    @property
    def pending_path(self) -> Optional[pathlib.Path]: ...
    @property
    def decide_error(self) -> Optional[BaseException]: ...

class PruneReport:
    pruned: List[str]
    recovered: List[pathlib.Path]
    live: List[str]
    errors: List[str]
    deferred: List[str]

class SessionStatus:
    id: str
    live: bool
    project: Optional[pathlib.Path]
    sandboxes: List[str]
    pending: int

class SessionManager:
    """One engine session (the Rust/C++ SandboxManager). Thread-safe; a context manager."""
    def __init__(
        self,
        project_dir: _Path,
        root: Optional[_Path] = None,
        *,
        prune_on_start: bool = True,
        confine: bool = True,
        writable_dirs: Sequence[_Path] = (),
        progress: Optional[Callable[[int, int, int], object]] = None,
    ) -> None: ...
    @property
    def project_dir(self) -> pathlib.Path: ...
    @property
    def session_base(self) -> pathlib.Path: ...
    @property
    def session_id(self) -> str: ...
    @property
    def root(self) -> pathlib.Path: ...
    @property
    def closed(self) -> bool: ...
    def create_sandbox(self, delegation_id: str, chain_from: Optional[SandboxInfo] = None) -> SandboxInfo: ...
    def finalize_sandbox(self, info: SandboxInfo) -> SandboxResult: ...
    def discard_sandbox(self, info: SandboxInfo) -> None: ...
    def write_pending_patch(self, delegation_id: str, patch: _Patch) -> pathlib.Path: ...
    def complete_sandbox(
        self,
        info: SandboxInfo,
        decide: Optional[Callable[[SandboxResult], Union[Decision, bool]]] = None,
    ) -> Completion: ...
    def run(
        self,
        info: SandboxInfo,
        args: Sequence[_Path],
        *,
        env: Optional[Mapping[str, str]] = None,
        input: Optional[bytes] = None,
    ) -> subprocess.CompletedProcess[bytes]: ...
    def skipped(self) -> List[Tuple[str, str]]: ...
    def symlinks_into_project(self) -> List[str]: ...
    def confinement(self) -> str: ...
    def startup_recovery(self) -> Optional[PruneReport]: ...
    def close(self) -> None: ...
    def __enter__(self) -> SessionManager: ...
    def __exit__(self, *exc: object) -> None: ...

def list_sessions(root: Optional[_Path] = None) -> List[SessionStatus]: ...
def prune_sessions(root: Optional[_Path] = None) -> PruneReport: ...

class FileStatus:
    APPLIED: ClassVar[FileStatus]
    MERGED: ClassVar[FileStatus]
    ALREADY_APPLIED: ClassVar[FileStatus]
    CONFLICT: ClassVar[FileStatus]
    REFUSED: ClassVar[FileStatus]

class Outcome:
    APPLIED: ClassVar[Outcome]
    APPLIED_WITH_CONFLICTS: ClassVar[Outcome]
    ALREADY_APPLIED: ClassVar[Outcome]
    REFUSED: ClassVar[Outcome]

class HunkConflict:
    hunk: int
    header: str
    reason: str

class FileReport:
    @property
    def path(self) -> str: ...
    @property
    def old_path(self) -> Optional[str]: ...
    @property
    def status(self) -> FileStatus: ...
    @property
    def detail(self) -> str: ...
    @property
    def conflicts(self) -> List[HunkConflict]: ...
    @property
    def markers_written(self) -> bool: ...

class RecoveryReport:
    @property
    def recovered(self) -> List[Tuple[str, str]]: ...
    @property
    def warnings(self) -> List[str]: ...
    def is_empty(self) -> bool: ...

class ApplyReport:
    @property
    def files(self) -> List[FileReport]: ...
    @property
    def outcome(self) -> Outcome: ...
    @property
    def check_only(self) -> bool: ...
    @property
    def undo_dir(self) -> Optional[pathlib.Path]: ...
    @property
    def warnings(self) -> List[str]: ...
    @property
    def recovery(self) -> RecoveryReport: ...
    def is_ok(self) -> bool: ...
    def wrote(self) -> bool: ...
    def count(self, status: FileStatus) -> int: ...

class UndoReport:
    @property
    def restored(self) -> List[str]: ...
    @property
    def overwritten(self) -> List[str]: ...
    @property
    def already_undone(self) -> bool: ...
    @property
    def warnings(self) -> List[str]: ...
    @property
    def recovery(self) -> RecoveryReport: ...

def apply_patch(
    project: _Path,
    patch: _Patch,
    *,
    check: bool = False,
    preimages: Optional[_Path] = None,
    conflict_markers: bool = False,
    undo_dir: Optional[_Path] = None,
    strip: int = 1,
    allow_outside_symlinks: bool = False,
) -> ApplyReport: ...
def undo_apply(project: _Path, undo_dir: _Path, *, force: bool = False) -> UndoReport: ...
def recover_project(project: _Path) -> RecoveryReport: ...

class UndoRecord:
    id: str
    dir: pathlib.Path
    project: pathlib.Path
    created: float
    paths: int
    state: str

class UndoStore:
    def __init__(self, root: Optional[_Path] = None) -> None: ...
    @property
    def dir(self) -> pathlib.Path: ...
    def apply(
        self,
        project: _Path,
        patch: _Patch,
        *,
        check: bool = False,
        preimages: Optional[_Path] = None,
        conflict_markers: bool = False,
        strip: int = 1,
        allow_outside_symlinks: bool = False,
    ) -> ApplyReport: ...
    def list(self, project: Optional[_Path] = None) -> List[UndoRecord]: ...
    def undo_last(self, project: _Path, *, force: bool = False) -> Tuple[UndoRecord, UndoReport]: ...
    def undo(self, project: _Path, id: str, *, force: bool = False) -> UndoReport: ...
    def drop(self, id: str) -> None: ...
    def prune(self) -> List[str]: ...

class PendingPatch:
    id: str
    session: str
    delegation: str
    patch_path: pathlib.Path
    preimages: Optional[pathlib.Path]
    project: pathlib.Path
    created: int
    recovered: bool
    abandoned: bool

def list_pending(root: Optional[_Path] = None) -> List[PendingPatch]: ...
def read_pending(id: str, *, root: Optional[_Path] = None) -> bytes: ...
def apply_pending(
    id: str,
    project: Optional[_Path] = None,
    *,
    root: Optional[_Path] = None,
    check: bool = False,
    preimages: Optional[_Path] = None,
    conflict_markers: bool = False,
    strip: int = 1,
    allow_outside_symlinks: bool = False,
) -> ApplyReport: ...
def drop_pending(id: str, *, root: Optional[_Path] = None) -> None: ...


# ---------------------------------------------------------------- (end of session layer)
