"""The house rules on imports, read from the source with ``ast`` (nothing is imported or run).

1. No mechanism family imports another family. A family is a package under
   ``engine/mechanisms/`` (``hdmm/``, ``residual/``, ...) or a module file there
   (``baselines.py``); ``base.py`` (the contract and the registry) and ``views.py`` (the typed
   views every family returns) are shared by all. Planning *another* mechanism through the
   registry (``from engine.mechanisms import get``) is allowed only in the modules listed in
   ``REGISTRY_USERS``, each with its reason.
2. The explorer speaks to the engine's public API only: no explorer module imports a family's
   modules (``engine.mechanisms.<family>...``).
3. No module imports a private name (``_x``) of another module: not ``from m import _x``,
   not ``m._x`` on an imported module, not a private module (``from numpy._core import``).
   Checked in ``engine/``, ``explorer/`` and ``benchmarks/``. Tests are exempt: a test may
   patch a module's private state for its own duration (``tests/engine/workflows/test_compare.py``
   registers throw-away mechanisms in ``base._REGISTRY`` through ``monkeypatch``), which no
   public API should offer.
4. The engine never imports Panel, HoloViews, hvPlot or Bokeh, nor the explorer.

Every check lists all offenders (``file:line: what``) in its failure message.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MECHANISMS = "engine.mechanisms"
#: Modules under engine/mechanisms/ that every family may use: they are not families.
SHARED_MECHANISM_MODULES = frozenset({"base", "views"})
#: Family modules that plan other mechanisms by name through the registry, and why.
REGISTRY_USERS = {
    "engine.mechanisms.hierarchical.bridge": (
        "matrix_mechanism_rmse plans any registered mechanism (HDMM, Eigen-Design, identity) "
        "on the PGSR queries to compare it with the hierarchical release, by name"),
}
#: Top-level packages the engine must never import.
ENGINE_FORBIDDEN = frozenset({"panel", "holoviews", "hvplot", "bokeh", "explorer"})
#: Folders whose modules must not import private names of other modules.
PRIVATE_NAME_ROOTS = ("engine", "explorer", "benchmarks")


@dataclass(frozen=True)
class Import:
    """One imported target: ``module`` and, for ``from module import name``, the name."""

    module: str
    name: str | None
    line: int


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
    """Every import in the file, also those inside functions. ``from p import m`` of a
    submodule m yields the module ``p.m`` (name None)."""
    module = module_name(path)
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, None, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            source = resolve_from(module, path.name == "__init__.py", node)
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in PATHS:
                    yield Import(sub, None, node.lineno)
                else:
                    yield Import(source, alias.name, node.lineno)


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
        module = module_name(path)
        own = family_of(module)
        if own is None:
            continue
        for imp in imports(path):
            other = family_of(imp.module)
            if other is not None and other != own:
                out.append((path, imp.line, f"family {own!r} imports {imp.module}"))
            elif imp.module == MECHANISMS and module not in REGISTRY_USERS:
                out.append((path, imp.line, f"family {own!r} imports the registry "
                            f"({imp.name or MECHANISMS}); plan other mechanisms outside the "
                            "families, or add this module to REGISTRY_USERS with its reason"))
    return listed(out)


def explorer_family_imports(paths: list[Path]) -> list[str]:
    """Offenders of rule 2 among ``paths``."""
    out = []
    for path in paths:
        for imp in imports(path):
            family = family_of(imp.module)
            if family is not None:
                out.append((path, imp.line, f"imports {imp.module} (family {family!r}); use "
                            "the engine's public API"))
    return listed(out)


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
    """Offenders of rule 4 among ``paths``."""
    return listed([(path, imp.line, f"imports {imp.module}")
                   for path in paths for imp in imports(path)
                   if imp.module.split(".")[0] in ENGINE_FORBIDDEN])


# ----- the rules on this repository ---------------------------------------------------------


def test_no_family_imports_another_family() -> None:
    fail_with(cross_family_imports(source_files("engine")),
              "mechanism families importing another family")


#: Pages that score releases against the truth: they run them through ``engine.workflows.evaluate``.
EXPERIMENT_PAGES = ("explorer/pages/adaptive.py", "explorer/pages/census.py")


def test_explorer_uses_no_family_internals() -> None:
    fail_with(explorer_family_imports(source_files("explorer")),
              "explorer modules importing a mechanism family")


def test_experiment_pages_run_through_the_engine() -> None:
    fail_with([page for page in EXPERIMENT_PAGES
               if not any(imp.module == "engine.workflows.evaluate"
                          for imp in imports(ROOT / page))],
              "pages comparing against the truth without engine.workflows.evaluate")


def test_no_private_names_across_modules() -> None:
    fail_with(private_imports(source_files(*PRIVATE_NAME_ROOTS)),
              "private names used outside their module")


#: The one engine module allowed HoloViews, inside its functions only: ``.plot()`` methods
#: import it when a picture is asked for, so ``import engine`` never loads HoloViews.
PLOTTING_MODULE = ROOT / "engine" / "plotting.py"


def test_engine_never_imports_the_ui() -> None:
    fail_with(forbidden_engine_imports([p for p in source_files("engine")
                                        if p != PLOTTING_MODULE]),
              "engine modules importing Panel / HoloViews / Bokeh / the explorer")


def test_plotting_imports_holoviews_only_inside_functions() -> None:
    tree = parse(PLOTTING_MODULE)
    top = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    fail_with([f"engine/plotting.py:{node.lineno}: imports at module level"
               for node in top if any(alias.name.split(".")[0] in ENGINE_FORBIDDEN
                                      for alias in node.names)
               or (isinstance(node, ast.ImportFrom)
                   and (node.module or "").split(".")[0] in ENGINE_FORBIDDEN)]
              + [f"engine/plotting.py:{imp.line}: imports {imp.module}"
                 for imp in imports(PLOTTING_MODULE)
                 if imp.module.split(".")[0] in ENGINE_FORBIDDEN - {"holoviews"}],
              "engine/plotting.py importing a UI library at module level, or other than HoloViews")


def test_allow_lists_name_existing_modules() -> None:
    """The allow-lists name real things, so a rename cannot leave a stale exemption behind."""
    families = {family_of(m) for m in PATHS} - {None}
    assert {"aim_grem", "baselines", "eigen_design", "hdmm", "hierarchical",
            "residual"} <= families
    for module in REGISTRY_USERS:
        assert module in PATHS, f"REGISTRY_USERS names a missing module {module}"
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
