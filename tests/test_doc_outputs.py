"""The most-cited quoted outputs of the documentation are what the commands print now.

scripts/check_doc_outputs.py re-runs every block marked ``<!-- output-of: scalemodel ... -->`` (run it by hand
after a change that moves numbers); this test runs only the cheap, most-quoted ones: the default study that
README's Quickstart and examples/README.md section 1 quote (``scalemodel scale``) and section 2's strong-scaling
table. The expected text is the README's own block, so the test never copies a number of the model: a quoted
line that the command no longer prints fails, with the line as quoted and as printed now. The summaries of
``--json`` output (``<!-- figures-of: ... -->``, examples/README.md sections 3, 5, 6 and 9) are too slow to run here;
the last test checks how their rows are read and rounded, on a hand-made block and hand-made JSON.
"""

from __future__ import annotations

import json

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


def _points(*points: dict) -> str:
    return json.dumps({"schema_version": "2.0", "points": list(points)})


def test_figures_of_rows_take_their_flags_and_round_as_quoted(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A figures-of row adds its label's flags (and those of the `$ ...` line above it) to the marker's command,
    and each quoted figure must be the JSON value rounded as quoted: 4.63 holds 4.6279, not 4.6249."""
    mod = script_module("check_doc_outputs")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "<!-- figures-of: scalemodel scale --json :: step_time_s breakdown_s.straggler*1000 0:tflops_per_gpu -->\n"
        "```\n$ scalemodel scale [--sync ...] --json\n(2048 GPUs; a title)\n      step  straggler\n"
        "(bsp)            4.63 s  27.6 ms  39.8   (+1 %)\n--sync hier:128  4.67 s   0      39.4\n"
        "$ ... --set strategy.bucket_size=25MiB        (a comment)\n(bsp)            8.83 s  27.6 ms  20.9\n```\n",
        encoding="utf-8",
    )
    (block,) = mod.blocks(doc)
    assert [(flags, figs) for _, flags, figs in mod.rows(block)] == [
        ([], ["4.63", "27.6", "39.8", "+1"]),  # figures past the columns (the percentage) are not checked
        (["--sync", "hier:128"], ["4.67", "0", "39.4"]),
        (["--set", "strategy.bucket_size=25MiB"], ["8.83", "27.6", "20.9"]),
    ]
    first = {"tflops_per_gpu": 39.84}  # the third column reads point 0, the others the last point
    base = "scalemodel scale --json"
    now = {
        base: _points(first, {"step_time_s": 4.6279, "breakdown_s": {"straggler": 0.02764}}),
        f"{base} --sync hier:128": _points(
            {"tflops_per_gpu": 39.35}, {"step_time_s": 4.67, "breakdown_s": {"straggler": 0.0}}
        ),
        f"{base} --set strategy.bucket_size=25MiB": _points(
            {"tflops_per_gpu": 20.9}, {"step_time_s": 8.83, "breakdown_s": {"straggler": 0.0276}}
        ),
    }
    assert mod.check_figures(block, now) == []
    now[base] = now[base].replace("4.6279", "4.6249")  # rounds to 4.62: the quoted 4.63 drifted
    (problem,) = mod.check_figures(block, now)
    assert "line 6" in problem and "4.6249" in problem
    now[f"{base} --sync hier:128"] = _points(first, {"step_time_s": 4.67})  # no straggler in the JSON
    assert len(mod.check_figures(block, now)) == 2
