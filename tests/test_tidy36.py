"""tidy36: pass 1a prices memory only for the configurations a candidate of which memory can still decide, and the
configuration axis is built without copying or sorting what does not change (planner._open_memory_rows, _levels,
_expand's one-option path, _with_cp_exchange's one exchange).

``plan -n 73513440`` on a dgx-h100 grown to 99,999,744 GPUs: 5.3 M configurations, of which 50,164 have a candidate
that the heads', sequence's and interleaving's divisibility leave open; pass 1a priced the memory of all of them.
Checked here against what the code did before, computed independently of the shortcuts:
- a row's memory is the same to the bit priced among any other rows (the property the skipped rows rely on);
- a whole search gives the same payload (ranked plans, counts of every reason, bounds) with memory priced on
  every row as with the open rows alone, on spaces where most configurations are closed;
- ``_levels`` equals ``np.unique(..., return_inverse=True)``; ``_expand`` with one option a group equals the
  repeat-and-gather path it skips."""

from __future__ import annotations

import numpy as np
import pytest
from msgspec.structs import replace

from scalemodel.engine import planner
from scalemodel.engine.job import build_job
from scalemodel.engine.pipeline_ranks import microbatches
from scalemodel.engine.stage_memory import memory_total
from scalemodel.specs import TrainingSpec, load_cluster, load_workload

#: (cluster, model, model sets, GPUs): GPU counts with many divisors, so tp / cp / pp that do not divide the heads,
#: the sequence or the layers close most configurations before memory
CLOSED = [
    ("dgx-a100", "gpt3-175b", ["layers=12"], 720),
    ("dgx-h100", "mixtral-8x7b", ["layers=6"], 360),
    ("dgx-h100", "llama2-13b", ["layers=10"], 240),
]


def _job(cluster: str, model: str, sets: list[str], gpus: int):  # type: ignore[no-untyped-def]
    return build_job(load_cluster(cluster), load_workload(model, sets), TrainingSpec(global_batch=gpus))


@pytest.mark.parametrize("case", CLOSED, ids=[c[1] for c in CLOSED])
def test_memory_of_a_row_is_its_own_among_any_rows(case) -> None:  # type: ignore[no-untyped-def]
    """memory_total of a random subset of the configurations equals those rows of the whole grid's, bit for bit, at
    every ZeRO stage (as the chunks and the memory rows' sharing already take)."""
    job = _job(*case)
    gpus = case[3]
    c: dict = {}
    cfg = planner.configurations(job, gpus, gpus, c)
    axes = planner._axes(job, c)
    n = len(cfg["dp"])
    zeros = axes["zero"].reshape(1, -1, 1, 1)

    def priced(rows: dict[str, np.ndarray]) -> np.ndarray:
        g = planner._outer_grid(gpus, gpus, rows, 0, len(rows["dp"]), axes, {}, {})
        full = replace(g, zero=zeros)
        return np.broadcast_to(memory_total(job, full, microbatches(full)), full.shape)

    whole = priced(cfg)
    rng = np.random.default_rng(36)
    for size in (1, 7, n // 3):
        pick = np.sort(rng.choice(n, size=size, replace=False))
        np.testing.assert_array_equal(priced({k: v[pick] for k, v in cfg.items()}), whole[pick])


@pytest.mark.parametrize("sync_modes", [("bsp",), ("bsp", "hier:2", "asp")])
@pytest.mark.parametrize("case", CLOSED, ids=[c[1] for c in CLOSED])
def test_search_is_the_same_with_memory_priced_everywhere(case, sync_modes, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The search with pass 1a's memory priced on every row (need None, the code before) and with the open rows
    alone: the same payload but the seconds; and the open rows are a strict part of the rows (not vacuous)."""
    job = _job(*case)
    gpus = case[3]
    real = planner._open_memory_rows
    seen = {"rows": 0, "open": 0}

    def counting(*args, **kw):  # type: ignore[no-untyped-def]
        need = args[6]
        seen["rows"] += len(args[4])
        seen["open"] += len(args[4]) if need is None else int(np.count_nonzero(need))
        return real(*args, **kw)

    def everywhere(*args, **kw):  # type: ignore[no-untyped-def]
        return real(*args[:6], None, *args[7:], **kw)

    def payload(res):  # type: ignore[no-untyped-def]
        out = res.payload()
        out.pop("elapsed_s", None)
        return out

    monkeypatch.setattr(planner, "_open_memory_rows", counting)
    fast = payload(planner.search(job, gpus, gpus, sync_modes=sync_modes))
    assert 0 < seen["open"] < seen["rows"] / 2, seen
    monkeypatch.setattr(planner, "_open_memory_rows", everywhere)
    slow = payload(planner.search(job, gpus, gpus, sync_modes=sync_modes))
    assert fast == slow
    assert fast["ranked"]


def test_levels_are_numpys_unique() -> None:
    """Columns in runs (as the configurations are), without runs, of one value, and empty."""
    rng = np.random.default_rng(3636)
    cols = [np.repeat(rng.integers(1, 50, size=300), rng.integers(1, 9, size=300)),
            rng.integers(-5, 10**12, size=1000), np.full(17, 8), np.zeros(0, dtype=np.int64),
            np.arange(40)[::-1].copy()]
    for col in cols:
        vals, inv = planner._levels(col)
        want_vals, want_inv = np.unique(col, return_inverse=True)
        np.testing.assert_array_equal(vals, want_vals)
        np.testing.assert_array_equal(inv, np.ravel(want_inv))
        assert vals.dtype == want_vals.dtype


def test_expand_with_one_option_a_group_is_the_general_path() -> None:
    """One option in every group skips the repeat and gather; an unused group of two options forces that path on
    the same rows, which must come out the same (values and dtypes)."""
    rng = np.random.default_rng(36)
    cfg = {"dp": rng.integers(1, 9, size=50), "tp": rng.integers(1, 9, size=50)}
    group = rng.integers(0, 3, size=50)
    options = [{"a": [v], "b": [bool(v % 2)]} for v in (5, 6, 7)]
    fast = planner._expand(cfg, group, options, ("a", "b"))
    general = planner._expand(cfg, group, [*options, {"a": [1, 2], "b": [False, True]}], ("a", "b"))
    assert fast.keys() == general.keys()
    for k in general:
        np.testing.assert_array_equal(fast[k], general[k])
        assert fast[k].dtype == general[k].dtype
