"""saf_utils: data, metrics, task logic and the report runner of the SAF/ArgSciChat notebooks."""

import warnings

# tqdm.auto falls back to text bars inside papermill kernels (no ipywidgets); that is wanted.
warnings.filterwarnings("ignore", message="IProgress not found")
