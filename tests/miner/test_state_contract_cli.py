"""`prism eval` tells a miner plainly when their model keeps state outside its parameters
and buffers (here a Python call counter on the model), before a validator's checks trip."""

from __future__ import annotations

import json
import re

from miner_kit import copy_example, prism_in_process

from prism_challenge.sandbox.record import RunRecord

NOTE = "TinyGPT.calls changed from 0 to 1 between scored steps 0 and 1"


def _counting_baseline(path):
    bundle = copy_example("baseline", path)
    arch = bundle / "architecture.py"
    text = arch.read_text()
    init = "        super().__init__()\n        self.embed"
    forward = "    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:\n"
    assert init in text and forward in text
    arch.write_text(text.replace(init, "        super().__init__()\n        self.calls = 0\n"
                                       "        self.embed")
                    .replace(forward, forward + "        self.calls += 1\n"))
    return bundle


def _flat(stdout: str) -> str:
    return re.sub(r"[│\s]+", " ", stdout)


ADVICE = ("model state must live in parameters and buffers: a validator's checks restore "
          "only the state_dict")


def test_eval_names_a_python_counter_on_the_model(tiny_config, prepared_data, tmp_path):
    bundle = _counting_baseline(tmp_path / "counter")
    out = tmp_path / "out"
    res = prism_in_process("eval", str(bundle), "-c", str(tiny_config), "--data-root",
                str(prepared_data), "--out", str(out))
    assert res.returncode in (0, 1), res.stdout + res.stderr
    record = RunRecord.model_validate_json((out / "record.json").read_text())
    assert record.axes.state_outside == [NOTE]
    assert f"state FAIL {NOTE}; {ADVICE}" in _flat(res.stdout), res.stdout
    assert json.loads((out / "score.json").read_text())["axes"]["arms"]["optimizer"] == "adamw"


def test_check_names_it_too(tiny_config, prepared_data, tmp_path):
    bundle = _counting_baseline(tmp_path / "counter")
    res = prism_in_process("check", str(bundle), "-c", str(tiny_config), "--data-root",
                str(prepared_data))
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"state FAIL {NOTE}; {ADVICE}" in _flat(res.stdout), res.stdout
