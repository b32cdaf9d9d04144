"""The `prism submit` tests' fixtures: the live node of tests/intake_kit.py, real wallets."""

from intake_kit import bundle_dir, intake_app, make_node, node, wallets  # noqa: F401 (fixtures)
