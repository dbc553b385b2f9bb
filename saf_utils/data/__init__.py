"""Data infrastructure: the loaders' shared reading, provenance of every file read, and the
files notebooks hand to each other (artifacts)."""
