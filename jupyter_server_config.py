# The project's jupyter_server settings. `make install` copies this file to
# .venv/etc/jupyter/, where every Jupyter server started from the venv reads it (`make lab`,
# or `.venv/bin/jupyter lab` by hand); another environment: pass --config=<this file>.
# Saves of notebooks under notebooks/ are stripped to their committed form (no outputs, no
# execution counts, no kernelspec / language_info changes): see saf_utils/reporting/lab.py.
c = get_config()  # noqa: F821  (provided by traitlets when it loads this file)
c.ContentsManager.pre_save_hook = "saf_utils.reporting.lab.pre_save_hook"
