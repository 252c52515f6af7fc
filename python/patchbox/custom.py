"""Custom sandbox strategies written in Python.

A strategy is a class with the nine methods of ``SandboxStrategyProtocol`` (create, read,
write, diff, commit, rollback, checkpoint, restore_checkpoint, cleanup). It is registered by
name in a ``SandboxStrategyRegistry``, which checks the nine methods at registration
(``ProtocolMismatchError`` naming the missing ones) and imports modules by name only under its
allowed prefixes (default ``("cleveragents.",)``). A ``SandboxManager(custom_registry=registry)``
then makes sandboxes of it: the Rust manager keeps the lifecycle, the on-disk state and
``commit_all``'s all-or-nothing; the strategy keeps the content.

How the two protocols meet: the Rust manager drives a *driver* (``_Driver`` below) through
the Rust protocol's shape (``create(ref, original_path) -> metadata``,
``rollback(ref, after_commit)`` …); the driver calls the user's class in the documented shape
(``create(plan_id, resource) -> SandboxRef``, ``rollback(ref)`` …). The ``SandboxRef`` the
user's ``create`` returns is the one its other methods receive. Optional extensions a
strategy may define: ``commit(ref, message=None)``, ``rollback(ref, after_commit=False)``
(``True``: undo a commit, as ``commit_all`` does when a later sandbox fails) and
``is_rollbackable`` (a bool or a method; default ``True``). Any exception a method raises
becomes the error of the step (``SandboxCommitError`` for commit, …) with its text;
``read`` may return ``None`` or raise ``FileNotFoundError``/``KeyError`` for a path that does
not exist in the sandbox. In ``commit_all``, an exception of the ``SandboxError`` family
(``SandboxCommitError``, …) is a sandbox-level failure: the plan is rolled back and the one
failed ``CommitResult`` returned; any other exception raises ``AtomicCommitError``.
``SandboxRef.metadata`` is kept as the strategy gave it (JSON values survive a restart; other
values come back as their ``str``). An operation runs while the library holds that sandbox's
lock: it must not call back into the same sandbox (its ``status``, ``diff`` …), which would
wait for itself.

Thread safety: the registry's Rust half is ``Send + Sync``; a driver serializes nothing
itself — the manager runs one operation of a sandbox at a time, and a strategy serving several
sandboxes from several threads must guard its own shared state.
"""

from __future__ import annotations

import importlib
import inspect
import threading
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Protocol, Tuple, Type

from ._native import (
    CopyOnWriteSandbox as _CopyOnWriteSandbox,
    CustomSandbox as _CustomSandbox,
    GitWorktreeSandbox as _GitWorktreeSandbox,
    NoSandbox as _NoSandbox,
    OverlaySandbox as _OverlaySandbox,
    TransactionSandbox as _TransactionSandbox,
    BuiltInSandboxStrategyAdapter,
    DiffEntry,
    DiffView,
    Resource,
    STRATEGY_OPERATIONS as _OPERATIONS,
    StrategyRegistry as _NativeRegistry,
)
from ._records import SandboxRef
from .errors import ProtocolMismatchError, SandboxError

__all__ = [
    "BuiltInSandboxStrategyAdapter",
    "REQUIRED_METHODS",
    "SandboxStrategyProtocol",
    "SandboxStrategyRegistry",
    "SandboxFactory",
    "SandboxRef",
    "DiffEntry",
    "DiffView",
    "validate_strategy",
]

#: The nine operations, in protocol order.
REQUIRED_METHODS: Tuple[str, ...] = tuple(_OPERATIONS)  # the Rust protocol's own list


class SandboxStrategyProtocol(Protocol):
    """What a custom strategy implements (structural: no base class needed)."""

    def create(self, plan_id: str, resource: Resource) -> SandboxRef: ...
    def read(self, ref: SandboxRef, path: str) -> Optional[bytes]: ...
    def write(self, ref: SandboxRef, path: str, content: bytes) -> DiffEntry: ...
    def diff(self, ref: SandboxRef) -> DiffView: ...
    def commit(self, ref: SandboxRef) -> Optional[str]: ...
    def rollback(self, ref: SandboxRef) -> None: ...
    def checkpoint(self, ref: SandboxRef, checkpoint_id: str) -> None: ...
    def restore_checkpoint(self, ref: SandboxRef, checkpoint_id: str) -> None: ...
    def cleanup(self, ref: SandboxRef) -> None: ...


def validate_strategy(name: str, strategy: object) -> None:
    """Raises ``ProtocolMismatchError`` naming the methods ``strategy`` (a class or an
    instance) lacks as callable attributes."""
    missing = [m for m in REQUIRED_METHODS if not callable(getattr(strategy, m, None))]
    if missing:
        raise ProtocolMismatchError(
            f"strategy {name!r} ({_qualname(strategy)}) does not implement the protocol: "
            f"missing {', '.join(missing)}"
        )


def _qualname(obj: object) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


class _Driver:
    """The Rust protocol's shape over a user's strategy instance (see the module docs)."""

    def __init__(self, impl: Any) -> None:
        self._impl = impl
        self._refs: Dict[str, Any] = {}
        self._lock = threading.Lock()
        self._commit_takes_message = _accepts(impl.commit, "message")
        self._rollback_takes_flag = _accepts(impl.rollback, "after_commit")

    def _ref(self, ref: SandboxRef) -> Any:
        with self._lock:
            mine = self._refs.get(ref.sandbox_id)
        if mine is not None:
            return mine
        # Reopened after a restart: rebuild the strategy's reference from the metadata.
        sid = str(ref.metadata.get("strategy.sandbox_id", ref.sandbox_id))
        return SandboxRef(sid, ref.plan_id, ref.resource_id, ref.created_at, dict(ref.metadata))

    def create(self, ref: SandboxRef, original_path: str) -> Dict[str, object]:
        resource = Resource(ref.resource_id, "other", original_path)
        theirs = self._impl.create(ref.plan_id, resource)
        if theirs is None:
            theirs = ref
        with self._lock:
            self._refs[ref.sandbox_id] = theirs
        # Kept as given: values that are not text are stored as JSON and come back typed.
        meta: Dict[str, object] = {str(k): v for k, v in dict(getattr(theirs, "metadata", None) or {}).items()}
        sid = getattr(theirs, "sandbox_id", ref.sandbox_id)
        if sid != ref.sandbox_id:
            meta["strategy.sandbox_id"] = str(sid)
        return meta

    def read(self, ref: SandboxRef, path: str) -> Optional[bytes]:
        try:
            data = self._impl.read(self._ref(ref), path)
        except (FileNotFoundError, KeyError):
            return None
        return None if data is None else bytes(data)

    def write(self, ref: SandboxRef, path: str, content: bytes) -> None:
        self._impl.write(self._ref(ref), path, content)

    def diff(self, ref: SandboxRef) -> Any:
        return self._impl.diff(self._ref(ref))

    def commit(self, ref: SandboxRef, message: Optional[str]) -> Optional[str]:
        if self._commit_takes_message:
            out = self._impl.commit(self._ref(ref), message=message)
        else:
            out = self._impl.commit(self._ref(ref))
        return None if out is None else str(out)

    def rollback(self, ref: SandboxRef, after_commit: bool) -> None:
        if self._rollback_takes_flag:
            self._impl.rollback(self._ref(ref), after_commit=after_commit)
        else:
            self._impl.rollback(self._ref(ref))

    def checkpoint(self, ref: SandboxRef, checkpoint_id: str) -> None:
        self._impl.checkpoint(self._ref(ref), checkpoint_id)

    def restore_checkpoint(self, ref: SandboxRef, checkpoint_id: str) -> None:
        self._impl.restore_checkpoint(self._ref(ref), checkpoint_id)

    def cleanup(self, ref: SandboxRef) -> None:
        self._impl.cleanup(self._ref(ref))
        with self._lock:
            self._refs.pop(ref.sandbox_id, None)

    def is_rollbackable(self) -> bool:
        v = getattr(self._impl, "is_rollbackable", True)
        return bool(v() if callable(v) else v)


class SandboxStrategyRegistry(_NativeRegistry):
    """Custom strategies by name, and the module prefixes they may be imported from.

    ``register(name, module, class_name)`` imports ``module`` only when its dotted name starts
    with one of ``allowed_prefixes``; ``register_class`` and ``register_instance`` take a class
    or an object the host already has (no import, so no prefix check). Every path validates
    the nine methods first. A new sandbox of a class-registered strategy gets an instance of
    its own; an instance-registered strategy serves all its sandboxes.
    """

    def __init__(self, allowed_prefixes: Iterable[str] = ("cleveragents.",)) -> None:
        self.allowed_prefixes: Tuple[str, ...] = tuple(allowed_prefixes)
        self._classes: Dict[str, Type[Any]] = {}

    def _check_module(self, module: str) -> None:
        if not any(module.startswith(p) for p in self.allowed_prefixes):
            raise SandboxError(
                f"module {module!r} is not allowed: it starts with none of the allowed prefixes "
                f"{list(self.allowed_prefixes)}",
                kind="not_allowed",
            )

    def register(self, name: str, module: str, class_name: str) -> None:
        """Imports ``module`` (under an allowed prefix), takes its ``class_name`` and
        registers it as ``name``."""
        self._check_module(module)
        try:
            mod = importlib.import_module(module)
        except ImportError as e:
            raise SandboxError(f"cannot import strategy module {module!r}: {e}") from e
        cls = getattr(mod, class_name, None)
        if not isinstance(cls, type):
            raise SandboxError(f"module {module!r} has no class {class_name!r}")
        self.register_class(name, cls)

    def register_all_from_config(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """Registers each ``name: {"module": ..., "class": ...}``; stops at the first error
        (those registered before it stay registered)."""
        for name, spec in configs.items():
            try:
                module, class_name = spec["module"], spec["class"]
            except KeyError as e:
                raise SandboxError(f"strategy {name!r}: config lacks {e.args[0]!r}") from e
            self.register(name, module, class_name)

    def register_class(self, name: str, cls: Type[Any]) -> None:
        """Registers a class: each sandbox gets ``cls()``."""
        validate_strategy(name, cls)
        self._register_driver(name, lambda: _Driver(cls()))
        self._classes[name] = cls

    def register_instance(self, name: str, strategy: object) -> None:
        """Registers one object serving every sandbox of the strategy."""
        validate_strategy(name, strategy)
        driver = _Driver(strategy)
        self._register_driver(name, lambda: driver)
        self._classes[name] = type(strategy)

    def get_custom_strategy_class(self, name: str) -> Type[Any]:
        """The class registered as ``name`` (``SandboxError`` when there is none)."""
        try:
            return self._classes[name]
        except KeyError:
            raise SandboxError(
                f"no custom strategy {name!r} is registered (registered: {self.names()})"
            ) from None

    def list_strategies(self) -> List[str]:
        """The registered names, sorted."""
        return self.names()


class SandboxFactory:
    """The strategies a manager can make: the built-in ones and a registry's custom ones.

    ``get_strategy_class(name)`` is the class a sandbox of ``name`` is an instance of (the
    manager makes them: ``CopyOnWriteSandbox`` for ``"copy_on_write"``, …, ``CustomSandbox`` for
    a registered custom strategy, whose own class ``get_custom_strategy_class`` returns).
    """

    BUILT_IN: Tuple[str, ...] = ("none", "copy_on_write", "overlay", "git_worktree", "transaction_rollback")
    _CLASSES: Dict[str, type] = {
        "none": _NoSandbox,
        "copy_on_write": _CopyOnWriteSandbox,
        "overlay": _OverlaySandbox,
        "git_worktree": _GitWorktreeSandbox,
        "transaction_rollback": _TransactionSandbox,
    }

    def __init__(self, custom_registry: Optional[SandboxStrategyRegistry] = None) -> None:
        self.custom_registry = custom_registry if custom_registry is not None else SandboxStrategyRegistry()

    def has_custom_strategy(self, name: str) -> bool:
        return self.custom_registry.has_custom_strategy(name)

    def get_custom_strategy_class(self, name: str) -> Type[Any]:
        return self.custom_registry.get_custom_strategy_class(name)

    def available_strategies(self) -> List[str]:
        return list(self.BUILT_IN) + self.custom_registry.names()

    def get_strategy_class(self, name: str) -> type:
        """The class of the sandboxes of strategy ``name`` (``SandboxError`` when there is no
        such strategy)."""
        if name in self._CLASSES:
            return self._CLASSES[name]
        if self.has_custom_strategy(name):
            return _CustomSandbox
        raise SandboxError(f"no strategy {name!r} (available: {self.available_strategies()})")
