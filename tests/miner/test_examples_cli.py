"""`prism examples copy`: the copy is the miner's bundle, named after its folder."""

from __future__ import annotations

import tomllib

from typer.testing import CliRunner

from prism_challenge.bundle import Bundle
from prism_challenge.cli.app import app


def test_a_copied_example_takes_the_name_of_its_folder(tmp_path):
    dest = tmp_path / 'my "fast" net'
    out = CliRunner().invoke(app, ["examples", "copy", "baseline", str(dest)])
    assert out.exit_code == 0, out.output
    meta = tomllib.loads((dest / "prism.toml").read_text())
    assert meta["name"] == 'my "fast" net'
    assert meta["axes"]["optimizer"] == "adamw"  # the rest of the manifest is unchanged
    assert Bundle.from_dir(dest).meta.name == 'my "fast" net'
    again = CliRunner().invoke(app, ["examples", "copy", "baseline", str(dest)])
    assert again.exit_code == 2 and "already exists" in again.output
