"""The ``remat`` command line (entry point ``remat_models.cli.app:main``)."""
