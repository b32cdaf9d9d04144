"""A real Ray cluster of two nodes on 127.0.0.1 (head + worker, separate raylet processes,
1 CPU each), started once per test module: Ray start-up costs seconds on 2 shared cores.

Each node has its own data root and work dir through its environment, as on real hosts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from prism_challenge.cluster.node_slot import NODE_DATA_ROOT_ENV, NODE_WORK_DIR_ENV

OBJECT_STORE_BYTES = 100 * 2**20


@dataclass
class TwoNodes:
    cluster: object  # ray.cluster_utils.Cluster
    head: object  # ray._private.node.Node
    worker: object
    work: Path  # the nodes' work dirs: every sandbox of this cluster runs under it

    @property
    def address(self) -> str:
        return self.cluster.address


@pytest.fixture(scope="module")
def ray_cluster(prepared_data, tmp_path_factory):
    env = pytest.MonkeyPatch()
    # Before Ray is imported: every address Ray derives is the loopback, never the host's IP.
    env.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    work = tmp_path_factory.mktemp("ray-nodes")

    def node(name: str) -> dict:
        return {"node_ip_address": "127.0.0.1", "num_cpus": 1,
                "object_store_memory": OBJECT_STORE_BYTES,
                "env_vars": {NODE_DATA_ROOT_ENV: str(prepared_data),
                             NODE_WORK_DIR_ENV: str(work / name)}}

    cluster = Cluster(initialize_head=True,
                      head_node_args={**node("head"), "include_dashboard": False})
    worker = cluster.add_node(**node("worker"))
    yield TwoNodes(cluster, cluster.head_node, worker, work)
    cluster.shutdown()
    env.undo()
