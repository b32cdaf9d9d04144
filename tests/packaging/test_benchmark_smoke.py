"""Every benchmark runs in its smoke mode here, so a broken assumption fails the suite.

A smoke run uses tiny sizes (and, where it needs prepared data, the session's small data)
and stops with an error when what the benchmark measures no longer matches what the code
does (for the compressor comparison: the bytes it hands the compressors are not the run's
own budget bytes). Each script is one case, asserting on the values of its last printed
line; a script in benchmarks/ that is neither run nor listed with a reason fails
`test_every_benchmark_is_smoked`, so a new benchmark cannot rot unseen. Running a script's
smoke imports it against today's code too (and the modules it shares with others: those
listed in COVERED_ELSEWHERE are imported by the scripts that use them), which is why there
is no separate import check.

A smoke runs in the test's own process (as `python SCRIPT --smoke` would run it, from the
clone's root), which has torch, PRISM and a prewarmed interpreter loaded already: a process
of its own would pay those imports again for every script, about a fifth of the suite's
CPU time spent on benchmark smokes. What a script changes in the process (environment,
working folder, torch's threads, deterministic mode and random state) is put back after it.
The scripts listed in OWN_PROCESS still start one, for the reason given.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"


# script -> why it runs in a process of its own
OWN_PROCESS = {
    "cluster_overhead.py": "it starts and stops a Ray cluster from its process",
    "warm_start.py": "it forks, and the fork prints its result through sys.stdout",
}


@pytest.fixture
def smoke_tmp():
    """A folder for what a smoke makes with `tempfile`, removed after it: short, since the
    runs' sockets live under it (a socket's path is at most 107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="prism-smoke-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _smoke(script: str, *args: str, tmp: Path) -> str:
    """The script's output; the folders it makes with `tempfile` go under `tmp`."""
    if script in OWN_PROCESS:
        done = subprocess.run([sys.executable, str(BENCH / script), "--smoke", *args],
                              capture_output=True, text=True, timeout=600, cwd=ROOT,
                              env={**os.environ, "TMPDIR": str(tmp)})
        assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
        return done.stdout
    out = io.StringIO()
    with _process_state_kept(tmp), contextlib.redirect_stdout(out):
        os.chdir(ROOT)
        sys.path.insert(0, str(BENCH))  # what `python benchmarks/SCRIPT` puts first
        sys.argv = [str(BENCH / script), "--smoke", *args]
        try:
            runpy.run_path(str(BENCH / script), run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (None, 0):
                pytest.fail(f"{script} --smoke stopped: {exc.code}\n{out.getvalue()[-2000:]}")
    return out.getvalue()


@contextlib.contextmanager
def _process_state_kept(tmp: Path):
    """Puts back what a benchmark's main may change in the process that ran it; `tempfile`
    makes its folders under `tmp` meanwhile."""
    import torch

    env, cwd, path, argv = dict(os.environ), os.getcwd(), list(sys.path), list(sys.argv)
    temp, tempfile.tempdir = tempfile.tempdir, str(tmp)
    os.environ["TMPDIR"] = str(tmp)  # and the processes it starts
    threads, rng = torch.get_num_threads(), torch.random.get_rng_state()
    mode = (torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled())
    cudnn = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    try:
        yield
    finally:
        tempfile.tempdir = temp
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        sys.path[:], sys.argv[:] = path, argv
        torch.set_num_threads(threads)
        torch.random.set_rng_state(rng)
        torch._C._set_deterministic_algorithms(mode[0], warn_only=mode[1])  # no inductor import
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = cudnn


def _last(out: str, pattern: str) -> tuple[str, ...]:
    last = out.strip().splitlines()[-1]
    found = re.search(pattern, last)
    assert found, f"the last line changed its form: {last!r}"
    return found.groups()


def test_compressor_benchmark_compares_the_runs_own_bytes(prepared_data, smoke_tmp):
    out = _smoke("baseline_vs_compressors.py", "--data-root", str(prepared_data),
                 tmp=smoke_tmp)
    line = next(x for x in out.splitlines() if x.startswith("the run's bytes:"))
    assert int(line.rsplit("=", 1)[1].split()[0].replace(",", "")) > 10_000
    rates = {x.split()[0]: float(x.split()[-2]) for x in out.splitlines()
             if x.endswith("bits/byte")}
    assert set(rates) >= {"gzip", "xz"}
    assert all(0 < r < 8 for r in rates.values()), rates


def _chain_faults(out: str) -> None:
    landed, allowed, stuck = _last(out, r"weights landed (\d+) of (\d+) epochs allowed, "
                                        r"stuck nonces (\d+)")
    assert int(allowed) >= 1 and landed == allowed and stuck == "0"


def _score_noise(out: str) -> None:
    spread, draws, margin, bad, honest = _last(
        out, r"ranked bpb range ([\d.]+) over (\d+) draws, margin ([\d.]+), "
             r"honest penalised (\d+) of (\d+)")
    assert draws == "4" and honest == "1" and bad == "0"  # the local round and 3 others
    assert 0 <= float(spread) and float(margin) > 0


def _probe_catch_rate(out: str) -> None:
    trials, passes, alarms, of = _last(out, r"(\d+) trials.*replay passes ([\d.]+)%; honest "
                                            r"false alarms (\d+)/(\d+)")
    assert trials == of == "20" and alarms == "0" and float(passes) <= 10.0


def _validator_agreement(out: str) -> None:
    same, cosine = _last(out, r"same leader ([\d.]+)% of epochs, weight cosine ([\d.]+)")
    assert float(same) >= 90.0 and float(cosine) >= 0.99


def _gates_speed(out: str) -> None:
    count, ms = _last(out, r"against (\d+) stored fingerprints: ([\d.]+) ms")
    assert count == "20" and float(ms) > 0


def _intake_bench(out: str) -> None:
    (count,) = _last(out, r"HTTP unregistered \(403\) +n=(\d+):")
    assert count == "3"


def _scoring_bench(out: str) -> None:
    assert "production-scale record: 300 batches" in out
    (ms,) = _last(out, r"build_plan, same entries, research credit on 256 hotkeys +([\d.]+) ms")
    assert float(ms) > 0


def _dashboard_speed(out: str) -> None:
    pages = re.findall(r"^(\w+) +first +[\d.]+ ms +median +[\d.]+ ms +\( *([\d.]+) KiB\)", out,
                       flags=re.M)
    assert [p for p, _ in pages] == ["overview", "submission", "metrics"]
    assert all(float(kib) > 0 for _, kib in pages)


def _registry_sim(out: str) -> None:
    assert "registry_sim: 1 seeds x 40 submissions" in out
    (farmed,) = re.search(r"near-duplicate credit: ([\d.]+)", out).groups()
    assert float(farmed) == 0.0  # copies of a design earn no research credit
    (total,) = _last(out, r"total ([\d.]+)s")
    assert float(total) > 0


def _startup(out: str) -> None:
    startup, total = _last(out, r"smoke: start-up now ([\d.]+) s; whole run now ([\d.]+) s")
    assert float(startup) > 0 and float(total) > 0  # speed is reported, never asserted
    assert "2 trivial workers, launch --ranks" in out and "whole runs, median of 1" in out
    # the harness's own account of its start-up, phase by phase (harness/step_clock.py)
    phases = re.search(r"harness start-up phases \(s\): interpreter ([\d.]+), import_torch "
                       r"([\d.]+), harness_imports [\d.]+, hello [\d.]+, import_architecture "
                       r"[\d.]+, build_model [\d.]+, to_device [\d.]+, ready [\d.]+; sum "
                       r"([\d.]+)", out)
    assert phases, out
    # a prewarmed start imported torch before the fork: its phase may print as 0.00
    assert float(phases[1]) >= 0 and float(phases[2]) >= 0
    assert float(phases[3]) >= float(phases[2])


def _warm_start(out: str) -> None:
    cold, warm, ratio = _last(out, r"median of 1: cold start ([\d.]+) s, warm start ([\d.]+) s, "
                                   r"warm/cold ([\d.]+); same sandbox seen: yes")
    assert float(cold) > 0 and float(warm) > 0  # speed is reported, never asserted
    assert ("uid 65534, capabilities none, network OSError, the clone hidden, /usr read-only, "
            "pids [1, 2, 3] (cold: [1, 2])") in out


def _data_throughput(out: str) -> None:
    tok, reader = _last(out, r"tokenizer ([\d.]+) MB/s, reader \(slowest\) ([\d.]+) M tokens/s")
    assert float(tok) > 0 and float(reader) > 0  # speed is reported, never asserted


def _record_size(out: str) -> None:
    small, large, growth = _last(out, r"record_size smoke: JSON ([\d.]+) kB at 2,000 steps, "
                                      r"([\d.]+) kB at 20,000 \(x([\d.]+)\); records read back")
    assert 0 < float(small) <= float(large) and float(growth) < 1.5  # the JSON stays bounded


def _harness_overhead(out: str) -> None:
    ratio, steps = _last(out, r"per-step ratio harness/bare = ([\d.]+) median of 1 .*; both "
                              r"sides (\d+) steps")
    assert steps == "8" and 0 < float(ratio) < float("inf")
    (boxed,) = re.findall(r"harness/bare-in-sandbox = ([\d.]+)", out)
    assert 0 < float(boxed) < float("inf")
    # the harness's account of its host time per step: the segments add up to the step
    host = re.search(r"harness host time per step \(ms, (\d+) steps\): rows ([\d.]+), "
                     r"prepare [\d.]+, forward ([\d.]+), loss [\d.]+, miner ([\d.]+); sum "
                     r"([\d.]+)", out)
    assert host, out
    assert host[1] == "3" and float(host[3]) > 0 and float(host[4]) > 0
    # the eval sandbox's account of its work: 8 held-out tasks per model (256 positions,
    # 4 cuts a row, 32 rows a task), its recheck and a causality probe each, every one in a
    # process of its own (forked and prepared ahead), and one more that found no task
    line = re.search(r"eval sandbox time \(s\): (.+); sum ([\d.]+)", out)
    assert line, out
    counts = {k: int(n or 1) for k, _, n in re.findall(r"(\w+) ([\d.]+)(?: x(\d+))?",
                                                        line[1])}
    assert counts["forward"] == 18 and counts["probe"] == 2 and counts["wait"] == 21
    assert counts["build_pristine"] == 20 and "build_full" not in counts, counts
    assert counts["spare_prepare"] == counts["spare_idle"] == 21, counts


def _cluster_overhead(out: str) -> None:
    (seconds,) = _last(out, r"ray overhead: ([\d.]+) s per evaluation; same scored nats: yes")
    assert float(seconds) >= 0


def _early_stop(out: str) -> None:
    saved, stopped = _last(out, r"early stop: budget saved ([\d.]+)%, future leaders stopped "
                                r"(\d+)")
    assert stopped == "0" and 0 < float(saved) <= 100


def _gpu_host(out: str) -> None:
    runs, where, startup = _last(out, r"gpu_host: (\d+) run\(s\) ok on (.+), start-up "
                                      r"([\d.]+) s, replay passed")
    assert int(runs) >= 1 and float(startup) > 0
    assert where == "this CPU" or "GPU" in where


def _eval_speed(out: str) -> None:
    count, where = _last(out, r"eval_speed: (\d+) evaluation\(s\) on (.+), held-out figures "
                              r"identical")
    assert int(count) >= 1 and (where == "this CPU" or "GPU" in where)
    # a fresh task process's phases, warm-up off and on, each with the first forward's extra
    fresh = re.findall(r"fresh process on \w+, warm-up (on |off) .*first forward ([\d.]+) ms, "
                       r"second forward ([\d.]+) ms", out)
    assert [m[0] for m in fresh] == ["off", "on "] and all(float(m[1]) > 0 for m in fresh)


def _soak(out: str) -> None:
    accepted, once, lost, double, errors, rss, kills = _last(
        out, r"soak: accepted (\d+), scored once (\d+), lost (\d+), double (\d+), 5xx "
             r"(\d+), peak rss (\d+) MB, kills (\d+)")
    assert int(accepted) >= 1 and once == accepted
    assert (lost, double, errors) == ("0", "0", "0") and int(rss) > 0 and int(kills) >= 1


def _verification_cost(out: str) -> None:
    contender, plain, memory = _last(out, r"verification cost: contender ([\d.]+)x, "
                                          r"non-contender ([\d.]+)x, peak memory ([\d.]+)x; "
                                          r"replay passed")
    assert float(contender) > float(plain) >= 1.0 and float(memory) > 0


# script -> (extra arguments, check of its output); DATA stands for the session's prepared
# data (`prepared_data`), which every smoke that trains shares instead of building its own
DATA = object()
SMOKES = {
    "chain_faults.py": ((), _chain_faults),
    "score_noise.py": ((), _score_noise),
    "probe_catch_rate.py": (("--schedule", "mixed"), _probe_catch_rate),
    "validator_agreement.py": ((), _validator_agreement),
    "gates_speed.py": ((), _gates_speed),
    "intake_bench.py": ((), _intake_bench),
    "scoring_bench.py": ((), _scoring_bench),
    "dashboard_speed.py": ((), _dashboard_speed),
    "startup.py": ((), _startup),
    "warm_start.py": ((), _warm_start),
    "registry_sim.py": ((), _registry_sim),
    "data_throughput.py": ((), _data_throughput),
    "record_size.py": ((), _record_size),
    # each of these trains in the real sandbox at its smallest budget (seconds of training;
    # the sandboxes' start-up is most of their time)
    "harness_overhead.py": (("--data", DATA), _harness_overhead),
    "cluster_overhead.py": (("--data", DATA), _cluster_overhead),
    "early_stop.py": (("--data", DATA), _early_stop),
    "gpu_host.py": (("--data", DATA), _gpu_host),
    "eval_speed.py": (("--data", DATA, "--forks", "2"), _eval_speed),
    "soak.py": (("--data", DATA), _soak),
    "verification_cost.py": (("--data", DATA), _verification_cost),
}
COVERED_ELSEWHERE = {
    "baseline_vs_compressors.py": "test_compressor_benchmark_compares_the_runs_own_bytes",
    "catch_sim.py": "a module with no main: probe_catch_rate.py --schedule runs it",
    "bare_loop.py": "the bare loop of harness_overhead.py and gpu_host.py: their smokes run "
                    "it in-process and as a sandbox's program",
}
# Scripts without a smoke mode yet, with the reason; each is a skipped case below.
NOT_YET: dict[str, str] = {}


@pytest.mark.timeout(900)  # the smokes that train in the sandbox: minutes when loaded
@pytest.mark.parametrize("script", sorted(SMOKES) + sorted(NOT_YET))
def test_benchmark_smoke_mode_holds(script, request, smoke_tmp):
    if script in NOT_YET:
        pytest.skip(NOT_YET[script])
    args, check = SMOKES[script]
    if DATA in args:
        data = str(request.getfixturevalue("prepared_data"))
        args = tuple(data if a is DATA else a for a in args)
    check(_smoke(script, *args, tmp=smoke_tmp))


def test_every_benchmark_is_smoked():
    scripts = {p.name for p in BENCH.glob("*.py")}
    listed = set(SMOKES) | set(COVERED_ELSEWHERE) | set(NOT_YET)
    assert sorted(scripts - listed) == [], "a benchmark without a smoke case"
    assert sorted(listed - scripts) == []
    assert not set(SMOKES) & set(NOT_YET)
    assert set(OWN_PROCESS) <= set(SMOKES)
