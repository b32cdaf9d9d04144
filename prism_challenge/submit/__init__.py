"""The miner-side client: commit a bundle, find the validators, sign and upload, follow."""

from prism_challenge.chain.wallet import WalletError
from prism_challenge.submit.client import SubmissionClient, SubmitError
from prism_challenge.submit.wallet import load_wallet

__all__ = ["SubmissionClient", "SubmitError", "WalletError", "load_wallet"]
