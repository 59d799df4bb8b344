"""Views parse, call selectors and services, and render: no view module queries the database
itself (docs/architecture.md, "Services and selectors"; /work/shared/STYLE.md).

Every view module is parsed (``ast``, nothing imported) and fails on a manager access
(``.objects``, ``._default_manager``, ``._base_manager``) or a query method called on a model
class imported from a ``models`` module (``Node.filter(...)``, ``m.Node.select_related(...)``).
A query belongs in the selector (reads) or service (writes) of the package owning the model.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VIEW_GLOBS = ("twin/*/views.py", "twin/*/*_views.py", "twin/*/drills_api.py",
              "twin/pages/entities.py", "twin/api/*.py")
NOT_VIEWS = {"twin/api/bodies.py"}  # the API's body reader and error shape
MANAGERS = {"objects", "_default_manager", "_base_manager"}
QUERY_METHODS = {"filter", "exclude", "get", "all", "select_related", "prefetch_related",
                 "values", "values_list", "annotate", "aggregate", "count", "exists",
                 "create", "update", "delete", "bulk_create", "get_or_create",
                 "update_or_create", "order_by", "first", "last", "raw"}


def view_modules() -> list[str]:
    found = {p.relative_to(ROOT).as_posix() for g in VIEW_GLOBS for p in ROOT.glob(g)}
    return sorted(found - NOT_VIEWS - {p for p in found if p.endswith("/__init__.py")})


def _models_imports(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names bound to model classes (``from x.models import Node``) and to models modules
    (``from twin import models as m``, ``import twin.inventory.models as im``)."""
    classes, modules = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if node.module.split(".")[-1] == "models":
                    classes.add(alias.asname or alias.name)
                elif alias.name == "models":
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[-1] == "models" and alias.asname:
                    modules.add(alias.asname)
    return classes, modules


def _is_model(expr: ast.expr, classes: set[str], modules: set[str]) -> bool:
    if isinstance(expr, ast.Name):
        return expr.id in classes
    return (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name)
            and expr.value.id in modules)


def orm_uses(source: str, path: str = "<source>") -> list[str]:
    """Each use of the ORM in ``source``, as ``path:line: what``."""
    tree = ast.parse(source, filename=path)
    classes, modules = _models_imports(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in MANAGERS:
            found.append(f"{path}:{node.lineno}: .{node.attr} (a model manager)")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in QUERY_METHODS
              and _is_model(node.func.value, classes, modules)):
            found.append(f"{path}:{node.lineno}: {ast.unparse(node.func)}() on a model class")
    return found


def test_the_view_modules_are_found():
    modules = view_modules()
    for expected in ("twin/pages/entities.py", "twin/pages/views.py", "twin/alerts/views.py",
                     "twin/studies/views.py", "twin/studies/whatif_views.py",
                     "twin/control/views.py", "twin/control/drills_api.py",
                     "twin/metrics/views.py", "twin/api/heatmap.py", "twin/api/views.py"):
        assert expected in modules
    assert "twin/api/bodies.py" not in modules


@pytest.mark.parametrize("path", view_modules())
def test_a_view_module_leaves_queries_to_selectors_and_services(path):
    uses = orm_uses((ROOT / path).read_text(encoding="utf-8"), path)
    assert not uses, ("views parse, call selectors/services and render; move these queries to "
                      "the owning package's selectors.py or services:\n" + "\n".join(uses))


@pytest.mark.parametrize("source", [
    "from twin.inventory.models import Node\ndef v(r):\n    return Node.objects.count()\n",
    "from twin.inventory.models import Node as N\ndef v(r):\n    return N.filter(pk=1)\n",
    "from twin import models as m\ndef v(r):\n    return m.Node.select_related('rack')\n",
    "from twin.studies.models import Study\ndef v(r):\n    return Study.values_list('pk')\n",
    "def v(r, model):\n    return model._default_manager.all()\n",
])
def test_the_check_catches_a_query_in_a_view(source):
    assert orm_uses(source)


@pytest.mark.parametrize("source", [
    "from twin.alerts.models import Alert\ndef v(r):\n    raise Alert.DoesNotExist\n",
    "from twin.studies.models import Study\nORIGIN = Study.Origin.SPEC\n",
    "from twin.inventory import selectors\ndef v(r):\n    return selectors.node_detail_get()\n",
    "def v(r, rows):\n    return rows.filter(pk=1)\n",  # not a model class: a selector's answer
])
def test_the_check_lets_views_name_models_and_call_selectors(source):
    assert orm_uses(source) == []
