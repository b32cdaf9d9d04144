"""The intake tests' fixtures: a live node, real wallets and tiny bundles (tests/intake_kit.py)."""

from intake_kit import (  # noqa: F401 (fixtures)
    bundle_dir,
    intake_app,
    make_bundle,
    make_node,
    miner,
    node,
    rival,
    stranger,
    wallets,
)
