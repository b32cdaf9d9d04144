"""An in-memory chain behind bittensor 11's `Substrate` protocol (its test seam).

`bittensor.Subtensor("local", substrate=FakeSubstrate(...))` then runs the library's own
reads, decoding, intents and executor over this state: a renamed or removed library call
fails the tests. The fake models only what PRISM touches: one subnet's neurons (hotkey,
permit, axon, last weight update), its hyperparameters, the Commitments pallet, and the
effects of the extrinsics PRISM sends (weights, axon, commitment). Every submitted call is
recorded in `extrinsics` so tests assert on the exact arguments bittensor composed. Weights
and LastUpdate are read as the chain keys them, by NetUidStorageIndex (mechanism 0's is the
netuid) and uid, with the empty default for a missing row; `replace` is a newcomer taking a
uid as `replace_neuron` does it (the chain zeroes every weight on that uid).

It refuses what subtensor refuses, with the pallet's error name, in the pallet's order
(subnets/weights.rs): weights over the subnet's size, from an unregistered hotkey, under the
stake threshold, below the version key, under the rate limit, without a validator permit
(the subnet owner's hotkey and a lone self-weight are exempt), with a duplicate or unknown
uid, fewer than min(subnet size, min allowed weights), or over the max weight limit
(exactly: max * 65535 > limit * sum; the chain compares in 32-bit fixed point, which can
only let a vector this refuses pass, never the reverse). Commit-reveal is on by default, as
on a new subnet: a plain set is then refused (`CommitRevealEnabled`), and a timelocked
commit is checked only for commit-reveal, its version, registration, the rate limit and the
unrevealed-commit limit (it sets LastUpdate). The commit is revealed when the block reaches
the first block of the epoch `RevealPeriodEpochs` after its own: every other weight check
runs then, and a commit that fails one is dropped silently, as the chain does (`dropped`
records why; the chain only logs it). The fake reads a commit's plaintext from what the
library sealed (see `_keep_timelocked_plaintext`), standing in for the drand pulse. Each
epoch counts a neuron whose LastUpdate is more than the activity cutoff
(ActivityCutoffFactorMilli x Tempo / 1000 blocks, or the absolute ActivityCutoff on an older
runtime without that item: `absent` names the items a runtime lacks) behind inactive
(`active`; the metagraph's `active` is the last epoch's mask). A ServeAxon from an
unregistered hotkey, of an address `is_valid_ip_address` refuses (InvalidIpAddress:
127.0.0.1, 255.255.255.255, ::1, ffff:...:ffff), inside the serving rate limit, or to port 0
is refused, in the pallet's order; so is a commitment from an unregistered hotkey, with too
many fields, or over the hotkey's space quota for the current epoch (each commitment counts
at least 100 bytes). Blocks have a finalized head `finality_lag` blocks behind the best one,
reads at a block see that block's commitments, and `reorg()` replaces the best blocks after
the finalized head.

What it cannot check is the SCALE encoding against live metadata: `compose` keeps the call
as bittensor's generated `Call` (module, function, params).
"""

from __future__ import annotations

import asyncio
import inspect
import ipaddress
import threading
from dataclasses import dataclass, field
from typing import Any

import bittensor_core
from bittensor import Balance, ExtrinsicResult, RpcConnectionError
from bittensor._transport.errors import StorageFunctionNotFound

# What the library sealed in each timelocked commit, by ciphertext: (uids, values, version key).
SEALED: dict[bytes, tuple[list[int], list[int], int]] = {}


def _keep_timelocked_plaintext() -> None:
    """The library's timelock encryption still runs (its call is checked), and what it sealed
    is remembered, so the fake can reveal a commit: the real chain decrypts it with the drand
    pulse of its reveal round, which no offline test has."""
    real = bittensor_core.get_encrypted_commit_v2
    if getattr(real, "keeps_plaintext", False):
        return

    def seal(**kwargs):
        commit, reveal_round = real(**kwargs)
        SEALED[bytes(commit)] = (list(kwargs["uids"]), list(kwargs["weights"]),
                                 int(kwargs["version_key"]))
        return commit, reveal_round

    seal.keeps_plaintext = True
    bittensor_core.get_encrypted_commit_v2 = seal


@dataclass
class Neuron:
    hotkey: str
    coldkey: str = "5C4hrfjw9DjXZTzV3MwzrrAr9P1MJhSrvWGWqi1eSuyUpnhM"
    permit: bool = False
    axon: dict | None = None  # {"ip": int, "port": int, "ip_type": 4, "block": n}
    last_update: int = 0
    stake: int | None = None  # rao; None: 10**12 with a permit, 0 without

    @property
    def total_stake(self) -> int:
        return self.stake if self.stake is not None else (10**12 if self.permit else 0)


@dataclass
class Commit:
    """A timelocked weights commit waiting for its reveal."""

    signer: str
    block: int
    epoch: int
    reveal_at: int  # the first block of the reveal epoch
    sealed: tuple[list[int], list[int], int] | None  # None: the fake cannot read it


@dataclass
class Sent:
    """One extrinsic as the chain received it."""

    module: str
    function: str
    params: dict
    signer: str
    period: int | None
    block: int


@dataclass
class FakeSubstrate:
    netuid: int
    block: int = 1000
    neurons: list[Neuron] = field(default_factory=list)
    hyper: dict[str, Any] = field(default_factory=dict)  # SubtensorModule items per netuid
    commitments: dict[str, dict] = field(default_factory=dict)  # hotkey -> Registration
    extrinsics: list[Sent] = field(default_factory=list)
    down: bool = False  # every read and write fails like an unreachable endpoint
    hang: bool = False  # writes never come back (the caller's timeout must fire)
    reject: str | None = None  # the next write fails on chain with this error name
    token_symbols: dict[int, str] = field(default_factory=dict)
    reads: list[tuple[str, str]] = field(default_factory=list)
    weights: dict[int, dict[int, int]] = field(default_factory=dict)  # uid -> stored vector
    # Nonces as the chain and a connection see them: `nonces` is each account's next nonce
    # on chain; `nonce_cache` is the connection's own next-index cache (advanced on every
    # signature, cleared with the connection, as async_substrate_interface does). A write
    # signed with a nonce above the chain's is a future transaction: it never lands.
    nonces: dict[str, int] = field(default_factory=dict)
    nonce_cache: dict[str, int] = field(default_factory=dict)
    raise_next: Exception | None = None  # raised by the next read or write, once
    lose: int = 0  # the next `lose` writes land, but their answer never comes back
    drop: int = 0  # the next `drop` writes are dropped from the pool: they never come back
    signed_nonces: list[int] = field(default_factory=list)
    future_signed: int = 0  # writes signed above the chain's nonce (stuck)
    finality_lag: int = 0  # the finalized head is this many blocks behind the best one
    # Every commitment stored, in order (block, hotkey, registration): what a read pinned to
    # an older block sees, and what a reorg moves.
    commit_log: list[tuple[int, str, dict]] = field(default_factory=list)
    max_space: int = 3100  # Commitments.MaxSpace: bytes per hotkey per epoch
    max_fields: int = 3  # the pallet's MaxFields
    used_space: dict[str, dict] = field(default_factory=dict)  # UsedSpaceOf per hotkey
    max_unrevealed: int = 10  # timelocked commits per hotkey per epoch
    commit_reveal_version: int = 4  # CommitRevealWeightsVersion
    commits: list[Commit] = field(default_factory=list)  # waiting for their reveal
    # Commits the reveal dropped, as (hotkey, block of the reveal, the check that failed):
    # the real chain only writes this to its trace log.
    dropped: list[tuple[str, int, str]] = field(default_factory=list)
    owner_hotkey: str = "owner"  # SubnetOwnerHotkey: exempt from the permit and stake checks
    reorgs: int = 0
    # Connections (`FakeConnection`): each made, sockets opened over an open one (leaked),
    # seconds a connect takes, and reads of the head block held until `hold` is set.
    connections: list[FakeConnection] = field(default_factory=list)
    leaked: int = 0
    connect_delay: float = 0.0
    hold: threading.Event | None = None
    holding: int = 0  # reads waiting on `hold`
    # Storage items this runtime lacks (an older runtime): reading one fails before any
    # request, as bittensor's codec does for an item missing from the runtime's metadata.
    absent: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        defaults = {"WeightsSetRateLimit": 100, "CommitRevealWeightsEnabled": True,
                    "WeightsVersionKey": 0, "ServingRateLimit": 50, "MinAllowedWeights": 0,
                    "MaxWeightsLimit": 65535, "SubnetEpochConsensus": "Yuma", "Tempo": 360,
                    "RevealPeriodEpochs": 1, "LastEpochBlock": 900, "PendingEpochAt": 0,
                    "SubnetEpochIndex": 3, "BlocksSinceLastStep": 100, "StakeThreshold": 0,
                    "ActivityCutoffFactorMilli": 13_889,  # 5000 blocks at tempo 360
                    "ActivityCutoff": 5000}  # the legacy item: what an older runtime reads
        self.hyper = {**defaults, **self.hyper}
        _keep_timelocked_plaintext()
        self._ready = True

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "block" and self.__dict__.get("_ready"):
            self.reveal_due()  # the chain reveals at the start of a block, before any call

    # --- helpers for tests ------------------------------------------------------------
    def uid_of(self, hotkey: str) -> int | None:
        return next((i for i, n in enumerate(self.neurons) if n.hotkey == hotkey), None)

    def replace(self, uid: int, hotkey: str) -> None:
        """A newcomer registers on `uid` (`replace_neuron`, then `clear_neuron`): the uid's
        own Weights row is removed, every weight on it in the other rows is set to 0, its
        axon and permit go, and its LastUpdate starts at this block. The subnet owner's
        hotkey is never replaced (the chain skips it)."""
        if self.neurons[uid].hotkey == self.owner_hotkey:
            return
        self.weights.pop(uid, None)
        for row in self.weights.values():
            if uid in row:
                row[uid] = 0
        self.neurons[uid] = Neuron(hotkey, last_update=self.block)

    def sent(self, function: str) -> list[Sent]:
        return [x for x in self.extrinsics if x.function == function]

    def _check_up(self) -> None:
        if self.raise_next is not None:
            error, self.raise_next = self.raise_next, None
            raise error
        if self.down:
            raise RpcConnectionError("connection refused (fake chain is down)")

    # --- Substrate protocol: lifecycle and display -------------------------------------
    def balance(self, rao: int, netuid: int = 0) -> Balance:
        return Balance(int(rao), netuid, None)

    async def connect(self) -> None:
        self._check_up()

    async def close(self) -> None:
        self.nonce_cache.clear()  # a new connection starts with no cached nonce

    # --- reads ------------------------------------------------------------------------
    async def block_hash(self, block: int | None = None) -> str:
        self._check_up()
        return f"0x{(self.block if block is None else block):064x}"

    async def block_number(self) -> int:
        self._check_up()
        if self.hold is not None:
            self.holding += 1
            while not self.hold.is_set():
                await asyncio.sleep(0.005)
            self.holding -= 1
        return self.block

    async def finalized_block_number(self) -> int:
        self._check_up()
        return self.finalized

    @property
    def finalized(self) -> int:
        return max(0, self.block - self.finality_lag)

    def _at(self, block_hash) -> int:
        return self.block if block_hash is None else int(block_hash, 16)

    def commitments_at(self, block: int) -> dict[str, dict]:
        """Each hotkey's latest commitment as of `block` (the pallet keeps only the latest,
        the log keeps the history a pinned read needs)."""
        seen = {hk: reg for hk, reg in self.commitments.items() if reg["block"] <= block}
        for at, hotkey, reg in self.commit_log:
            if at <= block and (hotkey not in seen or at > seen[hotkey]["block"]):
                seen[hotkey] = reg
        return seen

    def reorg(self) -> None:
        """The best blocks after the finalized head are replaced by another fork: the
        commitments they held are included again in the new blocks in the opposite order
        (what came first on the abandoned fork comes last on the new one)."""
        head = self.finalized
        moved = [(at, hk, reg) for at, hk, reg in self.commit_log if at > head]
        kept = [(at, hk, reg) for at, hk, reg in self.commit_log if at <= head]
        blocks = sorted({at for at, _, _ in moved})
        relabel = dict(zip(blocks, reversed(blocks), strict=True))
        self.commit_log = kept
        for hotkey in {hk for _, hk, _ in moved}:
            self.commitments.pop(hotkey, None)
        for at, hotkey, reg in sorted(moved, key=lambda x: relabel[x[0]]):
            reg = {**reg, "block": relabel[at]}
            self.commit_log.append((relabel[at], hotkey, reg))
            self.commitments[hotkey] = reg
        self.reorgs += 1

    def epoch_index(self, block: int) -> int:
        """The subnet's epoch at `block` (what the space quota is counted per)."""
        tempo = self.hyper["Tempo"]
        return (block + self.netuid + 1) // (tempo + 1)

    def activity_cutoff(self) -> int:
        """`get_activity_cutoff_blocks`: ActivityCutoffFactorMilli x Tempo / 1000 blocks, at
        least 1 (the legacy ActivityCutoff item is no longer read). A runtime from before the
        factor (`absent` has it) reads the absolute ActivityCutoff (`get_activity_cutoff`)."""
        if "ActivityCutoffFactorMilli" in self.absent:
            return self.hyper["ActivityCutoff"]
        return max(1, self.hyper["ActivityCutoffFactorMilli"] * self.hyper["Tempo"] // 1000)

    def epoch_start(self, block: int) -> int:
        """The block at which the subnet's epoch containing `block` ran."""
        return self.epoch_index(block) * (self.hyper["Tempo"] + 1) - (self.netuid + 1)

    def active(self, block: int | None = None) -> list[bool]:
        """The epoch's activity mask at `block` (run_epoch.rs): a neuron is inactive when
        LastUpdate + the activity cutoff < the block; the epoch then masks its stake out of
        consensus and it earns no dividends. The metagraph's `active` is the mask of the
        subnet's last epoch (the Active item it wrote)."""
        at = self.block if block is None else block
        cutoff = self.activity_cutoff()
        return [n.last_update + cutoff >= at for n in self.neurons]

    async def block_time(self) -> float:
        return 0.01

    def _in_runtime(self, storage_function: str) -> None:
        if storage_function in self.absent:
            raise StorageFunctionNotFound(f"storage function {storage_function} not found")

    async def query(self, module, storage_function, params=None, block_hash=None):
        self._check_up()
        self._in_runtime(storage_function)
        self.reads.append((module, storage_function))
        params = list(params or [])
        if module == "SubtensorModule" and storage_function in self.hyper:
            return self.hyper[storage_function]
        if (module, storage_function) == ("SubtensorModule", "Uids"):
            return self.uid_of(params[1])
        if (module, storage_function) == ("SubtensorModule", "LastUpdate"):
            # NetUidStorageIndex (mechanism 0's is the netuid); ValueQuery: [] for another
            return [n.last_update for n in self.neurons] if params[0] == self.netuid else []
        if (module, storage_function) == ("SubtensorModule", "ValidatorPermit"):
            return [n.permit for n in self.neurons]
        if (module, storage_function) == ("SubtensorModule", "SubnetOwnerHotkey"):
            return self.owner_hotkey
        if (module, storage_function) == ("SubtensorModule", "Weights"):
            # DMAP (NetUidStorageIndex, uid) -> Vec<(u16, u16)>, ValueQuery: [] for no row
            if params[0] != self.netuid:
                return []
            return [(u, w) for u, w in self.weights.get(params[1], {}).items()]
        if (module, storage_function) == ("SubtensorModule", "Axons"):
            uid = self.uid_of(params[1])
            return None if uid is None else self.neurons[uid].axon
        if (module, storage_function) == ("Commitments", "CommitmentOf"):
            return self.commitments_at(self._at(block_hash)).get(params[1])
        if (module, storage_function) == ("Commitments", "MaxSpace"):
            return self.max_space
        if (module, storage_function) == ("Commitments", "UsedSpaceOf"):
            return self.used_space.get(params[1])
        raise KeyError(f"the fake chain has no storage {module}.{storage_function}")

    async def query_map(self, module, storage_function, params=None, block_hash=None):
        self._check_up()
        self.reads.append((module, storage_function))
        if (module, storage_function) == ("Commitments", "CommitmentOf"):
            return list(self.commitments_at(self._at(block_hash)).items())
        if (module, storage_function) == ("Commitments", "RevealedCommitments"):
            return []
        if (module, storage_function) == ("SubtensorModule", "Uids"):
            return [(n.hotkey, uid) for uid, n in enumerate(self.neurons)]
        if (module, storage_function) == ("SubtensorModule", "TokenSymbol"):
            return []
        raise KeyError(f"the fake chain has no map {module}.{storage_function}")

    async def query_batch(self, module, storage_function, param_sets, block_hash=None):
        return [await self.query(module, storage_function, p, block_hash) for p in param_sets]

    async def map_has_entries(self, module, storage_function, params, block_hash=None):
        return bool(await self.query_map(module, storage_function, params, block_hash))

    async def runtime_call(self, api, method, params, block_hash=None):
        self._check_up()
        self.reads.append((api, method))
        if (api, method) != ("SubnetInfoRuntimeApi", "get_metagraph"):
            raise KeyError(f"the fake chain has no runtime call {api}.{method}")
        if params[0] != self.netuid:
            return None
        n = len(self.neurons)
        return {
            "netuid": self.netuid, "name": list(b"prism"), "symbol": list(b"p"),
            "block": self.block, "tempo": self.hyper["Tempo"], "last_step": 900,
            "blocks_since_last_step": self.block - 900, "owner_hotkey": self.owner_hotkey,
            "owner_coldkey": "owner", "network_registered_at": 1, "num_uids": n,
            "max_uids": 256, "hotkeys": [x.hotkey for x in self.neurons],
            "coldkeys": [x.coldkey for x in self.neurons],
            "axons": [x.axon or {"ip": 0, "port": 0, "ip_type": 4} for x in self.neurons],
            "validator_permit": [x.permit for x in self.neurons],
            "last_update": [x.last_update for x in self.neurons],
            "active": self.active(self.epoch_start(self.block)),
            "block_at_registration": [1] * n,
            "alpha_stake": [x.total_stake for x in self.neurons],
            "tao_stake": [0] * n, "total_stake": [x.total_stake for x in self.neurons],
        }

    async def constant(self, module, name):
        raise KeyError(f"the fake chain has no constant {module}.{name}")

    async def events(self, block_hash=None):
        return []

    # --- calls and writes ---------------------------------------------------------------
    async def compose(self, call):
        return call  # bittensor's generated Call(module, function, params)

    async def estimate_fee(self, call, keypair) -> Balance:
        return Balance(0)

    async def account_next_index(self, address: str) -> int:
        return 0

    async def submit(self, call, keypair, *, nonce=None, period=64, wait_for_inclusion=True,
                     wait_for_finalization=True) -> ExtrinsicResult:
        self._check_up()
        signer = keypair.ss58_address
        if nonce is None:
            nonce = self.nonce_cache.get(signer, self.nonces.get(signer, 0))
            self.nonce_cache[signer] = nonce + 1
        self.signed_nonces.append(nonce)
        if nonce > self.nonces.get(signer, 0):
            self.future_signed += 1  # a jammed client: this write can never land
        if self.drop:
            self.drop -= 1
            await asyncio.sleep(3600)  # in the pool, then dropped: the nonce stays unused
        if self.hang or nonce > self.nonces.get(signer, 0):
            await asyncio.sleep(3600)  # a future nonce waits in the pool for ever
        self.nonces[signer] = nonce + 1
        sent = Sent(call.module, call.function, dict(call.params), keypair.ss58_address,
                    period, self.block)
        self.extrinsics.append(sent)
        if self.reject is None:
            self.reject = self._refusal(sent)
        if self.reject is not None:
            name, self.reject = self.reject, None
            from bittensor import ChainError

            return ExtrinsicResult(success=False, message=name, error=ChainError(name, name))
        self._apply(sent)
        if self.lose:
            self.lose -= 1
            await asyncio.sleep(3600)
        return ExtrinsicResult(success=True, message="Success", block_hash=await self.block_hash())

    def _refusal(self, sent: Sent) -> str | None:
        """The pallet error the real chain answers this call with, if any."""
        if sent.function == "set_commitment":
            return self._commitment_refusal(sent)
        if sent.function == "serve_axon":
            return self._serving_refusal(sent)
        if sent.function == "commit_timelocked_mechanism_weights":
            return self._commit_refusal(sent)
        if sent.function != "set_mechanism_weights":
            return None
        if self.hyper["CommitRevealWeightsEnabled"]:
            return "CommitRevealEnabled"
        p = sent.params
        return self._weights_refusal(sent.signer, p["dests"], p["weights"], p["version_key"])

    def _serving_refusal(self, sent: Sent) -> str | None:
        """`validate_serve_axon` (subnets/serving.rs), in its order: registration, the ip
        type, the address (`is_valid_ip_address` with zero allowed), the serving rate limit,
        then the port."""
        uid, p = self.uid_of(sent.signer), sent.params
        if uid is None:
            return "HotKeyNotRegisteredInNetwork"
        if p["ip_type"] not in (4, 6):
            return "InvalidIpType"
        if not valid_ip_address(p["ip_type"], p["ip"], allow_zero=True):
            return "InvalidIpAddress"
        served = (self.neurons[uid].axon or {}).get("block") or 0
        if served and self.block - served < self.hyper["ServingRateLimit"]:
            return "ServingRateLimitExceeded"
        if p["port"] == 0:
            return "InvalidPort"
        return None

    def _commit_refusal(self, sent: Sent) -> str | None:
        """What the chain checks of a timelocked commit, and nothing else: the weights inside
        are checked at the reveal."""
        if not self.hyper["CommitRevealWeightsEnabled"]:
            return "CommitRevealDisabled"
        if sent.params["commit_reveal_version"] != self.commit_reveal_version:
            return "IncorrectCommitRevealVersion"
        uid = self.uid_of(sent.signer)
        if uid is None:
            return "HotKeyNotRegisteredInSubNet"
        if not self._rate_limit_passed(uid):
            return "CommittingWeightsTooFast"
        epoch = self.epoch_index(self.block)
        mine = [c for c in self.commits if c.signer == sent.signer and c.epoch == epoch]
        if len(mine) >= self.max_unrevealed:
            return "TooManyUnrevealedCommits"
        return None

    def _rate_limit_passed(self, uid: int) -> bool:
        last = self.neurons[uid].last_update
        return not last or self.block - last >= self.hyper["WeightsSetRateLimit"]

    def pending(self, hotkey: str) -> list[Commit]:
        """The hotkey's commits not revealed yet."""
        return [c for c in self.commits if c.signer == hotkey]

    def reveal_due(self) -> None:
        """Reveal every commit whose reveal block has come, in commit order, with the weight
        checks of a plain set (but not the rate limit, and LastUpdate stays the commit's), as
        `reveal_crv3_commits_for_subnet` does; a commit that fails one is dropped silently.
        The chain state used is the one at the moment the block moved."""
        due = [c for c in self.commits if c.reveal_at <= self.block]
        self.commits = [c for c in self.commits if c.reveal_at > self.block]
        for c in due:
            if c.sealed is None:
                self.dropped.append((c.signer, c.reveal_at, "undecryptable"))
                continue
            dests, values, version_key = c.sealed
            error = self._weights_refusal(c.signer, dests, values, version_key,
                                          revealing=True)
            if error is not None:
                self.dropped.append((c.signer, c.reveal_at, error))
                continue
            self._store_weights(self.uid_of(c.signer), dests, values)

    def _commitment_refusal(self, sent: Sent) -> str | None:
        """Registered hotkeys only, at most `max_fields` fields, and the hotkey's bytes this
        epoch (each commitment counts at least 100) within `max_space`."""
        if self.uid_of(sent.signer) is None:
            return "AccountNotAllowedCommit"
        fields = sent.params["info"]["fields"]
        if len(fields) > self.max_fields:
            return "TooManyFieldsInCommitmentInfo"
        size = max(100, sum(len(bytes(v)) for f in fields for v in f.values()))
        epoch = self.epoch_index(self.block)
        usage = self.used_space.get(sent.signer)
        used = usage["used_space"] if usage and usage["last_epoch"] == epoch else 0
        if used + size > self.max_space:
            return "SpaceLimitExceeded"
        self.used_space[sent.signer] = {"last_epoch": epoch, "used_space": used + size}
        return None

    def _weights_refusal(self, signer: str, dests: list[int], values: list[int],
                         version_key: int, *, revealing: bool = False) -> str | None:
        """The checks of `internal_set_weights`, in its order; at a reveal the rate limit is
        not checked (commit-reveal is on, the commit was rate limited)."""
        n, uid = len(self.neurons), self.uid_of(signer)
        if len(dests) > n:
            return "UidsLengthExceedUidsInSubNet"
        if uid is None:
            return "HotKeyNotRegisteredInSubNet"
        owner = uid == self.uid_of(self.owner_hotkey)
        if not owner and self.neurons[uid].total_stake < self.hyper["StakeThreshold"]:
            return "NotEnoughStakeToSetWeights"
        required = self.hyper["WeightsVersionKey"]
        if required and version_key < required:
            return "IncorrectWeightVersionKey"
        if not revealing and not self._rate_limit_passed(uid):
            return "SettingWeightsTooFast"
        self_weight = len(values) == 1 and dests[:1] == [uid]
        if not (self_weight or owner or self.neurons[uid].permit):
            return "NeuronNoValidatorPermit"
        if len(set(dests)) != len(dests):
            return "DuplicateUids"
        if any(d >= n for d in dests):
            return "UidVecContainInvalidOne"
        if not self_weight and len(values) < min(n, self.hyper["MinAllowedWeights"]):
            return "WeightVecLengthIsLow"
        limit, upscaled = self.hyper["MaxWeightsLimit"], max_upscale(values)
        if not self_weight and limit < 65535 and max(upscaled) * 65535 > limit * sum(upscaled):
            return "MaxWeightExceeded"  # check_vec_max_limited, without fixed-point rounding
        return None

    def _store_weights(self, uid: int, dests: list[int], values: list[int]) -> None:
        self.weights[uid] = dict(zip(dests, max_upscale(values), strict=True))

    def _apply(self, sent: Sent) -> None:
        uid = self.uid_of(sent.signer)
        if sent.function == "set_mechanism_weights":
            self._store_weights(uid, sent.params["dests"], sent.params["weights"])
        if sent.function in ("set_mechanism_weights", "commit_timelocked_mechanism_weights"):
            self.neurons[uid].last_update = self.block
        if sent.function == "commit_timelocked_mechanism_weights":
            epoch = self.epoch_index(self.block)
            reveal_epoch = epoch + self.hyper["RevealPeriodEpochs"]
            reveal_at = reveal_epoch * (self.hyper["Tempo"] + 1) - (self.netuid + 1)
            self.commits.append(Commit(sent.signer, self.block, epoch, reveal_at,
                                       SEALED.get(bytes(sent.params["commit"]))))
        elif sent.function == "serve_axon":
            p = sent.params
            self.neurons[uid].axon = {"ip": p["ip"], "port": p["port"], "ip_type": p["ip_type"],
                                      "block": self.block}
        elif sent.function == "set_commitment":
            # The pallet stores the info as sent; reads decode Raw bytes as 0x-hex.
            fields = [{k: "0x" + bytes(v).hex() for k, v in f.items()}
                      for f in sent.params["info"]["fields"]]
            reg = {"deposit": 0, "block": self.block, "info": {"fields": fields}}
            self.commitments[sent.signer] = reg
            self.commit_log.append((self.block, sent.signer, reg))


class FakeConnection:
    """One websocket to the fake chain (what a `bittensor.Subtensor` connects), for tests
    that need connections told apart: `FakeConnection(fake)` as the `substrate` of each new
    Subtensor. A call on a closed connection fails like a dropped socket, and so does a call
    in flight when its connection was closed under it (its answer is lost); connecting it
    again while it is open opens a second socket that nothing closes (`leaked`)."""

    def __init__(self, chain: FakeSubstrate) -> None:
        self._chain = chain
        self.opened = 0
        self.closed = False
        chain.connections.append(self)

    async def connect(self) -> None:
        if self.opened and not self.closed:
            self._chain.leaked += 1
        self.opened += 1
        await asyncio.sleep(self._chain.connect_delay)
        await self._chain.connect()

    async def close(self) -> None:
        self.closed = True
        await self._chain.close()

    def _usable(self, what: str) -> None:
        if self.closed:
            raise RpcConnectionError(f"{what}: the connection was closed")

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._chain, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        async def call(*args, **kwargs):
            self._usable(name)
            answer = await attr(*args, **kwargs)
            self._usable(name)  # closed while the call was in flight
            return answer

        return call


def valid_ip_address(ip_type: int, addr: int, *, allow_zero: bool) -> bool:
    """`is_valid_ip_address` (subnets/serving.rs), exactly: zero unless allowed (ServeAxon
    allows it), an IPv4 address of 255.255.255.255 or more, 127.0.0.1 (only that one: the
    rest of 127.0.0.0/8 passes), and IPv6 ::1 and ffff:...:ffff are refused."""
    if not allow_zero and addr == 0:
        return False
    if ip_type == 4 and (addr >= 0xFFFFFFFF or addr == 0x7F000001):
        return False
    return not (ip_type == 6 and addr in (2**128 - 1, 1))


def max_upscale(values: list[int]) -> list[int]:
    """`vec_u16_max_upscale_to_u16`: the largest value becomes 65535 (what the chain stores)."""
    top = max(values, default=0)
    if top in (0, 65535):
        return list(values)
    return [(v * 65535 + top // 2) // top for v in values]


def axon_of(address: str, block: int = 0) -> dict:
    host, port = address.rsplit(":", 1)
    return {"ip": int(ipaddress.ip_address(host)), "port": int(port), "ip_type": 4,
            "block": block}
