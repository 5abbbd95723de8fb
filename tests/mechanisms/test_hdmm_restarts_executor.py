"""HDMM p-Identity restarts on an executor: the restart rule launches the same starts as in
process (the first one alone, the further ones it admits as batches), so the plan is the
serial one."""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterator
from concurrent.futures import Executor

import numpy as np
import pytest

from engine.domain import Domain
from engine.executor import local_pool
from engine.mechanisms import get
from engine.mechanisms.hdmm.blas import blas_threads
from engine.mechanisms.hdmm.laplace_opt0 import optimize_pidentity
from engine.mechanisms.hdmm.opt_marginals import opt_marginals
from engine.privacy import Privacy
from engine.workloads import Product, Workload
from engine.workloads.blocks import IdentityBlock, PrefixBlock

LAPLACE = Privacy(noise="laplace", epsilon=1.0)
#: the p-Identity search's module (its rules' constants and executor hook are patched)
LAPLACE_OPT0 = importlib.import_module("engine.mechanisms.hdmm.laplace_opt0")
MARGINALS = importlib.import_module("engine.mechanisms.hdmm.opt_marginals")


@pytest.fixture(scope="module")
def pool() -> Iterator[Executor]:
    with blas_threads(1), local_pool(2) as executor:
        yield executor


@pytest.mark.parametrize(
    ("seed", "agree", "restarts"), [(2, False, 40), (1, False, 40), (2, True, 24)]
)
def test_restart_batches_give_the_serial_starts(
    pool: Executor, monkeypatch: pytest.MonkeyPatch, seed: int, agree: bool, restarts: int
) -> None:
    """Prefixes on 128 cells, p = 8 (the work budget admits about 24 starts). With the budget
    alone (agreement switched off): seed 2's further starts are shorter than its first, so a
    second batch runs (25 starts); seed 1's are longer, so the batch runs starts the rule then
    drops (28 kept). With agreement (the default), seed 2 stops after 9 starts, dropping
    the rest of its batch of 20. Either way: the serial starts, losses and Theta."""
    if not agree:
        monkeypatch.setattr(LAPLACE_OPT0, "AGREE_RTOL", 0.0)
    V = PrefixBlock(128).gram_array()
    with blas_threads(1):
        serial_theta, serial_f, serial_losses = optimize_pidentity(
            V, 8, restarts=restarts, seed=seed
        )
    batches: list[int] = []
    map_ordered = LAPLACE_OPT0.map_ordered

    def counted(executor, fn, tasks, **kwargs):  # noqa: ANN001, ANN003 -- a spy
        batches.append(len(tasks))
        return map_ordered(executor, fn, tasks, **kwargs)

    monkeypatch.setattr(LAPLACE_OPT0, "map_ordered", counted)
    with blas_threads(1):
        theta, f, losses = optimize_pidentity(V, 8, restarts=restarts, seed=seed, executor=pool)
    assert len(serial_losses) == {(2, False): 25, (1, False): 28, (2, True): 9}[seed, agree]
    assert losses == serial_losses
    assert f == pytest.approx(serial_f, rel=1e-12, abs=0)
    assert np.allclose(theta, serial_theta, rtol=1e-12, atol=1e-12)
    assert serial_f == pytest.approx(min(serial_losses), rel=0.01)
    if (seed, agree) == (2, False):
        assert batches == [20, 3]
    else:
        assert len(batches) == 1 and batches[0] > len(serial_losses) - 1


def test_hdmm_plans_with_restarts_on_a_pool_are_the_serial_plans(pool: Executor) -> None:
    domain = Domain.from_sizes([64, 2], ["age", "sex"], ["numeric", "categorical"])
    workload = Workload(domain, (Product((("age", PrefixBlock(64)), ("sex", IdentityBlock(2)))),))
    for name in ("hdmm-opt0", "hdmm-kron", "hdmm"):
        serial = get(name).plan(workload, LAPLACE)
        remote = get(name, executor=pool).plan(workload, LAPLACE)
        assert remote.rmse() == pytest.approx(serial.rmse(), rel=1e-12, abs=0), name
        assert np.allclose(remote.variances(), serial.variances(), rtol=1e-12, atol=0), name
    assert 5.0 < serial.rmse() < 8.0  # hdmm: between the prefix optimum and identity


def test_marginal_weight_starts_on_a_pool_are_the_serial_starts(
    pool: Executor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPT_M, Laplace, on HDMM Table 3's 2 x 3 x 4 x 5 domain (all 2-way marginals): the
    closed-form start and 64 random ones (small domains get more), run as 4 batches on two
    workers; every start's loss, the weights and the loss are the serial ones."""
    shape = (2, 3, 4, 5)
    w = np.zeros(16)
    w[[0b0011, 0b0101, 0b0110, 0b1001, 0b1010, 0b1100]] = 1.0  # the six 2-way marginals
    with blas_threads(1):
        serial = opt_marginals(w, shape, 1, restarts=10, seed=3)
    batches: list[int] = []
    map_ordered = MARGINALS.map_ordered

    def counted(executor, fn, tasks, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003 -- a spy
        batches.extend(len(task[2]) for task in tasks)
        return map_ordered(executor, fn, tasks, *args, **kwargs)

    monkeypatch.setattr(MARGINALS, "map_ordered", counted)
    with blas_threads(1):
        remote = opt_marginals(w, shape, 1, restarts=10, seed=3, executor=pool)
    assert batches == [16, 16, 17, 16]
    losses = serial.info["start_losses"]
    assert len(losses) == 65
    assert remote.info["start_losses"] == losses
    assert remote.loss == pytest.approx(serial.loss, rel=1e-12, abs=0)
    assert np.allclose(remote.theta, serial.theta, rtol=1e-12, atol=1e-15)
    assert serial.loss == pytest.approx(min(losses), rel=1e-9)
    assert min(losses) < losses[0]  # a random start beats the closed-form one here


def test_hdmm_marginals_plan_on_a_pool_is_the_serial_plan(pool: Executor) -> None:
    domain = Domain.from_sizes([6, 5, 4], ["a", "b", "c"])
    workload = Workload.marginals(domain, k=1)
    serial = get("hdmm-marginals").plan(workload, LAPLACE)
    remote = get("hdmm-marginals", executor=pool).plan(workload, LAPLACE)
    assert remote.rmse() == pytest.approx(serial.rmse(), rel=1e-12, abs=0)
    assert np.allclose(remote.variances(), serial.variances(), rtol=1e-12, atol=0)
    # below the three 1-way marginals with a third of the budget each (sqrt(2) * 3 per count)
    assert 0.9 * 3 * math.sqrt(2) < serial.rmse() < 0.95 * 3 * math.sqrt(2)
