"""The head's side of a Ray cluster: one slot actor per slot of capacity, and their proxies.

Each slot is a Ray actor that asks for the slot's resources; Ray places it on a node, where
it opens that node's data once (refusing another data version) and then runs evaluations
and contender replays one at a time. The head keeps one `RemoteSlot` per slot, driven by an
ordinary evaluation worker, so claiming, scoring and requeueing stay the store's
compare-and-set: a node only ever returns a record.

A slot whose node dies (Ray reports the actor or its node lost) fails its job with
`NodeLost`, which the worker requeues; the slot gets a new actor wherever Ray has room.
The actors are owned by this process: when the head dies, Ray ends them with their runs,
and a restarted head also kills any slot actor of the namespace left from before it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import ray
from ray.exceptions import (
    GetTimeoutError,
    NodeDiedError,
    ObjectLostError,
    OwnerDiedError,
    RayActorError,
    RayTaskError,
    WorkerCrashedError,
)

from prism_challenge.bundle import wire
from prism_challenge.cluster.capacity import NodeUsage, plan_capacity, slot_resources
from prism_challenge.cluster.node_slot import NodeSlot
from prism_challenge.config.settings import Settings
from prism_challenge.data.manifest import Manifest
from prism_challenge.sandbox.early_stop import EarlyStopPlan, plan_early_stop
from prism_challenge.sandbox.record import RunRecord, competition_key
from prism_challenge.sandbox.runner import Cancelled
from prism_challenge.verification.replay import DrawnPlan, ReplayRecord

log = logging.getLogger("prism.validator")

LOST = (RayActorError, NodeDiedError, WorkerCrashedError, ObjectLostError, OwnerDiedError)
ACTOR_PREFIX = "prism-slot-"
CANCEL_GRACE_S = 15.0


class NodeLost(RuntimeError):
    """The node running a job died (or its slot actor did): the job goes back to the queue."""


class RemoteFailure(RuntimeError):
    """The node could not run the job (its side failed, or it refused the job)."""


@ray.remote(max_concurrency=2, max_restarts=0)
class SlotActor:
    """A `NodeSlot` inside Ray: told its node and GPUs by Ray; cancel arrives on a 2nd thread."""

    def __init__(self, head: Settings, data_version: str, index: int) -> None:
        self.node_id = ray.get_runtime_context().get_node_id()
        node = f"{ray.util.get_node_ip_address()}/{self.node_id[:8]}"
        self.slot = NodeSlot(head, data_version, node=node, index=index,
                             gpu_ids=[str(g) for g in ray.get_gpu_ids()])

    def about(self) -> dict:
        return {**self.slot.about(), "node_id": self.node_id}

    def check(self) -> dict:
        self.slot.check()
        return self.about()

    def run(self, wire_bytes: bytes, digest: str, options: dict) -> dict:
        return self.slot.run(wire_bytes, digest, **options)

    def replay(self, wire_bytes: bytes, digest: str, record: dict, plan: dict | None
               ) -> dict:
        return self.slot.replay(wire_bytes, digest, record, plan)

    def cancel(self) -> None:
        self.slot.cancel()


class RemoteSlot:
    """The head's handle on slot `index`: runs jobs on whichever actor currently backs it.

    States: idle (no actor: the cluster has no room), pending (placed or waiting for room),
    ready, refused (the node's data or health refused it), lost (its node died).
    """

    def __init__(self, pool: ClusterPool, index: int) -> None:
        self.pool = pool
        self.index = index
        self.generation = 0
        self.actor = None
        self.state = "idle"
        self.about: dict = {}
        self.busy = False
        self._asked = None  # an about/check call in flight
        self.last_overhead_s: float | None = None  # the last run's wall beyond the node's

    def describe(self) -> str:
        return f"cluster slot {self.index} on {self.about.get('node', 'an unplaced node')}"

    def usable(self) -> bool:
        return self.state == "ready" and not self.busy

    @property
    def competition(self) -> str:
        """The competition of the head's data and settings (every node's data is the same
        version, or refused)."""
        return self.pool.competition

    def early_stop_plan(self, leader_bpb: float, leader_id: int, leader: RunRecord
                        ) -> EarlyStopPlan | None:
        return self.pool.early_stop_plan(leader_bpb, leader_id, leader)

    # ---- lifecycle (driven by the pool) ---------------------------------------------------
    def place(self) -> None:
        self.generation += 1
        opts = {"name": f"{ACTOR_PREFIX}{self.index}-{self.generation}",
                "namespace": self.pool.settings.ray.namespace, "scheduling_strategy": "SPREAD",
                **self.pool.resources}
        self.actor = SlotActor.options(**opts).remote(self.pool.settings,
                                                      self.pool.data_version, self.index)
        self.state, self.about = "pending", {}
        self._asked = self.actor.about.remote()

    def drop(self, state: str = "idle") -> None:
        if self.actor is not None:
            with contextlib.suppress(*LOST, ValueError):  # already dead: nothing to end
                ray.kill(self.actor)
        self.actor, self._asked, self.state = None, None, state

    def poll(self, alive_nodes: set[str]) -> None:
        """Take in the answer to the last about/check; notice a dead node; re-check a
        refused slot (the operator may have fixed the node's data)."""
        if self.state in ("ready", "refused") and self.about.get("node_id") not in alive_nodes:
            log.error("%s: the node is gone", self.describe())
            self.drop("lost")
            return
        if self._asked is not None:
            done, _ = ray.wait([self._asked], timeout=0)
            if not done:
                return
            try:
                about = ray.get(self._asked)
            except LOST as exc:
                log.error("%s: its actor was lost before it started: %s", self.describe(),
                          str(exc).splitlines()[0])
                self.drop("lost")
                return
            self._asked = None
            was = (self.state, self.about.get("refused"))
            self.about = about
            self.state = "refused" if about["refused"] else "ready"
            if (self.state, about["refused"]) != was:
                if self.state == "refused":
                    log.error("%s refused: %s", self.describe(), about["refused"])
                else:
                    log.info("%s ready (GPUs %s)", self.describe(),
                             ",".join(about["gpus"]) or "none")
        elif self.state == "refused" and not self.busy:
            self._asked = self.actor.check.remote()

    # ---- jobs (driven by an evaluation worker) -------------------------------------------
    def run(self, files: Mapping[str, bytes], digest: str, run_dir: Path,
            *, cancel: threading.Event | None = None, **options) -> RunRecord:
        """`Runner.run` on the node; `options` (plain, picklable values the head fixed before
        the run) reach the node's runner unchanged."""
        started = time.monotonic()
        raw = self._call("run", wire.encode(files), digest, options, cancel=cancel)
        record = RunRecord.model_validate(raw["record"])
        self.last_overhead_s = time.monotonic() - started - float(raw["node_s"])
        if record.digest != digest or record.manifest_sha256 != self.pool.data_version:
            raise RemoteFailure(f"{self.describe()} returned a record of another bundle or "
                                "data version; discarded")
        return record

    def replay(self, files: Mapping[str, bytes], record: RunRecord, run_dir: Path,
               *, cancel: threading.Event | None = None, plan: DrawnPlan | None = None
               ) -> ReplayRecord:
        """`Runner.replay` on the node, with the plan the head stored."""
        raw = self._call("replay", wire.encode(files), record.digest,
                         record.to_wire(),
                         None if plan is None else plan.model_dump(mode="json"), cancel=cancel)
        return ReplayRecord.model_validate(raw)

    def _call(self, method: str, *args, cancel: threading.Event | None) -> dict:
        cancel = cancel or threading.Event()
        actor = self.actor
        if actor is None or self.state != "ready":
            raise NodeLost(f"{self.describe()} is {self.state}")
        self.busy = True
        try:
            ref = getattr(actor, method).remote(*args)
            while not ray.wait([ref], timeout=0.5)[0]:
                if cancel.is_set():
                    self._cancel(actor, ref)
                    raise Cancelled("the validator is shutting down")
            return ray.get(ref)
        except LOST as exc:
            if self.actor is actor:
                self.drop("lost")
            raise NodeLost(f"{self.describe()}: the node or its slot actor died mid-job "
                           f"({type(exc).__name__})") from exc
        except RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, Cancelled):
                raise Cancelled(str(cause)) from None
            raise RemoteFailure(f"{self.describe()}: {type(cause).__name__}: {cause}") from None
        finally:
            self.busy = False

    def _cancel(self, actor, ref) -> None:
        actor.cancel.remote()
        try:
            ray.get(ref, timeout=CANCEL_GRACE_S)
        except GetTimeoutError:  # it did not stop: end the actor so nothing keeps running
            self.drop("lost")
        except Exception:  # noqa: BLE001 - the run ended (Cancelled, or otherwise)
            pass


class ClusterPool:
    """Connects to `ray.address` and keeps one slot actor per slot of cluster capacity."""

    def __init__(self, settings: Settings, manifest: Manifest) -> None:
        self.settings = settings
        self.manifest = manifest  # the head's data: every node must have this version
        self.data_version = manifest.sha256
        self.slots: list[RemoteSlot] = []
        self.resources: dict[str, float] = {}
        self._plan = []
        self._lock = threading.Lock()

    def connect(self) -> list[RemoteSlot]:
        r = self.settings.ray
        ray.init(address=r.address, namespace=r.namespace, ignore_reinit_error=True,
                 log_to_driver=False, logging_level=logging.WARNING)
        killed = self.kill_leftovers()
        if killed:
            log.warning("killed %d slot actors left by a previous validator head: %s",
                        len(killed), ", ".join(killed))
        return self.sync()

    def kill_leftovers(self) -> list[str]:
        """Slot actors of this namespace that this process did not create (a crashed head's
        runs still in flight) are ended before any submission is resumed."""
        mine = {f"{ACTOR_PREFIX}{s.index}-{s.generation}" for s in self.slots}
        killed = []
        for name in ray.util.list_named_actors():
            if name.startswith(ACTOR_PREFIX) and name not in mine:
                try:
                    ray.kill(ray.get_actor(name))
                    killed.append(name)
                except ValueError:  # already gone
                    continue
        return killed

    def sync(self) -> list[RemoteSlot]:
        """Read the cluster's capacity, take in slot answers, replace lost slots and add
        slots for new room; returns the slots added (each needs a worker)."""
        with self._lock:
            nodes = ray.nodes()
            r = self.settings.ray
            nproc = self.settings.sandbox.nproc_per_node
            self.resources = slot_resources(nodes, cpus_per_slot=r.cpus_per_slot, nproc=nproc)
            self._plan = plan_capacity(nodes, cpus_per_slot=r.cpus_per_slot, nproc=nproc)
            alive = {n["NodeID"] for n in nodes if n.get("Alive")}
            for slot in self.slots:
                slot.poll(alive)
            want = sum(c.slots for c in self._plan)
            placed = [s for s in self.slots if s.actor is not None]
            waiting = [s for s in placed if s.state == "pending"]
            for slot in waiting[:max(0, len(placed) - want)]:  # the cluster shrank
                slot.drop()
            room = want - sum(1 for s in self.slots if s.actor is not None)
            for slot in self.slots:
                if room > 0 and slot.actor is None:
                    slot.place()
                    room -= 1
            added = []
            while room > 0:
                slot = RemoteSlot(self, len(self.slots))
                slot.place()
                self.slots.append(slot)
                added.append(slot)
                room -= 1
            return added

    def wait_ready(self, timeout_s: float) -> int:
        """Poll until no slot is pending (or timeout); the number of ready slots."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.sync()
            if not any(s.state == "pending" for s in self.slots) \
                    or time.monotonic() > deadline:
                return sum(s.state == "ready" for s in self.slots)
            time.sleep(0.2)

    @property
    def competition(self) -> str:
        """What the cluster's runs are scored in (`RunRecord.competition`): the head's data
        version and settings, which every node's records must match."""
        c = self.settings.challenge
        rows = c.token_budget // c.seq_len
        return competition_key(self.manifest.corpus, self.data_version, rows * c.seq_len,
                               c.seq_len, c.param_cap, c.stream_lanes)

    def early_stop_plan(self, leader_bpb: float, leader_id: int, leader: RunRecord
                        ) -> EarlyStopPlan | None:
        """The early-stop bar, made here from the head's own data version and settings (plain
        values sent with the run; the node checks it fits its budget). The head holds only the
        MANIFEST: the budget's bytes are the leader's, which is the same budget exactly when
        the data version, rows, tokens and lanes are the same."""
        c = self.settings.challenge
        rows = c.token_budget // c.seq_len
        if (leader.budget.rows, leader.budget.tokens) != (rows, rows * c.seq_len):
            return None
        return plan_early_stop(self.settings.scoring, leader_bpb, leader_id, leader,
                               manifest_sha256=self.data_version, lanes=c.stream_lanes,
                               budget=leader.budget)

    def capacity(self) -> int:
        """Slots that take runs now (at least 1, for the contender queue)."""
        return max(1, sum(s.state == "ready" for s in self.slots))

    def usage(self) -> list[NodeUsage]:
        out = []
        for cap in self._plan:
            here = [s for s in self.slots if s.about.get("node_id") == cap.node_id
                    and s.state in ("ready", "refused")]
            out.append(NodeUsage(
                cap.node_id, cap.address, cap.slots,
                ready=sum(s.state == "ready" for s in here),
                busy=sum(s.busy for s in here),
                refused=tuple(sorted({s.about["refused"] for s in here
                                      if s.state == "refused"}))))
        return out

    def close(self) -> None:
        with self._lock:
            for slot in self.slots:
                slot.drop()
        ray.shutdown()
