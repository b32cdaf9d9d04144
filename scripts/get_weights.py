"""Print the weights plan (dry run): a thin wrapper over `prism weights`, same flags."""

from __future__ import annotations

import sys

from prism_challenge.cli.app import app

if __name__ == "__main__":
    app(["weights", *sys.argv[1:]], prog_name="get_weights.py")
