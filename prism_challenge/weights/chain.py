"""Putting a weights plan on chain: the only code here that writes weights to the subnet.

Two locks must both be open: the operator passes `--set` (`confirm=True`) AND the config
says `weights.dry_run: false` (with `chain.mode: online`). Then `WeightSetter.offer` sends
the plan only when the subnet allows it, instead of every epoch:

- the metagraph is fresh (while the chain is unreachable the last good view serves intake,
  but weights wait: a stale uid map could pay the wrong neuron);
- the subnet's `weights_rate_limit` has passed since this hotkey last set weights (read
  from the neuron's `last_update`; the chain's own preflight re-checks it);
- at least one tempo has passed since the last set (a commit-reveal subnet with rate limit
  0 would otherwise pile up an unrevealed commit every epoch);
- the version key derived from the scoring version is not below the subnet's
  `WeightsVersionKey`.

Right before sending, the metagraph is read again, and every check the chain applies to the
weights runs here first. On a commit-reveal subnet (the default for a new subnet) the chain
checks a commit only for its rate limit and registration; the weights inside are checked
when the chain reveals them, an epoch later, and a reveal that fails a check is dropped
without any error reaching the sender. So the plan is refused here, with the chain's reason,
when the hotkey has no validator permit (the subnet owner's hotkey is exempt) or too little
stake, when a planned row's hotkey no longer holds its uid (the next epoch re-plans on the
fresh metagraph), or when the vector breaks a rule on the uids or the subnet's
`max_weight_limit` / `min_allowed_weights` (`weights.conform.as_sent`: what is sent and
logged is the vector the chain stores). Once a commit's reveal is past, the chain's stored
weights for this uid are compared with what was committed, and a mismatch is logged.

It sends `SetWeights` only (the library picks a timelocked commit when the subnet runs
commit-reveal), bounded by the chain client's timeout and extrinsic period. An unreachable
chain is retried with exponential backoff; a refusal by the chain is not (it would refuse
again). Every outcome is logged and counted in `ChainStatus`
(`prism_weights_attempts_total{outcome}` at /metrics).

While no quorum ranks the runs, `keep_active` sends the weights last sent again once half
the subnet's activity cutoff has passed since this hotkey's LastUpdate, so the chain does
not count the validator inactive (no dividends) while it waits for its peers. A node
restarted since has sent nothing: it re-sends the Weights row the chain holds for its uid.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import bittensor

from prism_challenge.chain.metagraph import LiveMetagraph
from prism_challenge.chain.status import ChainStatus
from prism_challenge.chain.subtensor import ChainClient, ChainUnavailable, WeightsRules
from prism_challenge.config.settings import Settings
from prism_challenge.scoring.version import SCORING_VERSION, version_key
from prism_challenge.weights.conform import WeightsImpossible, as_sent
from prism_challenge.weights.plan import PlanRow, WeightPlan

log = logging.getLogger("prism.weights")


class WeightsLocked(RuntimeError):
    """Setting weights was asked for but is not enabled; the message says which lock."""


def check_unlocked(settings: Settings, *, confirm: bool) -> None:
    if not confirm:
        raise WeightsLocked("weights are only set on chain with an explicit --set flag")
    if settings.weights.dry_run:
        raise WeightsLocked("weights.dry_run is true in the config; set it to false to set weights")
    if settings.chain.mode != "online":
        raise WeightsLocked("chain.mode is 'local'; weights can only be set in 'online' mode")


@dataclass(frozen=True)
class WeightsOutcome:
    """What one offer did: set, committed, not_yet, stale, refused or failed."""

    outcome: str
    message: str
    block: int | None = None

    @property
    def sent(self) -> bool:
        return self.outcome in ("set", "committed")


@dataclass(frozen=True)
class _Commit:
    """A timelocked commit this setter sent, to compare with the chain after its reveal."""

    block: int
    due: int  # the reveal epoch is over by then: the chain revealed it or dropped it
    vector: dict[int, int]


def _holds(stored: dict[int, int], committed: dict[int, int]) -> bool:
    """The chain holds the committed vector: the same uids and values, except a weight the
    chain zeroed since because its uid was given to a newcomer."""
    return stored.keys() == committed.keys() and all(
        stored[uid] in (value, 0) for uid, value in committed.items())


class WeightSetter:
    def __init__(self, client: ChainClient, wallet: bittensor.Wallet, settings: Settings, *,
                 status: ChainStatus | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.client = client
        self.wallet = wallet
        self.retries = settings.chain.retries
        self.backoff_s = settings.chain.backoff_s
        self.status = status or ChainStatus()
        self.sleep = sleep
        self.version_key = version_key()
        self._sent_at: int = 0  # block of our last accepted extrinsic (the metagraph lags)
        self.last_sent: WeightPlan | None = None  # the vector last sent, as the chain stores it
        self._commits: list[_Commit] = []  # sent, their reveal not checked yet
        self._sending: tuple[WeightsRules, WeightPlan] | None = None
        self._warned_nothing_to_resend = False

    def offer(self, plan: WeightPlan, metagraph: LiveMetagraph) -> WeightsOutcome:
        outcome = self._offer(plan, metagraph)
        self.status.weights_attempt(outcome.outcome, block=outcome.block)
        level = logging.INFO if outcome.outcome in ("set", "committed", "not_yet") else (
            logging.WARNING)
        log.log(level, "weights: %s: %s", outcome.outcome, outcome.message)
        return outcome

    def keep_active(self, metagraph: LiveMetagraph) -> WeightsOutcome | None:
        """While no quorum ranks the runs no new plan is sent, and the weights last set stand
        on chain. But the subnet's epoch counts a validator inactive once the activity
        cutoff has passed since its LastUpdate (5000 blocks, about 17 hours, by default):
        its stake leaves consensus and it earns no dividends. So once more than half the
        cutoff has passed, the weights this setter last sent are offered again (a node
        restarted since has sent none: then the row the chain holds for its uid), through
        every check of `offer` (a row whose hotkey no longer holds its uid is not paid:
        then nothing is sent). None when nothing was due."""
        if metagraph.stale or metagraph.block is None:
            return None
        hotkey = self.wallet.hotkey.ss58_address
        neuron = metagraph.neuron(hotkey)
        if neuron is None:
            return None
        last = max(neuron.last_update, self._sent_at)
        try:
            cutoff = self.client.activity_cutoff()
        except ChainUnavailable:
            return None  # asked again at the next epoch, well before the cutoff
        since = metagraph.block - last
        if since <= cutoff // 2:
            return None
        resend, what = self.last_sent, "the weights last set"
        if resend is None:  # restarted since: what the chain holds for this uid
            try:
                resend = self._held_on_chain(neuron.uid, metagraph)
            except ChainUnavailable:
                return None  # asked again at the next epoch
            what = f"the weights the chain holds for uid {neuron.uid}"
        if resend is None:
            if not self._warned_nothing_to_resend:
                log.warning("weights: no quorum, this node has sent no weights since it "
                            "started and the chain holds none for uid %d: the chain counts %s "
                            "inactive (no dividends) at block %d unless weights are set "
                            "(prism weights --set)", neuron.uid, hotkey, last + cutoff + 1)
                self._warned_nothing_to_resend = True
            return None
        log.info("weights: no quorum; re-sending %s (block %d): %d blocks have passed of the "
                 "%d after which the chain counts this validator inactive (no dividends)",
                 what, last, since, cutoff)
        return self.offer(resend, metagraph)

    def _held_on_chain(self, uid: int, metagraph: LiveMetagraph) -> WeightPlan | None:
        """The chain's Weights row for this uid (a node restarted holds no vector of its
        own), as a plan to re-send; None when it holds no non-zero weight. A weight on a uid
        given to a newcomer since is one the chain already zeroed (clear_neuron): it is left
        out, so the re-send pays no newcomer; each row names the hotkey holding its uid now,
        so one that changes hands before the send stops it (`_moved_rows`)."""
        held = {dest: value for dest, value in sorted(self.client.weights_of(uid).items())
                if value > 0}
        if not held:
            return None
        holder = {n.uid: n.hotkey for n in metagraph.neurons}
        total = sum(held.values())
        rows = [PlanRow(uid=dest, hotkey=holder.get(dest), share=value / total, u16=value,
                        bpb=None, reasons=[f"held on chain for uid {uid}"])
                for dest, value in held.items()]
        return WeightPlan(netuid=self.client.netuid, block=metagraph.block, corpus=None,
                          dry_run=False, leader=None, uids=list(held),
                          weights_u16=list(held.values()), rows=rows, excluded=[])

    def _offer(self, plan: WeightPlan, metagraph: LiveMetagraph) -> WeightsOutcome:
        if not plan.uids:
            return WeightsOutcome("refused", "the plan has no non-zero weight")
        if metagraph.stale:
            return WeightsOutcome("stale", f"the chain is unreachable (metagraph of block "
                                  f"{metagraph.block}); weights wait for a fresh view")
        hotkey = self.wallet.hotkey.ss58_address
        neuron = metagraph.neuron(hotkey)
        if neuron is None:
            return WeightsOutcome("refused", f"{hotkey} is not registered on netuid "
                                  f"{self.client.netuid}")
        self._check_reveals(neuron.uid, metagraph.block or 0)
        last = max(neuron.last_update, self._sent_at)
        for attempt in range(self.retries + 1):
            try:
                return self._send(plan, last, metagraph)
            except ChainUnavailable as exc:
                if (landed := self._landed(neuron.uid, last)) is not None:
                    return landed
                if attempt == self.retries:
                    return WeightsOutcome("failed", f"{exc} (after {attempt + 1} attempts)")
                delay = self.backoff_s * 2**attempt
                log.warning("weights: attempt %d of %d: %s; retrying in %.1f s", attempt + 1,
                            self.retries + 1, exc, delay)
                self.sleep(delay)
            except bittensor.ChainError as exc:
                if exc.code == bittensor.ErrorCode.RATE_LIMITED:
                    return WeightsOutcome("not_yet", exc.message)
                return WeightsOutcome("failed", f"the chain refused the weights: {exc.message}")
        raise AssertionError("unreachable")

    def _landed(self, uid: int, last: int) -> WeightsOutcome | None:
        """After a write that did not answer: the chain's LastUpdate says whether it landed
        (never trust, nor blindly repeat, a write whose answer was lost)."""
        try:
            seen = self.client.last_update(uid)
        except ChainUnavailable:
            return None
        if seen <= last:
            return None
        self._sent_at = seen
        how = "set"
        if self._sending is not None:
            rules, sent = self._sending
            self.last_sent = sent
            if rules.commit_reveal:
                how = "committed"
                self._remember_commit(seen, rules, sent)
        return WeightsOutcome(how, f"landed at block {seen} (confirmed by LastUpdate after "
                              f"the write's answer was lost)", seen)

    def _send(self, plan: WeightPlan, last: int, metagraph: LiveMetagraph) -> WeightsOutcome:
        self._sending = None
        rules = self.client.weights_rules()
        since = rules.block - last
        floor = max(rules.rate_limit, rules.tempo)
        if last and since < floor:
            return WeightsOutcome("not_yet", f"last set {since} blocks ago; weights go at most "
                                  f"once per {floor} blocks (weights_rate_limit "
                                  f"{rules.rate_limit}, tempo {rules.tempo})")
        if self.version_key < rules.min_version_key:
            return WeightsOutcome(
                "refused", f"this validator scores with version {SCORING_VERSION} (version key "
                f"{self.version_key}) but netuid {self.client.netuid} requires version key >= "
                f"{rules.min_version_key}: upgrade PRISM")
        if not metagraph.refresh(force=True):  # who holds each uid, and our permit, now
            raise ChainUnavailable("the metagraph could not be read again before sending")
        hotkey = self.wallet.hotkey.ss58_address
        me = metagraph.neuron(hotkey)
        if me is None:
            return WeightsOutcome("refused", f"{hotkey} is no longer registered on netuid "
                                  f"{self.client.netuid}")
        if (moved := self._moved_rows(plan, metagraph)) is not None:
            return moved
        if (refused := self._permit_refusal(plan, me, metagraph.owner_hotkey, rules)):
            return WeightsOutcome("refused", refused)
        try:
            sent = as_sent(plan, rules, me.uid, subnet_n=metagraph.n)
        except WeightsImpossible as exc:
            return WeightsOutcome("refused", str(exc))
        # `as_sent` made sure the library's own clip and quantization leave this vector as it
        # is, so what is logged and shown is what the chain stores.
        self._sending = (rules, sent)  # what `_landed` confirms if the answer is lost
        self.client.set_weights(self.wallet, sent.uids, [float(w) for w in sent.weights_u16],
                                version_key=self.version_key)
        self._sent_at = rules.block
        self.last_sent = sent
        if rules.commit_reveal:
            self._remember_commit(rules.block, rules, sent)
        how = "committed" if rules.commit_reveal else "set"
        pairs = ", ".join(f"{u}={w}" for u, w in zip(sent.uids, sent.weights_u16, strict=True))
        return WeightsOutcome(how, f"{how} at block {rules.block} (version key "
                              f"{self.version_key}; {sent.as_sent}): {pairs}", rules.block)

    def _remember_commit(self, block: int, rules: WeightsRules, sent: WeightPlan) -> None:
        """The chain reveals a commit in the epoch `reveal_period` after its own; by the end
        of that epoch it has applied it or dropped it."""
        due = block + (rules.reveal_period + 1) * (rules.tempo + 1)
        self._commits.append(_Commit(block, due, dict(zip(sent.uids, sent.weights_u16,
                                                          strict=True))))

    def _moved_rows(self, plan: WeightPlan, metagraph: LiveMetagraph) -> WeightsOutcome | None:
        """A planned row whose hotkey no longer holds its uid (deregistered, its uid taken by
        a newcomer) would pay the newcomer: nothing is sent, and the next epoch plans on the
        metagraph just read."""
        paid = set(plan.uids)
        holder = {n.uid: n.hotkey for n in metagraph.neurons}
        moved = [f"uid {row.uid} planned for {row.hotkey} is now held by "
                 f"{holder.get(row.uid) or 'no one'}" for row in plan.rows
                 if row.hotkey and row.uid in paid and metagraph.uid_of(row.hotkey) != row.uid]
        if not moved:
            return None
        return WeightsOutcome("stale", f"{'; '.join(moved)}: nothing sent, the next epoch "
                              "plans on the fresh metagraph")

    def _permit_refusal(self, plan: WeightPlan, me: bittensor.MetagraphNeuron, owner: str,
                        rules: WeightsRules) -> str | None:
        """NeuronNoValidatorPermit and NotEnoughStakeToSetWeights, which the chain checks when
        it applies the weights: at the reveal, on a commit-reveal subnet, where a failure is
        silent. The subnet owner's hotkey is exempt from both, a lone self-weight from the
        permit."""
        if me.hotkey == owner:
            return None
        netuid = self.client.netuid
        stake = me.total_stake.rao
        if stake < rules.stake_threshold:
            return (f"{me.hotkey} (uid {me.uid}) holds {stake / 1e9:g} of stake but netuid "
                    f"{netuid} requires {rules.stake_threshold / 1e9:g} to set weights "
                    "(NotEnoughStakeToSetWeights): stake more to this hotkey")
        if not me.validator_permit and plan.uids != [me.uid]:
            when = " when it reveals them" if rules.commit_reveal else ""
            return (f"{me.hotkey} (uid {me.uid}) has no validator permit on netuid {netuid}, "
                    f"so the chain would drop these weights{when} (NeuronNoValidatorPermit): "
                    "stake more to this hotkey, or wait for the permit (the chain gives permits "
                    "each epoch to the hotkeys with the most stake)")
        return None

    def _check_reveals(self, uid: int, head: int) -> None:
        """Once a commit's reveal epoch is over, the chain holds what it revealed: warn when
        it is not what was committed (the chain dropped the reveal, saying nothing). A
        later commit may already be revealed over it, so any of those counts as applied."""
        due = [c for c in self._commits if c.due <= head]
        if not due:
            return
        try:
            stored = self.client.weights_of(uid)
        except ChainUnavailable:
            return  # asked again at the next offer
        checked = due[-1]
        self._commits = [c for c in self._commits if c.due > head]
        if any(_holds(stored, c.vector) for c in [checked, *self._commits]):
            return
        pairs = ", ".join(f"{u}={w}" for u, w in checked.vector.items())
        held = ", ".join(f"{u}={w}" for u, w in stored.items()) or "no weights"
        self.status.weights_dropped()
        log.warning("weights: dropped: the weights committed at block %d were not applied at "
                    "their reveal (the chain holds %s for uid %d, not %s): the chain drops a "
                    "revealed commit that fails a weight check; check this hotkey's validator "
                    "permit and stake (btcli subnets metagraph)", checked.block, held, uid,
                    pairs)
