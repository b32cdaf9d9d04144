"""The Ray cluster's nodes at `/metrics`: slots each node's resources allow, how many take
runs, how many are busy, and slots refused there (another data version, a failing probe).

The head learns this from Ray and its slot actors, so it is read from memory per scrape.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from prism_challenge.cluster.capacity import NodeUsage


class ClusterCollector(Collector):
    def __init__(self, usage: Callable[[], list[NodeUsage]]) -> None:
        self.usage = usage

    def collect(self) -> Iterator[Metric]:
        families = {
            "slots": GaugeMetricFamily("prism_cluster_node_slots",
                                       "Evaluation slots the node's Ray resources allow",
                                       labels=["node"]),
            "ready": GaugeMetricFamily("prism_cluster_node_ready_slots",
                                       "Slots on the node that take runs", labels=["node"]),
            "busy": GaugeMetricFamily("prism_cluster_node_busy_slots",
                                      "Slots on the node running an evaluation or a replay",
                                      labels=["node"]),
            "refused": GaugeMetricFamily("prism_cluster_node_refused_slots",
                                         "Slots the node refused (other data version, failing "
                                         "health probe)", labels=["node"]),
        }
        for node in self.usage():
            families["slots"].add_metric([node.name], node.slots)
            families["ready"].add_metric([node.name], node.ready)
            families["busy"].add_metric([node.name], node.busy)
            families["refused"].add_metric([node.name], len(node.refused))
        yield from families.values()
