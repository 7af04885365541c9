"""The protocol-author guide runs as written, in an empty folder.

Its blocks are taken in order: a block whose first line is ``# file: NAME`` is written to that
file; other Python blocks are executed (in one namespace); each ``$`` line of a ``console``
block is run as a command (``netsim`` being this interpreter's ``python -m netsim``) and must
succeed.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "protocol-author.md"
FILE_MARK = re.compile(r"#\s*file:\s*(\S+)\n")


def blocks(text: str) -> list[tuple[str, str]]:
    """``(language, code)`` of every fenced block, in order."""
    return re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)


def guide_file(name: str) -> str:
    """The contents of the guide's ``# file: NAME`` block."""
    for _, code in blocks(GUIDE.read_text()):
        mark = FILE_MARK.match(code)
        if mark and mark.group(1) == name:
            return code
    raise LookupError(name)


def run_command(line: str) -> None:
    words = shlex.split(line)
    env = dict(os.environ)
    while "=" in words[0]:
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    assert words[0] == "netsim", line
    done = subprocess.run([sys.executable, "-m", "netsim", *words[1:]], env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{line}\n{done.stderr}"


def test_guide_runs_as_written(tmp_path, monkeypatch, isolated_plugins):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "protocol_author_guide"}
    kinds = []
    for language, code in blocks(GUIDE.read_text()):
        mark = FILE_MARK.match(code)
        if mark:
            (tmp_path / mark.group(1)).write_text(code)
            kinds.append("file")
        elif language == "python":
            exec(compile(code, str(GUIDE), "exec"), namespace)  # noqa: S102 - the guide is ours
            kinds.append("python")
        elif language == "console":
            for line in code.splitlines():
                if line.startswith("$ "):
                    run_command(line[2:])
            kinds.append("console")
    assert kinds.count("file") == 2 and kinds.count("python") >= 2 and "console" in kinds
    assert "example-neighbour-ucb" in isolated_plugins.protocols.names()
    # own 400 pulls plus 5 neighbours' rewards sent at ticks 0..398 (those of tick 399 arrive at the horizon)
    assert (namespace["sharing"].trials["observations_per_agent"] == 400 + 5 * 399).all()
