"""review22g: fuzz22's API argument checks and .json strategy-file reading, reviewed. Each test failed before its fix.

The API's contract is docs/api.md's: bad values raise InputError whose str() is the CLI's one-line message naming the
argument; a call the command line refuses is refused here too.
"""

from __future__ import annotations

import json
import os
import time
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from test_hostile_inputs import refused

import scalemodel
from scalemodel.errors import InputError

# --- plan's top beyond the command line's --top cap ----------------------------------------------------------------
# The API took top up to 1e8 where --top is capped at 500 (each ranked row priced and explained in full):
# plan(top=10**6) on 64 GPUs ran for 520 s. Refused here as --top is, naming top.

@pytest.mark.parametrize("top", [501, 10**6, 10**8])
def test_api_plan_top_beyond_the_command_lines_cap_is_refused(top: int) -> None:
    t0 = time.monotonic()
    with pytest.raises(InputError) as exc:
        scalemodel.plan("dgx-h100", "gpt-1.7b", 8, top=top)
    assert str(exc.value) == f"top: {top:,} plans is outside 1 to 500; an integer from 1 to 500", str(exc.value)
    assert time.monotonic() - t0 < 5  # refused before the search


def test_api_plan_top_at_the_cap_still_runs() -> None:
    # the space holds far more feasible plans than the cap (533,952 of 660,960 at e77eb9bf), so top 500 ranks
    # exactly 500: "at least one" (testaudit38) passed a cap cut short as well
    res = scalemodel.plan("dgx-h100", "gpt-1.7b", 8, top=500)
    assert res.feasible >= 500
    assert len(res.ranked) == 500


# --- refusals naming the command line's option instead of the argument ----------------------------------------------
# fuzz22 named the argument for a value of the wrong type (straggler_cv="x" -> "straggler_cv: ...") but the engine's
# range checks still said "--straggler-cv", "--factor", "--size", "--algo", and memory / plan / collective's GPU
# count beyond the cluster "--gpus": options the Python caller never wrote.

@pytest.mark.parametrize("call, said", [
    (lambda: scalemodel.memory("dgx-h100", "gpt-1.7b", 10**6), "gpus: 1000000 GPUs: more GPUs than the cluster has"),
    (lambda: scalemodel.plan("dgx-h100", "gpt-1.7b", 10**6), "gpus: 1000000 GPUs: more GPUs than the cluster has"),
    (lambda: scalemodel.collective("dgx-h100", "allreduce", "1GiB", 10**6), "gpus: 1000000 ranks x stride 1 need"),
    (lambda: scalemodel.predict("dgx-h100", "gpt-1.7b", 8, straggler_cv=-1), "straggler_cv: straggler CV -1.0 out"),
    (lambda: scalemodel.plan("dgx-h100", "gpt-1.7b", 8, straggler_cv=10), "straggler_cv: straggler CV 10.0 out"),
    (lambda: scalemodel.sensitivity("dgx-h100", "gpt-1.7b", 8, factor=0.5), "factor: improvement factor 0.5 is not"),
    (lambda: scalemodel.collective("dgx-h100", "allreduce", -1, 8), "size: size must be >= 0"),
    (lambda: scalemodel.collective("dgx-h100", "allreduce", "1GiB", 8, algo="bogus"), "algo: unknown algorithm"),
    (lambda: scalemodel.collective("dgx-h100", "bogus", "1GiB", 8), "op: unknown collective 'bogus'"),
    (lambda: scalemodel.scale("dgx-h100", "gpt-1.7b", [8, 16], mode="bogus"), "mode: unknown scaling mode 'bogus'"),
    (lambda: scalemodel.plan("dgx-h100", "gpt-1.7b", 8, objective="bogus"), "objective: unknown objective 'bogus'"),
    (lambda: scalemodel.plan("dgx-h100", "gpt-1.7b", 8, constraints={"bogus": 2}),
     "constraints: unknown constraint key 'bogus'"),
    (lambda: scalemodel.plan("dgx-h100", "gpt-1.7b", 8, sync_modes=("bogus",)), "sync_modes: unknown sync strategy"),
    (lambda: scalemodel.predict("dgx-h100", "gpt-1.7b", 8, sync="hier:3"), "sync: hier group size 3 does not divide"),
], ids=["memory-gpus", "plan-gpus", "collective-gpus", "predict-cv", "plan-cv", "factor", "size", "algo", "op", "mode",
        "objective", "constraint", "sync_modes", "sync"])
def test_api_range_refusals_name_the_argument(call, said: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as exc:
        call()
    assert str(exc.value).startswith(said), str(exc.value)
    assert "--" not in str(exc.value).split(":")[0], str(exc.value)


# --- plan's constraints that are not {key: value | (op, value) | [(op, value), ...]} ----------------------------------
# A list of bare values ({"tp": [2, 4]}) raised TypeError "cannot unpack non-iterable int object", a list of pairs in
# place of the dict AttributeError "'list' object has no attribute 'items'".

@pytest.mark.parametrize("constraints, said", [
    ({"tp": [2, 4]}, "constraints: 2 in the constraints on tp is not an (op, value) pair"),
    ({"tp": [("<=", 8), "x"]}, "constraints: 'x' in the constraints on tp is not an (op, value) pair"),
    ({"tp": [("<=", 8, 1)]}, "constraints: ('<=', 8, 1) in the constraints on tp is not an (op, value) pair"),
    ([("tp", 2)], "constraints: [('tp', 2)] is not a dict of constraints"),
], ids=repr)
def test_api_plan_constraints_of_the_wrong_shape_are_refused(constraints, said: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as exc:
        scalemodel.plan("dgx-h100", "gpt-1.7b", 8, constraints=constraints, top=1)
    assert str(exc.value).startswith(said), str(exc.value)


def test_api_plan_constraints_of_pairs_still_run() -> None:
    a = scalemodel.plan("dgx-h100", "gpt-1.7b", 8, constraints={"tp": [(">=", 2), ("<=", 2)]}, top=1)
    b = scalemodel.plan("dgx-h100", "gpt-1.7b", 8, constraints={"tp": ("=", 2)}, top=1)
    assert a.ranked[0].strategy["tp"] == b.ranked[0].strategy["tp"] == 2


# --- a .json strategy file holding both DeepSpeed's keys and a scalemodel strategy file's ----------------------------
# Read as a DeepSpeed config (DeepSpeed runs it, ignoring the rest), tp 1 priced with exit 0 and the warning
# "deepspeed settings not used: tp": it did not say that tp is a strategy file's field, why it was not read, or how to
# give it. A DeepSpeed config whose only key both formats name (optimizer) is still DeepSpeed's, nothing warned.

PRED = ["predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64"]


@pytest.mark.parametrize("body, unused", [
    ({"train_batch_size": 64, "tp": 2},
     ["tp (a scalemodel strategy file's field: a file with DeepSpeed keys is read as a DeepSpeed config; give it as "
      "--set strategy.tp=...)"]),
    ({"train_batch_size": 64, "seq_len": 4096, "training": {"micro_batch": 2}},
     ["seq_len (a scalemodel strategy file's field: a file with DeepSpeed keys is read as a DeepSpeed config; give it "
      "as --set training.seq_len=...)",
      "training (a scalemodel strategy file's section: a file with DeepSpeed keys is read as a DeepSpeed config; give "
      "its fields as --set training.FIELD=...)"]),
    ({"optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}, []),
    ({"optimizer": {"type": "AdamW"}, "sparse_attention": {"mode": "fixed"}}, ["sparse_attention"]),
], ids=["tp", "training", "optimizer-only", "optimizer-and-unread-ds-key"])
def test_a_mixed_json_file_says_why_the_strategy_keys_are_not_read(cli, tmp_path: Path, body, unused) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "mixed.json"
    f.write_text(json.dumps(body))
    r = cli(*PRED, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["inputs"]["strategy_file"]["format"] == "deepspeed"
    assert doc["inputs"]["strategy_file"]["unused"] == unused
    assert doc["strategy"]["tp"] == 1
    if unused:
        assert r.err.strip() == f"warning: {f}: deepspeed settings not used: {'; '.join(unused)}", r.err


# --- stragglers' samples of text or booleans -------------------------------------------------------------------------
# fuzz22 read samples with np.asarray(samples, dtype=float), which parses text and casts booleans: ["1.0", "1.1"] ran as
# step times of 1.0 s and 1.1 s and [True, 1.1] as 1.0 s and 1.1 s, while ["1 s", "2 s"] was refused as "not a list of
# numbers" and a True straggler_cv as "not a number".

def _stragglers(samples):  # type: ignore[no-untyped-def]
    return scalemodel.stragglers(64, "lognormal", 1.0, 0.1, 0, 0, 1, 0.1, None, samples=samples)


@pytest.mark.parametrize("samples", [["1.0", "1.1"], [True, 1.1], np.array(["1.0", "1.1"]), np.array([True, False]),
                                     [1.0, b"1.1"]], ids=repr)
def test_stragglers_samples_of_text_or_booleans_are_refused(samples) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as exc:
        _stragglers(samples)
    assert str(exc.value).startswith("stragglers: samples: ") and str(exc.value).endswith(
        " is not a list of numbers; a list or 1-d array of step times in seconds"), str(exc.value)


@pytest.mark.parametrize("samples", [(1.0, 1.1, 1.2), np.array([1.0, 1.1, 1.2], dtype=np.float32),
                                     [np.float64(1.0), 1.1, np.int64(1)], np.array([1, 2, 1])], ids=repr)
def test_stragglers_samples_of_numbers_still_run(samples) -> None:  # type: ignore[no-untyped-def]
    assert _stragglers(samples).payload()["inputs"]["samples"] == 3


# --- two sweep outputs that are one file through a hard link ---------------------------------------------------------
# fuzz22 compared os.path.realpath, which a symbolic link resolves and a hard link does not: with h.csv a hard link to
# an existing t.jsonl, `-o t.jsonl -o h.csv` wrote the JSONL table and then the CSV over it, exit 0.

SWEEP = "kind: sweep\nname: s\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: [8]\nstrategies: [{tp: 2}]\n"


def test_sweep_outputs_that_are_one_file_through_a_hard_link_are_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text(SWEEP)
    (tmp_path / "t.jsonl").write_text("old\n")
    os.link(tmp_path / "t.jsonl", tmp_path / "h.csv")
    line = refused(cli, "sweep", str(f), "-o", str(tmp_path / "t.jsonl"), "-o", str(tmp_path / "h.csv"), "-j", "1",
                   inputs=(f, tmp_path / "t.jsonl"))
    assert line == (f"error: --out: {str(tmp_path / 'h.csv')!r} is the same file as {str(tmp_path / 't.jsonl')!r}, "
                    "given before; one --out for each file"), line


# --- a .json strategy file that is not a JSON object ----------------------------------------------------------------
# Since fuzz22 a .json file may be a scalemodel strategy too; its refusal still offered "a DeepSpeed config" only.

def test_a_json_strategy_file_that_is_not_an_object_names_both_formats(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.json"
    f.write_text("[1]")
    line = refused(cli, *PRED, "--strategy", str(f), inputs=(f,))
    assert line == (f"error: --strategy: {f}: expected a JSON object; a DeepSpeed config, or a scalemodel strategy's "
                    "fields as a JSON object (e.g. {\"tp\": 2, \"pp\": 4})"), line


# --- a strategy file of scalemodel keys holding a DeepSpeed config's key ---------------------------------------------
# The other way round: {tp: 2, train_batch_size: 64} (YAML, or JSON in a .yaml) is a scalemodel strategy; the warning
# "scalemodel settings not used: train_batch_size" did not say that it is DeepSpeed's key, why it was not read, or the
# strategy file's own name for it.

@pytest.mark.parametrize("name, text", [("m.yaml", "tp: 2\ntrain_batch_size: 64\n"),
                                        ("m.yaml", '{"tp": 2, "train_batch_size": 64}'),
                                        ("m.json", '{"tp": 2, "strategy": {"pp": 1}, "zero_optimization": {}}')])
def test_a_deepspeed_key_in_a_strategy_file_says_why_it_is_not_read(cli, tmp_path: Path, name: str, text: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / name
    f.write_text(text)
    r = cli(*PRED, "--strategy", str(f), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    key = "zero_optimization" if "zero_optimization" in text else "train_batch_size"
    if name == "m.json":  # both formats' keys in a .json file: DeepSpeed's (the mixed case above)
        assert doc["inputs"]["strategy_file"]["format"] == "deepspeed"
        return
    assert doc["inputs"]["strategy_file"]["format"] == "scalemodel" and doc["strategy"]["tp"] == 2
    assert doc["inputs"]["strategy_file"]["unused"] == [
        f"{key} (a DeepSpeed config's key: a file with scalemodel strategy keys is read as a scalemodel strategy; give "
        "the strategy file's field instead, e.g. global_batch, micro_batch, zero)"]


# --- Python's other real-number types ------------------------------------------------------------------------------
# fuzz22's checks took int and float only: gpus=Fraction(8) was refused as "Fraction(8, 1) is not a whole number of
# GPUs" and straggler_cv=Fraction(1, 10) as "is not a number", both false.

def test_api_fractions_and_decimals_are_numbers() -> None:
    plain = scalemodel.predict("dgx-h100", "gpt-1.7b", 8, straggler_cv=0.1).payload()
    for gpus, cv in ((Fraction(8), Fraction(1, 10)), (Decimal(8), Decimal("0.1"))):
        doc = scalemodel.predict("dgx-h100", "gpt-1.7b", gpus, straggler_cv=cv).payload()
        assert doc["step_time_s"] == plain["step_time_s"] and type(doc["inputs"]["gpus"]) is int
    with pytest.raises(InputError, match=r"^gpus: 8.5 is not a whole number of GPUs"):
        scalemodel.predict("dgx-h100", "gpt-1.7b", Fraction(17, 2))
