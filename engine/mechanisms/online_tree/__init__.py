"""The binary tree for continual counting, with Honaker's efficient estimate released causally
(Dwork, Naor, Pitassi & Rothblum 2010; Chan, Shi & Song 2011; Honaker, "Efficient use of
differentially private binary trees", 2015).

Modules:
    tree: the dyadic intervals completed by each step and the causal efficient estimate;
    mechanism: the registered ``online-tree`` mechanism.
"""

from engine.mechanisms.online_tree.mechanism import OnlineTreeMechanism
from engine.mechanisms.online_tree.tree import DyadicTree

__all__ = ["DyadicTree", "OnlineTreeMechanism"]
