"""``SandboxFactory`` (``cleveragents.infrastructure.sandbox.factory`` in the plan executors'
documentation): the built-in strategies and a registry's custom ones."""

from ..custom import SandboxFactory

__all__ = ["SandboxFactory"]
