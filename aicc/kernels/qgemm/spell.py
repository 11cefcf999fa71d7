"""The qgemm family's per-ISA spellings: TABLES, {ISA name: its ``qgemm`` table}
(isa/<name>/qgemm.py), the ISAs these kernels run on; fill, which fills a table's template."""
from __future__ import annotations

from ..isa.registry import table

TABLES = table("qgemm")


def fill(template: str, **fields) -> str:
    """template with each ``{name}`` of fields replaced by its value; the other braces are
    C's."""
    for k, v in fields.items():
        template = template.replace("{" + k + "}", str(v))
    return template


def fill_lines(lines, **fields) -> list:
    """fill on each line of a template given as lines."""
    return [fill(s, **fields) for s in lines]
