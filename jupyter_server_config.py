# The project's jupyter_server settings (`make lab` loads this file; by hand:
# `.venv/bin/jupyter lab --config=jupyter_server_config.py notebooks/`).
# Saves of notebooks under notebooks/ are stripped to their committed form (no outputs, no
# execution counts, no kernelspec / language_info changes): see saf_utils/reporting/lab.py.
c = get_config()  # noqa: F821  (provided by traitlets when it loads this file)
c.ContentsManager.pre_save_hook = "saf_utils.reporting.lab.pre_save_hook"
