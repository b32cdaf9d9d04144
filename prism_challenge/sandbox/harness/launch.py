"""torchrun, ended without the interpreter's teardown once every worker has exited.

Runs torch's own launcher (`torch.distributed.run`) with the arguments it was given. A failed
worker makes torchrun raise: that path is left to torchrun, which prints its own report (the
host-fault classifier reads it) and exits non-zero.
"""

from __future__ import annotations

from prism_challenge.sandbox.harness.quick_exit import exit_now


def main() -> None:
    from torch.distributed.run import main as torchrun

    torchrun()
    exit_now(0)


if __name__ == "__main__":
    main()
