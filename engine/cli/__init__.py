"""``python -m engine ...``: the command line (``main``), its shared flags, census and budget."""
