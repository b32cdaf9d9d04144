"""The miner-side client: load the hotkey, sign and upload a bundle, follow its status."""

from prism_challenge.submit.client import SubmissionClient, SubmitError
from prism_challenge.submit.wallet import WalletError, load_hotkey

__all__ = ["SubmissionClient", "SubmitError", "WalletError", "load_hotkey"]
