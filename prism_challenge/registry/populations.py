"""Populations: hotkeys spread over K briefs with different directives.

    population = int(sha256(salt + "|" + hotkey)) mod K
    salt       = sha256("prism-population|<netuid>|<epoch>")[:16]

The epoch is the chain block divided by `registry.population_epoch_blocks` when the node is
online, so every validator derives the same salt and gives a hotkey the same brief; in local
mode it is the ledger's own epoch counter (scored submissions // `registry.cycle_scored`),
through the same function. Assignments change every epoch, so nobody stays on one question.

Population `i` has the directive `KINDS[i % 3]`:
- explore: the claims with the highest information value (explore populations split the
  ranking between them, so two of them never get the same first claim);
- exploit: start from the leader's design with the best guess on every claimed axis (matched
  evidence first, else an additive fit of the recent runs) and change one claimed axis at a
  time;
- canary: canary axes and new LLM claims that still lack evidence.

The salt need not be secret: populations steer, they do not pay. Any miner can read every
population's brief (ask for another hotkey), and research credit depends only on the
evidence a run carried, never on the population of the hotkey that sent it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from prism_challenge.registry.hypotheses import Interaction, SingleFactor
from prism_challenge.registry.state import RegistryState

KINDS = ("explore", "exploit", "canary")
FOCUS_MAX = 5
DIRECTIVES = {
    "explore": "Bring evidence on the open claims whose answer is worth the most "
               "(highest information value); complete an open test cell when you can.",
    "exploit": "Start from the design below: the leader's, with the current best guess on "
               "every claimed axis. Send it as it is, and send it with one axis of your focus "
               "changed: each such pair is a matched contrast next to the best configuration "
               "known.",
    "canary": "Test the newest questions: canary axes and LLM-proposed claims that still "
              "lack evidence. Declare the canary axis in prism.toml [axes].",
}


@dataclass(frozen=True)
class Assignment:
    hotkey: str
    index: int  # 0-based
    count: int
    kind: str
    epoch: int
    epoch_source: str
    salt: str

    @property
    def why(self) -> str:
        return (f'sha256(salt + "|" + hotkey) mod {self.count} = {self.index}, with salt '
                f"{self.salt} = sha256(\"prism-population|netuid|epoch\")[:16] of epoch "
                f"{self.epoch} ({self.epoch_source}); it changes every epoch")


def epoch_of(online: bool, block: int | None, state: RegistryState, cfg) -> tuple[int, str]:
    """(epoch, where it came from): the chain block online, the ledger's counter locally."""
    if online and block is not None:
        return block // cfg.population_epoch_blocks, (
            f"chain block {block} // registry.population_epoch_blocks "
            f"{cfg.population_epoch_blocks}")
    if cfg.cycle_scored <= 0:
        return 0, "local epoch counter: fixed at 0 (registry.cycle_scored is 0)"
    return state.n_obs // cfg.cycle_scored, (
        f"local epoch counter: {state.n_obs} scored // registry.cycle_scored {cfg.cycle_scored}")


def salt_of(netuid: int, epoch: int) -> str:
    return hashlib.sha256(f"prism-population|{netuid}|{epoch}".encode()).hexdigest()[:16]


def assign(hotkey: str, *, netuid: int, epoch: int, count: int, epoch_source: str = ""
           ) -> Assignment:
    salt = salt_of(netuid, epoch)
    digest = hashlib.sha256(f"{salt}|{hotkey}".encode()).hexdigest()
    index = int(digest, 16) % count
    return Assignment(hotkey=hotkey, index=index, count=count, kind=KINDS[index % len(KINDS)],
                      epoch=epoch, epoch_source=epoch_source, salt=salt)


def assignment_for(hotkey: str, state: RegistryState, settings, block: int | None
                   ) -> Assignment:
    """The population of `hotkey` now, from the whole node `Settings`."""
    cfg = settings.registry
    epoch, source = epoch_of(settings.chain.mode == "online", block, state, cfg)
    return assign(hotkey, netuid=settings.chain.netuid, epoch=epoch, count=cfg.populations,
                  epoch_source=source)


def focus(state: RegistryState, who: Assignment, scores: dict[str, float], cfg,
          start: dict[str, str] | None = None) -> tuple[list[str], str]:
    """(claim ids this population is asked to work on, a note when it explores instead).
    `scores` are the allocation scores (information value x importance ...); `start` is the
    exploit design (default: the leader's), whose claims' cells it must sit in: once the
    best guess has moved the design off the leader's arm (adamw -> muon), the claim on that
    axis is again one a single change can test next to it. Populations
    whose own work is missing (no canary or new claim, no leader yet) explore, and all
    exploring populations split the ranking between them."""
    active = [h for h in state.live() if h.status == "active"]
    ranked = sorted((h.id for h in active if not h.canary_axis),
                    key=lambda k: (-scores.get(k, 0.0), k))
    fresh = sorted(h.id for h in active if h.canary_axis or (
        h.origin == "llm" and h.n < cfg.credibility_n))
    start = state.best_arms if start is None else start
    near = [k for k in ranked if _touches(state.hypotheses[k].spec, start)]
    own = {"canary": fresh, "exploit": near if state.best_arms else []}

    def acts(index: int) -> str:
        kind = KINDS[index % len(KINDS)]
        return kind if kind == "explore" or own[kind] else "explore"

    if acts(who.index) != "explore":
        return own[who.kind][:FOCUS_MAX], ""
    fallback = {"canary": "no canary or new LLM claim is open: explore instead",
                "exploit": "no leader design to start from yet: explore instead"}
    peers = [i for i in range(who.count) if acts(i) == "explore"]
    mine = ranked[peers.index(who.index)::len(peers)]
    return (mine or ranked)[:FOCUS_MAX], fallback.get(who.kind, "")


def _touches(spec, arms: dict[str, str]) -> bool:
    """The design sits in one of the claim's cells, so changing the claimed axis (one
    axis) makes a contrast next to it."""
    if isinstance(spec, SingleFactor):
        return arms.get(spec.axis) in (spec.treatment, spec.control)
    if isinstance(spec, Interaction):
        return (arms.get(spec.axis_a) in (spec.a1, spec.a0)
                and arms.get(spec.axis_b) in (spec.b1, spec.b0))
    return spec.axis in arms  # a threshold: every value lies on one side
