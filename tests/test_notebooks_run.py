"""Every notebook in ``notebooks/`` runs top to bottom: the test of record for the notebooks.

Each notebook is executed the way the docs build executes it (jupyter-cache's
``single_nb_execution``, the notebook's own directory as working directory) and the executed copy
is stored in the docs build's MyST-NB cache (``docs/_build/.jupyter_cache``, keyed by the code
cells and kernel). ``make test`` runs ``make docs`` after pytest, which then renders these
outputs instead of running every notebook a second time (about three minutes on the 2-core
machine). A notebook whose cell raises fails here with the cell's traceback.
"""

from __future__ import annotations

import fcntl
from pathlib import Path

import nbformat
import pytest
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from jupyter_cache.executors.utils import single_nb_execution

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
DOCS_CACHE = ROOT / "docs" / "_build" / ".jupyter_cache"
#: Seconds a single cell may run (the docs build's ``nb_execution_timeout``).
CELL_TIMEOUT = 600


def store_for_the_docs(notebook: nbformat.NotebookNode, path: Path, seconds: float) -> None:
    """Put an executed notebook into the docs build's cache; parallel test workers take turns
    (the cache is one SQLite database)."""
    DOCS_CACHE.mkdir(parents=True, exist_ok=True)
    with open(DOCS_CACHE.parent / ".jupyter_cache.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        get_cache(str(DOCS_CACHE)).cache_notebook_bundle(
            CacheBundleIn(notebook, str(path), data={"execution_seconds": seconds}),
            check_validity=False, overwrite=True)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_notebook_runs_top_to_bottom(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    result = single_nb_execution(notebook, cwd=str(path.parent), timeout=CELL_TIMEOUT,
                                 allow_errors=False)
    assert result.err is None, f"{path.name} failed:\n{result.exc_string}"
    assert any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")
    store_for_the_docs(notebook, path, result.time)
