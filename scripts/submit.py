"""Submit a bundle to a validator: the same as `prism submit` (see `--help`)."""

import sys

from prism_challenge.cli.app import app

if __name__ == "__main__":
    app(["submit", *sys.argv[1:]], prog_name="submit.py")
