"""The plan space and its prices: blocks, strategies, the cost and memory model, the candidate
directory, and plans with their file format."""
