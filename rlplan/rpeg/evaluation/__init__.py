"""Judging plans: the exact simulator, plan-independent lower bounds, and the problem that ties
an instance to its candidate directory."""
