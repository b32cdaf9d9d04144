"""Entry point of the EVAL sandbox: architecture.py and weights only, no training code.

Measures, for the trained model and for its forced-seed random-init twin: summed val nats,
the causality probe; for the twin also its loss on the step-0 batch; and re-computes every
audited batch's loss from its snapshot. The host turns nats into bpb with its own byte
counts, so nothing here can inflate a score by mis-counting bytes.
"""

from __future__ import annotations

import json
import os
import traceback
from pathlib import Path


def _val_nats(model, rows, sep: int, batch: int) -> tuple[float, int]:
    import torch

    from prism_challenge.sandbox.harness.lm_loss import summed_nats

    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for i in range(0, rows.shape[0], batch):
            chunk = rows[i:i + batch]
            x, y = chunk[:, :-1], chunk[:, 1:]
            total += summed_nats(model(x), y, sep).item()
            tokens += int((y != sep).sum())
    return total, tokens


def _replay(model, snapshot: dict, rows, sep: int, device) -> float:
    """The scored forward of a training step, re-run from its snapshot (same RNG, mode, dtype)."""
    import torch

    from prism_challenge.sandbox.harness.lm_loss import summed_nats

    torch.set_rng_state(snapshot["cpu_rng"])
    if snapshot.get("cuda_rng") is not None and device.type == "cuda":
        torch.cuda.set_rng_state(snapshot["cuda_rng"], device)
    precision = snapshot.get("precision", "fp32")
    dtype = getattr(torch, precision) if precision != "fp32" else None
    model.train()
    x, y = rows[:, :-1], rows[:, 1:]
    with torch.enable_grad(), torch.autocast(device_type=device.type, dtype=dtype,
                                              enabled=dtype is not None):
        logits = model(x)
    return summed_nats(logits, y, sep).item()


def main() -> int:
    inputs = Path(os.environ["PRISM_INPUTS"])
    submission = Path(os.environ["PRISM_SUBMISSION"])
    scratch = Path(os.environ["PRISM_SCRATCH"])
    cfg = json.loads((inputs / "eval.json").read_text())
    result: dict = {"status": "ok", "detail": "", "audits": []}
    try:
        _evaluate(cfg, inputs, submission, result)
    except Exception as exc:
        result["status"] = "crash"
        result["detail"] = "".join(traceback.format_exception(exc)[-6:])[-3000:]
    (scratch / "eval_result.json").write_text(json.dumps(result))
    return 0 if result["status"] == "ok" else 1


def _evaluate(cfg: dict, inputs: Path, submission: Path, result: dict) -> None:
    from prism_challenge.sandbox.harness.seeding import make_deterministic

    make_deterministic(cfg["seed"], cfg["threads"])
    import numpy as np
    import torch

    from prism_challenge.sandbox.harness.loading import build_model, load_module
    from prism_challenge.sandbox.harness.probe import probe

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sep, vocab, T = cfg["separator_id"], cfg["vocab_size"], cfg["seq_len"]
    architecture = load_module(submission / "architecture.py", "architecture")

    def fresh():
        return build_model(architecture, vocab_size=vocab, seq_len=T,
                           max_params=cfg["param_cap"], seed=cfg["seed"]).to(device)

    def rows_of(name: str):
        array = np.load(inputs / name, allow_pickle=False).astype(np.int64)
        return torch.from_numpy(array).to(device)

    val = rows_of("val_rows.npy")
    probe_rows = rows_of("probe_rows.npy")
    p = cfg["probe"]

    twin = fresh()
    result["twin_val_nats"], result["val_tokens"] = _val_nats(twin, val, sep, cfg["val_batch"])
    result["probe_twin"] = probe(twin, probe_rows[:, :-1], p["positions"], vocab, p["seed"])
    step0 = cfg.get("step0")
    if step0:
        snap = torch.load(inputs / step0["snapshot"], weights_only=True, map_location="cpu")
        rows = rows_of(step0["rows"])
        twin_state = twin.state_dict()
        result["step0_weights_match_twin"] = all(
            torch.equal(twin_state[k].cpu(), v) for k, v in snap["model"].items()
            if k in twin_state
        ) and set(twin_state) == set(snap["model"])
        result["twin_step0_nats"] = _replay(fresh(), snap, rows, sep, device)
        result["twin_step0_tokens"] = int((rows[:, 1:] != sep).sum())
    del twin

    for audit in cfg["audits"]:
        snap = torch.load(inputs / audit["snapshot"], weights_only=True, map_location="cpu")
        model = fresh()
        model.load_state_dict(snap["model"])
        nats = _replay(model, snap, rows_of(audit["rows"]), sep, device)
        result["audits"].append({"step": audit["step"], "recomputed_nats": nats})

    final = inputs / "final.pt"
    if final.exists():
        trained = fresh()
        trained.load_state_dict(torch.load(final, weights_only=True, map_location="cpu"))
        result["trained_val_nats"], _ = _val_nats(trained, val, sep, cfg["val_batch"])
        result["probe_trained"] = probe(trained, probe_rows[:, :-1], p["positions"], vocab,
                                        p["seed"])
    else:
        result["detail"] = "no final weights were saved by the training run"


if __name__ == "__main__":
    raise SystemExit(main())
