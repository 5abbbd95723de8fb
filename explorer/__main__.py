"""``python -m explorer``: ``panel serve explorer/app.py`` (see
:func:`explorer.server.command.main`)."""

from explorer.server.command import main

if __name__ == "__main__":
    main()
