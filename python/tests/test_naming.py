"""The two families under one naming rule: a module per family, ``Manager`` in each, and the
names engines already import kept as the same objects."""

import patchbox
import patchbox.plan
import patchbox.session


def test_each_family_has_its_manager_under_its_module() -> None:
    assert patchbox.session.Manager is patchbox.SessionManager
    assert patchbox.plan.Manager is patchbox.plan.SandboxManager
    assert patchbox.plan.Manager is patchbox.SandboxManager


def test_the_bare_family_name_is_not_exported_at_the_top() -> None:
    assert "Manager" not in patchbox.__all__
    assert "Manager" not in patchbox.session.__all__
    assert "Manager" not in patchbox.plan.__all__
    namespace: dict = {}
    exec("from patchbox import *", namespace)
    assert "Manager" not in namespace
    assert namespace["SandboxManager"] is patchbox.plan.Manager
    assert namespace["SessionManager"] is patchbox.session.Manager


def test_session_manager_works_under_the_family_name(tmp_path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("one\n")
    with patchbox.session.Manager(project, root=tmp_path / "root") as mgr:
        sb = mgr.create_sandbox("naming")
        (sb.path / "a.txt").write_text("two\n")
        result = mgr.finalize_sandbox(sb)
        assert b"+two" in result.patch
    assert (project / "a.txt").read_text() == "one\n"
