"""docs/security.md B3, B5, B7, B8: a model that notices checks gains nothing.

Each attack runs for real in bubblewrap (bypassing the static gates, tested elsewhere). The
original run has nothing to notice; held-out scores are target-absent; and a contender's
replay checks positions it could not know would be checked. Where an attack would pass the
original run's screens (causality, gap), the replay must fail it.
"""

from __future__ import annotations

import pytest
from sandbox_kit import bundle, digest_of, tiny_settings

from prism_challenge.scoring import score_record
from prism_challenge.verification.verdict import verdict


@pytest.fixture
def verify(runner, tmp_path):
    """(record, score, replay, verdict) of one bundle: the original run, then its replay."""

    calls = []

    def _verify(files, r=None):
        r = r or runner
        calls.append(None)
        here = tmp_path / str(len(calls))
        record = r.run(files, digest_of(files), here / "run")
        score = score_record(record, r.settings.scoring)
        replay = r.replay(files, record, here / "replay")
        return record, score, replay, verdict(replay, r.settings.verification)

    return _verify


def test_stealthy_sparse_peeker_passes_the_screens_and_fails_the_replay(verify, make_runner):
    """Peeks at ~6% of positions only when the batch and the one before it are new: the
    causality probe (variations of one batch) never sees it, the gap only dents it; the
    replay's target-absent probes find the positions it read. At the default keep rate of
    this tiny budget the replay probes 42-52 positions (measured), which miss every peeked
    one with probability (15/16)^45, about 5%: this test keeps 5% of positions instead of 2%
    (138-139 probed, measured: a miss about 0.01%); benchmarks/probe_catch_rate.py measures the
    catch rate at real settings."""
    settings = tiny_settings()
    settings = settings.model_copy(update={"verification": settings.verification.model_copy(
        update={"keep_rate_max": 0.05})})
    record, score, replay, v = verify(bundle("peek", EVERY="16", GUARD="5"),
                                      make_runner(settings))
    assert record.exit_reason == "ok" and record.eval.exit_reason == "ok"
    assert record.eval.probe_trained.ok and record.eval.probe_twin.ok
    assert score.eligible, score.reasons  # a non-contender would keep this provisional score
    assert not v.passed
    assert replay.probes.mismatched >= 1
    # a peeked loss is ~0 on one side of the comparison and the honest loss on the other (which
    # side depends on where the stateful guard chose to peek in each run): 4.5-7 nats seen,
    # where the drift of the weights after a peek moves a loss by a few tenths at most (such
    # drift is a mismatch too at the default tolerances, so the first examples may be drift)
    assert replay.probes.max_abs_diff > 1
    assert any(r.startswith("positions:") for r in v.reasons)


def test_a_faint_peek_at_every_position_fails_the_replay(verify, make_runner):
    """A peek too faint for any one position to stand out: a bonus of 0.008 on the target's
    logit at every position while training (about 0.008 nats a token, 0.25% of bpb at 3
    nats). The replay's probes and snapshots, cut before each target, pay it back at every
    kept position. Under the old tolerances (0.05 + 1% a position, 0.01 on the mean) the
    same replay passed: their slack was a cheat's budget. Same-stack replays reproduce to
    1e-6 nats or better (docs/scoring.md), so the defaults now allow 1e-3. (This fixture
    also peeks in the final weights, so the causality screen flags it; a model that drops
    the peek before its last step would pass that screen, and the replay is what stops it.)"""
    files = bundle("peek", EVERY="1")
    files["architecture.py"] = files["architecture.py"].replace(b"BOOST = 30.0",
                                                                b"BOOST = 0.008")
    record, _, replay, v = verify(files)
    assert record.exit_reason == "ok"
    assert not v.passed and any(r.startswith("positions:") for r in v.reasons), v.reasons
    assert 0.006 < replay.probes.mean_diff < 0.0085 and replay.probes.max_abs_diff < 0.01
    loose = tiny_settings()
    loose = loose.model_copy(update={"verification": loose.verification.model_copy(update={
        "position_abs_tol": 0.05, "position_rel_tol": 0.01, "mean_tol": 0.01})})
    assert verify(files, make_runner(loose))[3].passed  # the loophole the old slack left


def test_snapshot_and_timing_aware_peeker_fails_the_replay(verify):
    """Peeks everywhere it believes unobserved: not on the first step, not right after a
    state_dict() of its submodule, not after an unusually slow step (the old audit's tells).
    The held-out score is target-absent, so the gap zeroes it; the replay fails it too."""
    record, score, replay, v = verify(bundle("peek", EVERY="1", GUARD="4"))
    assert not score.eligible and any(r.startswith("gap:") for r in score.reasons)
    assert record.eval.val_bpb_trained > 2.0 and score.prequential_bpb < 1.0
    assert not v.passed
    assert replay.snapshots.mismatched >= 1 and replay.probes.mismatched >= 1


def test_peeking_at_held_out_inputs_only_costs(run, runner):
    """A model that reads the next input everywhere, in every mode: the held-out inputs hold
    a filler after the scored position, so reading ahead there only hurts: its trained
    weights do worse on held-out text than its own untrained twin."""
    record = run(bundle("peek", EVERY="1", GUARD="-1"))
    score = score_record(record, runner.settings.scoring)
    assert record.eval.val_bpb_trained > record.eval.val_bpb_twin
    assert not score.eligible and any(r.startswith("gap:") for r in score.reasons)


def test_a_run_the_replay_cannot_reproduce_is_not_verified(verify):
    """Behaviour that differs between runs (here: the clock sets the learning rate), as a
    model's would if it behaved differently when replayed."""
    record, score, replay, v = verify(bundle("nondeterministic"))
    assert score.eligible
    assert replay.batch_mismatch_count >= 1
    assert not v.passed and any("not reproduced" in r for r in v.reasons)


def test_a_buffer_reassigned_in_forward_is_restored_after_each_probe(verify):
    """An honest model that keeps a count in a buffer it reassigns (`self.seen = self.seen +
    1`): the replay's probe forwards must leave the scored forwards exactly as they were."""
    record, score, replay, v = verify(bundle("counter_buffer"))
    assert record.exit_reason == "ok", record.exit_detail
    assert replay.probe_steps and replay.batches_compared > 0
    assert replay.batch_mismatch_count == 0 and v.passed, v.reasons


def test_introspection_finds_no_tell_in_the_original_run(verify):
    """Scanning every object for the feeder's replies finds nothing but rows and a token
    count in the original run; in the replay it sees the checks coming, and that changes
    nothing: the values it is judged on were already reported."""
    record, score, replay, v = verify(bundle("introspect"))
    assert record.exit_reason == "ok", record.exit_detail
    assert replay.exit_reason == "crash" and "check tells found" in replay.exit_detail
    assert "probe" in replay.exit_detail
    assert v.passed, v.reasons


def test_no_validator_file_is_readable_in_either_sandbox(verify, runner):
    """The architecture walks every visible folder and tries linecache and warnings on the
    files the eval sandbox used to hold; it raises if it finds anything but its own code,
    weights and snapshots. Both sandboxes (and the replay's) stay clean."""
    record, score, replay, v = verify(bundle("sidedoor"))
    assert record.exit_reason == "ok", record.exit_detail
    assert record.eval.exit_reason == "ok", record.eval.detail
    assert record.eval.val_bpb_trained is not None
    assert v.passed and replay.snapshots.compared > 0


def test_a_snapshot_rewritten_after_its_step_never_reaches_the_eval(runner, tmp_path):
    """Past the policy (it reads and writes files), an honest model's training rewrites every
    replay snapshot it finds in /scratch/snapshots, right after that step's optimiser step,
    with the weights trained on the step's targets. When snapshots stayed in the training
    scratch until the run ended, the eval sandbox re-predicted from the rewrite (mismatches,
    the replay failed). Now each snapshot is streamed to the feeder before the step's forward
    and written in a host folder no sandbox mounts: the training scratch holds none, and the
    eval sees each snapshot as it was taken."""
    files = bundle("snapshot_rewrite")
    record = runner.run(files, digest_of(files), tmp_path / "run")
    assert record.exit_reason == "ok", record.exit_detail
    replay = runner.replay(files, record, tmp_path / "replay")
    v = verdict(replay, runner.settings.verification)
    assert replay.exit_reason == "ok", replay.exit_detail
    assert replay.missing == [] and len(replay.snapshot_steps) == 2
    assert replay.snapshots.compared > 0 and replay.snapshots.mismatched == 0
    assert replay.snapshots.max_abs_diff < 1e-4 and v.passed, v.reasons
    assert not (tmp_path / "replay" / "scratch" / "snapshots").exists()
    handed = sorted(p.name for p in (tmp_path / "replay" / "eval_inputs").glob("step_*.pt"))
    assert handed == [f"step_{s:08d}_rank0.pt" for s in replay.snapshot_steps]


def test_reading_the_next_row_of_the_batch_gains_nothing_and_is_caught(run, runner):
    """Rows of a batch come from different lanes of the stream, so the row after is not the
    continuation; the causality screen also changes the other rows and sees the leak."""
    record = run(bundle("cross_row"))
    score = score_record(record, runner.settings.scoring)
    assert not score.eligible
    assert any("causality" in r for r in score.reasons)
    assert record.eval.probe_trained.max_abs_diff > 1


def test_reading_another_row_only_at_the_training_batch_size_fails_the_replay(verify):
    """A model that reads the first token of the next row of its batch, only at 12 rows or
    more: the screen (8 rows) sees a causal model and the replay reproduces every batch
    loss. Its probes and snapshots answer each kept position with the rows that hold no
    position asked in that forward turned to filler, so what the next row added shows as a
    mismatch. (When every other row stayed intact, the same replay found no mismatch: a
    row's first token is never cut.) The held-out recheck (32 rows) finds it on its own."""
    record, score, replay, v = verify(bundle("cross_row_batch"))
    probe = record.eval.probe_trained
    assert record.exit_reason == "ok" and probe.max_abs_diff == 0.0, record.eval
    assert probe.rows_apart > 0.01 and not score.eligible, score.reasons
    assert replay.batch_mismatch_count == 0 and replay.batches_compared > 0
    assert not v.passed and any(r.startswith("positions:") for r in v.reasons), v.reasons
    assert replay.probes.mismatched >= 1 and replay.probes.max_abs_diff > 0.01


def test_an_honest_model_answers_a_cut_row_alone_as_it_did_in_its_batch(verify):
    """The honest tiny model trained at 16 rows a step: filler beside the probed rows
    changes none of its answers, the replay passes with every probe exact."""
    files = bundle("tiny")
    files["training.py"] = bundle("cross_row_batch")["training.py"]
    _, _, replay, v = verify(files)
    assert v.passed, v.reasons
    assert replay.probes.compared > 0 and replay.probes.max_abs_diff == 0.0


def test_a_tensor_subclass_cannot_rewrite_the_scored_loss(run):
    """Logits of a tensor subclass would compute the harness's per-position losses with the
    model's own methods (the replay passed such a run, halved at one step). The harness
    takes a plain tensor only: the run ends at its first forward as a contract error."""
    # the attack corpus's bundle, run past the AST policy that refuses it
    record = run(bundle("../attacks/b2_tensor_subclass_alias"))
    assert record.exit_reason == "contract"
    assert "Scaled, not a plain logits tensor" in record.exit_detail
    assert record.consumed.scored_tokens == 0


def test_weights_in_buffers_count_against_the_cap(make_runner, tmp_path):
    r = make_runner(tiny_settings(challenge={"param_cap": 100_000}))
    files = bundle("buffer_cap")
    record = r.run(files, digest_of(files), tmp_path / "cap")
    assert record.exit_reason == "contract"
    assert "tensor elements" in record.exit_detail and "100,000" in record.exit_detail


def test_state_grown_after_the_build_counts_against_the_cap(make_runner, tmp_path):
    """The cap is counted when build_model returns and again when `train` returns: a bigram
    table registered at the first training forward (65,536 elements beside the ~21,000 the
    build held) ends the run as a contract error, not a score."""
    r = make_runner(tiny_settings(challenge={"param_cap": 40_000}))
    files = bundle("grown_state")
    record = r.run(files, digest_of(files), tmp_path / "grown")
    assert record.exit_reason == "contract", (record.exit_reason, record.exit_detail)
    assert "grew to" in record.exit_detail and "40,000" in record.exit_detail


def test_telemetry_floods_are_bounded_inside_the_sandbox(run):
    record = run(bundle("telemetry_flood"))
    assert record.exit_reason == "ok"
    keys = {k for p in record.telemetry for k in p.values}
    assert 0 < len(record.telemetry) <= 1000
    assert len(keys) <= 16 and all(len(k) <= 48 for k in keys)
    assert all(p.values.get("nan") is None for p in record.telemetry)


def test_a_crash_deep_inside_torch_still_names_the_bundles_line(run):
    """A shape error raised four torch frames below the model's own call: the crash's
    detail keeps the innermost frame of the bundle, so the miner is told which line of
    architecture.py led to it (the last frames alone are torch's)."""
    files = bundle("tiny")
    files["architecture.py"] = files["architecture.py"].replace(
        b"        return self.head(torch.tanh(x.transpose(1, 2)))",
        b"        deep = nn.Sequential(nn.Sequential(nn.Sequential(nn.Linear(3, 4))))\n"
        b"        deep(torch.zeros(2, 5))\n"
        b"        return self.head(torch.tanh(x.transpose(1, 2)))")
    record = run(files)
    assert record.exit_reason == "crash"
    assert 'File "/submission/architecture.py", line 19, in forward' in record.exit_detail
    assert "mat1 and mat2 shapes cannot be multiplied" in record.exit_detail
