"""The challenge harness: the code that runs INSIDE the sandboxes, around the miner's code.

`train_main` drives a training run (seeds, forced-seed build, `train(ctx)`, final weights);
`eval_main` scores the final weights and the random-init twin with architecture.py alone.
"""
