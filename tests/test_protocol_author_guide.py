"""The protocol-author guide runs as written: its Python blocks are executed in order."""

from __future__ import annotations

import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "protocol-author.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_guide_example_runs_and_its_claims_hold():
    from netsim.registry import protocols

    protocols._items.pop("example-neighbour-ucb", None)  # the guide registers it afresh
    blocks = python_blocks(GUIDE.read_text())
    assert len(blocks) >= 4
    namespace: dict = {"__name__": "protocol_author_guide"}
    for block in blocks:
        exec(compile(block, str(GUIDE), "exec"), namespace)  # noqa: S102 - the guide is ours
    assert "example-neighbour-ucb" in protocols.names()
    assert all(r.row["observations_per_agent"] == 6 * 400 - 5 for r in namespace["sharing"])
