"""Continual release (issue 33) beside the peer jax_privacy's matrix_factorization, one run.

For the n-step prefix workload under single participation, each mechanism's unit total
squared error ``sensitivity**2 * ||W C^-1||_F**2`` (sensitivity = largest column norm of the
strategy C; ``RMSE = sqrt(unit / n)`` at sigma = 1 per unit sensitivity, zCDP rho = 0.5),
ours (``online-sqrt``, ``online-optimal``, ``online-blt``) beside the peer's:

* sqrt: the peer's Toeplitz coefficients of the square root of the prefix matrix (Fichtenberger
  et al.), its mean loss ``toeplitz.loss(..., reduction_fn=mean)`` times n. Exact on both
  sides (goal: ratio 1 to 1e-9);
* optimal: the peer's dense projected-gradient L-BFGS (``dense.optimize``, Denisov et al.
  single participation, stopping at a projected gradient of 1e-3), its per-query errors
  summed times its single-participation sensitivity squared. Goal: ratio 1 within the peer's
  optimisation tolerance (ours stops at a certified duality gap of 1e-6, so ours <= peer's);
* blt: the peer's BLT optimiser (``buffered_toeplitz.optimize_loss``, 5 buffers as ours, the
  mean-error materialised loss of McMahan et al. 2024 under single participation); its loss
  times n. The peer's BLT parameters (``c_0 = 1``, ``c_k = sum_j s_j d_j**(k-1)``, the same
  parametrisation as ours) are also re-evaluated with our closed form, so a difference of the
  optimisers and a difference of the error formulas read apart;
* blt-max (``--max-error``): max (last-step) error ``sensitivity**2 * max_t Var(step t)``, the
  objective of Dvijotham et al. and the peer's default: the peer's 5-buffer fit for it
  (``optimize_loss`` on ``LossFn.build_closed_form_single_participation``) beside our
  ``online-blt`` with ``error="max"``; the fits' mean errors and our mean-error fit's max
  error are printed too.

* bracket (``--bracket``, no peer needed): our ``online-blt`` (the mean-error fit) against the
  optimum at horizons up to 2^20 and beyond: the exact SVD bound (closed-form singular values
  of the prefix matrix) is below every matrix mechanism's error, online or offline, so the
  optimum lies in [bound, BLT]; printed as BLT / bound on the total squared error and on the
  RMSE (``engine.analysis.continual.optimum_bracket``).

With ``--peer-python PATH --peer-src DIR`` the peer runs in a subprocess under PATH (an
environment with jax, jaxlib, numpy, scipy, absl-py, optax and dp-accounting), importing only
its ``jax_privacy.matrix_factorization`` package from the source tree DIR; CPU seconds are
``time.process_time`` around each computation on each side (the peer's include jax's
compilation). The peer's code is never shipped or fetched here. Without the flags the script
says how to run it and exits.

Run: ``python benchmarks/continual_peers.py --peer-python PY --peer-src DIR [--sizes 64 256
1024] [--large 4096 16384] [--max-error 1024 4096]`` (large: sqrt and BLT only), or
``python benchmarks/continual_peers.py --bracket 1024 4096 16384 65536 262144 1048576``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

from engine.analysis.continual import optimum_bracket
from engine.mechanisms import get
from engine.mechanisms.online_blt.fit import blt_unit_max, blt_unit_tse, fit_blt
from engine.mechanisms.online_sqrt import sqrt_closed_form_tse
from engine.privacy import Privacy
from engine.workloads import PrefixBlock, Workload

ZCDP = Privacy(noise="zcdp", rho=0.5)  # sigma = 1 per unit sensitivity
ONE_THREAD = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
OURS = {"sqrt": "online-sqrt", "optimal": "online-optimal", "blt": "online-blt",
        "blt-max": "online-blt"}
KNOBS = {"blt-max": {"error": "max"}}
BUFFERS = 5

#: Runs under the peer's interpreter: argv = source dir, JSON list of [n, mechanism];
#: prints one JSON object per case.
PEER_SCRIPT = r'''
import json, sys, time, types, typing
import optax
if not hasattr(optax, "ArrayTree"):  # released optax dropped the alias the peer annotates with
    optax.ArrayTree = typing.Any
package = types.ModuleType("jax_privacy")  # the matrix_factorization package alone
package.__path__ = [sys.argv[1] + "/jax_privacy"]
sys.modules["jax_privacy"] = package
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
from jax_privacy.matrix_factorization import buffered_toeplitz, dense, sensitivity, toeplitz

def sqrt(n):
    coef = toeplitz.optimal_max_error_strategy_coefs(n)
    return {"unit": float(toeplitz.loss(coef, n, reduction_fn=jnp.mean)) * n}

def optimal(n):
    C = np.asarray(dense.optimize(n))
    per_query = np.asarray(dense.per_query_error(strategy_matrix=jnp.asarray(C)))
    sens = float(sensitivity.single_participation_sensitivity(C))
    return {"unit": float(per_query.sum()) * sens**2}

def blt(n, buffers):
    loss_fn = buffered_toeplitz.LossFn.build_min_sep(n=n, error="mean", min_sep=1,
                                                     max_participations=1)
    fitted, loss = buffered_toeplitz.optimize_loss(loss_fn, num_buffers=buffers)
    coef = fitted.toeplitz_coefs(n)
    return {"unit": float(toeplitz.loss(coef, n, reduction_fn=jnp.mean)) * n,
            "optimiser_loss_times_n": float(loss) * n,
            "theta": [float(x) for x in fitted.buf_decay],
            "omega": [float(x) for x in fitted.output_scale]}

def blt_max(n, buffers):
    loss_fn = buffered_toeplitz.LossFn.build_closed_form_single_participation(n)
    fitted, loss = buffered_toeplitz.optimize_loss(loss_fn, num_buffers=buffers)
    coef = fitted.toeplitz_coefs(n)
    return {"unit": float(toeplitz.loss(coef, n, reduction_fn=jnp.max)),
            "unit_mean_times_n": float(toeplitz.loss(coef, n, reduction_fn=jnp.mean)) * n,
            "optimiser_loss": float(loss),
            "theta": [float(x) for x in fitted.buf_decay],
            "omega": [float(x) for x in fitted.output_scale]}

FITS = {"blt": blt, "blt-max": blt_max}
for n, name in json.loads(sys.argv[2]):
    cpu = time.process_time()
    out = (FITS[name](n, int(sys.argv[3])) if name in FITS
           else {"sqrt": sqrt, "optimal": optimal}[name](n))
    out.update(n=n, mechanism=name, cpu=time.process_time() - cpu)
    print(json.dumps(out), flush=True)
'''


def ours(n: int, name: str) -> tuple[float, float, float]:
    """Our plan's unit total squared error, its unit max (last-step) squared error
    ``sensitivity**2 * max_t Var(step t)``, and its CPU seconds (``blt-max`` rows:
    ``online-blt`` fitted for max error)."""
    cpu = time.process_time()
    plan = get(OURS[name], **KNOBS.get(name, {})).plan(Workload.one_dim(PrefixBlock(n)), ZCDP)
    unit = plan.unit_tse()
    worst = plan.sensitivity[2] ** 2 * float(plan.unit_variances().max())
    return unit, worst, time.process_time() - cpu


def bracket(sizes: list[int]) -> None:
    """Print BLT's error against the optimum's bracket [SVD bound, BLT] at each horizon."""
    print(f"load average {os.getloadavg()[0]:.1f}; online-blt ({BUFFERS} buffers, mean-error "
          "fit) against the exact SVD bound; unit total squared error")
    print(f"{'n':>9} {'BLT':>16} {'SVD bound':>16} {'BLT/bound':>10} {'RMSE ratio':>10} "
          f"{'CPU s fit':>9} {'CPU s bound':>11}")
    for n in sizes:
        cpu = time.process_time()
        fit = fit_blt(n, BUFFERS)
        fit_cpu = time.process_time() - cpu
        cpu = time.process_time()
        found = optimum_bracket(Workload.one_dim(PrefixBlock(n)), fit.unit_tse)
        bound_cpu = time.process_time() - cpu
        print(f"{n:>9,} {found.mechanism:16.1f} {found.bound:16.1f} {found.ratio:10.4f} "
              f"{found.rmse_ratio:10.4f} {fit_cpu:9.2f} {bound_cpu:11.3f}")


def peer(python: str, source: str, cases: list[tuple[int, str]]) -> dict[tuple[int, str], dict]:
    """The peer's figures, one JSON object per case, from one subprocess."""
    done = subprocess.run([python, "-c", PEER_SCRIPT, source, json.dumps(cases), str(BUFFERS)],
                          env={**os.environ, **ONE_THREAD}, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        sys.exit(f"the peer's run failed: {done.stderr.strip().splitlines()[-1:]}")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {(row["n"], row["mechanism"]): row for row in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-python", help="a python with jax, optax and dp-accounting")
    parser.add_argument("--peer-src", help="the peer's source tree (holds jax_privacy/)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[64, 256, 1024],
                        help="horizons for all three mechanisms (default 64 256 1024)")
    parser.add_argument("--large", type=int, nargs="*", default=[],
                        help="further horizons for sqrt and BLT only")
    parser.add_argument("--max-error", type=int, nargs="*", default=[],
                        help="horizons of the max-error rows (blt-max)")
    parser.add_argument("--bracket", type=int, nargs="*", default=[],
                        help="horizons of BLT against the SVD bound (no peer needed)")
    args = parser.parse_args()
    if args.bracket:
        bracket(args.bracket)
        if not (args.peer_python and args.peer_src):
            return
    if not (args.peer_python and args.peer_src):
        print(__doc__)
        print("No --peer-python / --peer-src given: nothing measured. The recorded table is in "
              "benchmarks/README.md (continual release beside jax_privacy).")
        return
    cases = [(n, name) for n in args.sizes for name in ("sqrt", "optimal", "blt")]
    cases += [(n, name) for n in args.large for name in ("sqrt", "blt")]
    cases += [(n, "blt-max") for n in args.max_error]
    theirs = peer(args.peer_python, args.peer_src, cases)
    print(f"load average {os.getloadavg()[0]:.1f}; unit total squared error "
          "(sensitivity^2 ||W C^-1||_F^2); RMSE = sqrt(unit / n) at sigma = 1")
    print(f"{'n':>6} {'mechanism':>9} {'ours':>14} {'peer':>14} {'ours/peer':>10} "
          f"{'RMSE ours':>9} {'CPU s ours':>10} {'CPU s peer':>10}")
    blt_rows, max_rows = [], []
    for n, name in cases:
        total, worst, cpu = ours(n, name)
        other = theirs[(n, name)]
        mine = worst if name == "blt-max" else total
        if name == "blt-max":
            max_rows.append((n, total, other))
        print(f"{n:>6} {name:>9} {mine:14.4f} {other['unit']:14.4f} "
              f"{mine / other['unit']:10.6f} "
              f"{math.sqrt(mine / (1 if name == 'blt-max' else n)):9.4f} {cpu:10.2f} "
              f"{other['cpu']:10.2f}")
        if name == "blt":
            blt_rows.append(other)
    print("\nclosed forms: our square-root closed form / peer's sqrt, and the peer's BLT "
          "parameters under our closed form / peer's own evaluation")
    for n in sorted({n for n, name in cases if name == "sqrt"}):
        exact = sqrt_closed_form_tse(n) / theirs[(n, "sqrt")]["unit"]
        print(f"{n:>6} sqrt closed form / peer {exact:.12f}")
    for row in blt_rows:
        mine = blt_unit_tse(np.array(row["omega"]), np.array(row["theta"]), row["n"])
        print(f"{row['n']:>6} peer BLT under our closed form / peer {mine / row['unit']:.12f}; "
              f"theta {np.round(row['theta'], 6).tolist()}")
    if max_rows:
        print("\nmax error (blt-max rows: both fitted for max error): the max-error fits' mean "
              "error (unit total), our mean-error fit's max error, and the peer's max-error "
              "fit under our max closed form / its own evaluation")
    for n, total, other in max_rows:
        mean_fit = fit_blt(n)
        again = blt_unit_max(np.array(other["omega"]), np.array(other["theta"]), n)
        print(f"{n:>6} max-error fits' mean: ours {total:.4f} peer {other['unit_mean_times_n']:.4f}"
              f"; our mean fit: mean {mean_fit.unit_tse:.4f} max "
              f"{blt_unit_max(mean_fit.omega, mean_fit.theta, n):.4f}; closed form / peer "
              f"{again / other['unit']:.12f}; theta {np.round(other['theta'], 6).tolist()}")


if __name__ == "__main__":
    main()
