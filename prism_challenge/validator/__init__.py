"""The validator neuron: the stages of DESIGN §1 wired into one crash-safe process."""
