"""The code shows its architecture: the map in docs/architecture.md names every package, the
packages import one another without cycles, no module outgrows ~500 lines, and twin/ keeps its
modules in packages."""

import re
from pathlib import Path

import grimp
import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2]
MAP = (ROOT / "docs" / "architecture.md").read_text()
MODULE_LINES_MAX = 500
TWIN_TOP_MODULES = {"__init__.py", "apps.py", "models.py"}
"""What may sit at twin/'s top: the package, Django's app config and the model registry."""


def _units(package: str) -> set[str]:
    """The sub-packages and top-level modules of ``package`` (its folders with an
    ``__init__.py`` and its ``.py`` files), as ``package/name``."""
    base = ROOT / package
    found = {f"{package}/{p.name}" for p in base.iterdir()
             if p.is_dir() and (p / "__init__.py").exists()}
    found |= {f"{package}/{p.name}" for p in base.glob("*.py") if p.name != "__init__.py"}
    return found


def _mapped(package: str) -> set[str]:
    return set(re.findall(rf"`({package}/[A-Za-z_]+(?:\.py)?)`", MAP))


@pytest.mark.parametrize("package", ["scheduler", "twin"])
def test_the_map_names_every_package_and_nothing_that_is_gone(package):
    code = _units(package)
    if package == "twin":
        code -= {"twin/migrations", "twin/apps.py"}
    mapped = _mapped(package) - {"twin/__init__.py"}
    assert code - mapped == set(), f"missing from docs/architecture.md: {code - mapped}"
    assert mapped - code == set(), f"in docs/architecture.md, gone from the code: {mapped - code}"


def test_twin_keeps_its_modules_in_packages():
    tops = {p.name for p in (ROOT / "twin").glob("*.py")}
    assert tops <= TWIN_TOP_MODULES, f"modules a package should hold: {tops - TWIN_TOP_MODULES}"


def test_no_module_is_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in list((ROOT / "scheduler").rglob("*.py"))
            + list((ROOT / "twin").rglob("*.py"))
            if "migrations" not in p.parts
            and (n := len(p.read_text().splitlines())) > MODULE_LINES_MAX}
    assert long == {}


def _package_graph(root: str) -> nx.DiGraph:
    """Imports between ``root``'s first-level packages and modules (every import, also inside
    functions), as grimp reads them."""
    graph = grimp.build_graph(root, cache_dir=None)
    top = lambda m: ".".join(m.split(".")[:2])  # noqa: E731
    edges = nx.DiGraph()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = top(module), top(imported)
            if a != b and root not in (a, b):
                edges.add_edge(a, b)
    return edges


@pytest.mark.parametrize("root", ["scheduler", "twin"])
def test_packages_import_one_another_without_cycles(root):
    graph = _package_graph(root)
    if root == "twin":
        # the registry Django loads imports every package's models and nobody imports it
        # (import-linter's twin-no-registry contract); migrations are Django's history
        graph.remove_nodes_from(["twin.models", "twin.migrations"])
    assert list(nx.simple_cycles(graph)) == []


def test_the_cycle_check_sees_a_cycle():
    """The check above fails on a cycle (the graph it builds is not empty, and a planted
    back edge makes one)."""
    graph = _package_graph("scheduler")
    assert graph.number_of_edges() > 20
    graph.add_edge("scheduler.sim", "scheduler.engine")
    assert list(nx.simple_cycles(graph)) != []
