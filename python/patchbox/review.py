"""Review and accept: the pending store's records as Python data, and accepting part of a
pending patch.

The records are the JSON documents ``patchbox ... --json`` prints and the C++ API returns
(``docs/json.md``): the same field names, whichever face a consumer uses. ``pending_records``
lists every pending patch (ids, project, origin, times, the command that produced it, and the
files with their change kind and line counts); ``apply_pending_selected`` applies some files
(``only``, ``exclude``) or hunks (``hunks=["a.py:1,3"]``) and keeps the rest pending as a new
entry that applies later. ``stored_record`` reads one pending patch's record in an object store
(``pending show --json --store URL``).
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Union

from ._native import (
    PartialApply,
    apply_pending_selected,
    pending_record_json,
    pending_records_json,
    sessions_json,
    stored_record_json,
)

__all__ = [
    "PartialApply",
    "apply_pending_selected",
    "pending_record",
    "pending_records",
    "session_records",
    "stored_record",
]

PathLike = Union[str, "os.PathLike[str]"]


def pending_records(root: Optional[PathLike] = None) -> List[Dict[str, Any]]:
    """Every pending patch's record under ``root``, oldest session first (what
    ``patchbox pending list --json`` prints)."""
    records: List[Dict[str, Any]] = json.loads(pending_records_json(root))
    return records


def pending_record(id: str, *, root: Optional[PathLike] = None) -> Dict[str, Any]:
    """The record of pending patch ``id``, its ``patch`` text included (what
    ``patchbox pending show --json`` prints). An unknown id raises ``PatchboxError``
    (kind ``"pending"``)."""
    record: Dict[str, Any] = json.loads(pending_record_json(id, root=root))
    return record


def stored_record(id: str, *, store: str) -> Dict[str, Any]:
    """The record of pending patch ``id`` in the object store ``store`` (``s3://bucket/prefix``
    or a directory), its ``patch`` text and ``provenance`` included (what ``patchbox pending
    show --json --store URL`` prints). An unknown id raises ``PatchboxError`` (kind
    ``"pending"``); a store that cannot be read, kind ``"store"``."""
    record: Dict[str, Any] = json.loads(stored_record_json(id, store=store))
    return record


def session_records(root: Optional[PathLike] = None) -> List[Dict[str, Any]]:
    """The sessions under ``root`` (what ``patchbox sessions --json`` prints)."""
    records: List[Dict[str, Any]] = json.loads(sessions_json(root))
    return records
