"""Host faults come from the host's own evidence: the kernel's Xids for the slot's GPUs."""

from __future__ import annotations

from prism_challenge.hardware.faults import kernel_xids


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
