"""AIM+PGM end to end on a tiny domain (runs only where the optional ``mbi`` package is
installed): the budget is spent exactly, the released marginals are those of one fitted model
(non-negative, one total, shared margins equal), seeds repeat and fresh entropy does not."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from engine.data import Dataset
from engine.domain import Domain
from engine.errors import Cancelled
from engine.mechanisms.aim_grem.pgm import PGM_NOISE_RECORD, aim_pgm
from engine.progress import Progress

pytest.importorskip("mbi")
#: one AIM+PGM run (JAX compiles mbi's mirror descent on first use) takes over 10 s
pytestmark = pytest.mark.slow

DOMAIN = Domain.from_sizes([3, 2, 4])
PAIRS = list(itertools.combinations(range(3), 2))
RHO = 0.5
N = 1500
#: few mirror-descent iterations keep the run short; the checks hold for any count
ITERS = {"iters": 50, "final_iters": 100}


@pytest.fixture(scope="module")
def data() -> Dataset:
    return Dataset.synthetic(DOMAIN, N, rng=5, correlation=0.5)


def counter(data: Dataset):
    return lambda axes: data.marginal([DOMAIN.names[i] for i in axes])


@pytest.fixture(scope="module")
def seeded(data):
    return aim_pgm(DOMAIN, PAIRS, counter(data), RHO, np.random.default_rng(21), **ITERS)


def test_aim_pgm_spends_the_budget_exactly(seeded):
    assert abs(seeded.rho_spent - RHO) <= 1e-12 * RHO
    assert seeded.rho == RHO
    # T = 16 d units: sigma0**2 = 16 * 3 / (2 * 0.9 * rho) for each one-way initial measurement
    sigma2 = 16 * 3 / (2 * 0.9 * RHO)
    init = [cost for what, cost in seeded.ledger if what.startswith("init")]
    assert init == pytest.approx([1 / (2 * sigma2)] * 3, rel=1e-12)
    rounds = math.fsum(r.rho_round for r in seeded.rounds)
    assert math.fsum(init) + rounds == pytest.approx(RHO, rel=1e-12)
    assert seeded.rounds[-1].final and not any(r.final for r in seeded.rounds[:-1])
    assert seeded.details["noise"] == PGM_NOISE_RECORD


def test_aim_pgm_marginals_come_from_one_model(seeded, data):
    total = seeded.total
    sigma0 = math.sqrt(16 * 3 / (2 * 0.9 * RHO))
    # the model's total estimates N from noisy one-way counts (sigma0 ~ 7.3 per cell)
    assert abs(total - N) < 5 * sigma0 * math.sqrt(4)
    assert set(seeded.estimates) == set(PAIRS)
    for g, m in seeded.estimates.items():
        assert m.shape == tuple(DOMAIN.shape[k] for k in g)
        assert (m >= 0).all()
        assert m.sum() == pytest.approx(total, rel=1e-9)
    # shared one-way margins agree: (0,1) and (0,2) over attribute 0, and so on
    by_attr = {}
    for g, m in seeded.estimates.items():
        for position, k in enumerate(g):
            other = tuple(a for a in range(len(g)) if a != position)
            by_attr.setdefault(k, []).append(m.sum(axis=other))
    for margins in by_attr.values():
        for margin in margins[1:]:
            np.testing.assert_allclose(margin, margins[0], rtol=0, atol=1e-6 * total)
    # a useful release: each 2-way marginal's L1 error is far below N
    for g, m in seeded.estimates.items():
        assert np.abs(m - counter(data)(g)).sum() < 0.1 * N


def test_aim_pgm_seeds_repeat_and_entropy_differs(seeded, data):
    again = aim_pgm(DOMAIN, PAIRS, counter(data), RHO, np.random.default_rng(21), **ITERS)
    assert [r.marginal for r in again.rounds] == [r.marginal for r in seeded.rounds]
    for g in PAIRS:
        np.testing.assert_array_equal(again.estimates[g], seeded.estimates[g])
    fresh = aim_pgm(DOMAIN, PAIRS, counter(data), RHO, np.random.default_rng(), **ITERS)
    assert not np.array_equal(fresh.estimates[(0, 2)], seeded.estimates[(0, 2)])
    assert abs(fresh.rho_spent - RHO) <= 1e-12 * RHO


def test_aim_pgm_stops_at_the_round_it_is_cancelled(data):
    progress = Progress()
    seen = []

    def cancel_after_first(record):
        seen.append(record.round)
        progress.cancel()

    with pytest.raises(Cancelled, match="cancelled at iteration 1"):
        aim_pgm(
            DOMAIN,
            PAIRS,
            counter(data),
            RHO,
            np.random.default_rng(2),
            progress=progress,
            on_round=cancel_after_first,
            **ITERS,
        )
    assert seen == [1]
