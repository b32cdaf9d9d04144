"""The chain as PRISM sees it: the metagraph, commitments, validator addresses, weights.

`subtensor.ChainClient` owns every call to a Bittensor chain; `ledger.LocalLedger` stands
in for the chain in local mode. Import from the submodules (this package stays import-light:
`precedence` is used by pure code that must not load bittensor).
"""
