"""How many evaluation slots a Ray cluster has, node by node, from what Ray reports.

A slot asks Ray for `ray.cpus_per_slot` CPUs and, on a cluster with GPUs, for
`sandbox.nproc_per_node` GPUs: a run never shares a GPU, and on a GPU cluster a CPU-only
node takes no runs (a CPU would miss a GPU run's deadline).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeCapacity:
    node_id: str
    address: str
    slots: int


@dataclass(frozen=True)
class NodeUsage:
    """One node as the dashboard and `/metrics` show it."""

    node_id: str
    address: str
    slots: int  # what the node's resources allow
    ready: int  # slot actors placed there that take runs
    busy: int  # ... of which are running an evaluation or a replay
    refused: tuple[str, ...] = ()  # why slot actors there refuse runs

    @property
    def name(self) -> str:
        return f"{self.address}/{self.node_id[:8]}"


def slot_resources(nodes: list[dict], *, cpus_per_slot: int, nproc: int) -> dict[str, float]:
    """What one slot asks of Ray: GPUs too when any live node has them."""
    gpus = any(n.get("Alive") and n.get("Resources", {}).get("GPU", 0) for n in nodes)
    return {"num_cpus": cpus_per_slot, "num_gpus": nproc if gpus else 0}


def plan_capacity(nodes: list[dict], *, cpus_per_slot: int, nproc: int) -> list[NodeCapacity]:
    """Slots per live node (entries of `ray.nodes()`), in the order Ray lists them."""
    need = slot_resources(nodes, cpus_per_slot=cpus_per_slot, nproc=nproc)
    plan = []
    for n in nodes:
        if not n.get("Alive"):
            continue
        have = n.get("Resources", {})
        slots = int(have.get("CPU", 0) // need["num_cpus"])
        if need["num_gpus"]:
            slots = min(slots, int(have.get("GPU", 0) // need["num_gpus"]))
        plan.append(NodeCapacity(n["NodeID"], str(n.get("NodeManagerAddress", "?")), slots))
    return plan
