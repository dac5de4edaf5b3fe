"""Hostile-input round 22: the public Python API given NumPy values (NaN, inf, 0, negatives, arrays, bools, strings),
torus_dims' allowed range, and a scalemodel strategy written as a .json file.

Each case is one finding of a 1,432-case corpus run one process per case (timeout and memory cap): the fields of
rounds 20-21 (overlap_p2p_comm, xla_gpu_lhs, fp8_recipe blockwise / mxfp8, recompute_modules jax_qkvo,
tp_comm_overlap, module_precision), TPU v5e/v6e clusters and torus_dims, extreme sizes, plan's reference batch and
scale's batch efficiency, calibrate runs near the bytes floor, YAML/JSON oddities, stdin, output paths, sweeps and the
API. The CLI contract is test_hostile_inputs.py's; the API's is docs/api.md's: bad values raise InputError naming the
argument.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

import scalemodel
from scalemodel.errors import InputError

# --- the API's GPU counts -------------------------------------------------------------------------------------------
# predict / memory / plan / sensitivity took gpus as given: NaN, a string, None or a 1-element array raised ValueError /
# TypeError / IndexError inside the engine (plan on every float), True ran as one GPU (echoed "gpus": true), 0 was
# refused as "stride: stride must be >= 1" or "dp: dp has a value <= 0", NaN as "nan GPUs is not a multiple of tp x pp
# x cp", and np.int64(64) ran with the NumPy integer in the payload, which json.dumps refuses.

NOT_A_COUNT = [np.nan, np.inf, -np.inf, 64.5, np.float64(8.5), True, "64", None, np.array([64]), np.array([8, 16])]


def _entry(name: str, gpus: Any) -> Any:
    calls = {"predict": lambda: scalemodel.predict("dgx-h100", "gpt-1.7b", gpus),
             "memory": lambda: scalemodel.memory("dgx-h100", "gpt-1.7b", gpus),
             "plan": lambda: scalemodel.plan("dgx-h100", "gpt-1.7b", gpus, top=1),
             "sensitivity": lambda: scalemodel.sensitivity("dgx-h100", "gpt-1.7b", gpus),
             "collective": lambda: scalemodel.collective("dgx-h100", "allreduce", "1GiB", gpus)}
    return calls[name]()


@pytest.mark.parametrize("entry", ["predict", "memory", "plan", "sensitivity", "collective"])
@pytest.mark.parametrize("gpus", NOT_A_COUNT, ids=repr)
def test_api_gpus_that_are_not_a_count_are_refused(entry: str, gpus: Any) -> None:
    with pytest.raises(InputError) as exc:
        _entry(entry, gpus)
    assert str(exc.value).startswith("gpus: ") and " is not a whole number of " in str(exc.value), str(exc.value)
    assert str(exc.value).endswith("; an integer from 1 to 1e+08"), str(exc.value)


@pytest.mark.parametrize("entry", ["predict", "memory", "plan", "sensitivity", "collective"])
@pytest.mark.parametrize("gpus", [0, -1, np.int64(-64)], ids=repr)
def test_api_gpus_below_one_are_refused_as_gpus(entry: str, gpus: Any) -> None:
    with pytest.raises(InputError, match=r"^gpus: -?\d+ (GPUs|ranks) is outside 1 to 1e\+08; an integer from 1"):
        _entry(entry, gpus)


@pytest.mark.parametrize("gpus", [np.int64(8), np.float64(8.0), np.array(8), np.uint8(8)], ids=repr)
def test_api_numpy_gpu_counts_still_run_and_the_payload_is_json(gpus: Any) -> None:
    doc = scalemodel.predict("dgx-h100", "gpt-1.7b", gpus).payload()
    plain = scalemodel.predict("dgx-h100", "gpt-1.7b", 8).payload()
    assert doc["inputs"]["gpus"] == 8 and type(doc["inputs"]["gpus"]) is int
    assert doc["step_time_s"] == plain["step_time_s"]
    json.dumps(doc, allow_nan=False)  # np.int64 in the payload: "Object of type int64 is not JSON serializable"


@pytest.mark.parametrize("top", [np.nan, 2.5, True, "3", None, np.array([2])], ids=repr)
def test_api_plan_top_that_is_not_a_count_is_refused(top: Any) -> None:
    # NaN / 2.5 / "3" / None / an array raised TypeError or ValueError in the ranking; True ranked one plan
    with pytest.raises(InputError, match=r"^top: .* is not a whole number of plans; an integer from 1 to 500$"):
        scalemodel.plan("dgx-h100", "gpt-1.7b", 8, top=top)


# --- scale's list of GPU counts -------------------------------------------------------------------------------------
# [] raised "max() arg is an empty sequence", 8 "'int' object is not iterable", a 2-d array "truth value of an array
# is ambiguous", [8, nan] "cannot convert float NaN to integer"; [8.5, 16] ran as [8, 16] (int() truncated it).

@pytest.mark.parametrize("gpus, said", [
    ([], "gpus: no GPU counts; at least one GPU count"),
    (8, "gpus: 8 is not a list of GPU counts; a list, tuple or 1-d array of GPU counts"),
    (np.array(8), "gpus: an array of shape () is not a list of GPU counts"),
    (np.array([[8, 16]]), "gpus: an array of shape (1, 2) is not a list of GPU counts"),
    (np.array([8, np.nan]), "gpus: nan is not a whole number of GPUs"),
    (np.array([8.5, 16]), "gpus: 8.5 is not a whole number of GPUs"),
    (["8", "16"], "gpus: '8' is not a whole number of GPUs"),
], ids=repr)
def test_api_scale_gpu_lists_that_are_not_counts_are_refused(gpus: Any, said: str) -> None:
    with pytest.raises(InputError) as exc:
        scalemodel.scale("dgx-h100", "gpt-1.7b", gpus, mode="strong", global_batch=16)
    assert str(exc.value).startswith(said), str(exc.value)


def test_api_scale_numpy_counts_still_run() -> None:
    doc = scalemodel.scale("dgx-h100", "gpt-1.7b", np.array([8, 16]), mode="strong", global_batch=16).payload()
    assert doc["inputs"]["gpus"] == [8, 16] and [p["gpus"] for p in doc["points"]] == [8, 16]
    json.dumps(doc, allow_nan=False)


# --- NumPy values in spec fields ------------------------------------------------------------------------------------
# A spec dict or keyword took np.float64(1024.0) but refused np.int64(8) ("Input should be a valid integer (got
# np.int64(8))"), np.True_ ("a valid boolean (got np.True_)") and stage_layers=np.array([8, 8, 8, 8]) ("a valid list").

WL = {"kind": "transformer", "name": "w", "layers": 8, "hidden": 1024, "heads": 16, "vocab": 32000, "seq_len": 2048}


@pytest.mark.parametrize("model, fields", [
    ({**WL, "layers": np.int64(8), "hidden": np.float64(1024)}, {}),
    (WL, {"pp": np.int64(4), "stage_layers": np.array([2, 2, 2, 2]), "global_batch": np.uint16(16)}),
    (WL, {"zero": "fsdp", "xla_gpu_lhs": np.bool_(True), "recompute": "selective",
          "recompute_modules": np.str_("jax_qkvo")}),
], ids=["workload", "strategy", "booleans"])
def test_api_numpy_values_in_spec_fields_price_as_python_values(model: dict[str, Any], fields: dict[str, Any]) -> None:
    plain = {k: v.tolist() if isinstance(v, (np.ndarray, np.generic)) else v for k, v in fields.items()}
    a = scalemodel.predict("dgx-h100", model, 16, **fields).payload()
    b = scalemodel.predict("dgx-h100", {k: int(v) if isinstance(v, np.integer) else v for k, v in model.items()}, 16,
                           **plain).payload()
    assert a["step_time_s"] == b["step_time_s"]
    json.dumps(a, allow_nan=False)


@pytest.mark.parametrize("fields, said", [
    ({"micro_batch": np.array([1, 2])}, "training.micro_batch: Input should be a valid integer (got [1, 2])"),
    ({"tp_comm_overlap": np.float64(np.nan)}, "strategy.tp_comm_overlap: Input should be a valid boolean (got nan)"),
    ({"global_batch": np.float64(np.inf)}, "training.global_batch: Input should be a finite number (got inf)"),
    ({"tp": np.int64(-8)}, "strategy.tp: Input should be greater than 0 (got -8)"),
])
def test_api_numpy_values_out_of_range_are_refused_naming_the_field(fields: dict[str, Any], said: str) -> None:
    with pytest.raises(InputError) as exc:
        scalemodel.predict("dgx-h100", "llama3-8b", 64, **fields)
    assert str(exc.value).startswith(said), str(exc.value)


# --- real-number arguments -------------------------------------------------------------------------------------------
# a string, None or a 1-element array raised TypeError ("'<=' not supported between 'float' and 'str'", "only
# 0-dimensional arrays can be converted to Python scalars", "float() argument must be ... not 'NoneType'").

@pytest.mark.parametrize("call, said", [
    (lambda: scalemodel.predict("dgx-h100", "gpt-1.7b", 8, straggler_cv="0.1"), "straggler_cv: '0.1' is not a number"),
    (lambda: scalemodel.predict("dgx-h100", "gpt-1.7b", 8, kappa=np.array([0.1])),
     "kappa: an array of shape (1,) is not a number"),
    (lambda: scalemodel.sensitivity("dgx-h100", "gpt-1.7b", 8, factor="2"), "factor: '2' is not a number"),
    (lambda: scalemodel.sensitivity("dgx-h100", "gpt-1.7b", 8, factor=None), "factor: None is not a number"),
    (lambda: scalemodel.collective("dgx-h100", "allreduce", np.array([64.0]), 8),
     "size: an array of shape (1,) is not a number"),
    (lambda: scalemodel.collective("dgx-h100", "allreduce", None, 8), "size: None is not a number; a real number"),
    (lambda: scalemodel.collective("dgx-h100", "allreduce", "1GiB", 8, stride=np.nan), "stride: nan is not a whole"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_api_real_arguments_of_the_wrong_type_are_refused(call: Any, said: str) -> None:
    with pytest.raises(InputError) as exc:
        call()
    assert str(exc.value).startswith(said), str(exc.value)


# the command line's ranges, which the API skipped: collective(size=2**80) priced 1.2e24 bytes (--size refuses beyond
# 1e21 B), predict(kappa=2**80) ran (--staleness-kappa takes 0 to 1e6)

@pytest.mark.parametrize("call, said", [
    (lambda: scalemodel.collective("dgx-h100", "allreduce", 2**80, 8),
     "size: 1.209e+24 B is outside the physical range 1 .. 1e+21 B; 1 B .. 1e+21 B"),
    (lambda: scalemodel.collective("dgx-h100", "allreduce", "1e30 B", 8),
     "size: 1e+30 B is outside the physical range"),
    (lambda: scalemodel.predict("dgx-h100", "gpt-1.7b", 8, kappa=np.float64(2.0**80)),
     "kappa: kappa must be a finite number from 0 to 1e+06, got 1.20893e+24; a number from 0 to 1e+06"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_api_reals_beyond_the_command_lines_range_are_refused(call: Any, said: str) -> None:
    with pytest.raises(InputError) as exc:
        call()
    assert str(exc.value).startswith(said), str(exc.value)


def test_api_numpy_reals_still_run() -> None:
    a = scalemodel.collective("dgx-h100", "allreduce", np.float64(2**30), np.int64(8)).payload()
    b = scalemodel.collective("dgx-h100", "allreduce", "1GiB", 8).payload()
    assert a["rows"] == b["rows"]
    json.dumps(a, allow_nan=False)


# --- torus_dims' allowed range ------------------------------------------------------------------------------------
# A fraction, a bool, a nested list or a huge extent was refused with "an integer from -1e+09 to 1e+09" (the spec's
# generic integer bound), where only 1 to 1e+08 is taken.

@pytest.mark.parametrize("dims, said", [
    ("[1.5]", "torus_dims[0]: Input should be a valid integer, got a number with a fractional part (got 1.5); "
              "an integer from 1 to 1e+08"),
    ("[true, 256]", "torus_dims[0]: True is a boolean, not a number; an integer from 1 to 1e+08"),
    ("[0, 16]", "torus_dims[0]: Input should be greater than 0 (got 0); an integer from 1 to 1e+08"),
    ("[]", "List should have at least 1 item (got []); a list of 1 to 6 items, each item an integer from 1 to 1e+08"),
])
def test_torus_dims_refusals_give_the_range_taken(cli, dims: str, said: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", "-c", "tpu-v5e-pod", "-m", "llama3-8b", "-n", "256",
                   "--set", f"cluster.tiers.ici.torus_dims={dims}")
    assert line.startswith("error: --set cluster.tiers.ici.torus_dims: ") and said in line, line
    assert "-1e+09" not in line, line


def test_torus_dims_that_fit_still_run(cli) -> None:  # type: ignore[no-untyped-def]
    doc = accepted(cli, "predict", "-c", "tpu-v5e-pod", "-m", "llama3-8b", "-n", "256",
                   "--set", "cluster.tiers.ici.torus_dims=[4,64]")
    assert doc["step_time_s"] > 0


# --- a scalemodel strategy in a .json file ------------------------------------------------------------------------
# A .json file of strategy-file keys (tp, pp, schedule, overlap_p2p_comm) was read as a DeepSpeed config: "deepspeed
# settings not used: tp; pp; schedule; overlap_p2p_comm", and tp 1 / pp 1 priced with exit 0.

STRAT = {"tp": 2, "pp": 4, "schedule": "interleaved:2", "overlap_p2p_comm": True}
PRED = ["predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64"]


def test_strategy_fields_in_a_json_file_are_read_as_a_strategy(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    j = tmp_path / "s.json"
    j.write_text(json.dumps(STRAT))
    y = tmp_path / "s.yaml"
    y.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in STRAT.items()))
    r = cli(*PRED, "--strategy", str(j), "--json")
    assert r.code == 0 and "not used" not in r.err, r.err
    doc, same = json.loads(r.out), accepted(cli, *PRED, "--strategy", str(y))
    assert doc["inputs"]["strategy_file"]["format"] == "scalemodel"
    assert (doc["strategy"]["tp"], doc["strategy"]["pp"]) == (2, 4)
    assert doc["step_time_s"] == same["step_time_s"]


@pytest.mark.parametrize("body, unused", [
    ({"train_batch_size": 64, "zero_optimization": {"stage": 1}}, []),  # DeepSpeed keys only
    # both: DeepSpeed's, tp warned as not used, saying why (review22g)
    ({"train_batch_size": 64, "tp": 2}, ["tp (a scalemodel strategy file's field: a file with DeepSpeed keys is read "
                                         "as a DeepSpeed config; give it as --set strategy.tp=...)"]),
])
def test_deepspeed_json_files_are_still_deepspeed(cli, tmp_path: Path, body: dict[str, Any], unused: list[str]) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "ds.json"
    f.write_text(json.dumps(body))
    doc = accepted(cli, *PRED, "--strategy", str(f))
    assert doc["inputs"]["strategy_file"]["format"] == "deepspeed"
    assert doc["inputs"]["strategy_file"]["unused"] == unused
    assert (doc["strategy"]["global_batch"], doc["strategy"]["tp"]) == (64, 1)


# --- two sweep outputs that are one file ---------------------------------------------------------------------------
# `-o t.jsonl -o link.csv` (link.csv -> t.jsonl) wrote the JSONL table, then the CSV over it: one table of the two
# asked for, exit 0; `-o t.csv -o t.csv` wrote it twice.

SWEEP = "kind: sweep\nname: s\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: [8]\nstrategies: [{tp: 2}]\n"


@pytest.mark.parametrize("second", ["t.jsonl", "link.csv", "./sub/../t.jsonl"])
def test_sweep_outputs_naming_one_file_twice_are_refused(cli, tmp_path: Path, second: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text(SWEEP)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.csv").symlink_to(tmp_path / "t.jsonl")
    line = refused(cli, "sweep", str(f), "-o", str(tmp_path / "t.jsonl"), "-o", str(tmp_path / second), "-j", "1",
                   inputs=(f,))
    assert line == (f"error: --out: {str(tmp_path / second)!r} is the same file as {str(tmp_path / 't.jsonl')!r}, "
                    "given before; one --out for each file"), line
    assert not (tmp_path / "t.jsonl").exists()  # refused before the work: nothing written


def test_sweep_outputs_of_two_files_still_write_both(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text(SWEEP)
    r = cli("sweep", str(f), "-o", str(tmp_path / "t.jsonl"), "-o", str(tmp_path / "t.csv"), "-j", "1")
    assert r.code == 0, r.err
    rows = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and (tmp_path / "t.csv").read_text().count("\n") == 2  # header and one row


# --- scalemodel.stragglers given arrays -------------------------------------------------------------------------------
# np.array([0.1]) as mean_s / cv / comm_s raised NumPy's TypeError "only 0-dimensional arrays can be converted to
# Python scalars"; a sample list holding an array, ValueError "setting an array element with a sequence".

def _stragglers(**kw: Any) -> Any:
    args = {"mean_s": 1.0, "cv": 0.1, "comm_s": 0.1, **kw}
    return scalemodel.stragglers(64, "lognormal", args.pop("mean_s"), args.pop("cv"), 0, 0, 1, args.pop("comm_s"),
                                 None, **args)


@pytest.mark.parametrize("kw, said", [
    ({"mean_s": np.array([1.0])}, "stragglers: mean_s: an array of shape (1,) is not a number; a real number"),
    ({"cv": np.array([0.1])}, "stragglers: cv: an array of shape (1,) is not a number"),
    ({"comm_s": np.array([[0.1]])}, "stragglers: comm_s: an array of shape (1, 1) is not a number"),
    ({"samples": [1.0, np.array([0.1]), 1.2]},
     "stragglers: samples: [1.0, array([0.1]), 1.2] is not a list of numbers"),
    ({"samples": np.ones((2, 3))}, "is not a list of numbers; a list or 1-d array of step times in seconds"),
    ({"samples": ["1 s", "2 s"]}, "stragglers: samples: ['1 s', '2 s'] is not a list of numbers"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_stragglers_arrays_where_a_number_is_taken_are_refused(kw: dict[str, Any], said: str) -> None:
    with pytest.raises(InputError) as exc:
        _stragglers(**kw)
    assert said in str(exc.value), str(exc.value)


def test_stragglers_numpy_samples_run_as_a_list_does() -> None:
    # a 1-d array of samples raised ValueError "The truth value of an array with more than one element is ambiguous"
    a = _stragglers(samples=np.array([1.0, 1.1, 1.2])).payload()
    b = _stragglers(samples=[1.0, 1.1, 1.2]).payload()
    assert a == b and a["inputs"]["samples"] == 3
