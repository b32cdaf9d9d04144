"""A validator head in its own process, to be SIGKILLed mid-run by a test: it connects to
the cluster and evaluates queued submissions on every slot, until killed.

    python crashing_head.py SETTINGS.json
"""

from __future__ import annotations

import json
import sys

from cluster_kit import together

from prism_challenge.cluster.ray_pool import ClusterPool
from prism_challenge.config import Settings
from prism_challenge.data.manifest import read_manifest
from prism_challenge.storage import Store
from prism_challenge.validator.worker import EvaluationWorker


def main() -> None:
    settings = Settings(**json.loads(open(sys.argv[1]).read()))
    pool = ClusterPool(settings, read_manifest(settings.data.root))
    pool.connect()
    pool.wait_ready(120)
    store = Store(settings.storage.url)
    workers = [EvaluationWorker(settings, store, slot, None) for slot in pool.slots]
    print("ready", flush=True)
    while True:
        together(workers)


if __name__ == "__main__":
    main()
