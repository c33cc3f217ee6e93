"""Runs every ```python block of a Markdown file (docs/python.md), in order, in one
namespace, with the documented default ports replaced by the test server's ports."""
import os
import re
import sys

text = open(sys.argv[1], encoding="utf-8").read()
blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
assert blocks, "no python blocks found"
# Packages an example may need that the test machine need not have (the CI installs redis,
# psycopg and pandas only): a block that fails to import one of them is skipped, and said so.
OPTIONAL = {"sqlalchemy"}
namespace = {}
skipped = 0
for i, block in enumerate(blocks, 1):
    code = block.replace("6380", os.environ["STRATA_RESP_PORT"]).replace(
        "5433", os.environ["STRATA_PG_PORT"])
    try:
        exec(compile(code, f"{sys.argv[1]} block {i}", "exec"), namespace)
    except ModuleNotFoundError as e:
        if e.name not in OPTIONAL:
            raise
        skipped += 1
        print(f"block {i} skipped: no module {e.name}")
print(f"{len(blocks) - skipped} examples ok, {skipped} skipped")
