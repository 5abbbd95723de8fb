"""Use cases over the mechanisms: compare plans, evaluate runs against the truth, release."""
