"""What the served process does once before its first page: fewer objects for the garbage
collector to walk, and fewer full collections (issue 30 item 3: a page in under 0.2 s)."""

from __future__ import annotations

import gc
import subprocess
import sys

import panel as pn
from panel.config import panel_extension

from explorer.server import process
from explorer.server.command import REPO_ROOT


def test_full_collections_wait_for_fifty_middle_generation_collections():
    before = gc.get_threshold()
    try:
        process.collect_fully_less_often()
        assert gc.get_threshold() == (before[0], before[1], process.FULL_COLLECTION_EVERY)
        assert process.FULL_COLLECTION_EVERY == 50
    finally:
        gc.set_threshold(*before)


def test_pages_do_not_rebuild_every_component_signature(monkeypatch):
    rebuilt = []
    monkeypatch.setattr(panel_extension, "_apply_signatures", lambda self: rebuilt.append(1))
    monkeypatch.setattr(pn.config, "apply_signatures", True)
    pn.extension()
    assert rebuilt == [1]  # Panel's default: on every call
    process.skip_signatures()
    pn.extension()
    pn.extension()
    assert rebuilt == [1]


#: In a fresh interpreter (Panel's first ``pn.extension`` call happens once per process):
#: load what loads on demand, freeze, then count the objects one page's extension call adds.
FIRST_EXTENSION = """
import gc, inspect
import panel as pn
import explorer.components.matrix_picture  # HoloViews, imported by the app's pages
from explorer.server import process
from explorer.server.command import REPO_ROOT
process.skip_signatures()
process.load_parts_loaded_on_demand()
gc.collect()
gc.freeze()
pn.extension(notifications=True, browser_info=False)
gc.collect()
print(sum(isinstance(o, inspect.Parameter) for o in gc.get_objects()))
"""


def test_the_first_extension_call_builds_its_objects_before_the_heap_is_frozen():
    # Without the call in load_parts_loaded_on_demand, the page's call switches HoloViews to
    # its Bokeh backend after the freeze: 9,684 signature parameters, walked by every full
    # collection.
    result = subprocess.run([sys.executable, "-c", FIRST_EXTENSION], capture_output=True,
                            text=True, timeout=120, cwd=REPO_ROOT, check=True)
    assert int(result.stdout.split()[-1]) == 0
