"""The `Subnet` of a live chain: commitments and validator addresses through `ChainClient`.

Commitments are read for the whole subnet at once (`subnets.commitments`, at the finalized
head: precedence no reorg can change) and reused for `min_read_interval_s`, so a burst of
uploads costs one chain read, not one per request. A commitment is confirmed by reading it
back once finalized, also after a write whose answer was lost (it may have landed).
The intake address is published with `ServeAxon` only when it differs from the one on
chain, and only once the subnet's serving rate limit allows it; an address the chain
refuses as an axon (InvalidIpAddress, say) is not sent again until the node restarts.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from collections.abc import Callable

import bittensor

from prism_challenge.chain.metagraph import LiveMetagraph
from prism_challenge.chain.subnet import Commitment, Endpoint
from prism_challenge.chain.subtensor import ChainClient, ChainUnavailable

log = logging.getLogger("prism.chain")


# ServeAxon refusals of the address itself: sending it again gets the same answer.
_BAD_AXON = {"InvalidIpAddress", "InvalidIpType", "InvalidPort"}


def axon_address(host: str, port: int) -> str:
    """How the metagraph writes an axon: `ip:port`, `[ipv6]:port`."""
    ip = ipaddress.ip_address(host)
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


class CommitmentRefused(RuntimeError):
    """The chain refused a commitment (quota, registration); the message gives the next step."""


def refusal(exc: bittensor.ChainError, hotkey: str, netuid: int) -> CommitmentRefused:
    if exc.name == "SpaceLimitExceeded":
        return CommitmentRefused(
            f"netuid {netuid} refused the commitment of {hotkey}: its commitment space for "
            "this epoch is used (SpaceLimitExceeded; each commitment counts at least 100 "
            "bytes); it resets at the subnet's next epoch: submit again then")
    if exc.name == "AccountNotAllowedCommit":
        return CommitmentRefused(f"netuid {netuid} refused the commitment of {hotkey}: the "
                                 "hotkey is not registered there (btcli subnets register)")
    return CommitmentRefused(f"netuid {netuid} refused the commitment of {hotkey}: {exc}")


class OnlineSubnet:
    def __init__(self, client: ChainClient, metagraph: LiveMetagraph, *,
                 min_read_interval_s: float = 2.0,
                 clock: Callable[[], float] = time.monotonic,
                 finality_wait_s: float = 60.0, poll_s: float = 3.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        """`finality_wait_s`: how long `commit` waits for its commitment to be finalized
        (a few blocks of 12 s), reading it back every `poll_s`."""
        self.client = client
        self.metagraph = metagraph
        self.min_read_interval_s = min_read_interval_s
        self.clock = clock
        self.finality_wait_s = finality_wait_s
        self.poll_s = poll_s
        self.sleep = sleep
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._commitments: dict[str, bittensor.NeuronCommitment] = {}
        self._published: str | None = None
        self._refused: dict[str, str] = {}  # address -> the chain's refusal of it

    def _current(self) -> dict[str, bittensor.NeuronCommitment]:
        with self._lock:
            now = self.clock()
            if self._read_at is None or now - self._read_at >= self.min_read_interval_s:
                try:
                    self._commitments = self.client.commitments()
                    self._read_at = now
                except ChainUnavailable:
                    if self._read_at is None:
                        raise
                    log.warning("commitments: chain unreachable, using the last read")
            return self._commitments

    def latest_commitment(self, hotkey: str) -> Commitment | None:
        seen = self._current().get(hotkey)
        if seen is None or not seen.is_revealed or seen.value is None:
            return None
        return Commitment(hotkey, seen.value, seen.block, seen.uid)

    def commit(self, wallet: bittensor.Wallet, value: str) -> Commitment:
        """Send the commitment, then read it back once finalized (never trust the write). A
        write that timed out or lost its answer may have landed: it is read back too, and
        only reported failed when the chain does not show it."""
        hotkey = wallet.hotkey.ss58_address
        lost: ChainUnavailable | None = None
        try:
            self.client.set_commitment(wallet, value)
        except ChainUnavailable as exc:
            lost = exc
        except bittensor.ChainError as exc:
            raise refusal(exc, hotkey, self.client.netuid) from None
        seen = self._read_back(hotkey, value)
        if seen is not None:
            if lost is not None:
                log.info("commitment of %s: the write's answer was lost (%s) but it landed "
                         "at block %d", hotkey, lost, seen.block)
            return seen
        if lost is not None:
            raise ChainUnavailable(f"{lost}; the commitment is not on chain: run the command "
                                   "again") from None
        raise ChainUnavailable(
            f"the commitment of {hotkey} was sent but is not finalized after "
            f"{self.finality_wait_s:g} s; run the command again (it reuses the commitment "
            "once it is visible)")

    def _read_back(self, hotkey: str, value: str) -> Commitment | None:
        deadline = time.monotonic() + self.finality_wait_s
        while True:
            with self._lock:
                self._read_at = None  # read it from the chain, not the cache
            try:
                seen = self.latest_commitment(hotkey)
            except ChainUnavailable:
                seen = None
            if seen is not None and seen.value == value:
                return seen
            if time.monotonic() >= deadline:
                return None
            self.sleep(self.poll_s)

    def validators(self) -> list[Endpoint]:
        return [Endpoint(n.hotkey, f"http://{n.axon}") for n in self.metagraph.neurons
                if n.validator_permit and n.axon]

    def serve(self, wallet: bittensor.Wallet, host: str, port: int) -> str:
        hotkey, address = wallet.hotkey.ss58_address, axon_address(host, port)
        neuron = self.metagraph.neuron(hotkey)
        if neuron is None:
            return f"not published: {hotkey} is not registered on netuid {self.client.netuid}"
        if address in (neuron.axon, self._published):
            return f"{address} already published"
        if address in self._refused:
            return self._refused[address]
        rules = self.client.serving_rules(hotkey)
        if rules.last_served is not None and rules.block - rules.last_served < rules.rate_limit:
            wait = rules.rate_limit - (rules.block - rules.last_served)
            return f"not yet: the serving rate limit allows {address} in {wait} blocks"
        try:
            self.client.serve_axon(wallet, str(ipaddress.ip_address(host)), port)
        except bittensor.ChainError as exc:
            if exc.code == bittensor.ErrorCode.RATE_LIMITED:
                return f"not yet: {exc.message}"
            if exc.name in _BAD_AXON:  # it would refuse the same address at every poll
                self._refused[address] = (
                    f"not published: netuid {self.client.netuid} refuses {address} ({exc.name}); "
                    "set chain.serve_address to this host's public ip:port and restart")
                return self._refused[address]
            raise
        self._published = address
        return f"published {address}"
