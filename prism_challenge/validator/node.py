"""The validator node: intake API, gates, evaluation slots and weight epochs in one process.

Everything runs on threads of one process that share one store: the API (uvicorn), one gate
loop, one evaluation worker per slot (each drives a sandbox on its own GPUs and CPU cores, so
the GIL is not the bottleneck), the epoch loop, the research loop (the registry's LLM
proposals) and, online, the chain loop (metagraph refresh on a block schedule, intake address
published when it changed). With `validator.executor: ray` the slots are a Ray cluster's
(`cluster.ray_pool`): one worker thread per slot waits on its node while this process stays
the only writer of the store. With `agreement.enabled` a peer loop fetches the other
validators' signed measurements, and runs rank on their stake-weighted median. The node's
identity is its wallet's hotkey: submissions are signed for it, it signs the measurements it
serves, and it sets the weights. SIGTERM/SIGINT stop it gracefully: in-flight
sandboxes are cancelled and their submissions go back to the queue; a SIGKILL is handled at
the next start by `recovery`.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

import bittensor

from prism_challenge.agreement.bundles import BundleFetcher
from prism_challenge.agreement.fetch import PeerFetcher
from prism_challenge.agreement.peers import electorate
from prism_challenge.agreement.status import AgreementStatus
from prism_challenge.agreement.sync import PeerSync
from prism_challenge.api import ApiDeps, ApiServer
from prism_challenge.chain.factory import ChainAccess, connect
from prism_challenge.chain.subtensor import ChainUnavailable
from prism_challenge.chain.wallet import WalletError, load_wallet
from prism_challenge.config.settings import Settings
from prism_challenge.data.manifest import read_manifest
from prism_challenge.gates import GateStage
from prism_challenge.gates.reviewer import LlmReviewer
from prism_challenge.hardware.devices import discover_gpus, host_cpus
from prism_challenge.hardware.health import HealthCheck
from prism_challenge.hardware.slots import plan_slots
from prism_challenge.intake.policy import IntakePolicy
from prism_challenge.isolation import make_backend
from prism_challenge.isolation.cgroup import Cgroup
from prism_challenge.metrics.cluster import ClusterCollector
from prism_challenge.registry.loop import ResearchLoop
from prism_challenge.registry.service import Registry
from prism_challenge.sandbox.runner import Runner
from prism_challenge.storage import Store
from prism_challenge.validator.app import create_app
from prism_challenge.validator.epochs import run_epoch
from prism_challenge.validator.recovery import resume_interrupted
from prism_challenge.validator.rotation import Rotation
from prism_challenge.validator.slot_metrics import SlotCollector
from prism_challenge.validator.update_check import check_for_update
from prism_challenge.validator.worker import EvaluationWorker
from prism_challenge.verification import jobs as verification_jobs
from prism_challenge.weights.chain import WeightSetter
from prism_challenge.weights.conform import AsSent

log = logging.getLogger("prism.validator")
# How often the main thread checks for a stop signal (see run_forever).
STOP_POLL_S = 0.5


class ValidatorNode:
    def __init__(self, settings: Settings, *, reviewer: LlmReviewer | None = None,
                 chain: ChainAccess | None = None) -> None:
        """Raises ValueError (with the fix) when the validator's wallet cannot be loaded."""
        self.settings = settings
        self.stop_event = threading.Event()
        try:
            self.wallet = load_wallet(settings.wallet.name, settings.wallet.hotkey,
                                      settings.wallet.path)
        except WalletError as exc:
            raise ValueError(f"the validator's own wallet: {exc}") from None
        self.hotkey = self.wallet.hotkey.ss58_address
        self.chain = chain or connect(settings)
        self.metagraph = self.chain.metagraph
        self.setter = None
        if self.chain.client is not None and not settings.weights.dry_run:
            self.setter = WeightSetter(self.chain.client, self.wallet, settings,
                                       status=self.chain.status)
        self.store = Store(settings.storage.url)
        backend = make_backend(settings.sandbox.backend,
                               docker_image=settings.sandbox.docker_image,
                               prewarm=settings.sandbox.prewarm)
        self.registry = Registry(self.store, settings)
        self.research = ResearchLoop.from_settings(settings, self.registry)
        if reviewer is None and settings.llm.enabled:
            reviewer = LlmReviewer(settings.llm)
        self.gates = GateStage(settings, self.store, reviewer)
        self.cluster = None
        if settings.validator.executor == "ray":  # only then is Ray imported
            from prism_challenge.cluster.ray_pool import ClusterPool

            self.cluster = ClusterPool(settings, read_manifest(Path(settings.data.root)))
            self.workers: list[EvaluationWorker] = []
            collector = ClusterCollector(self.cluster.usage)
        else:
            self.runner = Runner.from_data(settings, backend, Path(settings.data.root))
            slots = plan_slots(settings, discover_gpus(settings.sandbox.gpus), host_cpus())
            health = HealthCheck(settings, backend, Path(settings.validator.work_dir) / "health",
                                 cancel=self.stop_event)
            self.rotation = Rotation(settings, slots, health)
            self.workers = [
                EvaluationWorker(settings, self.store, self.runner, self.registry,
                                 cancel=self.stop_event, slot=slot, rotation=self.rotation,
                                 metagraph=self.metagraph, hotkey=self.hotkey)
                for slot in slots
            ]
            collector = SlotCollector(self.rotation)
        self.agreement = AgreementStatus()
        deps = ApiDeps(settings, self.store, self.metagraph, hotkey=self.hotkey,
                       subnet=self.chain.subnet, chain_status=self.chain.status,
                       slots=collector,
                       cluster=None if self.cluster is None else self.cluster.usage,
                       signer=self.wallet, agreement=self.agreement,
                       as_sent=self._as_sent())
        self.server = ApiServer(create_app(deps), settings.intake.host, settings.intake.port)
        self._threads: list[threading.Thread] = []
        self.url: str | None = None
        self._warned_unserved = False

    def _as_sent(self) -> AsSent | None:
        """Online, /v1/weights shows the plan as the chain would store it."""
        if self.chain.client is None:
            return None
        return AsSent(self.chain.client, lambda: self.metagraph.uid_of(self.hotkey))

    # ---- lifecycle ------------------------------------------------------------------------
    def start(self) -> str:
        swept = Cgroup.sweep_stale()
        if self.cluster is not None:  # a crashed head's slot actors end before any resume
            self.workers += [self._remote_worker(slot) for slot in self.cluster.connect()]
        resumed = resume_interrupted(self.store)
        resumed += verification_jobs.resume_interrupted(self.store)
        caught_up = EvaluationWorker(self.settings, self.store, None, self.registry
                                     ).catch_up_registry()
        log.info("start-up: %d stale cgroups removed, %d submissions resumed, %d registry "
                 "observations caught up", swept, len(resumed), caught_up)
        if self.settings.validator.update_check:
            update = check_for_update()
            (log.warning if update.behind else log.info)(update.advice)
        for worker in self.workers:
            log.info("evaluation %s", (worker.slot or worker.runner).describe())
        self.url = self.server.start()
        log.info("intake API listening on %s as validator %s", self.url, self.hotkey)
        self._publish_address()
        loops = [("gates", self._gate_loop), ("epochs", self._epoch_loop)]
        if self.chain.client is not None:
            loops.append(("chain", self._chain_loop))
        if self.settings.agreement.enabled:
            loops.append(("peers", self._peer_loop))
        if self.research is not None:
            loops.append(("research", lambda: self.research.run(self.stop_event)))
        loops += [(f"worker-{i}", w) for i, w in enumerate(self._worker_loops())]
        if self.cluster is not None:
            loops.append(("cluster", self._cluster_loop))
        for name, target in loops:
            self._spawn(name, target)
        return self.url

    def _spawn(self, name: str, target) -> None:
        thread = threading.Thread(target=self._guard(target), name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop every loop within `timeout_s` in all; a loop still running then is logged
        with where it is (the operator's lead on a hang), and the node closes without it."""
        self.stop_event.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [t for t in self._threads if t.is_alive()]
        if stuck:
            frames = sys._current_frames()
            for t in stuck:
                where = "".join(traceback.format_stack(frames[t.ident])[-6:]) \
                    if t.ident in frames else "(no frame)"
                log.error("loop %s still running %.0fs after the stop; closing without it; "
                          "it was at:\n%s", t.name, timeout_s, where)
        self.server.stop()
        if self.cluster is not None:
            self.cluster.close()
        self.chain.close()
        self.store.close()
        log.info("validator stopped")

    def run_forever(self) -> None:
        """Start, then block until SIGTERM/SIGINT; stop gracefully."""
        def _on_signal(signum, _frame):
            self.stop_event.set()  # first: a loop that logs after this line has seen it set
            log.info("received %s: stopping", signal.Signals(signum).name)

        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)
        self.start()
        # The kernel may hand a process's signal to any of its threads; Python then only
        # flags it, and the handler runs when the main thread next runs bytecode. A main
        # thread blocked in an untimed wait would never get there: it waits in slices.
        while not self.stop_event.wait(STOP_POLL_S):
            pass
        self.stop()

    # ---- loops ----------------------------------------------------------------------------
    def _guard(self, loop):
        """Keep a loop alive through unexpected errors (logged), until stop."""
        def run():
            while not self.stop_event.is_set():
                try:
                    loop()
                    return
                except Exception:
                    log.exception("%s loop failed; restarting it", threading.current_thread().name)
                    self.stop_event.wait(self.settings.validator.poll_s)
        return run

    def _gate_loop(self) -> None:
        while not self.stop_event.is_set():
            for outcome in self.gates.process_due(time.time()):
                log.info("submission %s: gates -> %s %s", outcome.submission_id, outcome.status,
                         outcome.reason or "")
            self.stop_event.wait(self.settings.validator.poll_s)

    def _worker_loops(self):
        return [self._worker_loop(w) for w in self.workers]

    def _worker_loop(self, worker: EvaluationWorker):
        usable = getattr(worker.runner, "usable", lambda: True)  # a cluster slot may be down

        def loop():
            while not self.stop_event.is_set():
                if not usable() or worker.run_once() is None:
                    self.stop_event.wait(self.settings.validator.poll_s)
        return loop

    def _remote_worker(self, slot) -> EvaluationWorker:
        return EvaluationWorker(self.settings, self.store, slot, self.registry,
                                cancel=self.stop_event, capacity=self.cluster.capacity,
                                metagraph=self.metagraph, hotkey=self.hotkey)

    def _cluster_loop(self) -> None:
        """Follow the cluster: capacity, lost nodes, refused slots; a worker per new slot."""
        while not self.stop_event.wait(self.settings.ray.rescan_s):
            for slot in self.cluster.sync():
                worker = self._remote_worker(slot)
                self.workers.append(worker)
                self._spawn(f"worker-{len(self.workers) - 1}", self._worker_loop(worker))

    def _epoch_loop(self) -> None:
        while not self.stop_event.wait(self.settings.validator.epoch_s):
            slots = len(self.workers) if self.cluster is None else self.cluster.capacity()
            run_epoch(self.settings, self.store, self.metagraph, self.registry, self.setter,
                      slots=slots, hotkey=self.hotkey, agreement=self.agreement)

    def _peer_loop(self) -> None:
        """Every `agreement.poll_s`: fetch the peers' new signed measurements (agreement)."""
        cfg = self.settings.agreement
        fetcher = PeerFetcher(own_hotkey=self.hotkey, netuid=self.settings.chain.netuid,
                              timeout_s=cfg.timeout_s, max_page_bytes=cfg.max_page_bytes,
                              max_age_s=cfg.signature_max_age_s)
        bundles = self._bundle_fetcher() if cfg.fetch_bundles else None
        sync = PeerSync(self.store, fetcher, self.agreement, cfg.page_size,
                        netuid=self.settings.chain.netuid, relay=cfg.relay,
                        ban_s=cfg.equivocation_ban_s, skew_s=cfg.signature_max_age_s,
                        max_page_bytes=cfg.max_page_bytes,
                        max_rows_per_peer=cfg.max_rows_per_peer, bundles=bundles,
                        max_stream_parts=self.settings.scoring.dethrone_windows)
        try:
            while True:
                try:
                    peers = electorate(self.chain, self.hotkey)
                except ChainUnavailable as exc:
                    log.warning("agreement: no metagraph yet, peers not fetched: %s", exc)
                else:
                    stored = sync.round(peers)
                    if any(stored.values()):
                        log.info("agreement: stored %s peer measurements", stored)
                if self.stop_event.wait(cfg.poll_s):
                    return
        finally:
            fetcher.close()
            if bundles is not None:
                bundles.close()

    def _bundle_fetcher(self) -> BundleFetcher:
        """Fetches runs known only from peers (agreement/bundles.py)."""
        return BundleFetcher(self.store, self.chain.subnet, self.metagraph, self.wallet,
                             policy=IntakePolicy.from_settings(self.settings),
                             settle_s=self.settings.gates.settle_s,
                             timeout_s=self.settings.agreement.timeout_s)

    def _chain_loop(self) -> None:
        while not self.stop_event.wait(self.settings.chain.poll_s):
            if self.chain.refresh():
                self._publish_address()

    def _publish_address(self) -> None:
        """Put this node's intake address where miners look (only when it changed)."""
        address = self.settings.chain.serve_address
        if address is None and self.chain.client is None:
            address = self.url.removeprefix("http://")  # local: where it really listens
        if address is None:
            if not self._warned_unserved:
                log.warning("chain.serve_address is not set: miners cannot discover this "
                            "validator (they need --url)")
                self._warned_unserved = True
            return
        host, _, port = address.rpartition(":")
        try:
            log.info("intake address: %s", self.chain.subnet.serve(self.wallet, host.strip("[]"),
                                                                   int(port)))
        except (ChainUnavailable, bittensor.BittensorError) as exc:
            log.warning("intake address not published: %s", exc)
