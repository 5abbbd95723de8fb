"""Panel/HoloViews explorer for the engine: one ``pn.viewable.Viewer`` per page.

The explorer only holds engine objects and asks them questions; the maths lives in ``engine``.
Serve it with ``panel serve explorer/app.py`` (see :mod:`explorer.app`).
"""

from engine import __version__

__all__ = ["__version__"]
