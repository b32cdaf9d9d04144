"""Rich renderings of the local reports: one table of findings, one of the score.

Kept apart from the CLI commands so that both commands print a finding the same way.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from prism_challenge.miner.evaluate import NOT_VERIFIED, EvalReport
from prism_challenge.miner.findings import Finding
from prism_challenge.miner.outcome import crash_traceback, humanize, run_problem
from prism_challenge.sandbox.record import RunRecord

MARK = {"pass": "[green]pass[/]", "fail": "[bold red]FAIL[/]", "skip": "[yellow]skip[/]",
        "info": "[cyan]info[/]", "warn": "[bold yellow]WARN[/]"}


def findings_table(title: str, findings: list[Finding]) -> Table:
    # The title and details hold bundle names and miner values: never read as markup.
    table = Table("check", "result", "detail", title=Text(title), title_justify="left",
                  show_lines=False)
    for f in findings:
        table.add_row(Text(f.check), MARK[f.status], Text(f.detail))
    return table


def _f(x: float | None, fmt: str = ".4f") -> str:
    return "n/a" if x is None else format(x, fmt)


def _pm(x: float | None, se: float | None) -> str:
    """'2.8443 ± 0.0123' (the standard error), or the bare figure without one."""
    return _f(x) + (f" ± {se:.4f}" if x is not None and se is not None else "")


def print_eval(console: Console, report: EvalReport) -> None:
    rec, s = report.record, report.score
    name = report.bundle.meta.name or "bundle"
    console.print(findings_table(f"{name} {report.bundle.digest[:12]}: static gates",
                                 report.findings))
    demo = " [bold yellow](DEMO corpus: development only)[/]" if report.corpus == "demo" else ""
    console.print(f"corpus {report.corpus}{demo}, data version {rec.manifest_sha256[:16]}…",
                  highlight=False)
    console.print(f"held-out numbers from {report.val_source}", highlight=False, markup=False)
    ev = rec.eval
    score = Table("measure", "value", title="score (the validator's score_record)",
                  title_justify="left")
    ratio = (s.prequential_bpb / s.uniform_bpb) if s.prequential_bpb and s.uniform_bpb else None
    score.add_row("prequential bpb", _f(s.prequential_bpb))
    score.add_row("uniform bpb (knows nothing)", _f(s.uniform_bpb))
    score.add_row("prequential / uniform", _f(ratio, ".3f"))
    score.add_row("tail bpb (last part of the stream)", _f(s.tail_bpb))
    score.add_row("held-out bpb, trained", _pm(ev.val_bpb_trained if ev else None,
                                                ev.val_bpb_trained_se if ev else None))
    score.add_row("held-out bpb, random-init twin", _pm(ev.val_bpb_twin if ev else None,
                                                         ev.val_bpb_twin_se if ev else None))
    score.add_row("held-out round (plan secret's sha256)",
                  f"{ev.heldout_round} {ev.heldout_commit[:16]}…" if ev and ev.heldout_commit
                  else "n/a")
    score.add_row("held-out delta (twin - trained, paired)", _pm(s.heldout_delta,
                                                                 s.heldout_delta_se))
    score.add_row("gap (held-out trained - best stream window)",
                  _pm(s.gap, s.gap_se) + (f", judged at its bound {s.gap_bound:.4f}"
                                          if s.gap_bound is not None and s.gap_se else ""))
    score.add_row("gap penalty", f"{s.penalty:.1%}")
    score.add_row("[bold]bpb that ranks[/]", f"[bold]{s.bpb:.4f}[/]")
    score.add_row("tokens consumed / budget",
                  f"{rec.consumed.scored_tokens:,} / {rec.budget.scored_tokens:,} scored")
    problem = run_problem(rec)
    exit_detail = problem.what if problem else humanize(rec.exit_detail[:200])
    score.add_row("exit", Text(rec.exit_reason + (f": {exit_detail}" if exit_detail else "")))
    console.print(score)
    gates = [Finding("gates", "pass", "step-0, causality, finite, contract, cap, gap")]
    if s.reasons:
        gates = [Finding(f"gate {r.split(':', 1)[0]}", "fail", r) for r in s.reasons]
    gates += [Finding("note", "info", n) for n in s.notes]
    console.print(findings_table("anti-cheat gates", gates))
    _print_replay(console, report)
    _print_axes(console, report)
    _print_telemetry(console, rec)
    _print_output(console, rec)
    print_traceback(console, rec)
    tok_s = rec.consumed.scored_tokens / rec.train_s if rec.train_s else None
    console.print(f"timings: startup {rec.startup_s:.1f} s, train {rec.train_s:.1f} s "
                  f"({_f(tok_s, ',.0f')} tokens/s), eval {rec.eval_s:.1f} s, "
                  f"wall {report.wall_s:.1f} s", highlight=False)
    for what, path in report.files.items():
        console.print(f"wrote {what}: {path}", highlight=False, markup=False)
    fix = f"; {problem.fix}" if problem is not None else ""  # the memory limit's
    cut = (f" (cut by the {rec.exit_reason} limit: {s.unconsumed_tokens:,} unconsumed tokens "
           f"charged{fix})" if rec.exit_reason in ("deadline", "memory", "disk", "pids") else "")
    if not cut and problem is not None:
        # a crash or an early return is charged, not zeroed: an eligible run says what it
        # cost; for one that is not, the crash is what to fix before any gate
        cut = (f" (but {problem.what}: {s.unconsumed_tokens:,} unconsumed tokens charged at "
               f"log2 V bits each; {problem.fix})" if report.eligible or report.replay_skipped
               else f" ({problem.line})")
    if report.eligible:
        verdict = ("[bold green]ELIGIBLE[/]: a validator would rank this run at "
                   f"{s.bpb:.4f} bpb, and its replay verifies it{cut}")
    elif report.replay_skipped:
        verdict = ("[bold yellow]NOT VERIFIED[/] (replay skipped with --no-replay): eligible on "
                   f"its record; a validator would rank this run at {s.bpb:.4f} bpb only if "
                   f"its replay verifies it{cut}")
    elif s.eligible:
        verdict = "[bold red]NOT ELIGIBLE[/]: the replay does not verify the run (see above)"
    else:
        verdict = "[bold red]NOT ELIGIBLE[/]: see the gates"
    verdict += cut if not (report.eligible or report.replay_skipped) else ""
    console.print(verdict)


def _print_replay(console: Console, report: EvalReport) -> None:
    replay, check = report.replay, report.verification
    if report.replay_skipped:
        console.print(Text(NOT_VERIFIED, style="bold yellow"), highlight=False)
        return
    if replay is None or check is None:
        console.print("replay: not run (the record is not eligible)", highlight=False)
        return
    rows = [Finding("replay", "pass" if check.passed else "fail",
                    f"{replay.batches_compared} batch losses compared, "
                    f"{replay.batch_mismatch_count} not reproduced; probes at "
                    f"{len(replay.probe_steps)} steps ({replay.probes.compared} positions, "
                    f"{replay.probes.mismatched} disagree), snapshots at "
                    f"{len(replay.snapshot_steps)} steps ({replay.snapshots.compared} "
                    f"positions, {replay.snapshots.mismatched} disagree); replay "
                    f"{replay.train_s:.1f} s + {replay.eval_s:.1f} s")]
    rows += [Finding(f"replay {r.split(':', 1)[0]}", "fail", r) for r in check.reasons]
    console.print(findings_table("contender replay (checks drawn after the run)", rows))


def _print_axes(console: Console, report: EvalReport) -> None:
    axes = Table("axis", "value", "arm", title="axes (measured win over declared)",
                 title_justify="left")
    for name, raw in sorted(report.axes.raw.items()):
        value = f"{raw:g}" if isinstance(raw, float) else str(raw)
        axes.add_row(Text(name), Text(value), Text(report.axes.arms.get(name, "")))
    console.print(axes)
    for flag in report.axes.flags:
        console.print(Text.assemble(("axis flag:", "yellow"), " ", flag), highlight=False)


OUTPUT_LINES = 40


def _print_output(console: Console, rec: RunRecord) -> None:
    """The training loop's own output (print(), warnings): its last lines, printed as
    written (never read as markup); the record keeps the last 64 KiB."""
    lines = rec.train_output.rstrip("\n").splitlines()
    if not lines:
        console.print("training output: none (the loop printed nothing)", highlight=False)
        return
    shown = lines[-OUTPUT_LINES:]
    more = f", the last {len(shown)} shown" if len(shown) < len(lines) else ""
    console.print(f"training output ({len(lines)} lines kept in record.json{more}):",
                  highlight=False)
    for line in shown:
        console.print(Text("  | " + line), highlight=False)


def print_traceback(console: Console, rec: RunRecord) -> None:
    """A crashed run's traceback, whole and unwrapped, below the one line that sums it up."""
    lines = crash_traceback(rec)
    if not lines:
        return
    console.print("traceback of the crash (its last frames, as the sandbox kept them; your "
                  "files are under /submission):", highlight=False)
    for line in lines:
        console.print(Text("  | " + line), highlight=False)


def _print_telemetry(console: Console, rec: RunRecord) -> None:
    series = rec.telemetry_series()
    if not series:
        console.print("telemetry: the training script logged nothing (ctx.log)", highlight=False)
        return
    table = Table("name", "points", "steps", "first", "last", "min", "max",
                  title="telemetry (ctx.log: shown, never scored)", title_justify="left")
    for name, points in series.items():
        values = [v for _, v in points]
        table.add_row(Text(name), str(len(points)), f"{points[0][0]}..{points[-1][0]}",
                      *(f"{v:.4g}" for v in (values[0], values[-1], min(values), max(values))))
    console.print(table)
