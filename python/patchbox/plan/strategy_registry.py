"""``SandboxStrategyRegistry`` (``cleveragents.infrastructure.sandbox.strategy_registry`` in
the plan executors' documentation): custom strategies by name, imported only from modules
under its allowed prefixes, each checked against the nine-method protocol."""

from ..custom import SandboxStrategyRegistry

__all__ = ["SandboxStrategyRegistry"]
