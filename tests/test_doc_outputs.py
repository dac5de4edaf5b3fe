"""The most-cited quoted outputs of the documentation are what the commands print now.

scripts/check_doc_outputs.py re-runs every block marked ``<!-- output-of: scalemodel ... -->`` (run it by hand
after a change that moves numbers); this test runs only the cheap, most-quoted ones: the default study that
README's Quickstart and examples/README.md section 1 quote (``scalemodel scale``) and section 2's strong-scaling
table. The expected text is the README's own block, so the test never copies a number of the model: a quoted
line that the command no longer prints fails, with the line as quoted and as printed now.
"""

from __future__ import annotations

from conftest import script_module

CHEAP = {"scalemodel scale", "scalemodel scale --scenario examples/scenarios/strong-scaling.yaml"}


def test_most_cited_quoted_outputs_match() -> None:
    mod = script_module("check_doc_outputs")
    found = [b for f in mod.default_files() for b in mod.blocks(f)]  # also: every marker in the docs is well-formed
    cheap = [b for b in found if b.command in CHEAP]
    assert {b.command for b in cheap} == CHEAP, "a most-cited block lost its output-of marker"
    assert all(len(b.quoted) >= 5 for b in cheap)  # the header and the table rows are quoted, not just the command
    problems = [msg for b in cheap for msg in mod.check(b)]
    assert not problems, "\n".join(problems) + "\n(re-run scripts/check_doc_outputs.py and update the docs)"
