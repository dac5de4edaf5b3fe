"""Warnings raised while reading inputs: things the tool understood only in part, or guessed.

A reader calls :func:`warn`; the CLI prints each collected warning as one ``warning: ...`` line on
stderr when the command ends, and every ``--json`` document carries them in its ``warnings`` list
(:func:`scalemodel.report.output.to_json`). :func:`clear` starts a new invocation, as
:func:`scalemodel.specs.files.forget_reads` does for the files read.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from scalemodel.errors import prose

_collected: list[str] = []
MAX_WARNINGS = 100  # a hostile config could name thousands of keys; one line each is enough up to here
#: the spec sections whose fields the input in hand writes flat, by their own names (:func:`flat_fields`)
_flat: ContextVar[frozenset[str]] = ContextVar("flat_fields", default=frozenset())


def warn(message: str) -> None:
    """Record one warning (a single line; repeated messages are kept once)."""
    # a file name's line break or tab as \n / \t (not folded into a space: another file's name), its undecodable
    # byte as \xff, not a lone surrogate
    line = prose(message)
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)  # no terminal escapes from a file
    if line not in _collected and len(_collected) < MAX_WARNINGS:
        _collected.append(line)


def field_name(path: str) -> str:
    """A spec field as a warning names it: ``strategy.tp`` / ``training.fp8_attention`` as predict's spec files nest
    them, or ``tp`` / ``fp8_attention`` inside :func:`flat_fields` for those sections (a measured-runs file writes
    every strategy and training field flat under its run: specs.runs). The warning's author names the field; the
    reader in hand decides how it is written, and no warning's text is rewritten after it was raised (a workload
    named ``lab/strategy.tp-net`` in the same line stays as named)."""
    section, dot, rest = path.partition(".")
    return rest if dot and section in _flat.get() else path


@contextmanager
def flat_fields(*sections: str) -> Iterator[None]:
    """Inside the block, :func:`field_name` writes the fields of ``sections`` (``"strategy"``, ``"training"``) by
    their own names."""
    token = _flat.set(_flat.get() | frozenset(sections))
    try:
        yield
    finally:
        _flat.reset(token)


def current() -> list[str]:
    """The warnings of this invocation so far, in the order raised."""
    return list(_collected)


def clear() -> None:
    """Start a new invocation (the CLI calls this once per command)."""
    _collected.clear()


@contextmanager
def collecting() -> Iterator[list[str]]:
    """The warnings raised inside the block, in a list of their own (filled when the block ends), kept out of
    this invocation's: a sweep point's warnings are raised where the point runs (maybe another process) and
    travel with its row, so the sweep reports each once with the point's label (engine/grid.py)."""
    saved = list(_collected)
    _collected.clear()
    got: list[str] = []
    try:
        yield got
    finally:
        got.extend(_collected)
        _collected[:] = saved
