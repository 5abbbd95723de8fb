"""``python -m explorer``: ``panel serve explorer/app.py`` (see :func:`explorer.app.main`)."""

from explorer.app import main

if __name__ == "__main__":
    main()
