"""The run: one submission trained and evaluated in sandboxes, observed from outside.

In: a bundle's files, the locked token streams, settings, a slot. Out: a `RunRecord`
(`record.py`) assembled from what the feeder and the eval server saw, never from what the
model reports. Guarantees: the model gets its batches only from the feeder, in the stream
order of `stream_order.py`; the held-out positions and probe cuts are drawn outside; inside
the sandbox only `harness/` (plus `protocol.py` and `sampling.py`) exists of PRISM.
"""
