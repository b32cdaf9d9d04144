"""What the Ray executor adds to one evaluation, next to the local executor, on one host.

Starts a one-node Ray cluster on 127.0.0.1 (1 CPU, 100 MB object store, no dashboard), places
one slot actor (the one-off cost: Ray worker start, data opened and version-checked), then
evaluates the same tiny bundle through the real runner (bubblewrap, feeder, eval sandbox)
alternately on the local executor and through the slot actor, `--repeats` times each. Both
wall times are printed, but on a loaded host their difference is mostly the sandbox's own
noise; the fixed overhead is measured per Ray evaluation as the head's wall time minus the
time the node spent in the runner call (the bundle's wire bytes out, digest check, the record
back as JSON, scheduling and polling), and its median is the last line.

    python benchmarks/cluster_overhead.py [--repeats 3] [--bundle tests/fixtures/sandbox/tiny]
    python benchmarks/cluster_overhead.py --smoke [--data DIR]   # one pair of 3-step runs

Both executors must score the same nats on every run (the script stops otherwise). Last
line: `ray overhead: X s per evaluation; same scored nats: yes`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from prism_challenge.bundle import Bundle
from prism_challenge.cluster.node_slot import NODE_DATA_ROOT_ENV, NODE_WORK_DIR_ENV
from prism_challenge.config import Settings
from prism_challenge.data import prepare_data
from prism_challenge.data.manifest import read_manifest
from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl
from prism_challenge.isolation import make_backend
from prism_challenge.sandbox.runner import Runner


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", type=Path, default=Path("tests/fixtures/sandbox/tiny"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--data", type=Path, default=None,
                    help="a prepared data folder; default: a small synthetic corpus built here")
    ap.add_argument("--smoke", action="store_true", help="one pair of runs of 3 steps")
    args = ap.parse_args()
    steps = 3 if args.smoke else 4  # 3 steps of 8: 24 rows let a step take 11
    if args.smoke:
        args.repeats = 1
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # loopback addresses only
    from ray.cluster_utils import Cluster

    from prism_challenge.cluster.ray_pool import ClusterPool

    work = Path(tempfile.mkdtemp(prefix="prism-cluster-"))
    data = (args.data or work / "data").resolve()
    if args.data is None:
        source = write_jsonl(work / "docs.jsonl", english_like_documents(400, seed=1))
        prepare_data(small_spec([source]), data)
    cluster = Cluster(initialize_head=True, head_node_args={
        "node_ip_address": "127.0.0.1", "num_cpus": 1, "object_store_memory": 100 * 2**20,
        "include_dashboard": False,
        "env_vars": {NODE_DATA_ROOT_ENV: str(data),
                     NODE_WORK_DIR_ENV: str(work / "node-runs")}})
    settings = Settings(
        challenge={"seq_len": 32, "token_budget": 32 * 8 * steps, "deadline_s": 120.0},
        scoring={"heldout_positions": 256, "heldout_cuts_per_row": 4},
        sandbox={"cpu_threads": 1, "save_grace_s": 30.0},
        data={"root": str(data)},
        validator={"executor": "ray", "work_dir": str(work / "runs")},
        ray={"address": cluster.address},
    )
    bundle = Bundle.from_dir(args.bundle)
    pool = ClusterPool(settings, read_manifest(data))
    try:
        t0 = time.monotonic()
        pool.connect()
        assert pool.wait_ready(300) == 1, "the slot actor did not start"
        placed = time.monotonic() - t0
        remote = pool.slots[0]
        local = Runner.from_data(settings, make_backend("bubblewrap"), data)
        walls: dict[str, list[float]] = {"local": [], "ray": []}
        fixed: list[float] = []
        bpb: dict[str, set[float]] = {"local": set(), "ray": set()}
        for i in range(args.repeats):
            for label, runner in (("local", local), ("ray", remote)):
                t = time.monotonic()
                record = runner.run(bundle.files, bundle.digest, work / f"{label}-{i}")
                walls[label].append(time.monotonic() - t)
                if record.exit_reason != "ok" or record.summary.count != steps:
                    raise SystemExit(f"{label} run failed: {record.exit_reason} after "
                                     f"{record.summary.count} of {steps} steps "
                                     f"{record.exit_detail[-300:]}")
                bpb[label].add(round(float(record.columns.nats.sum()), 9))
                extra = ""
                if label == "ray":
                    fixed.append(remote.last_overhead_s)
                    extra = f", beyond the node's own time {fixed[-1]:.3f} s"
                print(f"repeat {i} {label:5s}: {walls[label][-1]:6.2f} s (exit "
                      f"{record.exit_reason}, node {record.placement.node or 'this'}{extra})")
    finally:
        pool.close()
        cluster.shutdown()
    same = "yes" if bpb["local"] == bpb["ray"] and len(bpb["local"]) == 1 else "NO"
    med = {k: statistics.median(v) for k, v in walls.items()}
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"slot start-up (once per slot: Ray worker, data opened and checked): {placed:.2f} s")
    print(f"median wall: local {med['local']:.2f} s, ray {med['ray']:.2f} s (difference "
          f"{med['ray'] - med['local']:+.2f} s, within the sandbox's own noise); same scored "
          f"nats: {same}")
    if same != "yes":
        raise SystemExit(f"the executors scored different nats: {bpb}")
    print(f"ray overhead: {statistics.median(fixed):.2f} s per evaluation; same scored nats: "
          f"{same}")


if __name__ == "__main__":
    main()
