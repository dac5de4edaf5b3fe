"""A pinned HSDP shard_group that does not divide dp, and hier:G with G not dividing dp, get one verdict.

Both are configurations the user wrote that cannot run (FSDP HYBRID_SHARD's mesh is replicas x shard group = dp;
hier:G splits dp into groups of G), so per the CLI contract (error: <where>: <what>; <what is allowed>, exit 2)
predict, memory, scale and check refuse both. The planner, which generates candidates, still marks a pinned group
that leaves some dp out infeasible (tests/test_planner_shard_group.py).
"""

from __future__ import annotations

import pytest

BASE = ["--cluster", "dgx-a100", "--model", "gpt-1.7b", "--global-batch", "32", "--tp", "1", "--pp", "1"]
# 16 GPUs at tp = pp = 1: dp = 16, whose divisors are 1, 2, 4, 8, 16; 3 divides none of it
SHARD = ["--zero", "hsdp", "--set", "strategy.shard_group=3"]
HIER = ["--sync", "hier:3"]


def _refused(r, where: str) -> str:  # type: ignore[no-untyped-def]
    assert r.code == 2, (r.code, r.out[-300:], r.err[-300:])
    assert "Traceback" not in r.err and r.out == ""
    line = r.err.strip()
    assert len(line.splitlines()) == 1 and line.startswith(f"error: {where}:"), line
    return line


# the shard group is given as --set strategy.shard_group=3: errors name that item (round 13 named each field where it
# was written; before, the engine's "strategy.shard_group" named no origin)
@pytest.mark.parametrize("extra,where", [(SHARD, "--set strategy.shard_group"), (HIER, "--sync")])
@pytest.mark.parametrize("command", ["predict", "memory"])
def test_predict_and_memory_refuse_a_group_that_does_not_divide_dp(cli, command, extra, where):
    line = _refused(cli(command, *BASE, "--gpus", "16", *extra), where)
    assert "does not divide dp = 16" in line
    assert "16" in line.split(";", 1)[1]  # the allowed part names the divisors' dp


@pytest.mark.parametrize("extra,where", [(SHARD, "--set strategy.shard_group"), (HIER, "--sync")])
def test_scale_refuses_at_the_count_where_the_group_stops_dividing(cli, extra, where):
    # 24 GPUs: dp = 24, divisible by 3; 32 GPUs: dp = 32, not
    line = _refused(cli("scale", *BASE, "--global-batch", "48", "--mode", "weak", "--gpus", "24,32", *extra), where)
    assert "dp = 32" in line


def test_divisor_is_accepted(cli):
    import json

    for extra, want in ((["--zero", "hsdp", "--set", "strategy.shard_group=4"], {"zero": "hsdp", "shard_group": 4}),
                        (["--sync", "hier:4"], {"sync": "hier:4"})):
        r = cli("predict", *BASE, "--gpus", "16", *extra, "--json")
        assert r.code == 0, r.err
        st = json.loads(r.out)["strategy"]  # testaudit37: taken as given, not only not refused
        assert {k: st[k] for k in want} == want


@pytest.mark.parametrize("strategy,where", [("{tp: 1, pp: 1, zero: hsdp, shard_group: 3}", "strategy.shard_group"),
                                            ("{tp: 1, pp: 1, sync: 'hier:3'}", "strategy.sync")])
def test_check_refuses_both(cli, tmp_path, strategy, where):
    p = tmp_path / "cap.yaml"
    p.write_text("kind: scenario\nname: t\ncluster: dgx-a100\nmodel: gpt-1.7b\ngpus: [16]\nmode: weak\n"
                 f"training: {{global_batch: 32, micro_batch: 1}}\nstrategy: {strategy}\n"
                 "assertions:\n  must_fit_memory: true\n")
    _refused(cli("check", str(p)), f"{p}: {where}")  # the capacity file's field (was "--sync", not check's option)
