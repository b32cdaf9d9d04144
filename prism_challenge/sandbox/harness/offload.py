"""Per-step results leave the device without making the host wait for it.

Each scored step produces two small device tensors the host must read: the per-position
losses (sent to the feeder) and whether the forward edited its input (a contract check).
Reading them at once would synchronise the host with the GPU every step, so the next step
could not be queued while this one runs. On a GPU they are copied instead, without
blocking, into pinned host memory (PyTorch's caching host allocator reuses the pages), an
event marks the copies, and they are read `LAG` steps later, by when the device has long
finished them; only a backlog longer than that waits. On the CPU there is nothing to wait
for and each step is read at the next request, as before.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

LAG = 2  # steps a result may stay on its way before the host waits for it


class Offload:
    def __init__(self) -> None:
        self._queue: deque = deque()  # (step, nats, edited, event or None), oldest first

    def push(self, step: int, per_token, edited) -> None:
        """Queue a step's losses (float32, detached) and its input-edit flag (bool)."""
        if per_token.device.type != "cuda":
            self._queue.append((step, per_token, edited, None))
            return
        import torch

        nats = torch.empty(per_token.shape, dtype=torch.float32, pin_memory=True)
        nats.copy_(per_token, non_blocking=True)
        flag = torch.empty((), dtype=torch.bool, pin_memory=True)
        flag.copy_(edited, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        self._queue.append((step, nats, flag, event))

    def due(self, everything: bool = False) -> Iterator[tuple[int, object, bool]]:
        """(step, host losses, edited) for every result that may be read now, in step
        order: those the device has finished, and any older than `LAG` steps (waited for).
        `everything`: wait for all (the run is ending)."""
        while self._queue:
            step, nats, edited, event = self._queue[0]
            if event is not None:
                if not (everything or len(self._queue) > LAG or event.query()):
                    return
                event.synchronize()
            self._queue.popleft()
            yield step, nats, bool(edited)

    def __len__(self) -> int:
        return len(self._queue)
