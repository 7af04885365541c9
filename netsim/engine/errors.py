"""Errors that reach the user as one clear line (exit code 2)."""

from __future__ import annotations

#: longest file name or key an error message shows (longer ones are cut, saying how long they were)
NAME_LIMIT = 200
#: longest error message (a message is one readable line whatever the input)
MESSAGE_LIMIT = 1000


def _cut(text: str, limit: int) -> str:
    """``text`` on one line (control characters escaped) and at most about ``limit`` characters."""
    text = "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in str(text))
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


class InputError(Exception):
    """Bad user input: a scenario key, a command-line value, a missing file.

    The message always names where the problem is (file and dotted key when known),
    what was wrong, and what would have been accepted. It is one line: control characters are
    escaped, a file name or key longer than :data:`NAME_LIMIT` characters is cut, and so is a
    message longer than :data:`MESSAGE_LIMIT`.
    """

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None):
        self.source = source
        self.key = key
        self.detail = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = ": ".join(_cut(part, NAME_LIMIT) for part in (self.source, self.key) if part)
        text = f"{where}: {self.detail}" if where else self.detail
        return _cut(text, MESSAGE_LIMIT)

    def located(self, source: str) -> InputError:
        """The same error, attributed to ``source`` (a file name) if it had none."""
        if self.source:
            return self
        return InputError(self.detail, source=source, key=self.key)


class ProtocolError(RuntimeError):
    """A protocol used the engine API wrongly (a bug in the protocol, exit code 1)."""
