# The suites are run by gnnbench's pytest plugin: see bench/run/pytest_plugin.py.
pytest_plugins = ["bench.run.pytest_plugin"]
