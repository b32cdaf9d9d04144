"""The state contract: a model's state lives in its parameters and buffers.

A validator's checks rebuild the model from `architecture.py` and load only its
`state_dict` (parameters and buffers). State kept anywhere else (a Python counter on a
module, a list that grows, a global of `architecture.py`) is not restored there, so the
checks disagree with the run. `StateWatch` fingerprints those other places before each of
the first scored forwards and names the first one that changed, so `prism check` and
`prism eval` can tell the miner plainly before a validator does.
"""

from __future__ import annotations

from types import ModuleType

CHECKED_STEPS = 4  # scored forwards compared: a counter changes at every call
MAX_NOTES = 4
_PLAIN = (bool, int, float, complex, str, bytes, type(None))
# torch's own per-module bookkeeping (beyond a bare Module's fields)
_TORCH_FIELDS = frozenset({"_compiled_call_impl"})


def _text(value) -> str | None:
    """A short comparable form of a plain value; a container by its length and, when
    small and plain, its contents. None: not something the contract looks at."""
    if isinstance(value, _PLAIN):
        return repr(value)[:80]
    if isinstance(value, list | tuple | dict | set):
        items = list(value.items()) if isinstance(value, dict) else list(value)
        flat = [x for item in items[:64] for x in (item if isinstance(value, dict) else (item,))]
        if len(items) <= 64 and all(isinstance(x, _PLAIN) for x in flat):
            return repr(value)[:200]
        return f"<{type(value).__name__} of {len(value)}>"
    return None


def fingerprint(model, module: ModuleType | None) -> dict[str, str]:
    """Plain Python values held by the model's modules and the architecture's globals."""
    import torch

    bare = set(vars(torch.nn.Module())) | _TORCH_FIELDS
    out: dict[str, str] = {}
    for name, sub in model.named_modules():
        for key, value in vars(sub).items():
            if key in bare:
                continue
            text = _text(value)
            if text is not None:
                out[f"{type(sub).__name__}{'.' + name if name else ''}.{key}"] = text
    if module is not None:
        for key, value in vars(module).items():
            if key.startswith("__") or isinstance(value, ModuleType | type):
                continue
            text = _text(value)
            if text is not None:
                out[f"global {key} of architecture.py"] = text
    return out


class StateWatch:
    """Compares fingerprints taken before the first `CHECKED_STEPS` scored forwards."""

    def __init__(self, model, module: ModuleType | None) -> None:
        self.model, self.module = model, module
        self.notes: list[str] = []
        self._last: tuple[int, dict[str, str]] | None = None

    def before_forward(self, step: int) -> None:
        if step >= CHECKED_STEPS or self.notes:
            return
        now = fingerprint(self.model, self.module)
        if self._last is not None:
            before_step, before = self._last
            for key in sorted(set(before) | set(now)):
                if before.get(key) != now.get(key) and len(self.notes) < MAX_NOTES:
                    self.notes.append(
                        f"{key} changed from {before.get(key, '(unset)')} to "
                        f"{now.get(key, '(unset)')} between scored steps {before_step} and "
                        f"{step}")
        self._last = (step, now)


ADVICE = ("model state must live in parameters and buffers: a validator's checks restore "
          "only the state_dict, so keep this in a buffer (self.register_buffer) or drop it")
