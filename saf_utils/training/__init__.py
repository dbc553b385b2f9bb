"""Training: jobs and their launchers, the per-process entry torchrun / accelerate start,
the seq2seq and cross-encoder Trainer paths, the classifier factory and peak memory."""
