"""The validator neuron: the stages of docs/architecture.md wired into one crash-safe process."""
