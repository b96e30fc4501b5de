"""The floors of the code base: nothing imports a floor above its own.

core (streamkit) < the keyed-operator contract (operators) < pure algorithms (lsb, windowing,
opstats) <
services < tools (stacktools) < benchmarks and tests. A service never imports another service,
so each can be deployed, tested and read alone; the join and the windows never import each
other, only the contract they both implement; the pure floors never import Spark, so they run
without a JVM, and the core imports it only inside the functions that build Spark columns of
the wire contract, so importing the core never needs pyspark. Inside the tools, each product is
a package on a floor of its own (``STACKTOOLS_FLOORS``). Checked on the source with ``ast``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from streamkit.paths import REPO_ROOT

CORE = {"streamkit"}
CONTRACT = {"operators"}
PURE = CONTRACT | {"lsb", "windowing", "opstats"}
SERVICES = {"simulator", "mqtt_bridge", "spark_jobs", "db_connector", "alert_forwarder"}
TOOLS = {"stacktools"}
PROJECT = CORE | PURE | SERVICES | TOOLS | {"tests", "benchmarks"}

#: What each package may import of the project (itself always).
ALLOWED: dict[str, set[str]] = {
    "streamkit": set(),
    "operators": CORE,
    "lsb": CORE | CONTRACT,
    "windowing": CORE | CONTRACT,
    "opstats": CORE | CONTRACT,
    **{service: CORE | PURE for service in SERVICES},
    "stacktools": CORE | PURE | SERVICES,
}
#: Third-party packages a floor must not import at all ...
FORBIDDEN_THIRD_PARTY = {
    "operators": {"pyspark"},
    "lsb": {"pyspark"},
    "windowing": {"pyspark"},
    "opstats": {"pyspark"},
}
#: ... or not when a module is imported (only inside functions).
FORBIDDEN_AT_IMPORT = {"streamkit": {"pyspark"}}


def imported_roots(path: Path) -> set[str]:
    """Top-level names of every import in the file (at any depth, lazy imports included)."""
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def imported_at_import_time(path: Path) -> set[str]:
    """Top-level names imported when the module itself is imported: not inside functions,
    not under ``if TYPE_CHECKING``."""
    roots: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            return
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return roots


def violations(package: str) -> list[str]:
    allowed = ALLOWED[package] | {package}
    found = []
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
        roots = imported_roots(path)
        for root in sorted((roots & PROJECT) - allowed):
            found.append(f"{path.relative_to(REPO_ROOT)} imports {root}")
        for root in sorted(roots & FORBIDDEN_THIRD_PARTY.get(package, set())):
            found.append(f"{path.relative_to(REPO_ROOT)} imports {root}")
        for root in sorted(imported_at_import_time(path) & FORBIDDEN_AT_IMPORT.get(package, set())):
            found.append(f"{path.relative_to(REPO_ROOT)} imports {root} at import time")
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_floor_imports_a_higher_one(package: str) -> None:
    assert (REPO_ROOT / package).is_dir(), package
    assert violations(package) == []


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    """The check itself can fail: an import of a service from the core is found."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def f():\n    from mqtt_bridge.bridge import main\n    import stacktools.stack\n"
    )
    assert imported_roots(bad) == {"mqtt_bridge", "stacktools"}
    assert imported_at_import_time(bad) == set()
    bad.write_text("import pyspark\nif TYPE_CHECKING:\n    import numpy\n")
    assert imported_at_import_time(bad) == {"pyspark"}


def test_every_package_has_a_floor() -> None:
    """A new top-level package must be placed on a floor before it can be imported anywhere."""
    packages = {p.parent.name for p in REPO_ROOT.glob("*/__init__.py")}
    assert packages - {"tests", "benchmarks"} <= set(ALLOWED), packages - set(ALLOWED)


#: The tools' products, each a package with one job, and what each may import of the others:
#: the stack in containers (stdlib and the core only, so ``.env`` is made before the project is
#: installed) < the launcher < the harness that runs the services < verify and the dashboards <
#: the demo and the configuration reference, which show all of them.
STACKTOOLS_FLOORS: dict[str, set[str]] = {
    "resources": set(),
    "compose": set(),
    "stack": {"compose", "resources"},
    "harness": {"compose", "stack"},
    "verify": {"stack"},
    "dashboards": {"stack", "harness", "resources"},
    "demo": {"compose", "stack", "harness", "verify", "dashboards", "resources"},
    "config_reference": {"compose", "stack", "harness", "verify", "dashboards"},
}
#: Where a package may use only part of a lower one: verify and the dashboards read InfluxDB
#: through the launcher's client, never its servers or provisioning; the pipeline graph takes
#: the services' list from the harness, nothing that runs them.
STACKTOOLS_ONLY: dict[tuple[str, str], set[str]] = {
    ("verify", "stack"): {"stacktools.stack.influx", "stacktools.stack.errors"},
    ("dashboards", "stack"): {"stacktools.stack.influx"},
    ("dashboards", "harness"): {"stacktools.harness.services"},
}
#: What the stack in containers may import at all: the standard library and the core.
COMPOSE_ROOTS = set(sys.stdlib_module_names) | {"__future__", "streamkit", "stacktools"}


def _within(name: str, prefixes: set[str]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def imported_names(path: Path) -> list[str]:
    """Every absolute import of the file as a dotted name (``from a.b import c``: ``a.b.c``)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def stacktools_violations(root: Path = REPO_ROOT) -> list[str]:
    found = []
    for package, allowed in STACKTOOLS_FLOORS.items():
        for path in sorted((root / "stacktools" / package).rglob("*.py")):
            where = path.relative_to(root).as_posix()
            for name in imported_names(path):
                parts = name.split(".")
                if package == "compose" and parts[0] not in COMPOSE_ROOTS:
                    found.append(f"{where} imports {name}")
                if parts[0] != "stacktools" or len(parts) < 2 or parts[1] == package:
                    continue
                other = parts[1]
                if other not in allowed:
                    found.append(f"{where} imports {name}")
                elif not _within(name, STACKTOOLS_ONLY.get((package, other), {name})):
                    found.append(f"{where} imports {name}, more of {other} than it may")
    return found


def test_stacktools_is_its_products_each_on_its_floor() -> None:
    tools = REPO_ROOT / "stacktools"
    assert [p.name for p in tools.glob("*.py")] == ["__init__.py"], "a module of no product"
    assert {p.parent.name for p in tools.glob("*/__init__.py")} == set(STACKTOOLS_FLOORS)
    assert stacktools_violations() == []


def test_the_stacktools_check_sees_a_violation(tmp_path: Path) -> None:
    """The check can fail: the launcher importing the dashboards or the demo, verify a server
    of the launcher, the compose tools a third-party package; a lower floor passes."""
    for package in STACKTOOLS_FLOORS:
        (tmp_path / "stacktools" / package).mkdir(parents=True)
    (tmp_path / "stacktools" / "stack" / "__main__.py").write_text(
        "from stacktools.dashboards.graph.render import render\nimport stacktools.demo\n"
    )
    (tmp_path / "stacktools" / "verify" / "bad.py").write_text(
        "from stacktools.stack.influx import InfluxClient\n"
        "from stacktools.stack.servers import kafka\n"
    )
    (tmp_path / "stacktools" / "compose" / "bad.py").write_text("import json\nimport yaml\n")
    (tmp_path / "stacktools" / "demo" / "ok.py").write_text("from stacktools.stack import Stack\n")
    assert stacktools_violations(tmp_path) == [
        "stacktools/compose/bad.py imports yaml",
        "stacktools/stack/__main__.py imports stacktools.dashboards.graph.render.render",
        "stacktools/stack/__main__.py imports stacktools.demo",
        "stacktools/verify/bad.py imports stacktools.stack.servers.kafka, "
        "more of stack than it may",
    ]


#: The oracles judge the project, so they are written from the specification alone: the
#: standard library, third-party decoders and each other; nothing of the project, nothing of
#: the rest of the test tree (whose helpers use the project). Their own tests (``test_*.py``
#: beside them) hold them against the project, so those may import it.
ORACLES = REPO_ROOT / "tests" / "oracles"
ORACLE_THIRD_PARTY = {"fastavro"}


def oracle_violations() -> list[str]:
    found = []
    for path in sorted(p for p in ORACLES.rglob("*.py") if not p.name.startswith("test_")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else ["." * node.level + (node.module or "")]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                root = name.split(".")[0]
                own = name.startswith("tests.oracles") or (
                    name.startswith(".") and not name.startswith("..")
                )
                if (
                    own
                    or root == "__future__"
                    or root in sys.stdlib_module_names
                    or root in ORACLE_THIRD_PARTY
                ):
                    continue
                found.append(f"{path.relative_to(REPO_ROOT)} imports {name}")
    return found


def test_the_oracles_import_nothing_they_judge() -> None:
    assert ORACLES.is_dir() and list(ORACLES.glob("*.py"))
    assert oracle_violations() == []


def test_the_oracle_check_sees_a_violation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: an oracle importing the bridge's splitter or a test helper is named."""
    fake = tmp_path / "tests" / "oracles"
    fake.mkdir(parents=True)
    (fake / "test_bad.py").write_text("from mqtt_bridge.records import RowSplitter\n")
    (fake / "bad.py").write_text(
        "import json\nfrom mqtt_bridge.records import RowSplitter\n"
        "from tests.support.harness import expected_records\nfrom . import join\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "ORACLES", fake)
    monkeypatch.setattr(sys.modules[__name__], "REPO_ROOT", tmp_path)
    assert oracle_violations() == [
        "tests/oracles/bad.py imports mqtt_bridge.records",
        "tests/oracles/bad.py imports tests.support.harness",
    ]


#: The Spark jobs' entry modules: each is only its query, and none imports another.
SPARK_ENTRY_MODULES = {"spark_jobs.join", "spark_jobs.aggregate", "spark_jobs.single_pass"}


def own_imports(path: Path, package: str) -> tuple[set[str], list[str]]:
    """The package's own modules a file imports, and the lines of those imported inside a
    function without a comment that Spark's pickling needs them there."""
    source = path.read_text()
    lines = source.splitlines()
    modules: set[str] = set()
    lazy: list[str] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == package:
                named = {f"{package}.{alias.name}" for alias in node.names}
            elif node.module.startswith(package + "."):
                named = {node.module}
            else:
                named = set()
            modules.update(named)
            said = "pickling" in lines[node.lineno - 1] or "pickling" in lines[node.lineno - 2]
            if named and in_function and not said:
                lazy.append(f"{path.name}:{node.lineno}")
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(source, str(path)), False)
    return modules, lazy


def module_graph(package: str) -> tuple[dict[str, set[str]], list[str]]:
    graph, lazy = {}, []
    for path in sorted((REPO_ROOT / package).glob("*.py")):
        name = f"{package}.{path.stem}" if path.stem != "__init__" else package
        graph[name], found = own_imports(path, package)
        lazy += found
    return graph, lazy


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle, each found from its first module in sorted order."""
    found = []

    def walk(path: list[str]) -> None:
        for nxt in sorted(graph.get(path[-1], set())):
            if nxt == path[0]:
                found.append([*path, nxt])
            elif nxt not in path and nxt > path[0]:
                walk([*path, nxt])

    for start in sorted(graph):
        walk([start])
    return found


def test_spark_jobs_has_no_import_cycle_and_its_entry_modules_import_no_entry_module() -> None:
    graph, lazy = module_graph("spark_jobs")
    assert SPARK_ENTRY_MODULES <= graph.keys()
    assert cycles(graph) == []
    assert {entry: graph[entry] & SPARK_ENTRY_MODULES for entry in SPARK_ENTRY_MODULES} == {
        entry: set() for entry in SPARK_ENTRY_MODULES
    }
    assert lazy == [], "import the package's own modules at the top"


def test_the_cycle_check_sees_a_cycle_and_a_lazy_import(tmp_path: Path) -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    from spark_jobs import runner\n")
    assert own_imports(lazy, "spark_jobs") == ({"spark_jobs.runner"}, ["lazy.py:2"])
