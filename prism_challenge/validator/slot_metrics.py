"""The node's evaluation slots at `/metrics`: which are in rotation, and why not.

Slot health lives in the node's memory (the store knows nothing of devices), so this
collector reads the node's `Rotation` at each scrape.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from prism_challenge.validator.rotation import Rotation


class SlotCollector(Collector):
    def __init__(self, rotation: Rotation) -> None:
        self.rotation = rotation

    def collect(self) -> Iterator[Metric]:
        states = self.rotation.states()
        rotation = GaugeMetricFamily(
            "prism_slot_in_rotation",
            "1 while the slot takes runs, 0 once its health probe failed",
            labels=["slot", "gpus", "cpus"])
        probes = CounterMetricFamily(
            "prism_slot_probe_failures", "Failed health probes of the slot", labels=["slot"])
        faults = CounterMetricFamily(
            "prism_slot_host_faults",
            "Runs on the slot that ended in a host fault (requeued, never charged to the miner)",
            labels=["slot"])
        for st in states:
            slot = str(st.index)
            rotation.add_metric([slot, ",".join(st.gpus), ",".join(str(c) for c in st.cpus)],
                                1 if st.in_rotation else 0)
            probes.add_metric([slot], st.probe_failures)
            faults.add_metric([slot], st.host_faults)
        yield rotation
        yield probes
        yield faults
