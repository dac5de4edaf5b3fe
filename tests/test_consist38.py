"""One question, one answer, whichever command asks it (consist38): the disagreements between commands found by
the route tests, each tested where it was fixed (plan against predict on the same pinned strategy)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from scalemodel.cli import main

REL = 1e-9


def _cli(*args: str) -> dict[str, Any]:
    """``scalemodel ARGS --json`` in-process; its document (exit 0, or check's 1)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([*args, "--json"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0
    assert code in (0, 1), f"scalemodel {' '.join(args)}: exit {code}: {err.getvalue()}"
    return json.loads(out.getvalue())  # type: ignore[no-any-return]


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REL * max(abs(a), abs(b), 1e-300)


def _dump(spec: Any) -> dict[str, Any]:
    return msgspec.to_builtins(spec)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("consist38")


def _write(folder: Path, name: str, data: Any) -> str:
    f = folder / name
    f.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(f)



# --- the disagreements found, each at its root --------------------------------------------------------------------

_VARIABLE = ("--cluster", "dgx-a100", "--model", "gpt-1.7b", "--gpus", "128", "--global-batch", "2048",
             "--set", "training.sequence_lengths=uniform:1:2048")
_PINNED = ("tp=1,pp=1,cp=1,ep=1,dp=128,micro_batch=1,zero=0,recompute=none,sp=false,overlap=true,compression=none,"
           "dp_comm=allreduce,algorithm=auto,layout=tp-cp-dp-pp,bucket=default,schedule=1f1b")


def test_plan_prices_dynamic_assignment_at_predicts_dispatch_overhead() -> None:
    """plan's grids took a 0 s dispatch overhead (GRID_DEFAULTS) where predict takes Ray's measured task round trip
    (cost.balance.DEFAULT_DISPATCH_OVERHEAD_S): the same pinned dynamic strategy was 1.929 s in plan and 1.946 s in
    predict. Now one default serves both; the overhead is priced (a free queue is faster) and echoed alike."""
    p = _cli("predict", *_VARIABLE, "--assignment", "dynamic")
    doc = _cli("plan", *_VARIABLE, "--allow", "dynamic-assignment", "--top", "1",
               "--constraint", _PINNED + ",assignment=dynamic")
    r = doc["ranked"][0]
    assert r["strategy"]["assignment"] == "dynamic"
    assert _close(r["step_time_s"], p["step_time_s"])
    assert r["strategy"]["dispatch_overhead_s"] == p["strategy"]["dispatch_overhead_s"] > 0
    assert r["strategy"]["dispatch_overhead"] == r["strategy"]["dispatch_overhead_s"]  # the file's twin, dynamic
    free = _cli("predict", *_VARIABLE, "--assignment", "dynamic", "--set", "strategy.dispatch_overhead=0")
    assert free["step_time_s"] < p["step_time_s"]
    # static: the same default echoed by both; the file's twin is null (a value would be warned "not priced")
    s = _cli("plan", *_VARIABLE, "--top", "1", "--constraint", _PINNED + ",assignment=static")["ranked"][0]["strategy"]
    assert s["dispatch_overhead_s"] == p["strategy"]["dispatch_overhead_s"] and s["dispatch_overhead"] is None


def test_plan_reads_null_fields_of_a_strategy_file_as_predict_does(tmp: Path) -> None:
    """A strategy file's null is the field's default. plan pinned a null dispatch_overhead into its grid as NaN ("a
    result is not finite", exit 2, under --json) and a null bucket_size (which plan's own --json strategy writes)
    was a TypeError traceback; predict priced both files at the defaults."""
    base = ("--cluster", "dgx-h100", "--model", "gpt-1.7b", "--gpus", "16", "--global-batch", "16")
    null = _write(tmp, "null-overhead.yaml", {"tp": 2, "zero": "1", "dispatch_overhead": None, "bucket_size": None})
    p = _cli("predict", *base, "--strategy", null)
    r = _cli("plan", *base, "--strategy", null, "--top", "1", "--constraint", "dp=8,micro_batch=1,sp=false,"
             "recompute=none,schedule=1f1b,overlap=true,bucket=default,layout=tp-cp-dp-pp")["ranked"][0]
    assert _close(r["step_time_s"], p["step_time_s"])
    top = _cli("plan", *base, "--top", "1")["ranked"][0]
    again = _write(tmp, "plan-top.yaml", top["strategy"])  # its bucket_size is null: the framework's default
    assert _cli("plan", *base, "--strategy", again, "--top", "1")["ranked"]


def test_plan_ranks_a_pinned_micro_batch_that_is_not_a_power_of_two() -> None:
    """plan's micro-batch axis is the powers of two dividing B / dp; one pinned with = is a candidate too, as predict
    prices it (docs/model.md#plan-space): a pinned 6 was "no split meets what was asked"."""
    base = ("--cluster", "dgx-a100", "--model", "gpt-1.7b", "--gpus", "64", "--global-batch", "384")
    p = _cli("predict", *base, "--micro-batch", "6", "--zero", "1")
    r = _cli("plan", *base, "--top", "1", "--constraint",
             "dp=64,tp=1,pp=1,micro_batch=6,zero=1,recompute=none,sp=false,overlap=true,bucket=default")["ranked"][0]
    assert r["strategy"]["micro_batch"] == 6
    assert _close(r["step_time_s"], p["step_time_s"])
    # unpinned, the axis is unchanged: powers of two only
    free = _cli("plan", *base, "--top", "5", "--constraint", "dp=64,tp=1,pp=1")["ranked"]
    assert {x["strategy"]["micro_batch"] for x in free} <= {1, 2}
