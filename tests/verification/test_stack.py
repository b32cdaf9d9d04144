"""A run records the stack it computed on, and a replay on another stack is "not comparable"
(replay it elsewhere), never a failed verification: honest runs drift across stacks."""

from __future__ import annotations

import torch
from sandbox_kit import tiny_settings

from prism_challenge.sandbox.stack import (
    HARDWARE,
    SOFTWARE,
    Stack,
    cpu_model,
    hardware,
    not_comparable,
    software_from_hello,
)
from prism_challenge.verification.verdict import verdict


def test_differences_name_each_field_and_skip_what_a_record_did_not_know():
    recorded = Stack(torch="2.11.0+cu130", cuda="13.0", cudnn=91300, devices=("NVIDIA H100",),
                     driver="580.1", deterministic=True)
    here = Stack(torch="2.13.0+cu130", cuda="13.0", cudnn=91300, devices=("NVIDIA H200",),
                 driver="580.1", deterministic=True)
    assert recorded.differences(here) == ["torch 2.11.0+cu130 -> 2.13.0+cu130",
                                          "devices NVIDIA H100 -> NVIDIA H200"]
    assert recorded.differences(here, SOFTWARE) == ["torch 2.11.0+cu130 -> 2.13.0+cu130"]
    # a field one side does not know (an older record) compares on the rest
    assert Stack(torch="2.13.0+cu130").differences(here) == []
    assert not_comparable(None, here, HARDWARE) is None
    why = not_comparable(recorded, here, HARDWARE)
    assert why.startswith("not comparable: the run was recorded on another stack (devices")
    assert "replay it on a host with the recorded stack" in why


def test_a_malformed_hello_stack_is_dropped_not_trusted():
    assert software_from_hello("2.13") is None
    assert software_from_hello({"torch": ["x"]}) is None
    got = software_from_hello({"torch": "2.13.0", "cudnn": None, "extra": "ignored"})
    assert got == Stack(torch="2.13.0")


def test_the_cpu_half_names_the_processor(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Example CPU @ 3.0GHz\nflags\t: avx2\n")
    assert cpu_model(info) == "Example CPU @ 3.0GHz"
    assert hardware(()).devices == (f"cpu: {cpu_model()}",)


def test_a_run_records_its_stack_and_a_replay_on_another_is_not_comparable(
        tiny_run, runner, make_runner, tmp_path):
    files, record, _ = tiny_run
    stack = record.stack
    # the software half as the harness saw it before the miner's code, the hardware half
    # from the host
    assert stack.torch == torch.__version__
    assert stack.cpu_capability == torch.backends.cpu.get_cpu_capability()
    assert stack.deterministic is True  # the sandbox's deterministic mode
    assert stack.devices == hardware(runner.devices()).devices
    # another torch build: the replay stops at the harness's hello and judges nothing
    elsewhere = "0.0.0+elsewhere"  # a build no host has: the test holds on any host
    other = record.model_copy(update={"stack": stack.model_copy(update={"torch": elsewhere})})
    replay = runner.replay(files, other, tmp_path / "replay-torch")
    assert replay.incomparable.startswith("not comparable")
    assert f"torch {elsewhere} -> {torch.__version__}" in replay.incomparable
    assert replay.batches_compared == 0
    result = verdict(replay, runner.settings.verification)
    assert (result.passed, result.comparable) == (False, False)
    assert result.reasons == [replay.incomparable]
    # another device: known on the host, so nothing is started at all
    gpu = record.model_copy(update={"stack": stack.model_copy(
        update={"devices": ("Example GPU 9000",), "driver": "0.1"})})
    replay = runner.replay(files, gpu, tmp_path / "replay-gpu")
    assert f"devices Example GPU 9000 -> {'+'.join(stack.devices)}" in replay.incomparable
    assert replay.train_s == 0.0 and not (tmp_path / "replay-gpu").exists()
    # a validator that turned the deterministic algorithms off computes on another stack
    loose = make_runner(tiny_settings(deterministic_algorithms=False))
    replay = loose.replay(files, record, tmp_path / "replay-loose")
    assert "deterministic True -> False" in replay.incomparable
    assert replay.batches_compared == 0
    # the same stack still replays and passes
    same = runner.replay(files, record, tmp_path / "replay-same")
    assert same.incomparable is None
    assert verdict(same, runner.settings.verification).passed


def test_a_replay_that_starts_otherwise_than_its_original_is_not_comparable(
        tiny_run, prepared_data, tmp_path):
    """The program can tell a prewarmed start from a cold one (its pid, the waiter beside
    it): a replay on a backend that starts cold must not judge a prewarmed original."""
    from prism_challenge.isolation.bubblewrap import BubblewrapBackend
    from prism_challenge.sandbox.runner import Runner

    files, record, _ = tiny_run
    assert record.stack.start == "prewarmed"  # a one-rank `python -m` program, bubblewrap
    cold = Runner.from_data(tiny_settings(), BubblewrapBackend(prewarm=False), prepared_data)
    replay = cold.replay(files, record, tmp_path / "replay-cold")
    assert "start prewarmed -> cold" in replay.incomparable
    assert replay.batches_compared == 0


def test_a_replay_of_a_cold_started_run_starts_cold_and_judges_it(tiny_run, runner, tmp_path):
    """The original started cold (a backend that fell back): its replay on a prewarming
    backend starts cold too, so it is comparable and verifies the run."""
    files, record, _ = tiny_run
    cold = record.model_copy(update={"stack": record.stack.model_copy(
        update={"start": "cold"})})
    replay = runner.replay(files, cold, tmp_path / "rc")
    assert replay.incomparable is None and replay.batch_max_rel_diff == 0.0
    assert verdict(replay, runner.settings.verification).passed


def test_a_replay_under_other_terms_is_not_comparable(tiny_run, make_runner, tmp_path):
    """The operator changed the budget (or the data version) after the run was scored: its
    replay would diverge, so it is not comparable, never a failed verification."""
    files, record, _ = tiny_run
    settings = tiny_settings()
    c = settings.challenge
    longer = make_runner(settings.model_copy(update={"challenge": c.model_copy(
        update={"token_budget": c.token_budget + c.seq_len})}))
    assert longer.competition != record.competition
    replay = longer.replay(files, record, tmp_path / "replay-terms")
    assert f"scored under {record.competition}" in replay.incomparable
    assert replay.train_s == 0.0 and not (tmp_path / "replay-terms").exists()
    result = verdict(replay, settings.verification)
    assert (result.passed, result.comparable) == (False, False)
