"""speed36: pass 1a classifies only the configurations memory can decide (planner._ClosedSplit).

Where feasibility's codes before memory have no ZeRO axis, a configuration none of whose valid candidates has an open
code takes those codes at every ZeRO stage, fitting or not: its histogram is taken at one stage and multiplied by the
stages of each ZeRO group, and classify runs on the open rows alone. Checked against the general path (classify on
every row at every stage), which is what the code did before:
- the closed rows' histogram equals _code_histogram over the full (rows, stages, recompute, SP) shape, bit for bit;
- a whole search gives the same payload with the split as without, on spaces where most configurations are closed,
  with several sync modes (hier:G's own counts, the replica modes), parameter-server and top-k choices (``--allow``
  all but offload, whose codes read the ZeRO stage and keep the general path) and a memory constraint."""

from __future__ import annotations

import numpy as np
import pytest

from scalemodel.engine import planner
from scalemodel.engine.job import build_job
from scalemodel.specs import TrainingSpec, load_cluster, load_workload
from scalemodel.specs.constraints import parse_constraints

CLOSED = [
    ("dgx-a100", "gpt3-175b", ["layers=12"], 720),
    ("dgx-h100", "mixtral-8x7b", ["layers=6"], 360),
    ("dgx-h100", "llama2-13b", ["layers=10"], 240),
]


def test_closed_histogram_is_the_full_shapes() -> None:
    """Random codes and validity at one ZeRO stage, broadcast to six: the split's histogram of the closed rows equals
    _code_histogram at the full shape (integer counts, so equality is exact)."""
    rng = np.random.default_rng(3636)
    n, nz, nr, ns, n_codes, n_choice = 40, 6, 3, 2, 20, 72
    sharded_z = np.array([False, True, True, True, True, True])
    r1 = rng.integers(1, n_codes, size=(n, 1, nr, ns))
    valid = rng.random((n, 1, nr, ns)) < 0.7
    need = rng.random(n) < 0.3
    split = planner._ClosedSplit(need, r1, valid, sharded_z, n_codes, n_choice)
    full = planner._code_histogram(np.broadcast_to(r1, (n, nz, nr, ns)), np.broadcast_to(valid, (n, nz, nr, ns)),
                                   sharded_z, n_codes, n_choice, np.zeros((1, 1, 1, 1), dtype=bool), 0)
    np.testing.assert_array_equal(split.hist[~need], full[~need])
    assert not split.hist[need].any()
    # by hand for one closed row: each valid candidate's code counted n_choice times per stage of the group
    i = int(np.nonzero(~need)[0][0])
    want = np.zeros((2, n_codes + 1))
    for code in r1[i].ravel()[valid[i].ravel()]:
        want[0, code] += n_choice
        want[1, code] += 5 * n_choice
    np.testing.assert_array_equal(split.hist[i], want)


def _payload(res):  # type: ignore[no-untyped-def]
    out = res.payload()
    out.pop("elapsed_s", None)
    return out


@pytest.mark.parametrize(("sync_modes", "allow", "memory"), [
    (("bsp",), (), None),
    (("bsp", "hier:2", "asp", "local:2"), (), None),
    (("bsp", "ssp:2"), ("parameter-server", "compression", "custom-collectives", "moe-dispatch"), None),
    (("bsp",), (), "<=60GiB"),
])
@pytest.mark.parametrize("case", CLOSED, ids=[c[1] for c in CLOSED])
def test_search_is_the_same_without_the_split(case, sync_modes, allow, memory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The whole search with the split and with classify on every row: the same payload but the seconds; and the
    split ran with closed rows (not vacuous)."""
    cluster, model, sets, gpus = case
    job = build_job(load_cluster(cluster), load_workload(model, sets), TrainingSpec(global_batch=gpus))
    kw = {"sync_modes": sync_modes, "allow": allow}
    if memory:
        kw["constraints"] = parse_constraints([f"memory{memory}"])
    real = planner._ClosedSplit
    seen = {"closed": 0}

    def counting(need, *args):  # type: ignore[no-untyped-def]
        seen["closed"] += int(np.count_nonzero(~need))
        return real(need, *args)

    monkeypatch.setattr(planner, "_ClosedSplit", counting)
    fast = _payload(planner.search(job, gpus, gpus, **kw))
    assert seen["closed"] > 0
    monkeypatch.setattr(planner, "_ClosedSplit", lambda *a: None)
    slow = _payload(planner.search(job, gpus, gpus, **kw))
    assert fast == slow
    assert fast["ranked"]
