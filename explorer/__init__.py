"""Panel/HoloViews explorer for the engine: one ``pn.viewable.Viewer`` per page.

The explorer only holds engine objects and asks them questions; the maths lives in ``engine``.
Serve it with ``python -m explorer`` (see :func:`explorer.app.main`).
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
