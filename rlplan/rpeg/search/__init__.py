"""Local search over plans: simulated annealing with a final polish."""
