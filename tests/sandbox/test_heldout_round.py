"""The held-out plan is the round's: the same for every run of a round, different between
rounds, recomputable from the revealed secret; and the eval answers every held-out task from
the final weights alone (a model that learns while evaluated gains nothing)."""

from __future__ import annotations

import numpy as np
import pytest
from sandbox_kit import bundle, digest_of, tiny_settings

from prism_challenge.sandbox.heldout import heldout_plan, ratio_se
from prism_challenge.sandbox.heldout_round import LOCAL_ROUND, RoundClock, reveal, round_of
from prism_challenge.scoring import score_record


def _plan(runner, rnd):
    sc = runner.settings.scoring
    return heldout_plan(runner.val, runner.seq_len, sc.heldout_positions,
                        sc.heldout_cuts_per_row,
                        rnd.rng(runner.val.manifest.sha256, runner.seq_len))


def test_a_rounds_plan_is_fixed_and_differs_between_rounds(runner):
    master = bytes(range(32))
    a, again, b = _plan(runner, round_of(master, 3)), _plan(runner, round_of(master, 3)), \
        _plan(runner, round_of(master, 4))
    assert np.array_equal(a.rows, again.rows) and np.array_equal(a.positions, again.positions)
    assert not np.array_equal(a.positions, b.positions)
    assert a.count == runner.settings.scoring.heldout_positions


def test_the_revealed_secret_reproduces_the_plan_and_a_wrong_one_is_refused(runner):
    rnd = round_of(b"validator master secret", 7)
    shown = rnd.commit  # published before the round
    back = reveal("round-7", rnd.secret.hex(), shown)
    assert np.array_equal(_plan(runner, back).positions, _plan(runner, rnd).positions)
    with pytest.raises(ValueError, match="not the commit"):
        reveal("round-7", round_of(b"validator master secret", 8).secret.hex(), shown)
    with pytest.raises(ValueError, match="not hex"):
        reveal("round-7", "zz", shown)
    assert LOCAL_ROUND.commit != rnd.commit


def test_ratio_se_matches_the_spread_of_row_ratios():
    rng = np.random.default_rng(0)
    nbytes = np.full(400, 40.0)
    bits = rng.normal(100.0, 10.0, size=400)
    # equal bytes per row: the SE of the mean of bits/bytes per row
    assert ratio_se(bits, nbytes) == pytest.approx(np.std(bits / 40, ddof=1) / np.sqrt(400))
    assert ratio_se(bits[:1], nbytes[:1]) is None


@pytest.mark.parametrize("learner", ["eval_learner", "eval_warnings_learner",
                                     "eval_sdpa_learner", "eval_classattr_learner",
                                     "eval_typevar_learner", "eval_mode_leaker",
                                     "eval_memo_cache_learner", "eval_freelist_learner",
                                     "eval_process_learner"])
def test_a_model_that_learns_while_evaluated_gains_nothing(runner, tiny_run, tmp_path, learner):
    """eval_learner keeps what it was shown in its globals and buffers; eval_warnings_learner
    in the process's warning filters, eval_sdpa_learner in its attention backends,
    eval_classattr_learner on a torch class, eval_typevar_learner on a TypeVar a torch class
    holds, eval_mode_leaker in inference mode left on, eval_memo_cache_learner in typing's
    subscription cache (read back with a clock), eval_freelist_learner in the order of the
    interpreter's tuple free lists (read back from `id()`), eval_process_learner in the
    process's environment (standing in for what no reset reaches, such as the order in which
    the memory allocators hand out blocks): every held-out task is answered in a process of
    its own, forked from one that no task ran in (harness/task_process.py)."""
    honest = tiny_run[1]  # the session's run of the tiny bundle, on the same runner
    files = bundle(learner)
    learner = runner.run(files, digest_of(files), tmp_path / "b")
    assert learner.columns.nats.tolist() == honest.columns.nats.tolist()
    assert learner.eval.val_tokens == honest.eval.val_tokens > 0
    assert learner.eval.val_bpb_trained == honest.eval.val_bpb_trained
    assert learner.eval.val_bpb_twin == honest.eval.val_bpb_twin


def test_freed_memory_carries_nothing_between_tasks_with_the_deterministic_mode_off(
        make_runner, tmp_path):
    """With `sandbox.deterministic_algorithms: false` torch does not fill new tensors, so a
    task's freed memory could reach the next one's uninitialised tensor; held-out tasks run
    with the mode on (warn-only), which fills them: the learner answers as the honest model."""
    r = make_runner(tiny_settings(deterministic_algorithms=False))
    honest, learner = (r.run(files, digest_of(files), tmp_path / name)
                       for name, files in (("a", bundle("tiny")),
                                           ("b", bundle("eval_freed_memory_learner"))))
    assert learner.eval.val_tokens == honest.eval.val_tokens > 0
    assert learner.eval.val_bpb_trained == honest.eval.val_bpb_trained


def test_a_model_that_pools_the_rows_of_its_batch_is_not_eligible(runner, tiny_run, tmp_path):
    """Pooling what the cut rows of one held-out forward hold lowers the held-out bpb (2.41
    against the honest 2.55 here, and the delta by 0.15) with nothing to carry between
    tasks. The recheck answers a block of rows again, each at another cut than its
    neighbours: an honest model's answers are exactly the same, the pooler's are not."""
    honest = tiny_run[1]  # the session's run of the tiny bundle, on the same runner
    files = bundle("heldout_pooler")
    pooler = runner.run(files, digest_of(files), tmp_path / "b")
    assert honest.eval.probe_trained.rows_apart == 0.0
    assert honest.eval.probe_twin.rows_apart == 0.0
    assert score_record(honest, runner.settings.scoring).eligible
    assert pooler.eval.val_bpb_trained < honest.eval.val_bpb_trained - 0.05
    assert pooler.eval.probe_trained.rows_apart > 0.01
    assert not pooler.eval.probe_trained.ok
    score = score_record(pooler, runner.settings.scoring)
    assert not score.eligible
    assert any("other rows shared its batch" in r for r in score.reasons), score.reasons


@pytest.mark.parametrize("n", [3, 16, 17, 96, 200])
def test_a_recheck_keeps_each_rows_place_and_shape_and_mixes_tasks(n):
    """Every plan task of a cut has one shape (the last topped up with filler rows); the
    recheck's row at each place is a row that had that place in some task, never all from
    one task, all at one cut index like a plan task, so only the contents beside a row
    change."""
    from prism_challenge.sandbox.heldout import HeldOutPlan, recheck_task

    rows = np.arange(n * 9).reshape(n, 9) % 50 + 1
    plan = HeldOutPlan(rows, np.tile(np.arange(1, 5), (n, 1)))
    b = plan.batch_rows(32)
    assert b == min(32, -(-n // 2))
    shapes = {t.inputs.shape for t in plan.tasks("m", 32, 0)}
    assert shapes == {(b, 8)}
    for seed in range(50):
        task = recheck_task(plan, "m", 32, 0, np.random.default_rng(seed))
        idx = task.tag[3]
        assert task.inputs.shape == (b, 8) and task.select_rows == list(range(b))
        assert (idx % b == np.arange(b)).all() and (idx < n).all()
        assert len(set(task.tag[4].tolist())) == 1  # one cut index, as in a plan task
        assert len(set((idx // b).tolist())) >= 2
        assert (task.inputs[:, 0] == rows[idx, 0]).all()


def test_a_plan_of_few_rows_still_rechecks_rows_beside_new_neighbours(make_runner, tmp_path):
    """16 plan rows (under one task's 32): the plan's tasks hold 8 rows each, so the recheck
    draws its 8 rows from both halves and the pooler's answers move. (With the plan as one
    task of 16 rows the recheck could only change cuts, and a pooler of the rows' first
    tokens, which no cut removes, passed it: rows_apart 0.0, held-out bpb 2.592 against the
    honest 2.598.)"""
    r = make_runner(tiny_settings(scoring={"heldout_positions": 64}))
    plan = _plan(r, LOCAL_ROUND)
    assert len(plan.rows) == 16 and plan.batch_rows(32) == 8
    honest, pooler = (r.run(files, digest_of(files), tmp_path / name)
                      for name, files in (("a", bundle("tiny")),
                                          ("b", bundle("heldout_head_pooler"))))
    assert honest.eval.probe_trained.rows_apart == 0.0
    assert pooler.eval.val_bpb_trained != honest.eval.val_bpb_trained
    assert pooler.eval.probe_trained.rows_apart > 10 * r.settings.scoring.probe_abs_tol
    assert not pooler.eval.probe_trained.ok
    assert not score_record(pooler, r.settings.scoring).eligible


def test_a_validators_rounds_keep_their_secret_and_reveal_only_ended_rounds(tmp_path):
    key = tmp_path / "state" / "heldout-master.key"
    clock = RoundClock.open(key, 100.0)
    assert key.stat().st_mode & 0o777 == 0o600
    assert RoundClock.open(key, 100.0).current(250.0) == clock.current(299.0)  # one round
    assert clock.current(250.0).label == "round-2" and clock.current(300.0).label == "round-3"
    assert clock.revealed(2, now=300.0).commit == clock.current(250.0).commit
    with pytest.raises(ValueError, match="has not ended"):
        clock.revealed(3, now=300.0)
    key.write_bytes(b"short")
    with pytest.raises(ValueError, match="not a 32-byte held-out master secret"):
        RoundClock.open(key, 100.0)


def test_the_twin_answers_the_same_positions_and_the_delta_is_paired(tiny_run, runner,
                                                                      tmp_path):
    """One run, then its final weights evaluated again under its own round and another in one
    eval sandbox: the same round gives the same figures exactly, another round others. The
    twin answers every position the trained model does, so the delta's SE is that of the
    per-row differences: within the sum of the two SEs (their residuals subtract). With
    `twin_rounds` 1 the twin answers the first round only (what benchmarks/score_noise.py
    asks of the other rounds' plans)."""
    files, record, folder = tiny_run
    ev = record.eval
    assert ev.val_tokens == _plan(runner, LOCAL_ROUND).count
    assert 0 < ev.heldout_delta_se <= ev.val_bpb_trained_se + ev.val_bpb_twin_se
    other = round_of(b"m" * 32, 1)
    again, moved = runner.evaluate_weights(files, folder / "eval_inputs" / "final.pt",
                                           tmp_path / "again", [LOCAL_ROUND, other],
                                           twin_rounds=1)
    assert (again.val_bpb_trained, again.val_bpb_twin, again.heldout_delta_se) == (
        ev.val_bpb_trained, ev.val_bpb_twin, ev.heldout_delta_se)
    assert moved.heldout_round == other.label and moved.heldout_commit == other.commit
    assert moved.val_bpb_trained != ev.val_bpb_trained
    assert moved.val_tokens == _plan(runner, other).count
    assert (moved.val_bpb_twin, moved.heldout_delta_se) == (None, None)


TELLER = b'''

class Teller(Tiny):
    def forward(self, input_ids):
        if not self.training:  # a held-out task: tell what was shown, then fail
            shown = "SHOWN-" + "-".join(str(t) for t in input_ids[0, :6].tolist())
            print(shown, flush=True)
            raise ValueError(shown)
        return super().forward(input_ids)


def build_model(ctx):
    return Teller(ctx.vocab_size)
'''


def test_what_a_model_writes_after_seeing_a_secret_round_is_not_published(runner, tmp_path):
    """A round's plan is the same for every run, and each cut shows the previous cut's
    target: the eval sandbox's own words (its error, its output) once it was given held-out
    inputs would hand them to the next bundle, so a secret round's record keeps only the
    cause. The public local round (`prism eval`) keeps them, for the miner to debug."""
    files = bundle("tiny")
    files["architecture.py"] += TELLER
    secret = runner.run(files, digest_of(files), tmp_path / "secret",
                        heldout_round=round_of(b"validator master secret", 9))
    local = runner.run(files, digest_of(files), tmp_path / "local")
    for record in (secret, local):
        assert record.exit_reason == "ok" and record.eval.exit_reason == "crash"
    assert "SHOWN-" not in secret.eval.detail and "not published" in secret.eval.detail
    assert "SHOWN-" in local.eval.detail
