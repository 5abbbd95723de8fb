"""Error analysis of a workload and a strategy: expected error, the SVD lower bound, the cost
model that guards memory and time, and per-query error in people at 95 %."""
