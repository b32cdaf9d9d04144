"""The PRISM validator neuron (thin): parse flags, build settings, run.

    python neurons/validator.py --config config.yaml --netuid 1 --subtensor.network finney
"""

from prism_challenge.cli.app import app

if __name__ == "__main__":
    app(["validator", *__import__("sys").argv[1:]])
