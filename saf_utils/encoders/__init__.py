"""Sentence encoders: the one embedding cache and the offline multilingual encoders."""
