"""PRISM: measure a model's ability to learn from scratch, honestly."""

__version__ = "0.1.0"
