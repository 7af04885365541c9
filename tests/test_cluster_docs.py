"""Issue 18 item 12: the cluster instructions never start a scheduler open to everyone, and say how to secure it.

The README told users to run ``dask scheduler`` on all interfaces with no word on security, while Dask runs
pickled code sent by anyone who reaches the port."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "docs" / "cluster.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_scheduler_command_binds_a_private_address(page):
    commands = [line for line in page.read_text().splitlines() if re.match(r"\s*(\$ )?dask scheduler\b", line)]
    assert commands, page
    for line in commands:
        host = re.search(r"--host\s+(\S+)", line)
        assert host, line
        assert re.match(r"(127\.|10\.|192\.168\.|172\.(1[6-9]|2\d|3[01])\.)", host.group(1)), line


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_security_warning_is_there(page):
    text = page.read_text()
    assert "anyone who can reach the scheduler's port can run any code on the workers" in " ".join(text.split())
    assert "0.0.0.0" in text and "TLS" in text and "SSH" in text


def test_the_security_section_gives_the_three_ways():
    text = (ROOT / "docs" / "cluster.md").read_text()
    section = text[text.index("## Security"):text.index("\n## ", text.index("## Security") + 1)]
    for needle in ("Private interface", "ssh -N -L", "--tls-ca-file", "--tls-cert", "--tls-key", "tls://"):
        assert needle in section, needle
