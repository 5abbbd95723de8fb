"""Explorer pages: each is a ``pn.viewable.Viewer`` that renders inline in a notebook too."""
