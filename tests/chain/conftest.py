"""The chain tests' fixtures: real wallets, the real bittensor client over a fake chain."""

from chain_kit import (  # noqa: F401 (fixtures)
    _symbol_cache,
    chain_client,
    chain_wallets,
    fake_chain,
    weight_setter_on,
)
