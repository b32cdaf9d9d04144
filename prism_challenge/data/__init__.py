"""The locked data plane (docs/data.md): prepare a data version once, then read exactly it.

    prepare_data(spec, out)            source -> split -> tokenizer -> shards -> MANIFEST
    verify_data(root)                  re-hash everything the MANIFEST lists
    TokenStream.open(root, split)      a verified split as fixed-geometry rows
    load_tokenizer(root)               the challenge tokenizer, hash-verified

See docs/data.md for the layout, the rules and the commands.
"""

from prism_challenge.data.errors import DataInputError, DataIntegrityError
from prism_challenge.data.manifest import Manifest, read_manifest
from prism_challenge.data.prepare import PrepareReport, prepare_data, verify_data
from prism_challenge.data.spec import (
    SPLITS,
    DataSpec,
    DemoSource,
    FineWebSource,
    LocalSource,
    SplitSpec,
    TokenizerSpec,
    load_spec,
)
from prism_challenge.data.stream import TokenStream
from prism_challenge.data.tokenizer import load_tokenizer

__all__ = [
    "SPLITS",
    "DataInputError",
    "DataIntegrityError",
    "DataSpec",
    "DemoSource",
    "FineWebSource",
    "LocalSource",
    "Manifest",
    "PrepareReport",
    "SplitSpec",
    "TokenStream",
    "TokenizerSpec",
    "load_spec",
    "load_tokenizer",
    "prepare_data",
    "read_manifest",
    "verify_data",
]
