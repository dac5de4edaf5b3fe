"""Hostile input, round 41 (fuzz41): plan's search-space limit, the Megatron-LM flags read since, and what this
round's corpus (scripts/fuzz41.py) found. The CLI contract is test_hostile_inputs.py's: exit 2, one ``error:`` line
naming the option / file / field, what was wrong and what is allowed, nothing on stdout, no input changed.

1. ``plan -m mixtral-8x7b -n 64 --allow all`` searched 14.2e9 candidates for 51 s of CPU with nothing said before it
   finished and no limit (fuzz40's open finding). The space is counted before pass 1a prices anything (planner.search:
   outer candidates x data-parallel communication choices); one over ``--max-candidates`` (planner.MAX_CANDIDATES,
   1e10; inf: no limit) is refused there with its size, both factors, the --allow searches given, the axes to pin
   and the option that raises the limit (planner.check_space; docs/model.md#plan-space).
"""

from __future__ import annotations

import json
import math
import time

import pytest
from test_hostile_inputs import no_hang, refused  # noqa: F401 (no_hang: autouse)

from scalemodel.engine import planner
from scalemodel.engine.job import build_job
from scalemodel.errors import InputError
from scalemodel.specs import TrainingSpec, load_cluster, load_workload

MIXTRAL_ALL = ["plan", "-m", "mixtral-8x7b", "-c", "dgx-h100", "-n", "64", "--allow", "all"]


def test_the_mixtral_allow_all_space_is_refused_before_it_is_searched(cli) -> None:
    """fuzz40's 51 s search: refused in well under a second of CPU, with its size (16,693,992 outer candidates x 1,064
    communication choices, the figures the search reports in --json when it runs: docs/model.md#plan-space), the
    limit, what narrows it and the option that raises it."""
    c0 = time.process_time()
    line = refused(cli, *MIXTRAL_ALL, "--json")
    assert time.process_time() - c0 < 5
    assert line.startswith("error: --max-candidates: the search space is 17,762,407,488 candidates"), line
    assert f"{16_693_992:,} outer candidates" in line and f"{1_064:,} data-parallel communication" in line
    assert "limit of 10,000,000,000" in line
    for named in ("fewer --allow searches (given: all;", "--constraint tp=", "--set strategy.X",
                  "--max-candidates 17762407488 (or inf)"):
        assert named in line, line


@pytest.mark.parametrize("value", ["nan", "0", "-1", "-inf", "1e-3"])
def test_a_limit_no_search_can_meet_is_refused(cli, value: str) -> None:
    refused(cli, "plan", "-m", "gpt-1.7b", "-n", "8", "--max-candidates", value, match="error: --max-candidates:")


def test_a_limit_that_is_no_number_is_a_usage_error(cli) -> None:
    r = cli("plan", "-m", "gpt-1.7b", "-n", "8", "--max-candidates", "lots")
    assert r.code == 2 and "'lots' is not a number" in r.err and r.out == "", r.err


@pytest.fixture(scope="module")
def small_job():  # type: ignore[no-untyped-def]
    cl, wl = load_cluster("dgx-a100", []), load_workload("gpt-1.7b", [])
    return build_job(cl, wl, TrainingSpec(global_batch=32, seq_len=2048))


def test_the_limit_is_the_space_the_search_counts(small_job) -> None:  # type: ignore[no-untyped-def]
    """At the limit the search runs, and reports the space it was held to; one candidate fewer is refused before
    anything is priced. The space bounds what the search covers (covered <= outer x choices: the outer candidates
    no sync mode admits are counted in the space, not covered), so a limit of covered - 1 is refused too."""
    res = planner.search(small_job, 16, 32, top=1, sync_modes=("bsp", "local:4"), max_candidates=math.inf)
    space = res.search["outer_candidates"] * res.search["communication_choices"]
    assert 0 < res.search["covered"] <= space
    again = planner.search(small_job, 16, 32, top=1, sync_modes=("bsp", "local:4"), max_candidates=space)
    assert again.search["covered"] == res.search["covered"]
    for limit in (space - 1, res.search["covered"] - 1):
        with pytest.raises(InputError, match=f"the search space is {space:,} candidates at global batch 32") as exc:
            planner.search(small_job, 16, 32, top=1, sync_modes=("bsp", "local:4"), max_candidates=limit)
        assert exc.value.where == "--max-candidates" and "over 2 sync modes" in exc.value.what
        assert "fewer --sync-modes" in exc.value.allowed and "--allow" not in exc.value.allowed


def test_each_batch_of_a_time_to_train_search_is_held_to_the_limit(cli) -> None:  # type: ignore[no-untyped-def]
    """time-to-train without --global-batch searches 1/8 to 8 x the batch, each a search of its own, the largest
    batch (most micro-batches) first: a limit under its space is refused before any batch is searched, naming the
    batch (8 x 8 GPUs = 64)."""
    one = cli("plan", "-m", "gpt-1.7b", "-c", "dgx-a100", "-n", "8", "--global-batch", "64", "--top", "1", "--json")
    search = json.loads(one.out)["search"]
    space = search["outer_candidates"] * search["communication_choices"]
    c0 = time.process_time()
    line = refused(cli, "plan", "-m", "gpt-1.7b", "-c", "dgx-a100", "-n", "8", "--objective", "time-to-train",
                   "--train-tokens", "1e9", "--max-candidates", str(space - 1))
    assert time.process_time() - c0 < 0.5 * 7  # refused at the first search, not after six
    assert f"the search space is {space:,} candidates at global batch 64" in line, line
