"""Do N validators set the same weights? A simulated subnet over the real ranking code.

A stream of submissions is generated once per seed: honest designs around a slowly
improving frontier, near-copies of the current leader that slip past the duplicate gate
(a tweak that may improve it a little), near-copies the gate catches, and copies that race
an original submitted in the same epoch (a leaky validator). Each validator then:

- receives every submission of an epoch in its own random order (arrival order), scores
  it after its own 0..`--max-delay` epochs, and measures its bpb and held-out delta with
  independent noise of `--noise` (relative, e.g. 0.002 = 0.2% of bpb, the spread of two
  GPU runs);
- gates near-copies in its gating order: by commitment block (`--precedence block`, this
  code) or by arrival (`--precedence arrival`, the rule before commitments), the copy of a
  standing bundle being refused;
- replays each of its runs (the contender replay) and marks it verified one to
  1 + `--max-delay` epochs after scoring it: only a verified run may lead;
- every epoch builds its weights with the real `build_plan` (epsilon grid, dethrone margin,
  payout split, verified leaders only) over what it ranks. With `--rule median` (default,
  the node's `agreement`) a run is ranked on the real `aggregate`: the stake-weighted median
  of the measurements the validator holds (its own and its peers', each peer's reaching it
  0..`--propagation` epochs after it was made), once they come from more than `--quorum` of
  the stake (`--stakes`) and have settled for `--settle` epochs; it is verified once the
  replays of more than `--quorum` of the stake passed. With `--rule own` each validator
  ranks on its own single measurement (the rule before shared input).

`--adversary` adds a lying or faulty validator (the last one, under 1/3 of the permitted
stake; the quorum is counted against every validator's stake, reachable or not, as the
node does): `withhold` serves nothing, `selective` answers the even validators only,
`equivocate` serves 2% low to even validators and 2% high to odd ones, `skew` dates half
its runs 50 epochs ahead (bounded by each receiver at arrival, as the node stores it) and
half 50 epochs behind; `missed-upload` makes every validator honest but one upload in five
never reaches one of them. Honest validators relay the pages they hold (one more
propagation hop), a validator holding two conflicting pages of one run (the real
`conflicting`) excludes the liar from then on and relays the proof (one more hop), and a
validator that missed an upload learns of the run from the first peer page and fetches
the bundle in that round, scoring it 0..`--max-delay` epochs later; `--no-relay` models
the node before these (no relay, no proofs, no bundle fetch).
Agreement is then counted over the honest validators. `--smoke` runs 60 epochs x 1 seed.

Printed per configuration: the fraction of epochs in which all validators pick the same
leader, and the mean pairwise cosine of their weight vectors. With `--sweep` it tries a
grid of dethrone margins and epsilons for both precedence rules, then repeats the
configured one (`scoring.dethrone_margin`, `scoring.epsilon_bpb` unless given) last.

    .venv/bin/python benchmarks/validator_agreement.py                 # ~1 min
    .venv/bin/python benchmarks/validator_agreement.py --rule own      # the old rule
    .venv/bin/python benchmarks/validator_agreement.py --sweep --seeds 5
    .venv/bin/python benchmarks/validator_agreement.py --adversary selective [--smoke]
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import statistics
import time
from dataclasses import dataclass, replace

from prism_challenge.agreement.aggregate import Measurement, aggregate
from prism_challenge.agreement.equivocation import conflicting
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.config.settings import Settings
from prism_challenge.scoring.leaderboard import Entry
from prism_challenge.weights.plan import build_plan

BASE_BPB = 1.10  # a FineWeb-Edu bpb scale (absolute epsilon matters against it)


@dataclass(frozen=True)
class Sub:
    index: int  # commitment order: the block
    epoch: int  # the epoch it was committed and uploaded in
    miner: int  # uid
    true_bpb: float
    true_delta: float
    copy_of: int | None  # caught by the duplicate gate as a near-copy of this submission


def world(rng: random.Random, *, epochs: int, miners: int, rate: float) -> list[Sub]:
    """One submission stream. uid 0 is the burn uid; copiers are the last quarter."""
    subs: list[Sub] = []
    frontier = BASE_BPB
    honest = list(range(1, miners - miners // 4))
    copiers = list(range(miners - miners // 4, miners))
    for epoch in range(epochs):
        for _ in range(_poisson(rng, rate)):
            kind = rng.random()
            standing = [s for s in subs if s.copy_of is None]
            leader = min(standing, key=lambda s: s.true_bpb, default=None)
            same_epoch = [s for s in standing if s.epoch == epoch]
            if leader is None or kind < 0.65:  # an honest design near the frontier
                bpb = frontier * (1 + rng.gauss(0.012, 0.012))
                frontier = min(frontier, bpb)
                subs.append(Sub(len(subs), epoch, rng.choice(honest), bpb,
                                rng.uniform(0.3, 0.6), None))
            elif kind < 0.80:  # a tweaked copy of the leader the gate does not catch
                bpb = leader.true_bpb * (1 - rng.uniform(0.0, 0.004))
                subs.append(Sub(len(subs), epoch, rng.choice(copiers), bpb,
                                leader.true_delta, None))
            else:  # a near-copy the gate catches; sometimes racing a same-epoch original
                source = rng.choice(same_epoch) if same_epoch and kind < 0.90 else leader
                subs.append(Sub(len(subs), epoch, rng.choice(copiers),
                                source.true_bpb * (1 + rng.gauss(0, 0.0005)),
                                source.true_delta, source.index))
    return subs


def _poisson(rng: random.Random, lam: float) -> int:
    k, p, limit = 0, 1.0, math.exp(-lam)
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


class Validator:
    def __init__(self, rng: random.Random, subs: list[Sub], *, noise: float, max_delay: int,
                 precedence: str) -> None:
        self.precedence = precedence
        self.max_delay = max_delay
        self.known_at: dict[int, int] = {}  # missed uploads: when a peer's page revealed it
        by_epoch: dict[int, list[Sub]] = {}
        for s in subs:
            by_epoch.setdefault(s.epoch, []).append(s)
        self.arrival: dict[int, float] = {}  # index -> accepted_at on this validator
        for epoch, group in by_epoch.items():
            order = group[:]
            rng.shuffle(order)
            for pos, s in enumerate(order):
                self.arrival[s.index] = epoch + pos / (len(order) + 1)
        self.scored_at = {s.index: s.epoch + rng.randint(0, max_delay) for s in subs}
        # a contender leads only once its replay passed: on this validator, one to
        # 1 + max_delay epochs after its score (every simulated run is honest, so it passes)
        self.verified_at = {i: at + 1 + rng.randint(0, max_delay)
                            for i, at in self.scored_at.items()}
        self.measured = {s.index: (s.true_bpb * (1 + rng.gauss(0, noise)),
                                   s.true_delta + rng.gauss(0, 10 * noise)) for s in subs}
        self.rejected = self._gate(subs)

    def _gate(self, subs: list[Sub]) -> set[int]:
        """Near-copies: whichever of (copy, source) is gated first stands."""
        key = ((lambda s: s.index) if self.precedence == "block"
               else (lambda s: self.arrival[s.index]))
        standing: set[int] = set()
        rejected: set[int] = set()
        for s in sorted(subs, key=key):
            if s.copy_of is not None and s.copy_of in standing:
                rejected.add(s.index)
            elif s.copy_of is None and any(c.copy_of == s.index and c.index in standing
                                           for c in subs):
                rejected.add(s.index)  # its copy got here first and stands in its place
            else:
                standing.add(s.index)
        return rejected

    def entry(self, s: Sub, epoch: int) -> Entry:
        """This validator's own view of a run it scored."""
        bpb, delta = self.measured[s.index]
        by_block = self.precedence == "block"
        return Entry(
            submission_id=s.index + 1, hotkey=f"hk{s.miner}", digest=f"{s.index:064x}",
            accepted_at=self.arrival[s.index], block=s.index if by_block else None,
            uid=s.miner if by_block else None, bpb=bpb, heldout_delta=delta,
            eligible=True, corpus="fineweb", scored_at=float(self.scored_at[s.index]),
            verification="passed" if epoch >= self.verified_at[s.index] else "queued")

    def entries(self, subs: list[Sub], epoch: int) -> list[Entry]:
        """The own-measurement rule: rank each run on this validator's one measurement."""
        return [self.entry(s, epoch) for s in subs
                if self.scored_at[s.index] <= epoch and s.index not in self.rejected]

    def measurement(self, s: Sub, name: str, epoch: int) -> Measurement:
        """What this validator serves about a run at `epoch` (scored by then)."""
        bpb, delta = self.measured[s.index]
        verified = self.verified_at[s.index]
        return Measurement(name, bpb, delta, True, float(self.scored_at[s.index]),
                           float(verified) if epoch >= verified else None)


class Shared:
    """The shared-input rule: every validator ranks each run on the stake-weighted median
    of the measurements it holds (its own, and its peers' once they arrived), with the real
    `aggregate`. A peer's measurement, and each later change of its verified flag, reaches a
    validator 0..`propagation` epochs after it was made (drawn per pair and run), directly
    or relayed by an honest validator that holds it (one more such hop), as the node's
    `GET /v1/relay` does. Two different measurements of one run signed by one validator
    (the real `conflicting`) are a proof that excludes it from the electorate of every
    validator that holds both, or that a proof reached (one more hop)."""

    def __init__(self, rng: random.Random, validators: list[Validator], subs: list[Sub], *,
                 stakes: list[float], propagation: int, quorum: float, settle: int,
                 adversary: str = "none", relay: bool = True) -> None:
        self.validators, self.subs = validators, subs
        self.relay = relay  # False: the node before relaying and fetching bundles
        self.names = [f"v{i}" for i in range(len(validators))]
        self.stakes = dict(zip(self.names, stakes, strict=True))  # every permitted validator
        self.permitted = sum(stakes)
        self.quorum, self.settle = quorum, settle
        n = len(validators)
        # delay[u][v][index]: epochs before v holds u's measurement (and its updates)
        self.delay = [[{s.index: 0 if u == v else rng.randint(0, propagation) for s in subs}
                       for v in range(n)] for u in range(n)]
        self.adversary = adversary
        self.bad = adversaries(stakes, adversary)
        # missed-upload: one in five uploads never reaches one honest validator (down, 503,
        # 429, or a miner choosing whom to send to); it learns of the run from the first
        # peer measurement that reaches it, fetches the bundle from a peer in that round
        # (agreement/bundles.py) and scores it 0..max_delay epochs later
        self.missed = {s.index: rng.randrange(n) for s in subs
                       if adversary == "missed-upload" and rng.random() < 0.2}
        for index, m in self.missed.items():
            me = validators[m]
            found = min(validators[u].scored_at[index] + self.delay[u][m][index]
                        for u in range(n) if u != m)
            me.scored_at[index] = found + rng.randint(0, me.max_delay)
            me.verified_at[index] = me.scored_at[index] + 1 + rng.randint(
                0, me.max_delay)
            me.known_at[index] = found if relay else 10**9
        self.proven_at = self._proofs()

    def _answers(self, u: int, v: int) -> bool:
        """Whether u serves its pages to v directly."""
        if u not in self.bad:
            return True
        if self.adversary == "withhold":
            return False
        return not (self.adversary == "selective" and v % 2)  # the even validators only

    def _paths(self, u: int, v: int, index: int) -> list[tuple[int, int]]:
        """(delay, first holder) of every way u's pages reach v: directly when u answers
        v, else through an honest relayer w that u answers."""
        out = [(self.delay[u][v][index], v)] if self._answers(u, v) else []
        out += [(self.delay[u][w][index] + self.delay[w][v][index], w)
                for w in range(len(self.validators)) if self.relay
                if w not in (u, v) and w not in self.bad and self._answers(u, w)]
        return out

    def _version(self, u: int, holder: int) -> str:
        """Which page of u the validator that fetched it from u holds."""
        if self.adversary == "equivocate" and u in self.bad:
            return "low" if holder % 2 == 0 else "high"
        return "one"

    def _proofs(self) -> dict[int, float]:
        """The epoch from which each honest validator holds a proof against the liar."""
        n = len(self.validators)
        own: dict[int, float] = {v: math.inf for v in range(n)}
        for u in self.bad:
            liar = self.validators[u]
            for s in self.subs:
                if s.index in liar.rejected:
                    continue
                low = liar.measurement(s, self.names[u], liar.scored_at[s.index])
                high = replace(low, bpb=low.bpb * 1.02)
                low = replace(low, bpb=low.bpb * 0.98)
                if not conflicting(low, high):
                    continue
                for v in range(n):
                    if v in self.bad:
                        continue
                    arrivals: dict[str, int] = {}
                    for d, holder in self._paths(u, v, s.index):
                        version = self._version(u, holder)
                        arrivals[version] = min(arrivals.get(version, 10**9), d)
                    if len(arrivals) == 2:
                        own[v] = min(own[v], liar.scored_at[s.index] + max(arrivals.values()))
        return {v: min([own[v]] + [own[w] + self.delay[w][v][0] for w in range(n)
                                   if w != v and w not in self.bad])
                for v in range(n)}

    def _held(self, s: Sub, u: int, v: int, epoch: int) -> Measurement | None:
        """u's measurement of s as v holds it at `epoch`, under the adversary's behaviour."""
        peer = self.validators[u]
        if u == v:
            seen = epoch
            path = (0, v)
        else:
            paths = self._paths(u, v, s.index)
            if not paths:
                return None
            path = min(paths)  # the first page to arrive is kept; a conflicting later one
            seen = epoch - path[0]  # is the proof (below), never stored
        if s.index in peer.rejected or peer.scored_at[s.index] > seen:
            return None
        m = peer.measurement(s, self.names[u], seen)
        if u not in self.bad or u == v:
            return m
        if self.adversary == "equivocate":  # 2% low to even validators, 2% high to odd
            return replace(m, bpb=m.bpb * (0.98 if self._version(u, path[1]) == "low"
                                          else 1.02))
        if self.adversary == "skew":  # half its runs dated 50 epochs ahead, half behind;
            shift = 50.0 if s.index % 2 else -50.0  # the receiver bounds it by arrival
            arrived = float(peer.scored_at[s.index] + path[0])
            verified = None if m.verified_at is None else min(
                m.verified_at + shift, float(peer.verified_at[s.index] + path[0]))
            return replace(m, measured_at=min(m.measured_at + shift, arrived),
                           verified_at=verified)
        return m

    def entries(self, v: int, epoch: int) -> list[Entry]:
        me = self.validators[v]
        stakes = {name: stake for u, (name, stake) in enumerate(self.stakes.items())
                  if not (u in self.bad and self.proven_at[v] <= epoch)}
        out = []
        for s in self.subs:
            if s.index in me.rejected:
                continue
            if self.missed.get(s.index) == v and me.known_at[s.index] > epoch:
                continue  # not known here yet: no submission row, nothing to rank
            held = [m for u in range(len(self.validators))
                    if (m := self._held(s, u, v, epoch)) is not None]
            ranked = aggregate(me.entry(s, epoch), held, stakes, quorum=self.quorum,
                               now=float(epoch), settle_s=float(self.settle),
                               permitted=self.permitted)
            if ranked is not None:
                out.append(ranked)
        return out


ADVERSARIES = ("none", "missed-upload", "equivocate", "selective", "withhold", "skew")


def adversaries(stakes: list[float], mode: str) -> set[int]:
    """The lying or faulty validators: the last one, which must hold under 1/3 of the
    permitted stake (none for `none` and `missed-upload`, where every validator is honest)."""
    if mode in ("none", "missed-upload"):
        return set()
    last = len(stakes) - 1
    if stakes[last] * 3 >= sum(stakes):
        raise SystemExit(f"--adversary {mode}: the last validator holds {stakes[last]:g} of "
                         f"{sum(stakes):g} stake, not under 1/3; give --stakes with a smaller "
                         "last value")
    return {last}


def cosine(a: dict[int, int], b: dict[int, int]) -> float:
    dot = sum(v * b.get(u, 0) for u, v in a.items())
    na = math.sqrt(sum(v * v for v in a.values()))
    nb = math.sqrt(sum(v * v for v in b.values()))
    return dot / (na * nb) if na and nb else float(na == nb)


def run(seed: int, args, *, margin: float, epsilon: float, precedence: str
        ) -> tuple[float, float, float, int]:
    """(same-leader fraction, mean pairwise cosine, validator 0's leaderless fraction, its
    changes of lead)."""
    rng = random.Random(seed)
    subs = world(rng, epochs=args.epochs, miners=args.miners, rate=args.rate)
    validators = [Validator(random.Random(seed * 1000 + v), subs, noise=args.noise,
                            max_delay=args.max_delay, precedence=precedence)
                  for v in range(args.validators)]
    shared = None if args.rule == "own" else Shared(
        random.Random(seed * 7919 + 1), validators, subs, stakes=stakes_of(args),
        propagation=args.propagation, quorum=args.quorum, settle=args.settle,
        adversary=args.adversary, relay=not args.no_relay)
    honest = [i for i in range(args.validators) if shared is None or i not in shared.bad]
    settings = Settings(scoring={"epsilon_bpb": epsilon, "dethrone_margin": margin},
                        weights={"winner_share": args.winner_share,
                                 "research_share": 0.0})
    metagraph = StaticMetagraph.of([f"hk{u}" for u in range(args.miners)])
    same, cosines, counted = 0, [], 0
    first = []  # validator 0's leader per epoch: a stream that never has one agrees trivially
    for epoch in range(args.warmup, args.epochs):
        plans = [build_plan(validators[i].entries(subs, epoch) if shared is None
                            else shared.entries(i, epoch), metagraph, settings)
                 for i in honest]
        leaders = {None if p.leader is None else p.leader.hotkey for p in plans}
        vectors = [dict(zip(p.uids, p.weights_u16, strict=True)) for p in plans]
        same += len(leaders) == 1
        cosines += [cosine(a, b) for a, b in itertools.combinations(vectors, 2)]
        counted += 1
        first.append(None if plans[0].leader is None else plans[0].leader.submission_id)
    changes = sum(a != b for a, b in itertools.pairwise(first) if a is not None)
    return same / counted, statistics.fmean(cosines), first.count(None) / counted, changes


def stakes_of(args) -> list[float]:
    """--stakes: one value per validator, or a shorter list repeated."""
    given = [float(x) for x in args.stakes.split(",")]
    return [given[i % len(given)] for i in range(args.validators)]


def evaluate(args, *, margin: float, epsilon: float, precedence: str
             ) -> tuple[float, float, float, float]:
    """`run`'s four figures, each averaged over the seeds."""
    results = [run(seed, args, margin=margin, epsilon=epsilon, precedence=precedence)
               for seed in range(args.seeds)]
    return tuple(statistics.fmean(r[i] for r in results) for i in range(4))


def main() -> None:
    defaults = Settings().scoring
    defaults_agreement = Settings().agreement
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--validators", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=5, help="epochs not counted")
    parser.add_argument("--miners", type=int, default=24)
    parser.add_argument("--rate", type=float, default=0.6, help="submissions per epoch")
    parser.add_argument("--noise", type=float, default=0.002, help="relative bpb noise")
    parser.add_argument("--max-delay", type=int, default=0,
                        help="epochs a validator may lag behind another in scoring")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--winner-share", type=float, default=1.0)
    parser.add_argument("--margin", type=float, default=defaults.dethrone_margin)
    parser.add_argument("--epsilon", type=float, default=defaults.epsilon_bpb)
    parser.add_argument("--precedence", choices=["block", "arrival"], default="block")
    parser.add_argument("--rule", choices=["median", "own"], default="median",
                        help="median: rank on the stake-weighted median of the measurements "
                        "held (shared input); own: on this validator's own measurement")
    parser.add_argument("--stakes", default="1",
                        help="validator stakes, comma-separated (repeated to --validators)")
    parser.add_argument("--quorum", type=float, default=defaults_agreement.quorum,
                        help="a run ranks once measurements from more than this share of "
                        "the stake are held")
    parser.add_argument("--propagation", type=int, default=1,
                        help="a peer's measurement reaches a validator 0..N epochs later")
    parser.add_argument("--settle", type=int, default=None,
                        help="epochs a measurement waits before it counts (default: "
                        "--propagation)")
    parser.add_argument("--adversary", choices=ADVERSARIES, default="none",
                        help="a lying or faulty validator under 1/3 of the stake (the last "
                        "one), or missed uploads; agreement is counted over honest ones")
    parser.add_argument("--no-relay", action="store_true",
                        help="the node before relaying pages, proofs and bundles")
    parser.add_argument("--smoke", action="store_true",
                        help="a quick check: 60 epochs x 1 seed")
    parser.add_argument("--sweep", action="store_true",
                        help="try every combination of the lists below first")
    parser.add_argument("--sweep-precedence", default="arrival,block")
    parser.add_argument("--sweep-epsilon", default="0,0.001,0.005")
    parser.add_argument("--sweep-margin", default="0,0.0025,0.005,0.01,0.02")
    parser.add_argument("--sweep-noise", default=None, help="default: --noise")
    args = parser.parse_args()
    if args.validators < 2:
        parser.error("--validators must be at least 2")
    if args.settle is None:
        args.settle = args.propagation
    if args.smoke:
        args.epochs, args.seeds = 60, 1
    if args.adversary != "none" and args.rule != "median":
        parser.error("--adversary needs --rule median (peers' measurements)")
    started = time.perf_counter()
    print(f"{args.validators} validators, {args.epochs} epochs x {args.seeds} seeds, "
          f"{args.rate:g} submissions/epoch, noise {args.noise:.2%} of bpb, scoring delay "
          f"0..{args.max_delay} epochs, winner share {args.winner_share:g}")
    if args.sweep:
        print(f"{'noise':>6} {'precedence':>10} {'epsilon':>8} {'margin':>7} "
              f"{'same leader':>12} {'cosine':>7}")
        noises = [float(x) for x in (args.sweep_noise or str(args.noise)).split(",")]
        for noise, precedence, epsilon, margin in itertools.product(
                noises, args.sweep_precedence.split(","),
                [float(x) for x in args.sweep_epsilon.split(",")],
                [float(x) for x in args.sweep_margin.split(",")]):
            same, cos, _, _ = evaluate(argparse.Namespace(**{**vars(args), "noise": noise}),
                                 margin=margin, epsilon=epsilon, precedence=precedence)
            print(f"{noise:>6g} {precedence:>10} {epsilon:>8g} {margin:>7g} {same:>11.1%} "
                  f"{cos:>7.3f}", flush=True)
    same, cos, leaderless, changes = evaluate(args, margin=args.margin, epsilon=args.epsilon,
                         precedence=args.precedence)
    print(f"configured: rule {args.rule}" + ("" if args.rule == "own" else (
          f" (quorum {args.quorum:.3g}, stakes {args.stakes}, propagation "
          f"0..{args.propagation}, settle {args.settle}, adversary {args.adversary}"
          f"{', no relay' if args.no_relay else ''})"))
          + f", precedence {args.precedence}, "
          f"epsilon {args.epsilon:g}, dethrone margin {args.margin:g} "
          f"({time.perf_counter() - started:.0f} s)")
    print(f"validator 0: the lead changed {changes:.1f} times per seed, no leader in "
          f"{leaderless:.1%} of epochs")
    print(f"agreement: same leader {same:.1%} of epochs, weight cosine {cos:.3f}")


if __name__ == "__main__":
    main()
