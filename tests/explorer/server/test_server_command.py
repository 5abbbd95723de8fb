"""The one ``panel serve explorer/app.py`` command line: ``python -m explorer`` and the test
servers build it the same way."""

from __future__ import annotations

import sys

import pytest

from explorer.server import command, served


def test_the_command_serves_the_app_file_of_this_checkout():
    assert command.APP_FILE.is_file() and command.APP_FILE.name == "app.py"
    assert (command.REPO_ROOT / "explorer" / "app.py") == command.APP_FILE
    assert served.REPO_ROOT == command.REPO_ROOT


def test_python_m_explorer_runs_panel_serve_with_every_option():
    line = command.command_line(["--port", "5100", "--num-threads", "4", "--basic-auth", "f"])
    assert line[:5] == [sys.executable, "-m", "panel", "serve", str(command.APP_FILE)]
    assert line[5:] == ["--address", "127.0.0.1", "--port", "5100",
                        "--websocket-max-message-size", "26732204", "--num-threads", "4",
                        "--basic-auth", "f"]


def test_test_servers_discard_unused_sessions_when_asked():
    line = command.serve_command(5200, "--prefix", "/dp", unused_session_ms=2000)
    assert line[5:] == ["--address", "127.0.0.1", "--port", "5200",
                        "--check-unused-sessions", "400", "--unused-session-lifetime", "2000",
                        "--websocket-max-message-size", "26732204", "--prefix", "/dp"]
    assert command.serve_command(5200, unused_session_ms=100)[10] == "100"  # checked >= 0.1 s


@pytest.mark.parametrize("argv", [["--port", "0"], ["--port", "70000"], ["--port", "x"]])
def test_python_m_explorer_rejects_bad_ports(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        command.command_line(argv)
    assert exit_info.value.code == 2
    assert "--port" in capsys.readouterr().err


def test_uploads_are_bounded_by_the_websocket_message_size(monkeypatch):
    monkeypatch.setenv("EXPLORER_MAX_UPLOAD_MB", "3")
    # a 3 MB file is 4 MB of base64, plus the message around it
    assert command.max_message_bytes(command.max_upload_bytes()) == 4_000_000 + 65_536
    line = command.serve_command(5200)
    assert line[line.index("--websocket-max-message-size") + 1] == "4065536"
    # an operator's own bound wins
    own = command.serve_command(5200, "--websocket-max-message-size=9")
    assert own.count("--websocket-max-message-size=9") == 1
    assert "--websocket-max-message-size" not in own
    monkeypatch.setenv("EXPLORER_MAX_UPLOAD_MB", "-1")
    with pytest.raises(SystemExit, match="EXPLORER_MAX_UPLOAD_MB: '-1'"):
        command.max_upload_bytes()


def test_the_served_process_uses_the_c_allocator_unless_told_otherwise():
    assert command.server_environment({"HOME": "/h"}) == {"HOME": "/h", "PYTHONMALLOC": "malloc"}
    assert command.server_environment({"PYTHONMALLOC": "pymalloc"}) == {
        "PYTHONMALLOC": "pymalloc"}
