"""review17d: the nanotron25 pipeline splits against the jobs' own logged parameter counts.

nanotron logs "Local number of parameters" per TP x PP rank (huggingface/nanotron@c2528430 src/nanotron/trainer.py
init_model lines 825-831, group dp_pg rank 0); the Playbook benchmark table keeps one such line per job as
``Local Params``, the embedding rank's (pipeline rank 0) count. Rank 0 of a Llama holds the token embedding (V h,
tied to the lm_head, replicated on the last rank) and its decoder layers, each ``4 h^2`` attention (kv heads = heads
in these models) + ``3 h f`` MLP + ``2 h`` RMSNorm weights, all divided over tp (the norms replicated: under 0.01 %).
The table's value for each validated row is written out here with its job id; the split the validator prices must
reproduce it to the table's three significant digits."""
from __future__ import annotations

import importlib.util
import sys

import pytest
from conftest import ROOT, load_yaml

#: case id -> (job id, Local Params as the benchmark table prints it)
LOGGED = {
    "nanotron25_h100_1b_n64": ("14097175", 470e6),
    "nanotron25_h100_80b_n32": ("14099353", 1.73e9),
    "nanotron25_h100_80b_n16": ("14102878", 998e6),
    "nanotron25_h100_1b_n8": ("14098792", 940e6),
    "nanotron25_h100_3b_n8": ("14098850", 2.21e9),
    "nanotron25_h100_8b_n8": ("14097162", 4.92e9),
    "nanotron25_h100_80b_gqa8_n8": ("14280956", 1.55e9),
    "nanotron25_h100_1b_n4": ("14098656", 940e6),
    "nanotron25_h100_3b_n4": ("14097156", 2.21e9),
    "nanotron25_h100_8b_n4": ("14097157", 4.92e9),
    "nanotron25_h100_80b_n4": ("14097158", 2.69e9),
    "nanotron25_h100_1b_n2": ("14098578", 940e6),
    "nanotron25_h100_3b_n2": ("14097151", 2.21e9),
    "nanotron25_h100_1b_n1": ("14098541", 940e6),
    "nanotron25_h100_3b_n1": ("14098558", 2.21e9),
    "nanotron25_h100_8b_n1": ("14097147", 2.73e9),
}


def _validator():
    spec = importlib.util.spec_from_file_location("validate_training_r17d", ROOT / "scripts" / "validate_training.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


CASES = {c["id"]: c for c in load_yaml(ROOT / "validation" / "training_cases.yaml")}


def test_every_validated_pp_row_is_listed():
    rows = {i for i, c in CASES.items() if i.startswith("nanotron25") and int(c["parallelism"].get("pp", 1)) > 1}
    assert rows == set(LOGGED)


@pytest.mark.parametrize("case_id", sorted(LOGGED))
def test_rank0_parameters_match_the_jobs_log(case_id):
    val = _validator()
    case = CASES[case_id]
    m, par = case["model"], case["parallelism"]
    h, f, a, vocab = int(m["hidden"]), int(m["ffn_hidden"]), int(m["heads"]), int(m["vocab"])
    kv = int(m.get("kv_heads", a))
    d = h // a
    layer = 2 * h * a * d + 2 * h * kv * d + 3 * h * f + 2 * h
    split = val.framework_split(case, int(par["pp"]))
    assert split is not None and sum(split) == int(m["layers"])
    rank0 = (split[0] * layer + vocab * h) / int(par["tp"])
    job, logged = LOGGED[case_id]
    assert abs(rank0 / logged - 1) < 0.006, (case_id, job, split, rank0, logged)
