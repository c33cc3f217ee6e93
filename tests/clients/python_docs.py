"""Runs every ```python block of a Markdown file (docs/python.md), in order, in one
namespace, with the documented default ports replaced by the test server's ports."""
import os
import re
import sys

text = open(sys.argv[1], encoding="utf-8").read()
blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
assert blocks, "no python blocks found"
namespace = {}
for i, block in enumerate(blocks, 1):
    code = block.replace("6380", os.environ["STRATA_RESP_PORT"]).replace(
        "5433", os.environ["STRATA_PG_PORT"])
    exec(compile(code, f"{sys.argv[1]} block {i}", "exec"), namespace)
print(f"{len(blocks)} examples ok")
