"""The host-fault classifier over real error texts (torch/CUDA, NVML, NCCL, kernel Xids)."""

from __future__ import annotations

import pytest

from prism_challenge.hardware.faults import host_fault, kernel_xids

CUDA_TAIL = ("CUDA kernel errors might be asynchronously reported at some other API call, so "
             "the stacktrace below might be incorrect.\nFor debugging consider passing "
             "CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side "
             "assertions.\n")

HOST = [
    ("gpu", "RuntimeError: CUDA error: uncorrectable ECC error encountered\n" + CUDA_TAIL),
    ("gpu", "RuntimeError: CUDA error: uncorrectable NVLink error detected during the "
            "execution\n" + CUDA_TAIL),
    ("gpu", "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable\n"
            + CUDA_TAIL),
    ("gpu", "RuntimeError: CUDA error: no CUDA-capable device is detected\n" + CUDA_TAIL),
    ("gpu", "RuntimeError: CUDA error: unknown error\n" + CUDA_TAIL),
    ("gpu", "Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.  Reboot "
            "the system to recover this GPU"),
    ("gpu", "RuntimeError: No CUDA GPUs are available"),
    ("driver", "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some "
               "cuda functions before calling NumCudaDevices() that might have already set an "
               "error? Error 802: system not yet initialized"),
    ("driver", "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime "
               "version\n" + CUDA_TAIL),
    ("driver", "Failed to initialize NVML: Driver/library version mismatch"),
    ("driver", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
               "Make sure that the latest NVIDIA driver is installed and running."),
    ("nccl", "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
             "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for "
             "details), NCCL version 2.20.5\nncclSystemError: System call (e.g. socket, malloc) "
             "or external library call failed or device error. \nLast error:\nsocketStartConnect"
             ": Connect to 127.0.0.1<44195> failed : Software caused connection abort"),
    ("nccl", "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
             "NCCLUtils.hpp:275, internal error - please report this issue to the NCCL "
             "developers, NCCL version 2.18.1\nncclInternalError: Internal check failed."),
    ("xid", "[ 3122.448119] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, "
            "GPU has fallen off the bus."),
    ("xid", "NVRM: Xid (PCI:0000:b3:00): 48, pid=2617, name=python, An uncorrectable double bit "
            "error (DBE) has been detected on GPU in the framebuffer at partition 6, "
            "subpartition 0."),
    ("xid", "NVRM: Xid (PCI:0000:41:00): 119, pid=3321, name=python, Timeout after 6s of "
            "waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) "
            "(0x2080014b 0x5)."),
]

MINER = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a "
    "total capacity of 79.11 GiB of which 3.94 GiB is free. Including non-PyTorch memory, "
    "this process has 75.16 GiB memory in use.",
    "RuntimeError: CUDA error: device-side assert triggered\n" + CUDA_TAIL,
    "RuntimeError: CUDA error: an illegal memory access was encountered\n" + CUDA_TAIL,
    "RuntimeError: CUDA error: misaligned address\n" + CUDA_TAIL,
    # An ECC text next to the run's own OOM: the OOM decides.
    "torch.OutOfMemoryError: CUDA out of memory.\nRuntimeError: CUDA error: uncorrectable ECC "
    "error encountered",
    "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled "
    "cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
    "ncclUnhandledCudaError: Call to CUDA function failed.\nLast error:\nCuda failure 'out of "
    "memory'",
    "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, invalid "
    "usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.20.5\nncclInvalidUsage: "
    "This usually reflects invalid usage of NCCL library.",
    "NVRM: Xid (PCI:0000:06:00): 13, pid=1875, name=python, Graphics SM Warp Exception on "
    "(GPC 0, TPC 0, SM 0): Out Of Range Address",
    "NVRM: Xid (PCI:0000:06:00): 31, pid=1875, name=python, Ch 00000008, intr 10000000. MMU "
    "Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f3c_00000000. Fault is of type "
    "FAULT_PDE ACCESS_TYPE_READ",
    "Traceback (most recent call last):\n  File \"/submission/training.py\", line 9, in train\n"
    "ValueError: loss is nan",
    "AssertionError: Torch not compiled with CUDA enabled",
]


@pytest.mark.parametrize("kind, text", HOST, ids=[f"{k}-{i}" for i, (k, _) in enumerate(HOST)])
def test_host_faults_are_recognised_with_the_line_that_shows_them(kind, text):
    fault = host_fault("Traceback (most recent call last):\n  ...\n" + text)
    assert fault is not None and fault.kind == kind
    assert fault.evidence in text and "Traceback" not in fault.evidence


@pytest.mark.parametrize("text", MINER, ids=range(len(MINER)))
def test_the_runs_own_faults_stay_the_miners(text):
    assert host_fault(text) is None


def test_kernel_xids_are_those_of_the_slots_gpus_since_the_run_began(tmp_path):
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(
        "6,1201,100000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
        "4,1302,300000000,-;NVRM: Xid (PCI:0000:3b:00): 13, pid=9, Graphics SM Warp Exception\n"
        "4,1303,300500000,-;NVRM: Xid (PCI:0000:18:00): 94, pid=9, Contained: SM (0x1). RST: "
        "No, D-RST: No\n"
        "4,1304,301000000,-;NVRM: Xid (PCI:0000:3b:00): 48, pid=9, An uncorrectable double bit "
        "error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition "
        "0.\n"
        " SUBSYSTEM=pci\n"
        "6,1305,302000000,-;usb 1-1: new high-speed USB device number 2\n")
    found = kernel_xids(["00000000:3B:00.0"], since_s=200.0, kmsg=kmsg)
    assert [f.evidence[:33] for f in found] == ["NVRM: Xid (PCI:0000:3b:00): 48, p"]
    assert [f.kind for f in kernel_xids(["00000000:18:00.0"], 200.0, kmsg)] == ["xid"]
    assert kernel_xids(["00000000:3B:00.0"], 200.0, tmp_path / "absent") == []
