"""``SandboxManager``, where the plan executors' documentation imports it from
(``cleveragents.infrastructure.sandbox.manager`` there).

``SandboxManager(root=None, custom_registry=None)`` is thread-safe; it makes sandboxes
lazily per ``(plan_id, resource_id)``, commits a plan's sandboxes all or nothing
(``commit_all``), and resolves resource boundaries (``get_or_create_sandbox_for_resource``).
"""

from .._native import SandboxManager

__all__ = ["SandboxManager"]
