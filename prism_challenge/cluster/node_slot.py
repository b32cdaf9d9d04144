"""One evaluation slot on a cluster node: the same sandboxed runner, on the node's own data.

This runs inside a Ray worker process on whichever node Ray placed the slot, but knows
nothing of Ray (the actor wrapper passes in what Ray assigned), so its refusals are plain
code. A slot refuses to run anything while the node's prepared data is not the head's data
version (the MANIFEST sha): a score on other data would be silently wrong. A bundle arrives
as its wire bytes with the head's digest and is refused unless they agree. The node never
writes the store: it returns the record as JSON and the head decides.

A run or replay that crashed or hung is blamed on the host exactly as a local slot's worker
does it: only on the host's own evidence (a hardware Xid the kernel logged for the slot's
GPUs during the job, or a health probe that fails right after it), never on text the sandbox
printed. Such a slot then refuses jobs until the head's re-check passes.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import TypeVar

from prism_challenge.bundle import Bundle
from prism_challenge.config.settings import Settings
from prism_challenge.data.errors import DataIntegrityError
from prism_challenge.data.manifest import read_manifest
from prism_challenge.hardware.devices import GpuInfo, discover_gpus, host_cpus
from prism_challenge.hardware.faults import BLAMEABLE, blamed, kernel_xids
from prism_challenge.hardware.health import HealthCheck
from prism_challenge.hardware.slots import Slot
from prism_challenge.isolation import make_backend
from prism_challenge.sandbox.record import RunRecord
from prism_challenge.sandbox.runner import Runner
from prism_challenge.verification.replay import DrawnPlan, ReplayRecord

# A node names its own data root and work dir the way any PRISM setting is overridden.
NODE_DATA_ROOT_ENV = "PRISM_DATA__ROOT"
NODE_WORK_DIR_ENV = "PRISM_VALIDATOR__WORK_DIR"
R = TypeVar("R", RunRecord, ReplayRecord)


class SlotRefused(RuntimeError):
    """The slot cannot take runs on this node (other data, a failing health probe)."""


class BundleMismatch(ValueError):
    """The bundle that arrived is not the one the head named by digest."""


def node_settings(head: Settings, env: dict[str, str] | None = None) -> Settings:
    """The head's settings with this node's own data root and work dir (its environment)."""
    env = os.environ if env is None else env
    data = head.data.model_copy(update={"root": Path(env.get(NODE_DATA_ROOT_ENV,
                                                             head.data.root))})
    validator = head.validator.model_copy(update={"work_dir": Path(env.get(
        NODE_WORK_DIR_ENV, head.validator.work_dir))})
    return head.model_copy(update={"data": data, "validator": validator})


def arrived(wire: bytes, digest: str) -> Bundle:
    """The bundle as it arrived, checked against the digest the head sent."""
    bundle = Bundle.from_wire(wire)
    if bundle.digest != digest:
        raise BundleMismatch(f"the bundle that arrived has digest {bundle.digest[:16]}…, not "
                             f"the {digest[:16]}… the head sent; refused")
    return bundle


class NodeSlot:
    """A slot's runner on a node, opened once (data hash-verified) and reused per job."""

    def __init__(self, head: Settings, data_version: str, *, node: str, index: int,
                 gpu_ids: list[str]) -> None:
        self.settings = node_settings(head)
        self.data_version = data_version
        self.node = node
        self.index = index
        self.gpus: tuple[GpuInfo, ...] = tuple(discover_gpus(gpu_ids)) if gpu_ids else ()
        self.backend = make_backend(self.settings.sandbox.backend,
                                    docker_image=self.settings.sandbox.docker_image,
                                    prewarm=self.settings.sandbox.prewarm)
        self.health = HealthCheck(self.settings, self.backend,
                                  Path(self.settings.validator.work_dir) / "health")
        self._cancel = threading.Event()
        self.runner: Runner | None = None
        self.refused: str | None = None
        self.check()

    def check(self) -> str | None:
        """(Re)open the node's data and probe the slot; the refusal, or None when ready."""
        root = Path(self.settings.data.root)
        try:
            found = read_manifest(root).sha256
            if found != self.data_version:
                raise SlotRefused(
                    f"node {self.node}: its data at {root} is version {found[:16]}…, the "
                    f"head's is {self.data_version[:16]}…; prepare the same data on this "
                    "node (same MANIFEST sha256) — nothing is run here until then")
            slot = Slot(self.index, self.gpus, ())
            if self.gpus:  # a GPU slot must pass its health probe before it takes runs
                health = self.health.check(slot)
                if not health.ok:
                    raise SlotRefused(f"node {self.node}: {slot.describe()} failed its health "
                                      f"probe: {health.reason}")
            runner = Runner.from_data(self.settings, self.backend, root).on_slot(slot)
        except (SlotRefused, DataIntegrityError, OSError, ValueError) as exc:
            self.runner, self.refused = None, str(exc)
            return self.refused
        self.runner, self.refused = runner, None
        return None

    def about(self) -> dict:
        return {"node": self.node, "index": self.index, "refused": self.refused,
                "gpus": [g.device.id for g in self.gpus], "cpus": len(host_cpus())}

    def cancel(self) -> None:
        """Stop the job in progress (the head is shutting down); the run raises Cancelled."""
        self._cancel.set()

    def _ready(self) -> Runner:
        if self.runner is None:
            raise SlotRefused(self.refused or f"node {self.node}: slot not ready")
        self._cancel.clear()
        return self.runner

    def _run_dir(self, digest: str) -> Path:
        return Path(self.settings.validator.work_dir) / f"{digest[:12]}-{uuid.uuid4().hex[:8]}"

    def run(self, wire: bytes, digest: str, **options) -> dict:
        """The run record as JSON, and the seconds this node spent (`node_s`): the head's
        wall time beyond that is what the cluster costs."""
        started = time.monotonic()
        runner = self._ready()
        bundle = arrived(wire, digest)
        run_dir = self._run_dir(digest)
        try:
            record = runner.run(bundle.files, digest, run_dir, cancel=self._cancel, **options)
            record = self._blame_host(record, started)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        placement = record.placement.model_copy(update={"node": self.node})
        return {"record": record.model_copy(update={"placement": placement}).to_wire(),
                "node_s": time.monotonic() - started}

    def replay(self, wire: bytes, digest: str, record: dict, plan: dict | None = None
               ) -> dict:
        """The replay record as JSON, checked with `plan` (the head's stored draw)."""
        started = time.monotonic()
        runner = self._ready()
        bundle = arrived(wire, digest)
        run_dir = self._run_dir(digest)
        drawn = None if plan is None else DrawnPlan.model_validate(plan)
        try:
            replay = runner.replay(bundle.files, RunRecord.model_validate(record), run_dir,
                                   cancel=self._cancel, plan=drawn)
            replay = self._blame_host(replay, started)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        return replay.model_dump(mode="json")

    def _blame_host(self, record: R, started: float) -> R:
        if record.exit_reason not in BLAMEABLE:
            return record
        return blamed(record, self.host_evidence(started - 1.0))

    def host_evidence(self, since_s: float) -> str | None:
        """After a job that failed: did the host fail? Hardware Xids the kernel logged for
        the slot's GPUs since `since_s` (CLOCK_MONOTONIC), else a failing health probe. Either
        takes the slot out until the head's next `check` passes."""
        if not self.gpus:
            return None
        xids = kernel_xids([g.bus_id for g in self.gpus if g.bus_id], since_s)
        if xids:
            self.runner = None
            self.refused = f"node {self.node}: the kernel logged {xids[0].evidence}"
            return xids[0].evidence
        health = self.health.check(Slot(self.index, self.gpus, ()))
        if health.ok:
            return None
        self.runner = None
        self.refused = f"node {self.node}: its health probe failed after a job: {health.reason}"
        return f"the slot's health probe failed after the run: {health.reason}"
