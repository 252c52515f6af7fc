"""``BuiltInSandboxStrategyAdapter`` (``cleveragents.infrastructure.sandbox.strategy_adapter``
in the plan executors' documentation): a built-in strategy behind the nine-method strategy
protocol. ``write`` returns the change as a ``DiffEntry``."""

from .._native import BuiltInSandboxStrategyAdapter

__all__ = ["BuiltInSandboxStrategyAdapter"]
