"""The `prism` command line (thin: parse, build settings, call the stage)."""
