"""Evaluations on a Ray cluster (`validator.executor: ray`).

The head (the validator process) keeps the store, scoring and weights; each node runs the
same sandboxed runner on its own prepared data. Only `ray_pool` imports Ray, and only the
node does so when the executor is `ray`.
"""
