"""Measuring and reconstructing view by view (``Assembly.stream_answers``): the same answers
as the whole-release path, each residual measured once."""

from __future__ import annotations

import numpy as np
import pytest

from engine.data.dataset import Dataset
from engine.domain import Domain
from engine.executor import SerialExecutor
from engine.mechanisms.residual.assemble import Assembly, MarginalSource
from engine.mechanisms.residual.decomposition import decompose
from engine.mechanisms.residual.subsolvers import make_solver, solve_residuals
from engine.workloads import Workload
from engine.workloads.blocks import AllRangeBlock, PrefixBlock
from engine.workloads.groups import PairQueries, Product


def assembled() -> tuple[Workload, Assembly, Dataset]:
    """Table 7's mix on [5]^4, with the prefix x prefix view asked twice, apart."""
    dom = Domain.from_sizes([5] * 4, kinds=["numeric"] * 4)
    triple = Product(tuple((a, PrefixBlock(5)) for a in ("a1", "a2", "a3")))
    W = Workload(dom, (Product((("a1", AllRangeBlock(5)),)), triple,
                       PairQueries(attrs=("a2", "a4"), pair_kind="affine"), triple))
    solved = solve_residuals(decompose(W), make_solver("optimal", W), SerialExecutor())
    assembly = Assembly.from_losses(dom, list(solved.residuals.values()))
    return W, assembly, Dataset.synthetic(dom, 500, rng=0)


def test_noise_free_stream_gives_the_true_answers() -> None:
    W, assembly, data = assembled()
    parts = [a for _, a in assembly.stream_answers(W, MarginalSource(data, W.domain), 0.0,
                                                   np.random.default_rng(0))]
    truth = W.answer(data.datavector())
    assert np.concatenate(parts) == pytest.approx(truth, abs=1e-9)
    whole = assembly.answers(W, assembly.exact_release(MarginalSource(data, W.domain)))
    assert np.concatenate(parts) == pytest.approx(whole, abs=1e-9)


def test_each_residual_is_measured_once() -> None:
    W, assembly, data = assembled()
    counted: list[tuple[int, ...]] = []
    source = MarginalSource(data, W.domain)

    def marginals(attrs: tuple[int, ...]) -> np.ndarray:
        counted.append(attrs)
        return source(attrs)

    parts = dict(enumerate(a for _, a in assembly.stream_answers(
        W, marginals, 1.0, np.random.default_rng(0))))
    assert sorted(counted) == sorted(r.attrs for r in assembly.releases)
    assert np.array_equal(parts[1], parts[3])  # the same view twice: one noisy estimate
    assert not np.allclose(parts[1], W.split(W.answer(data.datavector()))[1])
