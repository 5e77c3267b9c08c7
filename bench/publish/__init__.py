"""Publishing results: result files are read once into a typed model (results), and report,
history, advisor, charts and site turn that model into tables, verdicts and pages."""
