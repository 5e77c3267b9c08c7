# The suites are run by gnnbench's pytest plugin: see bench/pytest_plugin.py.
pytest_plugins = ["bench.pytest_plugin"]
