"""Start the served explorer on 127.0.0.1 in a subprocess and wait until it answers.

One helper for everything that drives the app the way an operator serves it (the browser
tests, ``benchmarks/server_load.py``, ``benchmarks/explorer_presets.py``), and for an operator
who wants a throw-away server from a checkout, for instance to try ``panel serve`` options::

    from pathlib import Path
    from explorer.server.served import serving

    with serving(Path("server.log"), "--num-threads", "4") as app:
        print(app.url)          # http://127.0.0.1:PORT, answers /app
        print(app.process.pid)  # the panel serve process (for its memory, say)

The server is ``panel serve explorer/app.py --address 127.0.0.1 --port PORT`` on a free port,
run with this checkout on ``PYTHONPATH`` and a fresh, temporary data directory
(``DPWB_DATA_DIR``: budget ledger and release records), so it never touches a real ledger;
it is stopped and the directory removed when the block ends. Nothing here imports Panel.

Browsers: :func:`chromium_options` gives the launch options of Debian's Chromium for
Playwright (``playwright.chromium.launch(**chromium_options())``); Playwright's own browser
downloads are never used.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from explorer.server.command import (
    DEFAULT_ADDRESS,
    REPO_ROOT,
    serve_command,
    server_environment,
)

#: Where the test servers listen: this machine only.
ADDRESS = DEFAULT_ADDRESS
#: Seconds to wait for a fresh server to answer ``/app`` (imports and the first page build).
START_TIMEOUT_S = 90.0
#: The Chromium binary (Debian's), overridable with the ``CHROMIUM`` environment variable.
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
#: Flags for a headless Chromium that makes no connection beyond 127.0.0.1 on its own.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


class ServerStartError(RuntimeError):
    """The served app exited or did not answer in time; the message quotes its log."""


@dataclass(frozen=True)
class ServedApp:
    """A running ``panel serve explorer/app.py``: its base URL, process and log file."""

    url: str
    process: subprocess.Popen
    log_path: Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((ADDRESS, 0))
        return sock.getsockname()[1]


def wait_until_serving(
    url: str, process: subprocess.Popen, log_path: Path, timeout_s: float = START_TIMEOUT_S
) -> None:
    """Return once ``url`` answers 200; raise :class:`ServerStartError` if the process exits
    first or ``timeout_s`` seconds pass."""
    deadline = time.monotonic() + timeout_s
    last_error = ""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerStartError(
                f"the explorer exited with status {process.returncode} before serving; "
                f"log:\n{log_path.read_text(errors='replace')}"
            )
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError) as exc:
            last_error = str(exc)
        time.sleep(0.25)
    raise ServerStartError(
        f"the explorer did not answer {url} within {timeout_s:.0f} s ({last_error}); "
        f"log:\n{log_path.read_text(errors='replace')}"
    )


def stop(process: subprocess.Popen) -> None:
    """Terminate ``process`` and every process it started (``--num-procs`` forks, planning
    workers: the server leads its own process group); kill what has not ended 10 s later."""
    signal_group(process, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        signal_group(process, signal.SIGKILL)
        process.wait(timeout=10)
    # forked children that outlived their parent must not keep serving (or holding the port)
    signal_group(process, signal.SIGKILL)


def signal_group(process: subprocess.Popen, signum: int) -> None:
    """Send ``signum`` to the process group that ``process`` leads (gone already: nothing)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


@contextlib.contextmanager
def serving(
    log_path: Path,
    *options: str,
    prefix: str = "",
    unused_session_ms: int | None = None,
    timeout_s: float = START_TIMEOUT_S,
    environment: Mapping[str, str] | None = None,
) -> Iterator[ServedApp]:
    """Serve the explorer (with extra ``panel serve`` ``options``) until the block ends.

    Yields once ``/app`` answers. ``prefix`` is served through ``--prefix`` and is part of the
    yielded URL; the server's output goes to ``log_path``; ``unused_session_ms`` as in
    :func:`explorer.server.command.serve_command`; ``environment`` adds variables to the
    server's environment (e.g. ``EXPLORER_SESSION_IDLE_SECONDS``; ``PYTHONMALLOC`` is
    :data:`explorer.server.command.DEFAULT_ALLOCATOR` unless set). Raises
    :class:`ServerStartError` when it does not come up.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    port = free_port()
    data_dir = tempfile.mkdtemp(prefix="dpwb-served-")
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO_ROOT), DPWB_DATA_DIR=data_dir)
    # the allocator of python -m explorer, unless PYTHONMALLOC is set
    env = server_environment({**env, **(environment or {})})
    env.pop("DPWB_LEDGER_URL", None)
    command = serve_command(
        port,
        *options,
        *(("--prefix", prefix) if prefix else ()),
        unused_session_ms=unused_session_ms,
    )
    try:
        with open(log_path, "w") as log:
            process = subprocess.Popen(
                command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() ends its forks too
            )
        try:
            url = f"http://{ADDRESS}:{port}{prefix}"
            wait_until_serving(url + "/app", process, log_path, timeout_s)
            yield ServedApp(url=url, process=process, log_path=log_path)
        finally:
            stop(process)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def chromium_options() -> dict[str, Any]:
    """Keyword arguments of Playwright's ``chromium.launch`` for headless Debian Chromium.

    Raises :class:`FileNotFoundError` naming :data:`CHROMIUM` when it is not installed.
    """
    if not Path(CHROMIUM).exists():
        raise FileNotFoundError(
            f"no Chromium at {CHROMIUM}: run `make chromium` (or set CHROMIUM=path)"
        )
    return {"executable_path": CHROMIUM, "headless": True, "args": list(CHROMIUM_ARGS)}


#: The eps slider's range input (a :class:`explorer.components.slider.LabelledSlider`).
EPS_SLIDER = ".eps-slider input[type=range]"

#: The centre of a range input's handle ([x, y] in the page): where the value sits along the
#: track, inset by half of Chromium's 16-pixel handle at either end.
HANDLE_CENTRE_JS = """el => {
  const box = el.getBoundingClientRect();
  const handle = 16;
  const at = (el.value - el.min) / (el.max - el.min);
  return [box.left + handle / 2 + at * (box.width - handle), box.top + box.height / 2];
}"""


def drag_eps_slider(page: Any, pixels: float, attempts: int = 3) -> None:
    """Drag the eps slider's handle ``pixels`` to the right (left when negative) and release
    it, as a person would (a Playwright sync page; the browser tests and the benchmarks).

    A page still laying out parts built after load (a progress row, a chart) can move the
    handle between finding it and pressing on it; the press then misses, as a person's would,
    and like a person this tries again (at most ``attempts`` drags) until the slider moved."""
    slider = page.locator(EPS_SLIDER).first
    for _ in range(attempts):
        before = slider.input_value()
        x, y = slider.evaluate(HANDLE_CENTRE_JS)
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x + pixels, y, steps=4)
        page.mouse.up()
        if slider.input_value() != before:
            return
