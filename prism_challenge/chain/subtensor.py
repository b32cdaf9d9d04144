"""Every call PRISM makes to a Bittensor chain, through bittensor 11's own API.

`ChainClient` is the only place that reads from or writes to a subnet. It drives the async
client of one `bittensor.Subtensor` on a private event-loop thread, because bittensor 11's
blocking client has no timeout: here every call is bounded by `asyncio.wait_for`, and every
extrinsic is also mortal (`period` blocks), so one that timed out here cannot land much
later. An unreachable or silent chain surfaces as `ChainUnavailable`; a refusal by the
chain surfaces as bittensor's own `ChainError` (with its `ErrorCode`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, TypeVar

import bittensor

T = TypeVar("T")


class ChainUnavailable(RuntimeError):
    """The chain could not be reached, or did not answer in time; the message says which."""


# Failures that say nothing about the call itself: try again later, on a new connection.
_TRANSIENT = {bittensor.ErrorCode.UNKNOWN, bittensor.ErrorCode.INTERNAL,
              bittensor.ErrorCode.EXPIRED}
# What the transaction pool did with an extrinsic, not what the chain ruled on its call:
# dropped, marked invalid, replaced by another with the same nonce (usurped), retracted with
# its block, watched past the finality timeout, or held for a nonce the chain has not reached
# (future). The library names these like pallet errors; the write may still have landed.
_POOL_FATES = {"Dropped", "Invalid", "Usurped", "Retracted", "FinalityTimeout", "Future"}


def transient(exc: bittensor.ChainError) -> bool:
    """A write failure worth retrying (after checking whether it landed): no named chain
    error (a dropped connection, a transport fault), a mortal extrinsic that expired in the
    pool, or the pool's fate for the extrinsic rather than a ruling on its call."""
    return exc.name is None and exc.code in _TRANSIENT or (
        exc.code == bittensor.ErrorCode.EXPIRED) or exc.name in _POOL_FATES


@dataclass(frozen=True)
class WeightsRules:
    """What the subnet says about setting weights, read at one moment."""

    block: int
    rate_limit: int  # blocks between two weight sets of one hotkey
    commit_reveal: bool
    min_version_key: int  # WeightsVersionKey: sending less fails on chain
    max_weight_limit: int = 65535  # largest share a weight may hold, out of 65535
    min_allowed_weights: int = 0  # fewest non-zero weights the chain accepts
    tempo: int = 360  # blocks per epoch: weights are offered at most once per tempo
    reveal_period: int = 1  # epochs from a timelocked commit to its reveal
    stake_threshold: int = 0  # rao of stake a hotkey needs to set weights (the owner's is exempt)


@dataclass(frozen=True)
class ServingRules:
    block: int
    rate_limit: int  # blocks between two ServeAxon of one hotkey
    last_served: int | None  # block of this hotkey's current axon record, if any


class ChainClient:
    """One subnet on one network. Thread-safe: calls from any thread run on its own loop,
    concurrently, over one shared connection.

    The connection is replaced after a call that timed out or lost it (`_reconnect`), from
    whichever thread saw the failure, while other threads' calls may be in flight on it.
    So one lock guards which connection is current: a connection is opened by one call at a
    time (concurrent first calls share it instead of each opening a socket), a connection
    opened before a reconnect is closed instead of being put back in use, and a replaced
    connection is closed only once the calls still running on it have finished."""

    def __init__(
        self,
        network: str,
        netuid: int,
        *,
        timeout_s: float = 30.0,
        period_blocks: int = 16,
        substrate: bittensor.Substrate | None = None,
    ) -> None:
        self.network = network
        self.netuid = netuid
        self.timeout_s = timeout_s
        self.period_blocks = period_blocks
        self._seam = substrate
        self._lock = threading.Lock()  # guards the fields below, never held across an await
        self._generation = 0  # bumped by every reconnect
        self._subtensor = bittensor.Subtensor(network, substrate=substrate)
        self._client: bittensor.Client | None = None  # this generation's open connection
        self._users: dict[int, int] = {}  # generation -> calls running on its connection
        self._retired: dict[int, bittensor.Client] = {}  # replaced, closed once unused
        self._closed = False
        self._closing: list = []  # old connections being closed on the loop
        self._opening = asyncio.Lock()  # one connect at a time (used on the loop only)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chain",
                                         daemon=True)
        self._thread.start()

    # ---- plumbing ---------------------------------------------------------------------
    def _run(self, what: str, call: Callable[[bittensor.Client], Awaitable[T]], *,
             write: bool = False) -> T:
        """Run one call on the chain loop. Unavailable (retry later): a timeout, a lost
        connection, any read the chain answers with an error, and a write that failed
        without a named chain error (the library reports a dropped connection during a
        submit as a bare `ChainError`) or that the pool dropped, replaced or held back
        (`transient`). A named refusal of a write stays a `ChainError`."""
        if self._closed:
            raise ChainUnavailable(f"{what}: this chain client is closed")
        used: list[int] = []  # the generation of the connection this call ran on

        async def go() -> T:
            generation, client = await self._acquire(used)
            try:
                return await call(client)
            finally:
                self._release(generation)

        future = asyncio.run_coroutine_threadsafe(
            asyncio.wait_for(go(), self.timeout_s), self._loop)
        try:
            return future.result(self.timeout_s + 5)
        except (TimeoutError, FutureTimeout):
            future.cancel()
            self._reconnect(*used)
            raise ChainUnavailable(
                f"{what}: {self.network} did not answer within {self.timeout_s:g} s") from None
        except (bittensor.RpcConnectionError, OSError) as exc:
            self._reconnect(*used)
            raise ChainUnavailable(f"{what}: cannot reach {self.network}: {exc}") from None
        except bittensor.ChainError as exc:
            if write and not transient(exc):
                raise
            self._reconnect(*used)
            raise ChainUnavailable(f"{what}: {self.network} failed: {exc}") from None

    async def _acquire(self, used: list[int]) -> tuple[int, bittensor.Client]:
        """The current connection, opened first if needed, counted as in use by one more
        call (`_release` gives it back). `used` gets its generation."""
        while True:
            with self._lock:
                generation, client = self._generation, self._client
                if client is not None:
                    self._users[generation] = self._users.get(generation, 0) + 1
                    used[:] = [generation]
                    return generation, client
                subtensor = self._subtensor
            used[:] = [generation]
            async with self._opening:
                with self._lock:
                    if self._client is not None or self._generation != generation:
                        continue  # opened, or replaced, while this call waited its turn
                try:
                    client = await subtensor
                except BaseException:  # a failed or cancelled connect: start afresh
                    self._reconnect(generation)
                    raise
                with self._lock:
                    current = self._generation == generation
                    if current:
                        self._client = client
                if not current:  # a reconnect came while it was opening: never use it
                    self._close_later(client)

    def _release(self, generation: int) -> None:
        with self._lock:
            left = self._users.get(generation, 1) - 1
            if left:
                self._users[generation] = left
                return
            self._users.pop(generation, None)
            retired = self._retired.pop(generation, None)
        if retired is not None:
            self._close_later(retired)

    def _reconnect(self, generation: int | None = None) -> None:
        """Drop the connection after a call timed out or lost it; the next call opens a new
        one. A cancelled submit skips the library's own clean-up, so the old connection's
        nonce cache still holds the nonce it signed with while the chain never saw it:
        every later write would be a future transaction that never lands. `generation`:
        the connection the failed call ran on; when it was already replaced, nothing is
        dropped (another thread's failure came first). The old connection is closed once
        the calls still running on it have finished."""
        with self._lock:
            if generation is not None and generation != self._generation:
                return
            old, self._client = self._client, None
            retiring = self._generation
            self._generation += 1
            self._subtensor = bittensor.Subtensor(self.network, substrate=self._seam)
            if old is not None and self._users.get(retiring):
                self._retired[retiring] = old
                return
        if old is not None:
            self._close_later(old)

    def _close_later(self, client: bittensor.Client) -> None:
        """Close `client` on the loop (from any thread); `close` waits for it."""
        async def close_old() -> None:
            try:
                await asyncio.wait_for(client.close(), self.timeout_s)
            except Exception:  # noqa: BLE001 - a dead connection may fail to close
                pass

        pending = asyncio.run_coroutine_threadsafe(close_old(), self._loop)
        with self._lock:
            self._closing = [f for f in self._closing if not f.done()] + [pending]

    def close(self) -> None:
        """Close every connection and stop the loop thread (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            open_now = [self._client, *self._retired.values()]
            self._client = None
            self._retired.clear()
        for client in open_now:
            if client is not None:
                self._close_later(client)
        with self._lock:
            pending = list(self._closing)
        for future in pending:  # let the connections finish closing on the loop
            try:
                future.result(self.timeout_s + 1)
            except Exception:  # noqa: BLE001 - closing a dead connection may fail or hang
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    # ---- reads ------------------------------------------------------------------------
    def block(self) -> int:
        return self._run("head block", lambda client: client.block())

    def metagraph(self) -> bittensor.Metagraph:
        """Neurons (hotkeys, uids, stakes, permits, axons, last updates) and commitments."""
        graph = self._run("metagraph", lambda client: client.subnets.metagraph(self.netuid))
        if graph is None:
            raise ChainUnavailable(f"netuid {self.netuid} does not exist on {self.network}")
        return graph

    def commitments(self) -> dict[str, bittensor.NeuronCommitment]:
        """Each hotkey's latest commitment on the subnet (with its commit block and uid), as
        of the finalized head: precedence is read where no reorg can change it, so every
        validator reads the same block and uid for a commitment, whenever it reads. A
        commitment in a best block not finalized yet is not visible (intake waits for it)."""
        async def read(client: bittensor.Client) -> dict[str, bittensor.NeuronCommitment]:
            head = await client.finalized_block()
            return dict(await client.subnets.commitments(self.netuid, block=head))

        return self._run("commitments", read)

    def weights_rules(self) -> WeightsRules:
        async def read(client: bittensor.Client) -> WeightsRules:
            view = await client.at()
            module = bittensor.storage.SubtensorModule
            (rate, reveal, version, top, fewest, tempo, period,
             threshold) = await asyncio.gather(
                view.hyperparameters.weights_rate_limit(self.netuid),
                view.subnets.commit_reveal_enabled(self.netuid),
                view.query(module.WeightsVersionKey, [self.netuid]),
                view.query(module.MaxWeightsLimit, [self.netuid]),
                view.query(module.MinAllowedWeights, [self.netuid]),
                view.query(module.Tempo, [self.netuid]),
                view.query(module.RevealPeriodEpochs, [self.netuid]),
                view.query(module.StakeThreshold, []),
            )
            return WeightsRules(view.block, int(rate), bool(reveal), int(version or 0),
                                65535 if top is None else int(top), int(fewest or 0),
                                int(tempo or 360), int(period or 1), int(threshold or 0))

        return self._run("weights hyperparameters", read)

    def activity_cutoff(self) -> int:
        """Blocks after a validator's LastUpdate past which the subnet's epoch counts it
        inactive: its stake leaves consensus and it earns no dividends. The chain derives it
        as ActivityCutoffFactorMilli x Tempo / 1000, at least 1 (`get_activity_cutoff_blocks`).
        A runtime from before that item has no ActivityCutoffFactorMilli in its metadata
        (bittensor raises StorageFunctionNotFound, a ValueError, before sending the read); its
        epoch reads the absolute ActivityCutoff (`get_activity_cutoff`), and so does this."""
        async def read(client: bittensor.Client) -> int:
            view = await client.at()
            module = bittensor.storage.SubtensorModule
            try:
                factor = await view.query(module.ActivityCutoffFactorMilli, [self.netuid])
            except ValueError:  # not in this runtime
                try:
                    return int(await view.query(module.ActivityCutoff, [self.netuid]) or 0)
                except ValueError as exc:
                    raise ChainUnavailable(f"activity cutoff: this runtime has neither "
                                           f"ActivityCutoffFactorMilli nor ActivityCutoff "
                                           f"({exc})") from None
            tempo = await view.query(module.Tempo, [self.netuid])
            return max(1, int(factor or 0) * int(tempo or 360) // 1000)

        return self._run("activity cutoff", read)

    def last_update(self, uid: int) -> int:
        """The block of this uid's last weights on chain (LastUpdate), 0 for never."""
        rows = self._run("last update", lambda client: client.query(
            bittensor.storage.SubtensorModule.LastUpdate, [self.netuid]))
        return int(rows[uid]) if isinstance(rows, (list, tuple)) and uid < len(rows) else 0

    def weights_of(self, uid: int) -> dict[int, int]:
        """The weights the chain holds for this uid (Weights, mechanism 0): {uid: u16}."""
        rows = self._run("stored weights", lambda client: client.query(
            bittensor.storage.SubtensorModule.Weights, [self.netuid, uid]))
        return {int(dest): int(value) for dest, value in rows or []}

    def serving_rules(self, hotkey: str) -> ServingRules:
        async def read(client: bittensor.Client) -> ServingRules:
            view = await client.at()
            limit, axon = await asyncio.gather(
                view.query(bittensor.storage.SubtensorModule.ServingRateLimit, [self.netuid]),
                view.query(bittensor.storage.SubtensorModule.Axons, [self.netuid, hotkey]),
            )
            served = int(axon["block"]) if isinstance(axon, dict) and axon.get("block") else None
            return ServingRules(view.block, int(limit or 0), served)

        return self._run("serving rate limit", read)

    # ---- writes (each signed by the wallet's hotkey) -------------------------------------
    def set_weights(self, wallet: bittensor.Wallet, uids: list[int], weights: list[float], *,
                    version_key: int) -> bittensor.ExtrinsicResult:
        """`SetWeights`: the library reads the subnet's commit-reveal flag itself and sends a
        timelocked commit (revealed by the chain) or a plain set. Raises `ChainError` on a
        refusal (RATE_LIMITED when the rate limit has not passed)."""
        intent = bittensor.SetWeights(netuid=self.netuid, uids=uids, weights=weights,
                                      version_key=version_key)
        return self._execute("SetWeights", intent, wallet)

    def serve_axon(self, wallet: bittensor.Wallet, ip: str, port: int
                   ) -> bittensor.ExtrinsicResult:
        intent = bittensor.ServeAxon(netuid=self.netuid, ip=ip, port=port)
        return self._execute("serve axon", intent, wallet)

    def set_commitment(self, wallet: bittensor.Wallet, text: str) -> bittensor.ExtrinsicResult:
        """Publish `text` as the hotkey's commitment (Raw bytes; the pallet keeps the latest)."""
        data = text.encode("utf-8")
        if not 0 < len(data) <= 128:
            raise ValueError(f"a commitment holds 1 to 128 bytes, not {len(data)}")
        call = bittensor.calls.Commitments.set_commitment(
            netuid=self.netuid, info={"fields": [{f"Raw{len(data)}": data}]})
        result = self._run("set commitment", lambda client: client.submit_call(
            call, wallet, signer="hotkey", period=self.period_blocks,
            wait_for_finalization=False), write=True)
        return self._outcome("set commitment", result)

    def _execute(self, what: str, intent: Any, wallet: bittensor.Wallet
                 ) -> bittensor.ExtrinsicResult:
        result = self._run(what, lambda client: client.execute(
            intent, wallet, period=self.period_blocks, wait_for_finalization=False),
            write=True)
        return self._outcome(what, result)

    def _outcome(self, what: str, result: bittensor.ExtrinsicResult
                 ) -> bittensor.ExtrinsicResult:
        try:
            return result.raise_for_failure()
        except bittensor.ChainError as exc:
            if not transient(exc):
                raise
            self._reconnect()
            raise ChainUnavailable(f"{what}: {self.network} failed: {exc}") from None
