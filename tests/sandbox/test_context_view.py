"""`train(ctx)` is handed the context's public face only (harness/context.py `miner_view`):
a library method that reads an object's `__dict__`, called with ctx as its `self`, finds
nothing of the harness behind it, and ctx cannot be written."""

from __future__ import annotations

from fixture_bundles import bundle

PROBE = b'''
def train(ctx):
    # torch's schedulers read and update `self.__dict__`: called with ctx as self, the
    # harness's private fields (its feeder channel, snapshot folder, state watch) would be
    # listed, and could be rewritten with load_state_dict
    try:
        fields = len(torch.optim.lr_scheduler.LRScheduler.state_dict(ctx))
    except AttributeError:
        fields = -1
    try:
        torch.optim.lr_scheduler.LRScheduler.load_state_dict(ctx, {"max_rows": 1})
        wrote = 1
    except AttributeError:
        wrote = 0
    ctx.log(fields=fields, wrote=wrote)
    _train(ctx)
'''


def test_a_library_method_called_with_ctx_as_self_finds_nothing_of_the_harness(run):
    files = bundle("tiny")
    files["training.py"] = (files["training.py"].replace(b"def train(ctx):", b"def _train(ctx):")
                            + PROBE)
    record = run(files)
    assert record.exit_reason == "ok", record.exit_detail
    series = record.telemetry_series()
    assert series["fields"][0][1] == -1.0 and series["wrote"][0][1] == 0.0
