import math

import pytest
from scoring_records import entries, make_record, with_eval

from prism_challenge.sandbox.record import Consumed, MeasuredAxes, ProbeResult
from prism_challenge.scoring import gates

LN256 = math.log(256)


def with_first_batch_nats(nats: float):
    rec = make_record()
    batches = [entries(rec)[0].model_copy(update={"nats": nats}), *entries(rec)[1:]]
    total = sum(b.nats for b in batches)
    return make_record(batches=batches, consumed=Consumed(rows=8, scored_tokens=800, bytes=1600,
                                                          nats=total))


@pytest.mark.parametrize("exit_reason", ["ok", "budget", "deadline", "crash", "memory", "pids"])
def test_an_honest_record_passes_every_gate_whatever_the_exit(settings, exit_reason):
    assert gates.gate_reasons(make_record(exit_reason=exit_reason), settings) == []


def test_step0_first_batch_far_below_random_init(settings):
    reasons = gates.step0(with_first_batch_nats(200 * 5.0), settings)
    assert len(reasons) == 1
    assert reasons[0].startswith("step0: the first batch's loss 5.0000")


def test_step0_threshold_is_relative_to_min_of_twin_and_uniform(settings):
    threshold = 0.95 * LN256  # min(5.6, ln 256) = ln 256
    assert gates.step0(with_first_batch_nats(200 * threshold * (1 + 1e-6)), settings) == []
    assert gates.step0(with_first_batch_nats(200 * threshold * (1 - 1e-6)), settings) != []
    # A twin below uniform lowers the reference: 5.4 * 0.95 = 5.13 is the bar now.
    rec = with_eval(with_first_batch_nats(200 * 5.2), twin_step0_nats_per_token=5.4)
    assert gates.step0(rec, settings) == []
    rec = with_eval(with_first_batch_nats(200 * 5.1), twin_step0_nats_per_token=5.4)
    assert [r.split(":")[0] for r in gates.step0(rec, settings)] == ["step0"]


def test_step0_twin_far_below_uniform_means_knowledge_in_build_model(settings):
    rec = with_eval(with_first_batch_nats(200 * 4.0), twin_step0_nats_per_token=4.0)
    reasons = gates.step0(rec, settings)
    assert len(reasons) == 1  # the first batch matches the twin; the twin itself is the cheat
    assert "random-init twin's loss 4.0000" in reasons[0]
    assert "build_model" in reasons[0]


@pytest.mark.parametrize(
    ("field", "probe", "who"),
    [
        ("probe_trained", ProbeResult(ok=False, max_abs_diff=0.3, positions=[7]), "trained"),
        ("probe_twin", ProbeResult(ok=True, max_abs_diff=2e-4, positions=[7]), "random-init"),
        ("probe_twin", ProbeResult(ok=True, max_abs_diff=float("nan"), positions=[7]), "twin"),
    ],
)
def test_causality_probe_failure_zeroes(settings, field, probe, who):
    reasons = gates.causality(with_eval(make_record(), **{field: probe}), settings)
    assert len(reasons) == 1
    assert reasons[0].startswith("causality:") and who in reasons[0]


def test_causality_within_tolerance_passes(settings):
    probe = ProbeResult(ok=True, max_abs_diff=1e-4, positions=[1])
    assert gates.causality(with_eval(make_record(), probe_trained=probe), settings) == []


def test_param_cap(settings):
    census = {"Linear": 1}
    at_cap = MeasuredAxes(param_count=1_000_000, layer_count=1, module_census=census)
    over = MeasuredAxes(param_count=1_000_001, layer_count=1, module_census=census)
    assert gates.param_cap(make_record(axes=at_cap), settings) == []
    assert gates.param_cap(make_record(axes=over), settings) == [
        "param_cap: the model holds 1,000,001 tensor elements (parameters and buffers), over "
        "the cap 1,000,000"
    ]
    in_buffers = MeasuredAxes(param_count=10, state_count=1_000_001, layer_count=1,
                              module_census=census)
    assert gates.param_cap(make_record(axes=in_buffers), settings)[0].startswith(
        "param_cap: the model holds 1,000,001")
    assert gates.param_cap(make_record(axes=None), settings)[0].startswith("param_cap:")


def test_non_finite_losses(settings):
    rec = make_record()
    nan_batch = [*entries(rec)[:3], entries(rec)[3].model_copy(update={"nats": float("nan")})]
    assert gates.non_finite(make_record(batches=nan_batch), settings) == [
        "non_finite: non-finite loss in batch step 3 rank 0"
    ]
    inf_total = make_record(consumed=rec.consumed.model_copy(update={"nats": math.inf}))
    assert "consumed total" in gates.non_finite(inf_total, settings)[0]
    nan_val = with_eval(rec, val_bpb_trained=float("nan"))
    assert "val_bpb_trained" in gates.non_finite(nan_val, settings)[0]


def test_missing_eval(settings):
    assert gates.missing_eval(make_record(eval=None), settings) == [
        "missing_eval: the eval sandbox produced no result"
    ]
    crashed = with_eval(make_record(), exit_reason="memory", detail="OOM")
    assert gates.missing_eval(crashed, settings) == [
        "missing_eval: the eval sandbox ended with 'memory' OOM"
    ]
    no_probe = with_eval(make_record(), probe_twin=None, val_bpb_twin=None)
    assert gates.missing_eval(no_probe, settings) == [
        "missing_eval: the eval result lacks val_bpb_twin, probe_twin"
    ]


def test_contract_exit_zeroes_but_crash_does_not(settings):
    broken = make_record(exit_reason="contract", exit_detail="logits have shape [2, 5]")
    assert gates.contract(broken, settings) == ["contract: logits have shape [2, 5]"]
    assert gates.contract(make_record(exit_reason="crash"), settings) == []


def test_all_gates_report_together(settings):
    rec = with_eval(with_first_batch_nats(200 * 3.0), probe_trained=ProbeResult(
        ok=False, max_abs_diff=1.0, positions=[0]))
    rec = rec.model_copy(update={"axes": None})
    names = [r.split(":")[0] for r in gates.gate_reasons(rec, settings)]
    assert names == ["step0", "causality", "param_cap"]
