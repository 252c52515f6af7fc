"""The custom-strategy models, where the plan executors' documentation imports them from
(``cleveragents.domain.models.core.sandbox_strategy`` there): ``SandboxStrategyProtocol``,
``SandboxRef`` (a frozen dataclass), ``DiffEntry`` and ``DiffView``."""

from ..custom import DiffEntry, DiffView, SandboxRef, SandboxStrategyProtocol

__all__ = ["SandboxStrategyProtocol", "SandboxRef", "DiffEntry", "DiffView"]
