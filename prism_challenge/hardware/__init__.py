"""The host's hardware: which GPUs and cores exist, how they split into slots, whether a slot
is healthy, and whether a failed run was the host's fault.

In: the host (nvidia-smi, cgroups, the kernel log) and `validator.slots` settings. Out:
`Slot`s (disjoint GPUs and CPU cores), a health verdict per slot, a host-fault reason for a
run's output. Guarantees: two slots never share a device or a core; a fault is blamed on the
host only with host evidence, never on the miner. `health_probe.py` runs inside a sandbox, so
this file imports nothing.
"""
