"""Whether a process that imported torch._dynamo (which imports triton on a CUDA build) can
still fork children that compute on the GPU. The prewarmed interpreter preloads torch._dynamo
only on CPU builds until this holds on a GPU host (isolation/prewarm.py): every sandbox's
program is a fork of it, and a fork whose CUDA is unusable would fail every GPU run."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import os, sys
import torch
import torch._dynamo  # on a CUDA build this imports triton
assert not torch.cuda.is_initialized()
codes = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        try:
            x = torch.arange(16.0).reshape(4, 4)
            ok = torch.equal((x.cuda() @ x.cuda()).cpu(), x @ x)  # small integers: exact
            os._exit(0 if ok else 3)
        except BaseException as exc:
            print(repr(exc), file=sys.stderr, flush=True)
            os._exit(4)
    codes.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
print(codes)
sys.exit(0 if codes == [0, 0] else 1)
"""


def test_forks_of_a_process_that_imported_dynamo_compute_on_the_gpu():
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
