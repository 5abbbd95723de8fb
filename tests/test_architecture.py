"""The house rules on imports and sizes, read from the source with ``ast`` (nothing is imported
or run).

1. No mechanism family imports another family, nor the registry (``engine.mechanisms``, whose
   ``__init__`` imports every family). A family is a package under ``engine/mechanisms/``
   (``hdmm/``, ``residual/``, ...) or a module file there (``baselines.py``); ``base.py`` (the
   contract and ``register``) and ``views.py`` (the typed views every family returns) are
   shared by all. Planning mechanisms by name is a job for the layers above the families
   (``engine/workflows/``).
2. The explorer speaks to the engine's public face only: ``import engine`` or ``from engine
   import X`` with X in ``engine.__all__``, never a submodule (so no family's modules and no
   command-line module either).
3. No module imports a private name (``_x``) of another module: not ``from m import _x``,
   not ``m._x`` on an imported module, not a private module (``from numpy._core import``).
   Checked in ``engine/``, ``explorer/`` and ``benchmarks/``. Tests are exempt: a test may
   patch a module's private state for its own duration (``tests/engine/workflows/test_compare.py``
   registers throw-away mechanisms in ``base._REGISTRY`` through ``monkeypatch``), which no
   public API should offer.
4. The engine never imports Panel, HoloViews, hvPlot or Bokeh, nor the explorer; the one
   exception is HoloViews inside the functions of ``engine/plotting.py`` (``PLOTTING``).
5. No import cycle among the modules of ``engine/`` and ``explorer/``; an import inside a
   function or under ``if TYPE_CHECKING:`` counts like any other.
6. The engine's layers (``LAYERS``): a module imports only modules of its own layer or lower
   ones; ``engine/__init__.py`` (the public face) and ``engine/__main__.py`` (the entry point)
   are exempt, and every other engine module belongs to a layer.
7. No module over ``MAX_LINES`` lines (the ledger's Alembic migrations are exempt).
8. At most ``MAX_LOCAL_PROJECT_IMPORTS`` imports of project modules (``engine.*``,
   ``explorer.*``) inside functions in ``engine/`` and ``explorer/``: imports belong at the top
   of a module. Lazy imports of anything else (optional heavy dependencies such as dask, mbi,
   pyarrow, cvxpy) do not count.

Every check lists all offenders (``file:line: what``) in its failure message.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MECHANISMS = "engine.mechanisms"
#: Modules under engine/mechanisms/ that every family may use: they are not families.
SHARED_MECHANISM_MODULES = frozenset({"base", "views"})
#: Top-level packages the engine must never import.
ENGINE_FORBIDDEN = frozenset({"panel", "holoviews", "hvplot", "bokeh", "explorer"})
#: The one engine module that may import HoloViews, and only inside its functions: the
#: notebook ``.plot()`` methods of engine objects call it, so that ``import engine`` never
#: loads HoloViews (nor Bokeh through it) and the engine stays usable without them.
PLOTTING = ("engine.plotting", "holoviews")
#: The engine's layers, lowest first. A module may import its own layer and the ones below.
#: A name stands for the module and everything under it; a name without a module is skipped.
LAYERS = (
    # plotting and html_tables: presentation helpers that import no engine module
    ("foundation", ("engine.errors", "engine.progress", "engine.specfile", "engine.executor",
                    "engine.plotting", "engine.html_tables")),
    ("units", ("engine.domain", "engine.privacy")),
    ("noise and linear algebra", ("engine.noise", "engine.linalg")),
    ("workloads and data", ("engine.workloads", "engine.data")),
    ("analysis", ("engine.analysis",)),
    ("mechanisms", ("engine.mechanisms",)),
    ("scenario and ledger", ("engine.scenario", "engine.ledger")),
    ("workflows", ("engine.workflows",)),
    ("command line", ("engine.cli",)),
)
#: Engine modules outside the layers, and why.
LAYER_EXEMPT = {
    "engine": "the public face: re-exports names from every layer",
    "engine.__main__": "the entry point of python -m engine: runs the command line",
}
#: Longest module in lines, and the folders exempt from it (generated-style Alembic scripts).
MAX_LINES = 800
LINE_LIMIT_EXEMPT = ("engine/ledger/migrations/",)
#: Most imports of project modules inside functions, over engine/ and explorer/ together.
MAX_LOCAL_PROJECT_IMPORTS = 25
#: The project's own top-level packages (the module graph and the local-import budget).
PROJECT = ("engine", "explorer")
#: Folders whose modules must not import private names of other modules.
PRIVATE_NAME_ROOTS = ("engine", "explorer", "benchmarks")


@dataclass(frozen=True)
class Import:
    """One imported target: ``module`` and, for ``from module import name``, the name;
    ``local`` when the import statement sits inside a function."""

    module: str
    name: str | None
    line: int
    local: bool = False


def module_name(path: Path) -> str:
    """Dotted module name of a file below the repository root."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files(*folders: str) -> list[Path]:
    """Every Python file below the given top-level folders (sorted)."""
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py")
                  if "__pycache__" not in p.parts)


PATHS = {module_name(p): p for p in source_files("engine", "explorer", "benchmarks")}


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def resolve_from(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """Absolute module of ``from ... import`` (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(path: Path) -> Iterator[Import]:
    """Every import in the file, also those inside functions and under ``TYPE_CHECKING``.
    ``from p import m`` of a submodule m yields the module ``p.m`` (name None)."""
    module = module_name(path)
    package = path.name == "__init__.py"

    def visit(node: ast.AST, local: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(alias.name, None, child.lineno, local)
            elif isinstance(child, ast.ImportFrom):
                source = resolve_from(module, package, child)
                for alias in child.names:
                    sub = f"{source}.{alias.name}"
                    if sub in PATHS:
                        yield Import(sub, None, child.lineno, local)
                    else:
                        yield Import(source, alias.name, child.lineno, local)
            yield from visit(child, local or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    yield from visit(parse(path), False)


def family_of(module: str) -> str | None:
    """The mechanism family a module belongs to (None outside the families)."""
    parts = module.split(".")
    if parts[:2] != ["engine", "mechanisms"] or len(parts) < 3:
        return None
    return None if parts[2] in SHARED_MECHANISM_MODULES else parts[2]


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


def listed(offences: list[tuple[Path, int, str]]) -> list[str]:
    """``file:line: what`` for each distinct offence, in file and line order."""
    return [f"{where(path, line)}: {what}" for path, line, what in sorted(set(offences))]


def fail_with(offenders: list[str], rule: str) -> None:
    """Fail listing every offender (``file:line: what``), or pass when there is none."""
    if offenders:
        pytest.fail(f"{rule} ({len(offenders)}):\n  " + "\n  ".join(offenders), pytrace=False)


def cross_family_imports(paths: list[Path]) -> list[str]:
    """Offenders of rule 1 among ``paths``."""
    out = []
    for path in paths:
        own = family_of(module_name(path))
        if own is None:
            continue
        for imp in imports(path):
            other = family_of(imp.module)
            if other is not None and other != own:
                out.append((path, imp.line, f"family {own!r} imports {imp.module}"))
            elif imp.module == MECHANISMS:
                out.append((path, imp.line, f"family {own!r} imports the registry "
                            f"({imp.name or MECHANISMS}); plan other mechanisms by name in "
                            "engine/workflows/, above the families"))
    return listed(out)


def explorer_family_imports(paths: list[Path]) -> list[str]:
    """Offenders of rule 2 (a family's modules) among ``paths``."""
    out = []
    for path in paths:
        for imp in imports(path):
            family = family_of(imp.module)
            if family is not None:
                out.append((path, imp.line, f"imports {imp.module} (family {family!r}); use "
                            "the engine's public API"))
    return listed(out)


def within(module: str, prefix: str) -> bool:
    """True when ``module`` is ``prefix`` or a module under it."""
    return module == prefix or module.startswith(prefix + ".")


def engine_public_names() -> set[str]:
    """``engine.__all__``, read from ``engine/__init__.py`` without importing it."""
    for node in parse(ROOT / "engine" / "__init__.py").body:
        if (isinstance(node, ast.Assign) and any(isinstance(target, ast.Name)
                                                 and target.id == "__all__"
                                                 for target in node.targets)):
            return set(ast.literal_eval(node.value))
    raise AssertionError("engine/__init__.py has no __all__")


def explorer_past_the_face(paths: list[Path], public: set[str]) -> list[str]:
    """Offenders of rule 2 (past the public face) among ``paths``: an engine submodule, or a
    name ``engine`` does not list in ``__all__``."""
    out = []
    for path in paths:
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.Import):
                out += [(path, node.lineno, f"imports {a.name}; use the names of `engine`")
                        for a in node.names if within(a.name, "engine") and a.name != "engine"]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and within(
                    node.module or "", "engine"):
                if node.module != "engine":
                    out.append((path, node.lineno, f"imports from {node.module}; use the names "
                                "of `engine` (its __all__)"))
                else:
                    out += [(path, node.lineno, f"imports engine.{a.name}, which engine's "
                             "__all__ does not list") for a in node.names
                            if a.name not in public]
    return listed(out)


def explorer_cli_imports(paths: list[Path]) -> list[str]:
    """Offenders of rule 2 (the command line) among ``paths``."""
    return listed([(path, imp.line, f"imports {imp.module}; the command line is for the shell, "
                    "the engine's public API is for the explorer")
                   for path in paths for imp in imports(path) if within(imp.module, "engine.cli")])


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of attribute accesses on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def private_imports(paths: list[Path]) -> list[str]:
    """Offenders of rule 3 among ``paths``."""
    out = []
    for path in paths:
        module = module_name(path)
        tree = parse(path)
        bound: dict[str, str] = {}  # local name -> imported module
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                source = (resolve_from(module, path.name == "__init__.py", node)
                          if isinstance(node, ast.ImportFrom) else None)
                for name in [source] if source else [a.name for a in node.names]:
                    hidden = [part for part in name.split(".") if is_private(part)]
                    if hidden:
                        out.append((path, node.lineno, f"imports the private module {name}"))
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        bound[top] = top
            elif isinstance(node, ast.ImportFrom):
                source = resolve_from(module, path.name == "__init__.py", node)
                for alias in node.names:
                    if f"{source}.{alias.name}" in PATHS:
                        bound[alias.asname or alias.name] = f"{source}.{alias.name}"
                    elif is_private(alias.name) and source != module:
                        out.append((path, node.lineno, f"imports {alias.name} from {source}"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and is_private(node.attr)):
                continue
            chain = dotted(node.value)
            if chain is None:
                continue
            head, _, rest = chain.partition(".")
            if head not in bound:
                continue
            target = ".".join(filter(None, [bound[head], rest]))
            if target != module:
                out.append((path, node.lineno, f"uses {target}.{node.attr}"))
    return listed(out)


def forbidden_engine_imports(paths: list[Path]) -> list[str]:
    """Offenders of rule 4 among ``paths``: HoloViews is allowed only inside the functions
    of the ``PLOTTING`` module."""
    plotting, holoviews = PLOTTING
    out = []
    for path in paths:
        for imp in imports(path):
            top = imp.module.split(".")[0]
            if top not in ENGINE_FORBIDDEN:
                continue
            if top == holoviews and module_name(path) == plotting:
                if not imp.local:
                    out.append((path, imp.line, f"imports {imp.module} at module level; "
                                "import it inside the function that draws"))
                continue
            out.append((path, imp.line, f"imports {imp.module}"))
    return listed(out)


def project_graph(paths: list[Path]) -> dict[str, dict[str, tuple[Path, int]]]:
    """module -> {imported project module: (file, first line)} over ``paths``; an import of a
    name from a package is an edge to the package (its ``__init__``)."""
    graph: dict[str, dict[str, tuple[Path, int]]] = {}
    for path in paths:
        module = module_name(path)
        edges = graph.setdefault(module, {})
        for imp in imports(path):
            if imp.module in PATHS and imp.module != module and imp.module not in edges:
                edges[imp.module] = (path, imp.line)
    return graph


def strongly_connected(graph: dict[str, dict[str, tuple[Path, int]]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                on_stack.add(target)
                work.append((target, iter(sorted(graph.get(target, {})))))
            elif target in on_stack:
                low[node] = min(low[node], index[target])
    return sorted(found)


def cycle_through(graph: dict[str, dict[str, tuple[Path, int]]], component: list[str]
                  ) -> list[str]:
    """A shortest import cycle from the component's first module back to it."""
    start, members = component[0], set(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph.get(node, {})):
                if target not in members or target in came_from:
                    continue
                if target == start:  # back at the start: walk the predecessors home
                    cycle = [start, node]
                    while cycle[-1] != start:
                        cycle.append(came_from[cycle[-1]])
                    return cycle[::-1]
                came_from[target] = node
                following.append(target)
        frontier = following
    return [start]


def import_cycles(paths: list[Path]) -> list[str]:
    """Offenders of rule 5: one cycle per tangle, each step as ``file:line: a imports b``."""
    graph = project_graph(paths)
    out = []
    for component in strongly_connected(graph):
        cycle = cycle_through(graph, component)
        steps = [f"{where(*graph[a][b])}: {a} imports {b}" for a, b in pairwise(cycle)]
        out.append(f"{len(component)} modules tangled ({', '.join(component)}); a cycle:\n    "
                   + "\n    ".join(steps))
    return out


def layer_of(module: str) -> int | None:
    """Index of the module's layer in ``LAYERS`` (the longest matching name), or None."""
    best = None
    for number, (_, names) in enumerate(LAYERS):
        for name in names:
            if within(module, name) and (best is None or len(name) > len(best[1])):
                best = (number, name)
    return None if best is None else best[0]


def layer_offences(paths: list[Path]) -> list[str]:
    """Offenders of rule 6 among ``paths`` (engine modules)."""
    out = []
    for path in paths:
        module = module_name(path)
        if module in LAYER_EXEMPT:
            continue
        own = layer_of(module)
        if own is None:
            out.append((path, 1, f"{module} is in no layer; add it to LAYERS"))
            continue
        for imp in imports(path):
            if imp.module not in PATHS or not within(imp.module, "engine"):
                continue
            if imp.module in LAYER_EXEMPT:
                out.append((path, imp.line, f"{LAYERS[own][0]} imports {imp.module} (the "
                            "public face); import the module that defines the name"))
                continue
            target = layer_of(imp.module)
            if target is not None and target > own:
                out.append((path, imp.line, f"{LAYERS[own][0]} imports {imp.module} "
                            f"({LAYERS[target][0]}, a higher layer)"))
    return listed(out)


def long_modules(paths: list[Path]) -> list[str]:
    """Offenders of rule 7 among ``paths``."""
    out = []
    for path in paths:
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(LINE_LIMIT_EXEMPT):
            continue
        count = len(path.read_text(encoding="utf-8").splitlines())
        if count > MAX_LINES:
            out.append(f"{relative}: {count} lines")
    return out


def local_project_imports(paths: list[Path]) -> list[str]:
    """Rule 8: every import statement of a project module inside a function, one per line."""
    return listed([(path, imp.line, f"imports {imp.module} inside a function")
                   for path in paths for imp in imports(path)
                   if imp.local and imp.module.split(".")[0] in PROJECT])


# ----- the rules on this repository ---------------------------------------------------------


def test_no_family_imports_another_family() -> None:
    fail_with(cross_family_imports(source_files("engine")),
              "mechanism families importing another family")


#: Pages that score releases against the truth: they run them through ``engine.workflows.evaluate``.
#: Pages that score runs against the truth, and the engine function (of
#: engine/workflows/evaluate.py, on the public face) each must do it with.
EXPERIMENT_PAGES = {"explorer/pages/adaptive.py": "compare_adaptive",
                    "explorer/pages/census.py": "census_trials"}


def test_explorer_uses_no_family_internals() -> None:
    fail_with(explorer_family_imports(source_files("explorer")),
              "explorer modules importing a mechanism family")


def test_experiment_pages_run_through_the_engine() -> None:
    fail_with([page for page, name in EXPERIMENT_PAGES.items()
               if not any(imp.module == "engine" and imp.name == name
                          for imp in imports(ROOT / page))],
              "pages comparing against the truth without engine.workflows.evaluate's "
              "functions (compare_adaptive, census_trials)")


def test_no_private_names_across_modules() -> None:
    fail_with(private_imports(source_files(*PRIVATE_NAME_ROOTS)),
              "private names used outside their module")


def test_engine_never_imports_the_ui() -> None:
    fail_with(forbidden_engine_imports(source_files("engine")),
              "engine modules importing Panel / HoloViews / Bokeh / the explorer")


def test_explorer_imports_only_the_engines_public_face() -> None:
    fail_with(explorer_past_the_face(source_files("explorer"), engine_public_names()),
              "explorer modules reaching past the engine's public face")


def test_explorer_never_imports_the_command_line() -> None:
    fail_with(explorer_cli_imports(source_files("explorer")),
              "explorer modules importing engine.cli")


def test_no_import_cycles() -> None:
    fail_with(import_cycles(source_files(*PROJECT)), "import cycles")


def test_engine_layers_import_downwards() -> None:
    fail_with(layer_offences(source_files("engine")),
              "engine modules importing a higher layer (or outside the layers)")


def test_no_module_over_the_line_limit() -> None:
    fail_with(long_modules(source_files("engine", "explorer", "benchmarks")),
              f"modules over {MAX_LINES} lines")


def test_few_imports_of_project_modules_inside_functions() -> None:
    found = local_project_imports(source_files(*PROJECT))
    if len(found) > MAX_LOCAL_PROJECT_IMPORTS:
        fail_with(found, f"imports of project modules inside functions: {len(found)}, more "
                  f"than {MAX_LOCAL_PROJECT_IMPORTS}")


def test_allow_lists_name_existing_modules() -> None:
    """The allow-lists name real things, so a rename cannot leave a stale exemption behind."""
    families = {family_of(m) for m in PATHS} - {None}
    assert {"aim_grem", "baselines", "eigen_design", "hdmm", "hierarchical",
            "residual"} <= families
    for module in LAYER_EXEMPT:
        assert module in PATHS, f"LAYER_EXEMPT names a missing module {module}"
    for _, names in LAYERS:
        assert any(name in PATHS for name in names), f"a layer with no module: {names}"
    assert (ROOT / "engine/ledger/migrations").is_dir()
    for page in EXPERIMENT_PAGES:
        assert (ROOT / page).is_file(), f"EXPERIMENT_PAGES names a missing file {page}"


# ----- the checker itself, on small made-up trees ------------------------------------------


def write(tmp: Path, files: dict[str, str]) -> list[Path]:
    out = []
    for rel, text in files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        out.append(path)
    return out


@pytest.fixture
def fake_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the checker at a scratch tree (its module table is rebuilt per test)."""
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    return tmp_path


def use_tree(root: Path, files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    paths = write(root, files)
    monkeypatch.setitem(globals(), "PATHS", {module_name(p): p for p in paths})
    return paths


def test_checker_finds_each_kind_of_offence(fake_root: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    paths = use_tree(fake_root, {
        "engine/__init__.py": "",
        "engine/mechanisms/__init__.py": "from engine.mechanisms.base import get\n",
        "engine/mechanisms/base.py": "def get(name):\n    return name\n_REGISTRY = {}\n",
        "engine/mechanisms/views.py": "",
        "engine/mechanisms/baselines.py": "from engine.mechanisms.base import get\n",
        "engine/mechanisms/alpha/__init__.py": "",
        "engine/mechanisms/alpha/core.py": (
            "from engine.mechanisms.baselines import haar\n"        # 1: another family
            "from . import helpers\n"                                # same family: fine
            "from .helpers import _kernel\n"                         # 3: private name
            "def f():\n"
            "    from engine.mechanisms import get\n"                # 1: registry, unlisted
            "    import engine.mechanisms.base as b\n"
            "    return b._REGISTRY, helpers._kernel\n"),            # 3: twice
        "engine/mechanisms/alpha/helpers.py": "def _kernel():\n    return _kernel\n",
        "engine/plots.py": "import panel as pn\nfrom holoviews import Curve\n",  # 4: twice
        "explorer/__init__.py": "",
        "explorer/page.py": (
            "from engine.mechanisms import get, views\n"            # public: fine
            "from engine.mechanisms.alpha.core import f\n"          # 2
            "from numpy._core import umath\n"),                     # 3: private module
    }, monkeypatch)
    engine = [p for p in paths if p.parts[len(fake_root.parts)] == "engine"]
    explorer = [p for p in paths if p.parts[len(fake_root.parts)] == "explorer"]

    cross = cross_family_imports(engine)
    assert [line.split(": ", 1)[0] for line in cross] == [
        "engine/mechanisms/alpha/core.py:1", "engine/mechanisms/alpha/core.py:5"]
    assert "engine.mechanisms.baselines" in cross[0] and "registry (get)" in cross[1]

    found = explorer_family_imports(explorer)
    assert found == ["explorer/page.py:2: imports engine.mechanisms.alpha.core "
                     "(family 'alpha'); use the engine's public API"]

    private = private_imports(paths)
    assert sorted(private) == sorted([
        "engine/mechanisms/alpha/core.py:3: imports _kernel from engine.mechanisms.alpha.helpers",
        "engine/mechanisms/alpha/core.py:7: uses engine.mechanisms.base._REGISTRY",
        "engine/mechanisms/alpha/core.py:7: uses engine.mechanisms.alpha.helpers._kernel",
        "explorer/page.py:3: imports the private module numpy._core"])

    assert forbidden_engine_imports(engine) == ["engine/plots.py:1: imports panel",
                                                "engine/plots.py:2: imports holoviews"]


def test_checker_accepts_a_clean_tree(fake_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = use_tree(fake_root, {
        "engine/__init__.py": "",
        "engine/linalg.py": "def kron():\n    return 1\n",
        "engine/mechanisms/__init__.py": "from engine.mechanisms import alpha, beta\n",
        "engine/mechanisms/base.py": "class Plan:\n    def _strategy(self):\n        return 1\n",
        "engine/mechanisms/alpha.py": (
            "from engine.linalg import kron\nfrom engine.mechanisms.base import Plan\n"
            "def _own():\n    return _own\n"
            "class A(Plan):\n    def g(self):\n        return self._strategy(), _own()\n"),
        "engine/mechanisms/beta/__init__.py": "from engine.mechanisms.beta.core import B\n",
        "engine/mechanisms/beta/core.py": "from engine.mechanisms.base import Plan\nB = Plan\n",
        "explorer/__init__.py": "",
        "explorer/page.py": "import engine.mechanisms\nfrom engine.mechanisms.base import Plan\n",
    }, monkeypatch)
    engine = [p for p in paths if p.parts[len(fake_root.parts)] == "engine"]
    explorer = [p for p in paths if p.parts[len(fake_root.parts)] == "explorer"]
    assert cross_family_imports(engine) == []
    assert explorer_family_imports(explorer) == []
    assert private_imports(paths) == []
    assert forbidden_engine_imports(engine) == []
    assert explorer_cli_imports(explorer) == []
    assert import_cycles(paths) == []
    assert layer_offences(engine) == []
    assert long_modules(paths) == []
    assert local_project_imports(paths) == []


def test_checker_finds_cycles_layers_long_modules_and_local_imports(
        fake_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    long_text = "x = 1\n" * (MAX_LINES + 1)
    paths = use_tree(fake_root, {
        "engine/__init__.py": "from engine.domain import Domain\n",          # exempt
        "engine/__main__.py": "from engine.cli.main import main\n",          # exempt
        "engine/errors.py": "",
        "engine/domain.py": "from engine.errors import SpecError\nDomain = 1\n",
        "engine/privacy.py": "from engine.mechanisms.base import Plan\n",    # 6: upwards
        "engine/mechanisms/__init__.py": "",
        "engine/mechanisms/base.py": (
            "from engine.domain import Domain\n"
            "def plan():\n"
            "    from engine.privacy import Privacy\n"                       # 5 and 8
            "    import cvxpy\n"                                             # optional: fine
            "    return Privacy, cvxpy\n"),
        "engine/stray.py": "",                                               # 6: no layer
        "engine/linalg/__init__.py": "",
        "engine/linalg/big.py": long_text,                                   # 7
        "engine/ledger/__init__.py": "",
        "engine/ledger/migrations/versions/0001_start.py": long_text,        # exempt
        "engine/cli/__init__.py": "",
        "engine/cli/main.py": "def main():\n    from engine import domain\n    return domain\n",
        "engine/workflows/__init__.py": "",
        "engine/workflows/run.py": "from engine import Domain\n",           # 6: public face
        "engine/plotting.py": (
            "import holoviews as hv\n"                                      # 4: at top
            "def draw():\n"
            "    import holoviews as hv\n"                                  # inside: fine
            "    import bokeh\n"                                            # 4
            "    return hv, bokeh\n"),
        "explorer/__init__.py": "",
        "explorer/app.py": "import engine.cli.main\n",                      # 2: the CLI
        "explorer/a.py": "def f():\n    from explorer import b\n    return b\n",
        "explorer/b.py": "from explorer import a\n",                         # 5 with a.py
    }, monkeypatch)
    engine = [p for p in paths if p.parts[len(fake_root.parts)] == "engine"]
    explorer = [p for p in paths if p.parts[len(fake_root.parts)] == "explorer"]

    assert [line.split(";")[0] for line in explorer_cli_imports(explorer)] == [
        "explorer/app.py:1: imports engine.cli.main"]

    assert import_cycles(paths) == [
        "2 modules tangled (engine.mechanisms.base, engine.privacy); a cycle:\n"
        "    engine/mechanisms/base.py:3: engine.mechanisms.base imports engine.privacy\n"
        "    engine/privacy.py:1: engine.privacy imports engine.mechanisms.base",
        "2 modules tangled (explorer.a, explorer.b); a cycle:\n"
        "    explorer/a.py:2: explorer.a imports explorer.b\n"
        "    explorer/b.py:1: explorer.b imports explorer.a"]

    layers = layer_offences(engine)
    assert [line.split(": ", 1)[0] for line in layers] == [
        "engine/privacy.py:1", "engine/stray.py:1", "engine/workflows/run.py:1"]
    assert "units imports engine.mechanisms.base (mechanisms, a higher layer)" in layers[0]
    assert "engine.stray is in no layer" in layers[1]
    assert "imports engine (the public face)" in layers[2]

    assert long_modules(paths) == [f"engine/linalg/big.py: {MAX_LINES + 1} lines"]

    assert local_project_imports(paths) == [
        "engine/cli/main.py:2: imports engine.domain inside a function",
        "engine/mechanisms/base.py:3: imports engine.privacy inside a function",
        "explorer/a.py:2: imports explorer.b inside a function"]

    assert forbidden_engine_imports(engine) == [
        "engine/plotting.py:1: imports holoviews at module level; import it inside the "
        "function that draws",
        "engine/plotting.py:4: imports bokeh"]


def test_cycle_report_follows_a_longer_cycle(fake_root: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Three modules in a ring plus a chord: the shortest way back is reported, in order."""
    paths = use_tree(fake_root, {
        "explorer/__init__.py": "",
        "explorer/a.py": "from explorer import b\n",
        "explorer/b.py": "from explorer import c\nfrom explorer import d\n",
        "explorer/c.py": "from explorer import a\n",
        "explorer/d.py": "from explorer import c\n",
    }, monkeypatch)
    assert import_cycles(paths) == [
        "4 modules tangled (explorer.a, explorer.b, explorer.c, explorer.d); a cycle:\n"
        "    explorer/a.py:1: explorer.a imports explorer.b\n"
        "    explorer/b.py:1: explorer.b imports explorer.c\n"
        "    explorer/c.py:1: explorer.c imports explorer.a"]

