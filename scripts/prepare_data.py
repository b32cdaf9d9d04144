#!/usr/bin/env python3
"""Prepare the locked data once per validator: the same as `prism prepare-data` (docs/data.md).

    python scripts/prepare_data.py --source demo --out prism-data/data
    python scripts/prepare_data.py --source fineweb-edu --out /data/prism
    python scripts/prepare_data.py --source local --input shards/ \
        --manifest data_manifests/fineweb-edu-sample-10BT.json
    python scripts/prepare_data.py --verify --out /data/prism
"""

from prism_challenge.cli.prepare_data_cmd import main

if __name__ == "__main__":
    main()
