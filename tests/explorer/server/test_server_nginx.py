"""The nginx configuration of the several machines recipe: what docs/serving.md shows is what
``python -m explorer.server.nginx`` prints, nginx accepts it, and bad addresses are refused
with one line naming the field."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from explorer.server import nginx

DOC = Path(__file__).resolve().parents[3] / "docs" / "serving.md"
DOC_ARGUMENTS = ["--listen", "0.0.0.0:80", "--run-dir", "/var/lib/dpwb-nginx",
                 "--backend", "10.0.0.11:5006", "--backend", "10.0.0.12:5006"]


def test_the_documented_configuration_is_the_generated_one(capsys):
    nginx.main(DOC_ARGUMENTS)
    printed = capsys.readouterr().out
    blocks = re.findall(r"```nginx\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert printed in blocks
    assert printed == nginx.render("0.0.0.0:80", ["10.0.0.11:5006", "10.0.0.12:5006"],
                                   "/var/lib/dpwb-nginx")
    assert printed.count("        server 10.0.0.1") == 2  # both, round robin, no ip_hash
    assert "ip_hash" not in printed and "sticky" not in printed


def test_nginx_accepts_the_configuration(tmp_path):
    if not Path(nginx.NGINX).exists():
        pytest.fail(f"no nginx at {nginx.NGINX}: run `make nginx`")
    config = tmp_path / "nginx.conf"
    config.write_text(nginx.render("127.0.0.1:8080", ["127.0.0.1:5007", "127.0.0.1:5008"],
                                   tmp_path))
    checked = subprocess.run([nginx.NGINX, "-t", "-e", str(tmp_path / "error.log"), "-c",
                              str(config)], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    assert "syntax is ok" in checked.stderr


@pytest.mark.parametrize(("listen", "backends", "field"), [
    ("127.0.0.1:8080", [], "backend"),
    ("127.0.0.1:8080", ["10.0.0.11"], "backend"),
    ("127.0.0.1:80 80", ["10.0.0.11:5006"], "listen"),
    ("127.0.0.1:0", ["10.0.0.11:5006"], "listen"),
])
def test_a_bad_address_is_refused_naming_the_field(listen, backends, field):
    with pytest.raises(ValueError, match=f"^{field}: "):
        nginx.render(listen, backends, "/tmp/run")
