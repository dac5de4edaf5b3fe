"""speed37: the search's configuration columns in narrow integer types, and less held per configuration.

``plan -n 73513440`` on a 1e8-GPU dgx-h100 held 14 int64 columns of 5.3 M configurations, a (twin groups, recompute,
SP) float array of compute floors of which 50 k rows were read, and the per-mode bound factors after the class factors
had them. Checked here against the general path, which is what the code did before:
- ``_narrow`` keeps every value (checked at each type's edges, and int64 kept beyond int32, bool and empty as they
  are); ``configurations(narrow=True)`` holds the same values as the int64 columns, row for row;
- the sync masks of narrowed columns equal those of int64 columns where the products overflow the narrow type;
- a whole search gives the same payload with the columns narrowed as with int64 columns (``_narrow`` the identity),
  with hier:G and backup:B (the masks), the CP exchanges searched (all_gather's bytes read the columns) and MoE;
- the compute floors priced once per twin group give the same payload whatever the chunking: chunks of a few
  configurations split twin groups across chunks (a floor priced in one chunk read in the next) and grow the store
  many times."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.engine import planner
from scalemodel.engine.job import build_job
from scalemodel.specs import TrainingSpec, load_cluster, load_workload


def test_narrow_keeps_every_value_at_the_edges() -> None:
    """Each column takes the least signed type holding its least and greatest value, by hand at the edges."""
    cases = [([0, 127], np.int8), ([-128, 5], np.int8), ([0, 128], np.int16), ([-129, 0], np.int16),
             ([1, 32767], np.int16), ([1, 32768], np.int32), ([-(2 ** 31), 2 ** 31 - 1], np.int32),
             ([1, 2 ** 31], np.int64), ([-(2 ** 31) - 1, 0], np.int64)]
    for values, kind in cases:
        col = np.asarray(values, dtype=np.int64)
        out = planner._narrow(col)
        assert out.dtype == kind, (values, out.dtype)
        assert out.tolist() == values
    flags = np.asarray([True, False])
    assert planner._narrow(flags) is flags
    empty = np.zeros(0, dtype=np.int64)
    assert planner._narrow(empty) is empty


SPACES = [
    ("dgx-a100", "gpt3-175b", [], 512, ()),
    # every custom axis but cp-exchanges (the llama2-13b space's) and offload: "all" took 130 s of the suite's CPU in
    # this test alone (mixtral's allow-all search ~20 s each, four of them), the same narrowing code on fewer axes
    ("dgx-h100", "mixtral-8x7b", [], 256, ("moe-dispatch", "compression", "parameter-server", "dynamic-assignment",
                                           "custom-collectives")),
    ("dgx-h100", "llama2-13b", [], 240, ("cp-exchanges",)),
]


def _job(cluster: str, model: str, sets: list[str], gpus: int):  # type: ignore[no-untyped-def]
    return build_job(load_cluster(cluster), load_workload(model, sets), TrainingSpec(global_batch=gpus))


@pytest.mark.parametrize("case", SPACES, ids=[c[1] for c in SPACES])
def test_narrow_configurations_hold_the_same_values(case) -> None:  # type: ignore[no-untyped-def]
    """configurations(narrow=True) equals the int64 columns value for value, each column narrower or as wide."""
    cluster, model, sets, gpus, allow = case
    job = _job(cluster, model, sets, gpus)
    keys = frozenset(k for a in allow for k in planner.ALLOW[a])
    wide = planner.configurations(job, gpus, gpus, {}, keys)
    narrow = planner.configurations(job, gpus, gpus, {}, keys, narrow=True)
    assert list(wide) == list(narrow)
    assert len(wide["dp"]) > 0
    for k in wide:
        np.testing.assert_array_equal(narrow[k], wide[k])
        assert narrow[k].dtype.itemsize <= wide[k].dtype.itemsize
    assert narrow["tp"].dtype == np.int8  # tp <= heads < 128 on these models


def test_sync_masks_of_narrow_columns() -> None:
    """backup:B's B x tp x pp x cp and hier:G's dp % G on int8 / int16 columns whose products overflow those types
    equal the int64 columns' masks (computed here in Python integers)."""
    rng = np.random.default_rng(37)
    n = 500
    wide = {"dp": rng.integers(1, 30000, n), "tp": rng.integers(1, 100, n), "pp": rng.integers(1, 100, n),
            "cp": rng.integers(1, 100, n)}
    narrow = {k: planner._narrow(v) for k, v in wide.items()}
    assert narrow["tp"].dtype == np.int8 and narrow["dp"].dtype == np.int16
    for sync, spare in (("backup:3", 200_000), ("backup:1", 50_000), ("hier:8", None), ("hier:3", None)):
        got = planner._sync_mask(narrow, sync, spare)
        np.testing.assert_array_equal(got, planner._sync_mask(wide, sync, spare))
        b = int(sync.split(":")[1])
        if sync.startswith("backup"):
            want = [b * int(t) * int(p) * int(c) <= spare for t, p, c in zip(wide["tp"], wide["pp"], wide["cp"],
                                                                              strict=True)]
        else:
            want = [int(d) % b == 0 for d in wide["dp"]]
        assert got.tolist() == want
        assert 0 < int(np.count_nonzero(got)) < n


def _payload(res):  # type: ignore[no-untyped-def]
    out = res.payload()
    out.pop("elapsed_s", None)
    return out


# mixtral's custom-choice space with bsp alone is left out: its four-mode search covers bsp's own columns beside the
# others', and bsp alone is the other two spaces' (5 s of CI's CPU)
@pytest.mark.parametrize("case,sync_modes", [
    pytest.param(case, modes, id=f"{case[1]}-{'+'.join(modes)}")
    for case in SPACES for modes in [("bsp",), ("bsp", "hier:2", "backup:1", "asp")]
    if not (case[1] == "mixtral-8x7b" and modes == ("bsp",))])
def test_search_is_the_same_with_int64_columns(case, sync_modes, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The whole search with the columns narrowed and with _narrow the identity (int64 columns, the code before):
    the same payload but the seconds."""
    cluster, model, sets, gpus, allow = case
    job = _job(cluster, model, sets, gpus)
    kw = {"sync_modes": sync_modes, "allow": allow}
    fast = _payload(planner.search(job, gpus, gpus, **kw))
    monkeypatch.setattr(planner, "_narrow", lambda v: v)
    slow = _payload(planner.search(job, gpus, gpus, **kw))
    assert fast == slow
    assert fast["ranked"]


@pytest.mark.parametrize("case", SPACES[:1], ids=[c[1] for c in SPACES[:1]])
def test_compute_floors_whatever_the_chunking(case, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Pass 1a in chunks of 15 configurations (an odd count: twin pairs split across chunks; the floor store grown
    ~log2(rows) times) gives the same payload as in its usual chunk, and prices as many floors: one per twin group
    with a configuration that fits, a group priced in one chunk read, not priced again, in the next. On the GPT-3
    space only: the mixtral "allow all" space in chunks of 3 ran over 10 minutes of CI (thousands of chunks, each a
    full pass-1a evaluation), and the chunking path is the same code on both (chunks of 3: 36 s of CPU; of 7: 16 s;
    of 15, still hundreds of chunks: ~8 s)."""
    cluster, model, sets, gpus, allow = case
    job = _job(cluster, model, sets, gpus)
    kw = {"allow": allow}
    real = planner.compute_floor
    priced: list[int] = []

    def counting(job, grid):  # type: ignore[no-untyped-def]
        priced.append(grid.shape[0])
        return real(job, grid)

    monkeypatch.setattr(planner, "compute_floor", counting)
    whole = _payload(planner.search(job, gpus, gpus, **kw))
    whole_calls, whole_rows = len(priced), sum(priced)
    priced.clear()
    inner = 6 * 3 * 2  # ZeRO stages x recompute x SP of these models
    monkeypatch.setattr(planner, "COUNT_CHUNK_CANDIDATES", 15 * inner)
    small = _payload(planner.search(job, gpus, gpus, **kw))
    assert small == whole
    assert len(priced) > 10 * whole_calls  # many chunks priced floors
    assert sum(priced) == whole_rows
