"""Errors that reach the user as one clear line (exit code 2)."""

from __future__ import annotations


class InputError(Exception):
    """Bad user input: a scenario key, a command-line value, a missing file.

    The message always names where the problem is (file and dotted key when known),
    what was wrong, and what would have been accepted.
    """

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None):
        self.source = source
        self.key = key
        self.detail = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = ": ".join(part for part in (self.source, self.key) if part)
        return f"{where}: {self.detail}" if where else self.detail

    def located(self, source: str) -> InputError:
        """The same error, attributed to ``source`` (a file name) if it had none."""
        if self.source:
            return self
        return InputError(self.detail, source=source, key=self.key)


class ProtocolError(RuntimeError):
    """A protocol used the engine API wrongly (a bug in the protocol, exit code 1)."""
