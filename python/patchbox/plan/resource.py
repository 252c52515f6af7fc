"""``Resource`` and ``ResourceRegistry`` (``cleveragents.domain.models.core.resource`` in the
plan executors' documentation): what a sandbox isolates, and the registry the boundary
algebra resolves against."""

from .._native import Resource, ResourceRegistry

__all__ = ["Resource", "ResourceRegistry"]
