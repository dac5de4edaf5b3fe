"""The one error type users see: where, what was wrong, what is allowed.

Every bad input (a spec file, a CLI option, a unit) raises :class:`InputError`; the CLI prints it
as ``error: <where>: <what>; <what is allowed>`` on stderr and exits with status 2.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input. Subclasses ValueError so spec validators report it with a field path."""

    def __init__(self, what: str, *, where: str = "", allowed: str = "") -> None:
        self.what = what
        self.where = where
        self.allowed = allowed
        super().__init__(self.message())

    def message(self) -> str:
        """One line: ``where: what; allowed`` (an echoed array is folded and cut to stay readable)."""
        what = " ".join(self.what.split())
        if len(what) > 300:
            what = what[:297] + "..."
        text = f"{self.where}: {what}" if self.where else what
        return f"{text}; {self.allowed}" if self.allowed else text

    def at(self, where: str) -> InputError:
        """The same error, located more precisely (prefixing the outer location)."""
        loc = f"{where}: {self.where}" if self.where else where
        return InputError(self.what, where=loc, allowed=self.allowed)
