"""Fixtures shared by every test."""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from xdist.scheduler import LoadScopeScheduling

REPO_ROOT = Path(__file__).resolve().parents[1]
#: A fixture of one of these scopes is shared by the tests of a file (or of a class).
SHARED_SCOPE = re.compile(r"""scope\s*=\s*["'](class|module|package)["']""")
#: Rough seconds of a browser test, a ``slow`` test and any other, to start the longest
#: units of work first (the longest-first rule: the last unit to finish is a short one).
BROWSER_SECONDS, SLOW_SECONDS, OTHER_SECONDS = 20.0, 20.0, 0.5


@functools.cache
def keeps_its_tests_together(path: str) -> bool:
    """True for a test file (``tests/...py``, from the repository root) whose tests run on one
    worker: a browser-test file (it starts its servers once) and a file that, or whose
    ``conftest.py``, defines a class-, module- or package-scoped fixture (computed once)."""
    file = REPO_ROOT / path
    if file.is_relative_to(REPO_ROOT / "tests" / "ui"):
        return True
    sources = [file, *(folder / "conftest.py" for folder in file.parents
                       if folder.is_relative_to(REPO_ROOT / "tests"))]
    return any(SHARED_SCOPE.search(source.read_text()) for source in sources
               if source.is_file())


class FileOrTestScheduling(LoadScopeScheduling):
    """``make test``'s units of work (``-n 2 --dist loadgroup --no-loadscope-reorder``): the
    tests of a file that keeps them together (:func:`keeps_its_tests_together`) are one unit,
    every other test is a unit of its own, so heavy files (paper tables, notebooks) spread
    over both workers. (xdist's own ``loadgroup`` reads ``xdist_group`` marks through a node
    id that pytest 9 no longer lets it change, so its groups are not formed.)"""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return path if keeps_its_tests_together(path) else nodeid


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadScopeScheduling | None:
    """``--dist loadgroup`` schedules :class:`FileOrTestScheduling`'s units."""
    return FileOrTestScheduling(config, log) if config.getvalue("dist") == "loadgroup" else None


def _seconds(item: pytest.Item) -> float:
    """The rough cost of one test (see BROWSER_SECONDS)."""
    if item.get_closest_marker("ui") is not None:
        return BROWSER_SECONDS
    return SLOW_SECONDS if item.get_closest_marker("slow") is not None else OTHER_SECONDS


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker under ``--dist loadgroup`` (xdist sets the worker's ``loadgroup``
    option): the tests in the order their units (:class:`FileOrTestScheduling`) should start,
    longest first by the rough costs above, so the run ends on short ones. The controller
    keeps this order (``--no-loadscope-reorder``). Otherwise nothing changes."""
    if not config.getoption("loadgroup", False):
        return
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        units.setdefault(path if keeps_its_tests_together(path) else item.nodeid,
                         []).append(item)
    ordered = sorted(units.values(), key=lambda unit: -sum(_seconds(item) for item in unit))
    items[:] = [item for unit in ordered for item in unit]


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator so that every random test is reproducible."""
    return np.random.default_rng(0)


@pytest.fixture(autouse=True)
def ledger_data_dir(tmp_path_factory: pytest.TempPathFactory,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test's budget ledger lives in a temporary data directory, never the user's."""
    monkeypatch.setenv("DPWB_DATA_DIR", str(tmp_path_factory.mktemp("dpwb-data")))
    monkeypatch.delenv("DPWB_LEDGER_URL", raising=False)


def _alive(pid: int) -> bool:
    """True while process ``pid`` runs (a zombie counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.fixture
def children_outlive_a_killed_parent() -> Callable[[str], list[int]]:
    """Run a Python ``script`` that prints its worker processes' ids on one line and then
    waits; kill it with SIGKILL (no exit handler runs) and return the ids of the workers that
    are still running 60 s later (an empty list is what every pool should give)."""

    def run(script: str) -> list[int]:
        parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                  text=True, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
        with parent:
            workers = [int(pid) for pid in parent.stdout.readline().split()]
            assert workers and all(_alive(pid) for pid in workers)
            parent.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 60
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        return [pid for pid in workers if _alive(pid)]

    return run


# ------------------------------------------------------------------- throw-away PostgreSQL
def _postgres_bin() -> Path:
    """The newest installed PostgreSQL's bin directory (Debian: /usr/lib/postgresql/N/bin;
    `make test` installs the package when it is missing)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0)
    if not found:
        pytest.fail("PostgreSQL is not installed: `make test` installs Debian's postgresql "
                    "package (apt-get install postgresql)")
    return found[-1].parent


def _as_server_user(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run the command as the `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A throw-away PostgreSQL server for this test session: ``initdb`` in a temporary
    directory (outside pytest's, which the ``postgres`` user cannot enter when the tests run
    as root), listening on 127.0.0.1 at a free port only, trust authentication for the
    ``dpwb`` role; stopped (fast shutdown) and removed at the end. Yields the server's
    SQLAlchemy URL prefix ``postgresql+psycopg://dpwb@127.0.0.1:PORT``."""
    bin_dir = _postgres_bin()
    root = Path(tempfile.mkdtemp(prefix="dpwb-postgres-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    def run(*command: str) -> None:
        done = subprocess.run(_as_server_user([str(bin_dir / command[0]), *command[1:]]),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            shutil.rmtree(root, ignore_errors=True)
            pytest.fail(f"PostgreSQL {command[0]} failed: {done.stdout.strip()[-500:]}")

    run("initdb", "-D", str(data), "-U", "dpwb", "--auth=trust", "-E", "UTF8", "--no-sync")
    options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {sockets} -c fsync=off "
               f"-c max_connections=100")
    run("pg_ctl", "-D", str(data), "-w", "-t", "60", "-o", options, "-l",
        str(root / "server.log"), "start")
    try:
        yield f"postgresql+psycopg://dpwb@127.0.0.1:{port}"
    finally:
        subprocess.run(_as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast",
                                        "-w", "stop"]), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: str, request: pytest.FixtureRequest) -> str:
    """A fresh, empty database on the throw-away server for one test (its SQLAlchemy URL)."""
    name = "t_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:50]
    admin = sa.create_engine(f"{postgres_server}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return f"{postgres_server}/{name}"
