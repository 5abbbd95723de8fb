"""HDMM, the High-Dimensional Matrix Mechanism (McKenna, Miklau, Hay, Machanavajjhala).

Registers ``hdmm`` (best of every operator), ``hdmm-opt0``, ``hdmm-kron``, ``hdmm-union`` and
``hdmm-marginals``. Modules, one concept each:

* :mod:`~engine.mechanisms.hdmm.opt0`: OPT_0 on an explicit Gram, the best of its candidates;
* :mod:`~engine.mechanisms.hdmm.laplace_opt0`: OPT_0's p-Identity search (Laplace noise);
* :mod:`~engine.mechanisms.hdmm.gaussian_opt0`: OPT_0's convex problem (Gaussian noise);
* :mod:`~engine.mechanisms.hdmm.pidentity`: the p-Identity strategy matrix;
* :mod:`~engine.mechanisms.hdmm.workload_gram`: the workload Gram and its fast products;
* :mod:`~engine.mechanisms.hdmm.opt0_mechanism`: ``hdmm-opt0``, OPT_0 on the whole domain;
* :mod:`~engine.mechanisms.hdmm.kron`: OPT_kron, one Kronecker product;
* :mod:`~engine.mechanisms.hdmm.union`: OPT_+, weighted unions with local least squares;
* :mod:`~engine.mechanisms.hdmm.opt_marginals`: OPT_M, weighted marginals;
* :mod:`~engine.mechanisms.hdmm.hdmm`: OPT_HDMM, the best of them;
* :mod:`~engine.mechanisms.hdmm.reconstruct`: census-scale measure/reconstruct and the
  marginal-only path;
* :mod:`~engine.mechanisms.hdmm.structure`: the per-attribute factor Grams of a workload;
* :mod:`~engine.mechanisms.hdmm.results`: what the optimisers return;
* :mod:`~engine.mechanisms.hdmm.display`: those results mapped to typed views;
* :mod:`~engine.mechanisms.hdmm.knobs`: the knobs every HDMM mechanism shares;
* :mod:`~engine.mechanisms.hdmm.tracking`: progress reporting and the reporting L-BFGS-B run;
* :mod:`~engine.mechanisms.hdmm.blas`: the BLAS thread limit used while optimising.
"""

from engine.mechanisms.hdmm.hdmm import HdmmMechanism
from engine.mechanisms.hdmm.kron import KronMechanism, opt_kron
from engine.mechanisms.hdmm.opt0 import opt0
from engine.mechanisms.hdmm.opt0_mechanism import Opt0Mechanism
from engine.mechanisms.hdmm.opt_marginals import MarginalsMechanism, opt_marginals
from engine.mechanisms.hdmm.pidentity import PIdentity
from engine.mechanisms.hdmm.union import UnionMechanism, opt_union

__all__ = ["HdmmMechanism", "KronMechanism", "MarginalsMechanism", "Opt0Mechanism",
           "PIdentity", "UnionMechanism", "opt0", "opt_kron", "opt_marginals", "opt_union"]
