"""``python -m explorer``: serve the explorer (see :func:`explorer.app.main`)."""

from explorer.app import main

if __name__ == "__main__":
    raise SystemExit(main())
