"""The miner-side client: commit a bundle, find the validators, sign and upload, follow."""

from prism_challenge.chain.wallet import WalletError, load_wallet
from prism_challenge.submit.client import SubmissionClient, SubmitError

__all__ = ["SubmissionClient", "SubmitError", "WalletError", "load_wallet"]
