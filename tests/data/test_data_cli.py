"""`prism prepare-data` and scripts/prepare_data.py as an operator runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cli_kit import prism_in_process

from prism_challenge.data import TokenStream
from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl

ROOT = Path(__file__).resolve().parents[2]


def _prism(*args: str, cwd: Path = ROOT):
    """`prism ARGS` run from `cwd` through typer's CliRunner, in this process (the same
    command without a second start of the CLI); `returncode` is its exit code. The hub's
    case starts a process of its own: the hub library reads its offline flags on import."""
    return prism_in_process(*args, cwd=cwd)


def _spec_file(tmp_path) -> Path:
    spec = small_spec([]).model_dump(mode="json")
    path = tmp_path / "small.json"
    path.write_text(json.dumps(spec))
    return path


def test_prepare_verify_and_corruption(tmp_path):
    src = write_jsonl(tmp_path / "docs.jsonl", english_like_documents(300, seed=2))
    out = tmp_path / "data"
    args = ["--source", "local", "--input", str(src), "--manifest", str(_spec_file(tmp_path))]
    res = _prism("prepare-data", *args, "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "data version (MANIFEST sha256)" in res.stdout
    version = TokenStream.open(out, "train").manifest.sha256
    assert version in res.stdout

    res = _prism("prepare-data", *args, "--out", str(out), "--no-progress")
    assert res.returncode == 0 and "already prepared" in res.stdout

    res = _prism("prepare-data", "--verify", "--out", str(out))
    assert res.returncode == 0 and "verified" in res.stdout

    shard = sorted((out / "val").glob("shard_*.bin"))[0]
    shard.write_bytes(shard.read_bytes()[::-1])
    res = _prism("prepare-data", "--verify", "--out", str(out))
    assert res.returncode == 1
    assert "verification failed" in res.stderr and "shard_00000.bin" in res.stderr
    assert "Traceback" not in res.stderr


def test_bad_input_is_a_clean_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"id": "1", "text": "\xff"}\n')
    out = tmp_path / "data"
    res = _prism(
        "prepare-data",
        "--source",
        "local",
        "--input",
        str(bad),
        "--out",
        str(out),
        "--manifest",
        str(_spec_file(tmp_path)),
    )
    assert res.returncode == 2
    assert "bad.jsonl:1: not valid UTF-8" in res.stderr and "Traceback" not in res.stderr
    assert not out.exists()

    res = _prism("prepare-data", "--source", "local", "--out", str(out))
    assert res.returncode == 2 and "needs --input" in res.stderr
    res = _prism(
        "prepare-data",
        "--source",
        "fineweb-edu",
        "--manifest",
        "data_manifests/demo.json",
        "--out",
        str(out),
    )
    assert res.returncode == 2 and "is a 'demo' manifest" in res.stderr
    res = _prism("prepare-data", "--verify", "--out", str(out))
    assert res.returncode == 1 and "no MANIFEST" in res.stderr


def test_config_supplies_defaults(tmp_path):
    src = write_jsonl(tmp_path / "docs.jsonl", english_like_documents(300, seed=4))
    cfg = tmp_path / "prism.yaml"
    cfg.write_text(
        f"data:\n  root: {tmp_path / 'from-config'}\n  manifest: {_spec_file(tmp_path)}\n"
    )
    res = _prism("prepare-data", "--config", str(cfg), "--input", str(src), "--no-progress")
    assert res.returncode == 0, res.stderr
    assert TokenStream.open(tmp_path / "from-config", "test").manifest.vocab_size == 512


def test_script_is_the_same_command():
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "prepare_data.py"), "--help"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0
    assert "--source" in res.stdout and "--verify" in res.stdout


def test_an_unreachable_hub_is_one_line_exit_3_and_leaves_nothing(tmp_path):
    """The hub faked unreachable at its lowest seam: offline mode, and an endpoint on a
    closed local port should anything still try the network."""
    parent = tmp_path / "existing"
    parent.mkdir()
    env = {**os.environ, "COLUMNS": "400", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf")}
    res = subprocess.run(
        [sys.executable, "-m", "prism_challenge.cli", "prepare-data", "--source", "fineweb-edu",
         "--out", str(parent / "data" / "fineweb"), "--no-progress"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=280,
    )
    assert res.returncode == 3, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert line.startswith("error: source unavailable: HuggingFaceFW/fineweb-edu (sample-10BT,")
    assert line.endswith("then run the same command again, or prepare a local copy with "
                         "--source local --input FILES; nothing was written")
    assert list(parent.iterdir()) == []  # no data/, no .work/, no partial shard
