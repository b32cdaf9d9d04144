"""Agreement between validators: each serves its signed measurements, fetches its peers',
and ranks every run on the stake-weighted median of them (docs/validators.md §9)."""
