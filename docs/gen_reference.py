"""mkdocs-gen-files: the reference pages written from the code at build time (bench/publish/reference.py)."""
import mkdocs_gen_files

from bench.publish import reference

with mkdocs_gen_files.open("reference/suite-keys.md", "w") as page:
    page.write(reference.suite_keys_markdown())
with mkdocs_gen_files.open("reference/columns.md", "w") as page:
    page.write(reference.columns_markdown())
