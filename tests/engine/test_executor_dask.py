"""Scale-out on Dask: a LocalCluster on 127.0.0.1 gives the serial results, cancels its
pending tasks, survives a killed worker and refuses bad scheduler addresses in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

distributed = pytest.importorskip("distributed")

from engine.cli.main import main  # noqa: E402 -- after the optional-dependency skip
from engine.domain import Domain  # noqa: E402
from engine.errors import Cancelled  # noqa: E402
from engine.executor import (  # noqa: E402
    LOCAL_CLUSTER_CONFIG,
    SerialExecutor,
    WorkerLost,
    dask_client,
    dask_executor,
    map_ordered,
    shared,
    worker_count,
)
from engine.mechanisms import get  # noqa: E402
from engine.mechanisms.residual import QuerySmasher  # noqa: E402
from engine.privacy import Privacy  # noqa: E402
from engine.workflows.compare import compare  # noqa: E402
from engine.workflows.evaluate import census_trials, synthetic_hierarchy  # noqa: E402
from engine.workloads import Workload  # noqa: E402
from engine.workloads.groups import PairQueries, PrefixMarginals  # noqa: E402

BETA1 = Privacy(noise="zcdp", rho=0.5)
CENSUS = "levels=1,2,4;groups=200;max_size=5;seed=0"
SPEC = """\
domain: {age: {size: 8, kind: numeric}, sex: 2}
workload: [{product: {age: prefix, sex: identity}}, {marginals: {k: 1}}]
privacy: {noise: gaussian, epsilon: 1.0, delta: 1.0e-6}
mechanisms: [identity, h2]
"""
#: Upper bound of every wait on the cluster: a hang fails the test instead of the suite.
WAIT_SECONDS = 90


def _cluster() -> Any:
    import cloudpickle

    # the workers cannot import this test module: ship its helpers by value
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        # health routes on a free port, not the shared 8787
        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
    )
    return distributed.Client(cluster), cluster


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    client, cluster = _cluster()
    yield client
    client.close()
    cluster.close()


def _mark_and_sleep(args: tuple[str, int]) -> int:
    folder, index = args
    Path(folder, str(index)).touch()
    time.sleep(0.5)
    return index


def _slow_square(x: int) -> int:
    time.sleep(0.5)
    return x * x


def _qs_workload() -> Workload:
    dom = Domain.from_sizes([8, 8, 9], ["x", "y", "z"], ["numeric"] * 3)
    return Workload(
        dom,
        (
            PrefixMarginals(k=1),
            PairQueries(attrs=("x", "y"), pair_kind="affine"),
            PairQueries(attrs=("y", "z"), pair_kind="abs_diff"),
        ),
    )


def test_the_cluster_runs_items_in_order(client: Any) -> None:
    executor = dask_executor(client)
    assert worker_count(executor) == 2
    seen: list[int] = []
    out = map_ordered(executor, abs, [-3, 1, -2], on_result=lambda i, r: seen.append(i))
    assert out == [3, 1, 2]
    assert sorted(seen) == [0, 1, 2]


def _weighted_total(args: tuple[np.ndarray, int]) -> float:
    values, weight = args
    return float(values.sum() * weight)


def test_a_shared_value_goes_to_every_worker_once(client: Any) -> None:
    # scattered once to both workers: the items carry a future, the workers get the array
    values = np.arange(1000.0)
    executor = dask_executor(client)
    data = shared(executor, values)
    assert isinstance(data, distributed.Future)
    assert len(client.who_has([data])[data.key]) == 2
    out = map_ordered(executor, _weighted_total, [(data, w) for w in range(6)])
    assert out == [499500.0 * w for w in range(6)]


def test_querysmasher_plan_is_the_serial_one(client: Any) -> None:
    W = _qs_workload()
    serial = QuerySmasher(executor=SerialExecutor()).plan(W, BETA1)
    remote = QuerySmasher(executor=dask_executor(client)).plan(W, BETA1)
    assert serial.fact("distinct_subproblems") >= 3
    assert remote.tse() == pytest.approx(serial.tse(), rel=1e-12, abs=0)
    assert np.allclose(remote.variances(), serial.variances(), rtol=1e-12, atol=0)


def test_compare_is_the_serial_one_in_mechanism_order(client: Any) -> None:
    W = _qs_workload()
    names = ["identity", "eigen-design", "querysmasher", "hdmm-opt0", "residual-planner", "hb"]
    serial = compare(W, BETA1, names)
    rows: list[str] = []
    remote = compare(
        W,
        BETA1,
        names,
        executor=dask_executor(client),
        on_row=lambda row: rows.append(row.mechanism),
    )
    assert rows == names
    assert [r.mechanism for r in remote.rows] == names
    for a, b in zip(serial.rows, remote.rows, strict=True):
        assert (a.rmse is None) == (b.rmse is None) and a.error == b.error
        if a.rmse is not None:
            assert b.rmse == pytest.approx(a.rmse, rel=1e-12, abs=0)
    assert remote.bound_rmse == pytest.approx(serial.bound_rmse, rel=1e-12)


def test_seeded_census_trials_do_not_depend_on_where_they_ran(client: Any) -> None:
    hierarchy = synthetic_hierarchy(CENSUS)
    serial = census_trials(hierarchy, ["cdp", "dp"], 0.5, 9, seed=4)
    shares: list[float] = []
    remote = census_trials(
        hierarchy,
        ["dp", "cdp"],
        0.5,
        9,
        seed=4,
        executor=dask_executor(client),
        on_trial=lambda variant, done, share: shares.append(share),
    )
    assert list(remote.evaluations) == list(serial.evaluations) == ["dp", "cdp"]
    assert shares[-1] == 1.0 and len(shares) > 2
    for variant, ev in serial.evaluations.items():
        other = remote.evaluations[variant]
        assert np.array_equal(other.rmse_trials, ev.rmse_trials)
        assert np.array_equal(other.violations_trials, ev.violations_trials)
        assert other.rmse == pytest.approx(ev.rmse, rel=1e-12)
        for a, b in zip(other.query_mse, ev.query_mse, strict=True):
            assert np.allclose(a, b, rtol=1e-12, atol=1e-12)
        assert np.array_equal(other.last_release.levels[-1], ev.last_release.levels[-1])


def test_hdmm_marginal_starts_on_the_cluster_are_the_serial_ones(client: Any) -> None:
    domain = Domain.from_sizes([6, 5, 4, 3], ["a", "b", "c", "d"])
    workload = Workload.marginals(domain, k=2)
    laplace = Privacy(noise="laplace", epsilon=1.0)
    serial = get("hdmm-marginals").plan(workload, laplace)
    remote = get("hdmm-marginals", executor=dask_executor(client)).plan(workload, laplace)
    assert remote.rmse() == pytest.approx(serial.rmse(), rel=1e-12, abs=0)
    assert np.allclose(remote.variances(), serial.variances(), rtol=1e-12, atol=0)
    assert serial.rmse() <= get("identity").plan(workload, laplace).rmse() * (1 + 1e-12)


def _environment(name: str) -> str | None:
    return os.environ.get(name)


def test_a_local_cluster_keeps_glibc_malloc_adaptive(monkeypatch: pytest.MonkeyPatch) -> None:
    """dask_client's workers run without Dask's MALLOC_TRIM_THRESHOLD_ (it pins glibc's mmap
    threshold, and numpy temporaries then fault their pages in anew on every call), with one
    BLAS thread each."""
    import cloudpickle

    # a default LocalCluster (the module's fixture) leaves the variable in this process too
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    client = dask_client(workers=1)
    try:
        assert list(client.run(_environment, "MALLOC_TRIM_THRESHOLD_").values()) == [None]
        assert list(client.run(_environment, "OPENBLAS_NUM_THREADS").values()) == ["1"]
    finally:
        client.close()
        client.cluster.close()


def test_the_readme_configures_dask_workers_as_local_clusters_are() -> None:
    """The configuration file the "Running on a cluster" page (docs/cluster.md) writes for
    ``dask worker`` holds exactly the settings of the local clusters started here."""
    import dask
    import yaml

    readme = (Path(__file__).resolve().parents[2] / "docs" / "cluster.md").read_text(
        encoding="utf-8")
    body = readme.split("cat > dask-config/dpwb.yaml <<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]
    config = yaml.safe_load(body)
    assert {key: dask.config.get(key, config=config) for key in LOCAL_CLUSTER_CONFIG} == (
        LOCAL_CLUSTER_CONFIG
    )


def test_cancel_stops_the_remote_tasks(client: Any, tmp_path: Path) -> None:
    def stop(index: int, result: int) -> None:
        raise Cancelled("stop after the first result")

    items = [(str(tmp_path), i) for i in range(12)]
    with pytest.raises(Cancelled):
        map_ordered(dask_executor(client), _mark_and_sleep, items, on_result=stop)
    deadline = time.monotonic() + WAIT_SECONDS
    while any(client.processing().values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(client.processing().values())
    started = len(list(tmp_path.iterdir()))
    assert 1 <= started <= 6  # the running ones and what a worker had queued, not all 12


@pytest.mark.slow
def test_a_killed_worker_gives_a_retried_result_or_a_clear_error() -> None:
    client, cluster = _cluster()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = map_ordered(dask_executor(client), _slow_square, range(4))
        except WorkerLost as exc:
            outcome["error"] = exc

    try:
        pids = client.run(os.getpid)
        runner = threading.Thread(target=run, daemon=True)
        runner.start()
        deadline = time.monotonic() + WAIT_SECONDS
        while not any(client.processing().values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(next(iter(pids.values())), signal.SIGKILL)
        runner.join(WAIT_SECONDS)
        assert not runner.is_alive(), "the map hung after a worker was killed"
        if "error" in outcome:
            assert "worker process died" in str(outcome["error"])
        else:
            assert outcome["result"] == [0, 1, 4, 9]
    finally:
        client.close()
        cluster.close()


@pytest.mark.parametrize(
    ("flags", "env", "message"),
    [
        (
            ["--scheduler", "tcp://127.0.0.1:port"],
            {},
            "error: --scheduler: 'tcp://127.0.0.1:port' is not a scheduler address like "
            "tcp://127.0.0.1:8786 (invalid literal for int() with base 10: 'port')",
        ),
        (
            [],
            {"DPWB_SCHEDULER": "127.0.0.1:1"},
            "error: DPWB_SCHEDULER: cannot reach the Dask scheduler '127.0.0.1:1' within 5 s "
            "([Errno 111] Connection refused)",
        ),
        (["--workers", "0"], {}, "error: --workers: must be >= 1, got 0"),
        (
            ["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"],
            {},
            "error: --workers: give --workers or --scheduler, not both",
        ),
    ],
)
def test_bad_cluster_flags_exit_2_with_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    flags: list[str],
    env: dict[str, str],
    message: str,
) -> None:
    spec = tmp_path / "scenario.yaml"
    spec.write_text(SPEC)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["compare", str(spec), *flags]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [message]


def test_an_unreachable_scheduler_exits_2_with_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "scenario.yaml"
    spec.write_text(SPEC)
    proc = subprocess.run(
        [sys.executable, "-m", "engine", "census", "--scheduler", "tcp://127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "error: --scheduler: cannot reach the Dask scheduler 'tcp://127.0.0.1:1' within 5 s "
        "([Errno 111] Connection refused)"
    ]


def test_cli_on_a_scheduler_prints_the_serial_document(
    client: Any, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    spec = tmp_path / "scenario.yaml"
    spec.write_text(SPEC)
    assert main(["compare", str(spec), "--json"]) == 0
    serial = json.loads(capsys.readouterr().out)
    assert main(["compare", str(spec), "--json", "--scheduler", client.scheduler.address]) == 0
    remote = json.loads(capsys.readouterr().out)
    for a, b in zip(serial["results"], remote["results"], strict=True):
        assert a["mechanism"] == b["mechanism"]
        assert b["rmse"] == pytest.approx(a["rmse"], rel=1e-12)
    args = ["census", "--synthetic", CENSUS, "--trials", "4", "--seed", "3", "--json"]
    assert main(args) == 0
    serial_census = json.loads(capsys.readouterr().out)
    assert main([*args, "--scheduler", client.scheduler.address]) == 0
    remote_census = json.loads(capsys.readouterr().out)
    assert remote_census["rmse"] == pytest.approx(serial_census["rmse"], rel=1e-12)
    assert remote_census["rmse_by_level"] == pytest.approx(
        serial_census["rmse_by_level"], rel=1e-12
    )


def _people(tmp_path: Path) -> tuple[Path, Path]:
    spec = tmp_path / "scenario.yaml"
    spec.write_text(SPEC)
    data = tmp_path / "people.csv"
    rng = np.random.default_rng(4)
    rows = zip(rng.integers(0, 8, 300), rng.integers(0, 2, 300), strict=True)
    data.write_text("age,sex\n" + "".join(f"{a},{s}\n" for a, s in rows))
    return spec, data


@pytest.mark.parametrize("mechanism", ["h2", "hdmm", "querysmasher"])
def test_run_planned_on_a_scheduler_releases_the_serial_answers(
    client: Any, tmp_path: Path, capsys: pytest.CaptureFixture, mechanism: str
) -> None:
    spec, data = _people(tmp_path)
    args = ["run", str(spec), "--data", str(data), "--mechanism", mechanism, "--seed", "7"]
    docs = []
    for flags in ([], ["--scheduler", client.scheduler.address], ["--workers", "2"]):
        out = tmp_path / f"out{len(docs)}"
        assert main([*args, *flags, "--json", "--out", str(out)]) == 0
        docs.append(json.loads(capsys.readouterr().out))
        docs[-1]["tables"] = [
            pd.read_csv(out / f"{name}.csv", comment="#")
            for name in ("prefix_age_x_identity_sex", "age", "sex")
        ]
    serial = docs[0]
    # age x sex prefixes, then the 1-way tables
    assert [len(t) for t in serial["tables"]] == [8 * 2, 8, 2]
    for remote in docs[1:]:
        assert remote["release"]["expected_rmse"] == pytest.approx(
            serial["release"]["expected_rmse"], rel=1e-12, abs=0
        )
        for mine, theirs in zip(remote["tables"], serial["tables"], strict=True):
            assert np.allclose(mine["raw"], theirs["raw"], rtol=1e-12, atol=1e-9)
            assert np.allclose(mine["margin_95"], theirs["margin_95"], rtol=1e-9, atol=0)
            assert mine["estimate"].tolist() == theirs["estimate"].tolist()
        assert remote["errors"] == pytest.approx(serial["errors"], rel=1e-9)


def test_run_on_an_unreachable_scheduler_fails_before_the_ledger_note(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    spec, data = _people(tmp_path)
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    args = ["run", str(spec), "--data", str(data), "--mechanism", "identity", "--ledger", ledger]
    assert main(args) == 0  # without the flag the ledger notes on stderr what it charged
    assert capsys.readouterr().err.splitlines() == [
        "note: evaluation only: nothing is written, so nothing is released; the budget ledger "
        "is not charged"
    ]
    assert main([*args, "--scheduler", "tcp://127.0.0.1:1"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "error: --scheduler: cannot reach the Dask scheduler 'tcp://127.0.0.1:1' within 5 s "
        "([Errno 111] Connection refused)"
    ]
    assert not (tmp_path / "ledger.sqlite").exists()
