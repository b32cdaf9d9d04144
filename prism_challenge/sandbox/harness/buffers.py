"""Putting a model's buffers back as they were after a forward that must leave no trace.

A check's forward (an in-process probe, a snapshot's re-computation in the eval sandbox)
runs the model as the scored forward will, and a model may change its buffers as it runs:
write into them (`self.seen += 1`) or put new tensors in their place (`self.seen =
self.seen + 1`, the way state is usually kept). Both are undone: each module's buffer table
gets its own tensor objects back, and those get their values back, so the next forward sees
exactly what it would have without the check.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def buffers_kept(model) -> Iterator[None]:
    import torch

    saved = [(m._buffers, dict(m._buffers),
              {k: b.detach().clone() for k, b in m._buffers.items() if b is not None})
             for m in torch.nn.Module.modules(model)]
    try:
        yield
    finally:
        with torch.no_grad():
            for table, objects, values in saved:
                table.clear()
                table.update(objects)
                for name, value in values.items():
                    objects[name].copy_(value)
