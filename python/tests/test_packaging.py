"""What the built package ships: an abi3 extension module (one binary for CPython >= 3.9),
its type stubs and py.typed beside it, stubs that name everything the module exports, and
the metadata pip reads."""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
import pathlib
from typing import Dict, Set

import patchbox
from patchbox import _native

PKG = pathlib.Path(patchbox.__file__).parent


def stub_names() -> Dict[str, Set[str]]:
    """Top-level names of _native.pyi, each class with the members it declares."""
    tree = ast.parse((PKG / "_native.pyi").read_text())
    out: Dict[str, Set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members: Set[str] = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    members.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
            out[node.name] = members
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = set()
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = set()
    return out


def test_the_extension_is_an_abi3_module() -> None:
    name = pathlib.Path(_native.__file__ or "").name
    assert name.startswith("_native.") and name.endswith(".abi3.so"), name


def test_stubs_and_py_typed_ship_beside_the_module() -> None:
    assert (PKG / "py.typed").is_file()
    assert (PKG / "_native.pyi").is_file()
    assert pathlib.Path(_native.__file__ or "").parent == PKG


def test_the_stubs_name_every_export_of_the_module() -> None:
    stubs = stub_names()
    exported = {n for n in dir(_native) if not n.startswith("_")} | {"__version__"}
    assert exported - set(stubs) == set(), "exported but missing from _native.pyi"
    assert set(stubs) - exported - {"_Path", "_Patch"} == set(), "in _native.pyi but not exported"


def test_the_stubs_carry_docstrings() -> None:
    """Editors show a stub's docstrings on hover: every class and function has one."""
    tree = ast.parse((PKG / "_native.pyi").read_text())
    missing = []
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            if not ast.get_docstring(node):
                missing.append(node.name)
            if isinstance(node, ast.ClassDef):
                missing += [
                    f"{node.name}.{item.name}"
                    for item in node.body
                    if isinstance(item, ast.FunctionDef) and not ast.get_docstring(item)
                ]
    assert missing == []


def test_the_stubs_declare_every_public_member_of_the_session_classes() -> None:
    stubs = stub_names()
    for cls_name in patchbox.session.__all__:
        cls = getattr(patchbox, cls_name)
        if not inspect.isclass(cls) or cls.__module__ != "patchbox._native" or issubclass(cls, BaseException):
            continue
        runtime = {n for n in vars(cls) if not n.startswith("_")}
        assert runtime - stubs[cls_name] == set(), f"{cls_name}: members missing from the stubs"


def test_every_name_of_the_package_resolves() -> None:
    for name in patchbox.__all__:
        assert hasattr(patchbox, name), name


def test_the_package_names_each_export_once() -> None:
    assert len(set(patchbox.__all__)) == len(patchbox.__all__), sorted(
        n for n in set(patchbox.__all__) if patchbox.__all__.count(n) > 1
    )
    namespace: Dict[str, object] = {}
    exec("from patchbox import *", namespace)
    assert set(patchbox.__all__) <= set(namespace)
    for module in (patchbox.plan, patchbox.checkpoint, patchbox.custom, patchbox.session, patchbox.errors):
        assert len(set(module.__all__)) == len(module.__all__), module.__name__
        for name in module.__all__:
            assert getattr(patchbox, name) is getattr(module, name), (module.__name__, name)


def test_metadata() -> None:
    meta = importlib.metadata.metadata("patchbox")
    assert meta["Name"] == "patchbox"
    assert meta["Requires-Python"] == ">=3.9"
    # The one runtime dependency: SandboxCheckpoint is a Pydantic model.
    runtime = [r for r in meta.get_all("Requires-Dist") or [] if "extra ==" not in r]
    assert runtime == ["pydantic>=2,<3"]
    assert meta["Version"] == patchbox.__version__
