"""The one loss the challenge scores: next-token cross-entropy in nats, per position.

Targets equal to the document separator predict no bytes and are not scored (docs/data.md):
their loss is 0 here. The train harness, the replay's probes and the eval harness all call
this function, so they cannot disagree; the feeder sums what it reports.
"""

from __future__ import annotations


def token_nats(logits, targets, separator_id: int):
    """-ln p(target) per position (float32, shaped like `targets`); separators give 0."""
    import torch.nn.functional as F

    vocab = logits.shape[-1]
    return F.cross_entropy(
        logits.reshape(-1, vocab).float(),
        targets.reshape(-1),
        ignore_index=separator_id,
        reduction="none",
    ).view(targets.shape)


def check_logits(logits, batch: int, seq_len: int, vocab_size: int) -> None:
    import torch

    from prism_challenge.sandbox.harness.loading import ContractError

    if type(logits) is not torch.Tensor:  # noqa: E721 - a subclass is what is refused
        raise ContractError(
            f"the model returned {type(logits).__name__}, not a plain logits tensor (a tensor "
            "subclass would compute the scored loss with its own methods)")
    if tuple(logits.shape) != (batch, seq_len, vocab_size):
        raise ContractError(
            f"the model returned logits of shape {tuple(logits.shape)}, expected "
            f"{(batch, seq_len, vocab_size)}"
        )
