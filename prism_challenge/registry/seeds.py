"""The claims a fresh registry starts with: common design questions of small language models.

They enter the ledger as ordinary `hypothesis` events the first time a store is opened, so a
replay never depends on this list changing later.
"""

from __future__ import annotations

SEED_HYPOTHESES: list[dict] = [
    {"spec": {"kind": "single", "axis": "optimizer", "treatment": "muon", "control": "adamw"},
     "importance": 0.8, "rationale": "orthogonalised updates are reported to learn faster"},
    {"spec": {"kind": "single", "axis": "norm", "treatment": "rmsnorm", "control": "layernorm"},
     "importance": 0.5, "rationale": "RMSNorm drops the mean; cheaper, often as good"},
    {"spec": {"kind": "single", "axis": "position", "treatment": "rope", "control": "learned"},
     "importance": 0.7, "rationale": "rotary positions generalise across offsets"},
    {"spec": {"kind": "single", "axis": "precision", "treatment": "bf16", "control": "fp32"},
     "importance": 0.4, "rationale": "more steps in the same wall-clock budget"},
    {"spec": {"kind": "single", "axis": "compile", "treatment": "true", "control": "false"},
     "importance": 0.3, "rationale": "compilation buys throughput, not sample efficiency"},
    {"spec": {"kind": "threshold", "axis": "lr", "threshold": 1e-3, "better": "above"},
     "importance": 0.6, "rationale": "short budgets reward aggressive learning rates"},
    {"spec": {"kind": "single", "axis": "batch_size", "treatment": "8-32", "control": "32-128"},
     "importance": 0.5, "rationale": "a fixed token budget favours more, smaller steps"},
    {"spec": {"kind": "interaction", "axis_a": "optimizer", "a1": "muon", "a0": "adamw",
              "axis_b": "lr", "b1": "0.001-0.01", "b0": "0.0001-0.001"},
     "importance": 0.4, "rationale": "muon tolerates larger steps than AdamW"},
]
