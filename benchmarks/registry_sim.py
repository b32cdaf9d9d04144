"""Does the registry learn the truth, and do its directives help? A synthetic swarm.

Miners submit configurations on a response surface with known effects plus Gaussian noise;
the registry (the real fold, axis reader and directives: `ledger.apply`, `read_axes`,
`program_json`) observes every score. Directed miners read the brief (refreshed every
`--refresh` submissions): they pick a claim by its share, complete its oldest open test cell
when there is one, and otherwise start a new contrast on top of the settled and leaning
recipe. Random miners ignore the brief. Printed:

- per seed hypothesis, how often it reached the right status within N submissions
  (true effects decided the right way; null effects still undecided);
- the false-support rate: runs in which a claim with no or a reversed effect was supported;
- submissions until the first one lands in the best region, with directives vs without.

    .venv/bin/python benchmarks/registry_sim.py            # default: ~1 min on one core
    .venv/bin/python benchmarks/registry_sim.py --seeds 40 --n 800
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from prism_challenge.config.settings import RegistrySettings
from prism_challenge.registry.axes import read_axes
from prism_challenge.registry.directives import program_json
from prism_challenge.registry.ledger import apply
from prism_challenge.registry.seeds import SEED_HYPOTHESES
from prism_challenge.registry.state import RegistryState

CHOICES = {
    "params": [2e6, 2e7, 2e8],
    "optimizer": ["adamw", "muon", "sgd", "lion"],
    "lr": [3e-4, 3e-3],
    "norm": ["layernorm", "rmsnorm"],
    "position": ["learned", "rope", "alibi"],
    "precision": ["fp32", "bf16"],
    "compile": ["false", "true"],
    "batch_size": [16, 64],
}
# bpb effects (lower is better). norm and compile have none; bf16 hurts; muon x high lr synergy.
EFFECTS = {
    "params": {2e6: 0.0, 2e7: -0.15, 2e8: -0.3},
    "optimizer": {"adamw": 0.0, "muon": -0.04, "sgd": 0.06, "lion": -0.01},
    "lr": {3e-4: 0.0, 3e-3: -0.02},
    "position": {"learned": 0.0, "rope": -0.03, "alibi": -0.01},
    "precision": {"fp32": 0.0, "bf16": 0.02},
    "batch_size": {16: -0.025, 64: 0.0},
}
SYNERGY = -0.03  # extra for muon with lr 3e-3
BEST = {"optimizer": "muon", "lr": 3e-3, "position": "rope", "precision": "fp32",
        "batch_size": 16}
# What each seed claim's right status is on this surface (seeds.py order).
TRUTH = ["supported", "active", "supported", "refuted", "active", "supported", "supported",
         "supported"]
ARM_VALUE = {
    "params": {"1e+06-1e+07": 2e6, "1e+07-1e+08": 2e7, ">=1e+08": 2e8},
    "lr": {"0.0001-0.001": 3e-4, "0.001-0.01": 3e-3, ">=0.001": 3e-3, "<0.001": 3e-4},
    "batch_size": {"8-32": 16, "32-128": 64},
}


def true_bpb(c: dict) -> float:
    bpb = 2.0 + sum(EFFECTS[a][c[a]] for a in EFFECTS)
    return bpb + (SYNERGY if c["optimizer"] == "muon" and c["lr"] == 3e-3 else 0.0)


def value_of(axis: str, arm: str):
    if axis in ARM_VALUE:
        return ARM_VALUE[axis].get(arm)
    return arm if arm in CHOICES.get(axis, []) else None


def overlay(config: dict, arms: dict) -> None:
    for axis, arm in arms.items():
        v = value_of(axis, arm)
        if v is not None:
            config[axis] = v


def random_config(rng: random.Random) -> dict:
    return {a: rng.choice(v) for a, v in CHOICES.items()}


def directed_config(doc: dict, rng: random.Random) -> dict:
    """Pick a claim by its share; complete its oldest open cell that agrees with the
    recipe (settled, then leaning) on the other axes, else start a contrast on the recipe."""
    config = random_config(rng)
    best = {**doc["leaning"], **doc["recipe"]}
    overlay(config, best)
    rows = doc["explore"]
    if not rows:
        return config
    row = rng.choices(rows, weights=[max(r["share"], 1e-9) for r in rows])[0]
    for cell in row["open"]:
        if all(cell["stratum"].get(a, arm) == arm for a, arm in best.items()
               if a not in cell["set"]):
            overlay(config, cell["stratum"])
            overlay(config, cell["set"])
            return config
    overlay(config, row["cells"][rng.choice(sorted(row["cells"]))])
    return config


def submission(config: dict) -> tuple[dict, dict]:
    norm = "RMSNorm" if config["norm"] == "rmsnorm" else "LayerNorm"
    measured = {
        "param_count": int(config["params"]), "layer_count": 4, "module_census": {norm: 4},
        "optimizers": [{"cls": config["optimizer"], "hparams": {"lr": config["lr"]}}],
        "batch_size": config["batch_size"], "precision": config["precision"],
        "compile": config["compile"] == "true",
    }
    return measured, {"norm": config["norm"], "position": config["position"]}


def run(seed: int, n: int, directed_fraction: float, noise: float, refresh: int, cfg) -> dict:
    rng = random.Random(seed)
    state = RegistryState()
    for s in SEED_HYPOTHESES:
        apply(state, "hypothesis", {"origin": "seed", **s}, cfg)
    miners = [f"hk{i}" for i in range(12)]
    directed = set(miners[: round(directed_fraction * len(miners))])
    doc = program_json(state, cfg)
    ever_supported: set[str] = set()
    ever_refuted: set[str] = set()
    first_best = None
    for i in range(n):
        hotkey = rng.choice(miners)
        config = directed_config(doc, rng) if hotkey in directed else random_config(rng)
        if first_best is None and all(config[a] == v for a, v in BEST.items()):
            first_best = i + 1
        measured, declared = submission(config)
        reading = read_axes(state.schema(), measured, declared)
        bpb = true_bpb(config) + rng.gauss(0.0, noise)
        apply(state, "observation", {"hotkey": hotkey, "bpb": bpb, "eligible": True,
                                     "reading": reading.model_dump()}, cfg)
        ever_supported |= {h.id for h in state.hypotheses.values() if h.status == "supported"}
        ever_refuted |= {h.id for h in state.hypotheses.values() if h.status == "refuted"}
        if directed and (i + 1) % refresh == 0:
            doc = program_json(state, cfg)
    ids = sorted(state.hypotheses)
    return {
        "status": [state.hypotheses[h].status for h in ids],
        "n": [state.hypotheses[h].n for h in ids],
        "ever_supported": [h in ever_supported for h in ids],
        "ever_refuted": [h in ever_refuted for h in ids],
        "first_best": first_best if first_best is not None else n + 1,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--n", type=int, default=600, help="submissions per simulated run")
    ap.add_argument("--directed-fraction", type=float, default=0.75)
    ap.add_argument("--noise", type=float, default=0.02, help="bpb noise (std) per run")
    ap.add_argument("--refresh", type=int, default=5, help="submissions between brief reads")
    args = ap.parse_args()
    cfg = RegistrySettings()
    t0 = time.perf_counter()
    worlds = {
        "directed": [run(s, args.n, args.directed_fraction, args.noise, args.refresh, cfg)
                     for s in range(args.seeds)],
        "random": [run(10_000 + s, args.n, 0.0, args.noise, args.refresh, cfg)
                   for s in range(args.seeds)],
    }
    print(f"registry_sim: {args.seeds} seeds x {args.n} submissions, noise sd {args.noise}, "
          f"{args.directed_fraction:.0%} of miners directed ({time.perf_counter() - t0:.1f}s)")
    for world, runs in worlds.items():
        print(f"\n[{world} world] right status within {args.n} submissions:")
        for k, truth in enumerate(TRUTH):
            right = sum(r["status"][k] == truth for r in runs) / len(runs)
            n_mean = statistics.mean(r["n"][k] for r in runs)
            claim = SEED_HYPOTHESES[k]["spec"]
            print(f"  H{k + 1:03d} {claim['kind']:<11} {claim.get('axis', claim.get('axis_a')):<10}"
                  f" truth={truth:<9} right={right:5.0%}  mean contrasts={n_mean:6.1f}")
        nulls = [k for k, t in enumerate(TRUTH) if t != "supported"]
        false = sum(r["ever_supported"][k] for r in runs for k in nulls)
        print(f"  false support: {false}/{len(nulls) * len(runs)} = "
              f"{false / (len(nulls) * len(runs)):.1%} (claims without a true benefit that were "
              f"ever supported)")
        final = sum(r["status"][k] == "supported" for r in runs for k in nulls)
        print(f"  ... supported at the end of the run: {final}/{len(nulls) * len(runs)} = "
              f"{final / (len(nulls) * len(runs)):.1%}")
        goods = [k for k, t in enumerate(TRUTH) if t == "supported"]
        wrong = sum(r["ever_refuted"][k] for r in runs for k in goods)
        print(f"  false refutation: {wrong}/{len(goods) * len(runs)} = "
              f"{wrong / (len(goods) * len(runs)):.1%} (claims with a true benefit ever refuted)")
    d = [r["first_best"] for r in worlds["directed"]]
    rnd = [r["first_best"] for r in worlds["random"]]
    ratio = statistics.median(d) / statistics.median(rnd)
    region = "/".join(f"{k}={v}" for k, v in BEST.items())
    print(f"\nsubmissions to first reach the best region ({region}):")
    for name, xs in (("with directives", d), ("random", rnd)):
        print(f"  {name:<16} median {statistics.median(xs):.0f}, mean {statistics.mean(xs):.1f}")
    print(f"  ratio directed/random (medians): {ratio:.2f}  (target <= 0.50)")
    print(f"total {time.perf_counter() - t0:.1f}s")


if __name__ == "__main__":
    main()
