"""Entry point of the TRAIN sandbox: `python -m prism_challenge.sandbox.harness.train_main`.

Order matters: deterministic flags and seeds first, then the miner's architecture, the
forced-seed build and the parameter cap, then the miner's training script and `train(ctx)`.
Whatever happens in `train`, the harness reports to the feeder and saves the final weights
itself. Paths come from the environment so every backend can place them where it likes.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from pathlib import Path

from prism_challenge.sandbox.harness.quick_exit import exit_now
from prism_challenge.sandbox.harness.step_clock import StartClock


def _env(name: str) -> str:
    value = os.environ.get(name)
    if value is None:
        raise SystemExit(f"harness: {name} is not set")
    return value


def _summary(exc: BaseException, submission: Path) -> str:
    """The end of a crash's traceback (its last frames and the exception), led by the
    innermost frame of the bundle's own code when that is not among them: an error raised
    deep inside torch would otherwise name no line the miner wrote."""
    lines = traceback.format_exception(exc)
    tail = lines[-6:]
    own = [ln for ln in lines[:-6] if f'File "{submission}/' in ln]
    head = own[-1] if own else ""
    return head + "".join(tail)[-(2000 - len(head)):]


def main() -> int:
    clock = StartClock()  # where the sandbox's start-up goes, for benchmarks/startup.py
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    submission = Path(_env("PRISM_SUBMISSION"))
    scratch = Path(_env("PRISM_SCRATCH"))
    seed = int(_env("PRISM_SEED"))

    from prism_challenge.sandbox.harness import cuda_start
    from prism_challenge.sandbox.harness.seeding import (
        cudnn_version,
        make_deterministic,
        software_stack,
    )

    cuda_start.watch()  # a CUDA start from here on is named by its line (see below)
    make_deterministic(seed, int(os.environ.get("PRISM_THREADS", "1")))

    # torch, and torch._dynamo: what the first torch.optim optimizer imports
    # (torch._disable_dynamo), seconds of CPU, triton too on GPU builds. Imported here,
    # before the hello, so it is never charged to the miner's training time and a failure
    # is the environment's (infra); the prewarmed interpreter has already imported it.
    import torch
    import torch._dynamo  # noqa: F401

    clock.mark("import_torch")

    from prism_challenge.sandbox.harness import axes
    from prism_challenge.sandbox.harness.context import FeederChannel, TrainContext, miner_view
    from prism_challenge.sandbox.harness.loading import (
        CUDA_IN_BUILD,
        ContractError,
        build_model,
        count_params,
        count_state,
        load_module,
    )
    from prism_challenge.sandbox.harness.state_contract import StateWatch

    clock.mark("harness_imports")
    channel = FeederChannel(_env("PRISM_SOCKET"), rank)
    # What this process sees of CUDA, reported before any of the miner's code is imported:
    # assigned GPUs that are not usable here are the host's fault (infra), never a CPU run.
    cuda_devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
    stack = software_stack()
    # CUDA started before the miner's code: the framework's or the environment's doing (infra)
    early = (cuda_start.where() or "unknown") if cuda_start.started() else ""
    challenge = channel.request("hello", {"world_size": world_size,
                                          "cuda_devices": cuda_devices,
                                          "cuda_started": early, "stack": stack})
    clock.mark("hello")
    vocab, seq_len, sep = challenge["vocab_size"], challenge["seq_len"], challenge["separator_id"]
    out_dir = scratch / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    status = {"status": "ok", "detail": ""}
    observed: dict = {"world_size": world_size}
    model = ctx = None
    watch = axes.OptimizerWatch()
    state_watch = None
    try:
        architecture = load_module(submission / "architecture.py", "architecture")
        clock.mark("import_architecture")
        model = build_model(architecture, vocab_size=vocab, seq_len=seq_len,
                            max_params=challenge["param_cap"], seed=seed)
        if cuda_start.started():  # refused here, before training, not at the eval
            raise ContractError(f"{CUDA_IN_BUILD} (CUDA was started at "
                                f"{cuda_start.where(str(submission)) or 'an unseen line'})")
        observed.update(param_count=count_params(model), state_count=count_state(model),
                        layer_count=axes.layer_count(model),
                        module_census=axes.module_census(model))
        clock.mark("build_model")
        if torch.cuda.is_available():
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)
        else:
            device = torch.device("cpu")
        model.to(device)
        clock.mark("to_device")
        ddp = None
        if world_size > 1:
            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel

            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
            ddp = DistributedDataParallel(model, device_ids=[local_rank]
                                          if device.type == "cuda" else None)
        training = load_module(submission / "training.py", "training")
        train = getattr(training, "train", None)
        if not callable(train):
            raise ContractError("training.py must define train(ctx)")
        state_watch = StateWatch(model, architecture)  # the state contract, told in the record
        ready = channel.request("ready", {"param_count": observed["param_count"],
                                          "cudnn": cudnn_version()})
        clock.mark("ready")
        clock.write(scratch / f"startup_rank{rank}.json")
        ctx = TrainContext(
            model=model, ddp_model=ddp, device=device, vocab_size=vocab, seq_len=seq_len,
            separator_id=sep, rank=rank, world_size=world_size,
            token_budget=challenge["token_budget"],
            max_step_rows=int(challenge["max_step_rows"]),
            deadline=time.monotonic() + float(ready["deadline_s"]), channel=channel,
            observed=observed,
            state_watch=state_watch,
        )
        watch = axes.OptimizerWatch(model)  # only steps that move the model's parameters
        with watch:
            train(miner_view(ctx))  # the public face only: nothing of the harness behind it
        ctx.close(profile=scratch / f"step_profile_rank{rank}.json")
        grown = count_state(model, vars(architecture))
        if grown > challenge["param_cap"]:  # counted at the build; what was added since
            raise ContractError(
                f"the model grew to {grown:,} tensor elements during training (parameters, "
                f"buffers and other tensors), over the cap of {challenge['param_cap']:,}; "
                "create every tensor in build_model")
    except ContractError as exc:
        status = {"status": "contract", "detail": str(exc)}
    except Exception as exc:  # the miner's code failed; the run is still recorded
        status = {"status": "crash", "detail": _summary(exc, submission)}
    if channel.broken:  # a contract break the miner's code caught and went on from
        status = {"status": "contract", "detail": channel.broken}
    observed["optimizers"] = watch.optimizers()
    if state_watch is not None and state_watch.notes:
        observed["state_outside"] = state_watch.notes
    if model is not None and rank == 0:
        state = {k: v.detach().to("cpu")
                 for k, v in torch.nn.Module.state_dict(model).items()}
        torch.save(state, out_dir / "final.pt")
    telemetry = ctx.telemetry if ctx is not None and rank == 0 else []
    channel.finish(status["status"], status["detail"],
                   {"axes": observed if "param_count" in observed else None,
                    "telemetry": telemetry})
    if world_size > 1:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    (scratch / f"status_rank{rank}.json").write_text(json.dumps(status))
    return 0 if status["status"] == "ok" else 1


if __name__ == "__main__":
    exit_now(main())
