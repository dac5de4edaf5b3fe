"""Hostile-input round 23: the Python API's arguments other than counts and spec fields (names, flags, lists of
names, file paths, predict's echo, calibrate_log's and study's arguments), NumPy scalars .item() gets wrong
(np.longdouble, np.timedelta64), pandas-like objects (a Series' repr is two lines), and the findings of the
command-line corpus below.

Each case is one finding of a corpus run one process per case (timeout and memory cap, sequentially): the fields
of rounds 21-22 (overlap_p2p_send_wait, train_metric_states, eager RoPE and MLA, the MoE dispatcher / EP-overlap
settings, collective_units, FP8 / MXFP8 / NVFP4 recipes), every built-in cluster and accelerator with every
command, settings legal one by one but contradictory together, check files with thresholds at their limits,
calibrate with degenerate measurement sets, the public API with NumPy / pandas values, and output paths. The CLI
contract is test_hostile_inputs.py's; the API's is docs/api.md's: bad values raise InputError naming the argument.
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

LOG = Path(__file__).resolve().parent / "data" / "nccl" / "synthetic_current.log"


def _refused(call: Any) -> str:
    with pytest.raises(InputError) as exc:
        call()
    text = str(exc.value)
    assert "\n" not in text and "; " in text, text
    return text


# --- NumPy scalars whose .item() is not the Python number -----------------------------------------------------------
# np.longdouble(8).item() is an np.longdouble: gpus=np.longdouble(8) was refused as "np.longdouble('8.0') is not a
# whole number of GPUs" and straggler_cv=np.longdouble(0.1) as "not a number"; np.timedelta64(8).item() is 8, so
# gpus=np.timedelta64(8) ran 8 GPUs and straggler_cv=np.timedelta64(1) a CV of 1.

def test_api_longdouble_counts_and_reals_run_as_floats() -> None:
    a = scalemodel.predict("dgx-h100", "gpt-1.7b", np.longdouble(8), straggler_cv=np.longdouble(0.25)).payload()
    b = scalemodel.predict("dgx-h100", "gpt-1.7b", 8, straggler_cv=0.25).payload()
    assert a["step_time_s"] == b["step_time_s"] and a["inputs"]["gpus"] == 8
    json.dumps(a, allow_nan=False)


@pytest.mark.parametrize("call, said", [
    (lambda: scalemodel.predict("dgx-h100", "gpt-1.7b", np.timedelta64(8)),
     "gpus: np.timedelta64(8) is not a whole number of GPUs"),
    (lambda: scalemodel.collective("dgx-h100", "allreduce", "1GiB", np.datetime64(8, "s")),
     "gpus: np.datetime64('1970-01-01T00:00:08') is not a whole number of ranks"),
    (lambda: scalemodel.predict("dgx-h100", "gpt-1.7b", 8, straggler_cv=np.timedelta64(1)),
     "straggler_cv: np.timedelta64(1) is not a number"),
    (lambda: scalemodel.predict("dgx-h100", "gpt-1.7b", np.float64(1e300)),
     "gpus: 1e+300 GPUs is outside 1 to 1e+08"),  # was the 301 digits of int(1e300)
], ids=lambda v: v if isinstance(v, str) else "")
def test_api_times_and_dates_are_not_counts(call: Any, said: str) -> None:
    assert _refused(call).startswith(said)


# --- arrays and pandas-like objects in messages ---------------------------------------------------------------------
# An object with ndim (a pandas Series / DataFrame / Index) was shown by its repr, two lines ("0    8\ndtype: int64");
# a DataFrame as scale's gpus was iterated by its column names ("'a' is not a whole number of GPUs").

class _Frame:
    """A stand-in for a pandas DataFrame (pandas is not a dependency): iterable over column names, ndim 2."""
    ndim = 2
    shape = (2, 1)

    def __iter__(self) -> Any:
        return iter(["a"])

    def __repr__(self) -> str:
        return "   a\n0  8\n1  16"


class _Series(_Frame):
    """A stand-in for a pandas Series: ndim 1, tolist()."""
    ndim = 1
    shape = (1,)

    def __iter__(self) -> Any:
        return iter([8])

    def tolist(self) -> list[int]:
        return [8]


@pytest.mark.parametrize("call, said", [
    (lambda: scalemodel.scale("dgx-h100", "gpt-1.7b", _Frame(), mode="strong", global_batch=16),
     "gpus: an array of shape (2, 1) is not a list of GPU counts"),
    (lambda: scalemodel.predict("dgx-h100", "gpt-1.7b", _Series()), "gpus: an array of shape (1,) is not a whole"),
    (lambda: scalemodel.predict("dgx-h100", "llama3-8b", 64, tp=_Series()),
     "strategy.tp: Input should be a valid integer (got [8])"),
    (lambda: scalemodel.scale("dgx-h100", "gpt-1.7b", {8, 16}, mode="strong", global_batch=16),
     "gpus: {8, 16} is not a list of GPU counts"),  # a set has no order
], ids=lambda v: v if isinstance(v, str) else "")
def test_api_array_likes_are_shown_on_one_line(call: Any, said: str) -> None:
    assert _refused(call).startswith(said)


# --- names, flags, lists of names and paths -------------------------------------------------------------------------
# collective(op=None / 5 / ['allreduce'] / np.array('alltoall')) raised AttributeError ("'NoneType' object has no
# attribute 'lower'"); scale(best='false') ran the planner (a non-empty string is true), best=np.array([True, False])
# raised "truth value of an array is ambiguous"; plan(sync_modes='bsp') searched the modes 'b', 's', 'p' ("unknown
# sync strategy 'b'") and sync_modes=() said "--constraint sync: the sync constraint leaves none of the searched sync
# modes ()"; calibrate_runs(factors='compute') "unknown factor 'c'" at "--factors", factors=5 TypeError; a file
# argument of None, 5 or bytes raised TypeError in pathlib.

@pytest.mark.parametrize("call, said", [
    (lambda: scalemodel.collective("dgx-h100", op=None, gpus=8), "op: None is not a name; a collective: allreduce"),
    (lambda: scalemodel.collective("dgx-h100", op=["allreduce"], gpus=8), "op: ['allreduce'] is not a name"),
    (lambda: scalemodel.collective("dgx-h100", algo=5, gpus=8), "algo: 5 is not a name; ring, tree"),
    (lambda: scalemodel.scale("dgx-h100", "gpt-1.7b", [8, 16], best="false"),
     "best: 'false' is not True or False; True or False"),
    (lambda: scalemodel.scale("dgx-h100", "gpt-1.7b", [8, 16], best=np.array([True, False])),
     "best: an array of shape (2,) is not True or False"),
    (lambda: scalemodel.plan("dgx-h100", "gpt-1.7b", 8, sync_modes=()), "sync_modes: no sync modes; at least one"),
    (lambda: scalemodel.plan("dgx-h100", "gpt-1.7b", 8, sync_modes=5), "sync_modes: 5 is not a list of names"),
    (lambda: scalemodel.calibrate_runs(LOG, factors=5), "factors: 5 is not a list of names"),
    (lambda: scalemodel.calibrate_runs(None), "runs_file: None is not a path; the path of a runs file"),  # type: ignore[arg-type]
    (lambda: scalemodel.calibrate_log(5, "dgx-h100"), "log: 5 is not a path; the path of an nccl-tests log"),  # type: ignore[arg-type]
    (lambda: scalemodel.study(None), "sweep_file: None is not a path"),  # type: ignore[arg-type]
], ids=lambda v: v if isinstance(v, str) else "")
def test_api_names_flags_and_paths_of_the_wrong_type_are_refused(call: Any, said: str) -> None:
    assert _refused(call).startswith(said)


def test_api_numpy_names_and_flags_still_run() -> None:
    a = scalemodel.collective("dgx-h100", op=np.array("alltoall"), algo=np.str_("auto"), gpus=8).payload()
    b = scalemodel.collective("dgx-h100", op="alltoall", gpus=8).payload()
    assert a["rows"] == b["rows"]
    s = scalemodel.scale("dgx-h100", "gpt-1.7b", [8, 16], mode="strong", best=np.bool_(False), global_batch=16)
    assert s.payload()["best"] is False


def test_api_sync_modes_as_one_string_are_the_command_lines_list() -> None:
    doc = scalemodel.plan("dgx-h100", "gpt-1.7b", 8, top=1, sync_modes="bsp,ssp:2").payload()
    assert doc["inputs"]["sync_modes"] == ["bsp", "ssp:2"]


def test_api_factors_as_one_string_are_the_command_lines_list(tmp_path: Path) -> None:
    runs = tmp_path / "runs.yaml"
    runs.write_text("- {name: a, cluster: dgx-h100, model: gpt-1.7b, gpus: 8, global_batch: 16, step_time: 5 s}\n"
                    "- {name: b, cluster: dgx-h100, model: gpt-1.7b, gpus: 16, global_batch: 32, step_time: 6 s}\n")
    one = scalemodel.calibrate_runs(runs, factors="compute")
    listed = scalemodel.calibrate_runs(str(runs).encode(), factors=[np.str_("compute")])  # type: ignore[arg-type]
    fitted = [[f.name for f in fit.factors if f.determined] for fit in (one, listed)]
    assert fitted[0] == fitted[1] == ["compute"], fitted
    with pytest.raises(InputError, match=r"^factors: unknown factor 'junk'; "):  # was located at "--factors"
        scalemodel.calibrate_runs(runs, factors="junk")


# --- plan's constraints echoed --------------------------------------------------------------------------------------
# inputs.constraints was [] for every dict, so a plan no split met was explained as asked under "no constraints".

def test_api_plan_echoes_its_constraints() -> None:
    r = scalemodel.plan("dgx-h100", "gpt-1.7b", 8, top=1, constraints={"tp": 16, "zero": ("<=", 1)})
    assert r.payload()["inputs"]["constraints"] == ["tp=16", "zero<=1"]
    assert not r.ranked and "tp=16" in r.why and "no constraints" not in r.why


# --- calibrate_log's and study's arguments --------------------------------------------------------------------------
# ranks=0 / -1 / True / 1 were "not given" ("cannot tell how many ranks the log used; pass --ranks N"), ranks='8',
# np.array([8]), tolerance='0.1' and op=5 raised TypeError / AttributeError, tolerance=nan was located at
# "--tolerance"; study(workers=1.5 / nan / True) ran, workers='2' raised TypeError, workers=0 was at "--workers".

@pytest.mark.parametrize("kw, said", [
    ({"ranks": 0}, "ranks: 0 ranks is outside 1 to 1e+08"),
    ({"ranks": True}, "ranks: True is not a whole number of ranks"),
    ({"ranks": 1}, "ranks: a collective needs at least 2 ranks, got 1"),
    ({"ranks": "8"}, "ranks: '8' is not a whole number of ranks"),
    ({"ranks": np.array([8])}, "ranks: an array of shape (1,) is not a whole number of ranks"),
    ({"tolerance": "0.1"}, "tolerance: '0.1' is not a number; a real number"),
    ({"tolerance": np.nan}, "tolerance: tolerance must be a number > 0, got nan"),
    ({"op": 5}, "op: 5 is not a name"),
    ({"tier": 5}, "tier: 5 is not a name"),
], ids=repr)
def test_api_calibrate_log_arguments_are_checked(kw: dict[str, Any], said: str) -> None:
    assert _refused(lambda: scalemodel.calibrate_log(LOG, "dgx-h100", **kw)).startswith(said)


@pytest.mark.parametrize("workers, said", [
    (1.5, "workers: 1.5 is not a whole number of processes"), (np.nan, "workers: nan is not a whole number"),
    (True, "workers: True is not a whole number"), ("2", "workers: '2' is not a whole number"),
    (0, "workers: 0 processes is outside 1 to 4,096"),
], ids=repr)
def test_api_study_workers_are_counts(workers: Any, said: str) -> None:
    sweep = Path(__file__).resolve().parent.parent / "examples" / "sweeps" / "capacity.yaml"
    assert _refused(lambda: scalemodel.study(sweep, workers=workers)).startswith(said)


@pytest.mark.parametrize("inputs, said", [
    (5, "inputs: 5 is not a dict"), ({"x": float("nan")}, "inputs: {'x': nan} holds a value strict JSON cannot write"),
], ids=repr)
def test_api_predict_echo_is_strict_json(inputs: Any, said: str) -> None:
    assert _refused(lambda: scalemodel.predict("dgx-h100", "gpt-1.7b", 8, inputs=inputs)).startswith(said)


# --- the precisions offered instead of fp4 --------------------------------------------------------------------------
# An A100 / V100 / P100 cluster asked for fp4 was offered "bf16, fp16 or fp8 on this accelerator", and fp8 is then
# refused there ("accelerator 'a100-sxm-80g' has no fp8 peak").

@pytest.mark.parametrize("cluster, offered", [("dgx-a100", "bf16 or fp16 on this accelerator"),
                                              ("dgx-1-v100", "bf16 or fp16 on this accelerator"),
                                              ("dgx-h100", "bf16, fp16 or fp8 on this accelerator")])
def test_fp4_refusal_offers_only_precisions_the_chip_runs(cli, cluster: str, offered: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", "-c", cluster, "-m", "llama3-8b", "-n", "16", "--precision", "fp4", "--json")
    assert line.startswith("error: --precision: precision fp4 (NVFP4) needs Blackwell") and line.endswith(offered), line


# --- an output path ending in / ------------------------------------------------------------------------------------
# Every option was offered "a file path, e.g. out.yaml": `sweep -o o.csv/` and `scale --plot o.svg/` a YAML name.

@pytest.mark.parametrize("args, example", [
    (["sweep", "{sweep}", "-o", "o.csv/"], "a file path, e.g. o.csv (without the trailing /)"),
    (["scale", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8,16", "--plot", "o.svg/"],
     "a file path, e.g. o.svg (without the trailing /)"),
    (["calibrate", "runs", "{runs}", "--out", "d/"], "a file path, e.g. out.yaml"),
])
def test_an_output_path_ending_in_a_slash_is_offered_its_own_name(cli, tmp_path: Path, args: list[str],  # type: ignore[no-untyped-def]
                                                                   example: str) -> None:
    sweep = Path(__file__).resolve().parent.parent / "examples" / "sweeps" / "capacity.yaml"
    runs = tmp_path / "runs.yaml"
    runs.write_text("- {name: a, cluster: dgx-h100, model: gpt-1.7b, gpus: 8, global_batch: 16, step_time: 5 s}\n")
    line = refused(cli, *[a.format(sweep=sweep, runs=runs) for a in args], inputs=(runs,))
    assert "names a folder, not a file; " in line and line.endswith(example), line


# --- collective_units against a compute_units set on the command line ---------------------------------------------
# `--set cluster.accelerator.compute_units=1` on dgx-h100 was refused at the built-in file's line ("hardware/clusters/
# dgx-h100.yaml:6: accelerator.collective_units: 16 is more than the chip's compute_units 1; 0 to 1"), a line the user
# never wrote, offering a range for the field they did not set.

def test_compute_units_below_collective_units_is_refused_at_the_set_item(cli) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "8",
                   "--set", "cluster.accelerator.compute_units=1")
    assert line.startswith("error: --set cluster.accelerator.compute_units: ") and ".yaml:" not in line, line
    assert line.endswith("or compute_units of at least 24"), line


# --- fp8-only training fields in an fp4 run -------------------------------------------------------------------------
# `--precision fp4 --set training.fp8_recipe=delayed` (and fp8_attention) was told to "leave it out for 16- and 32-bit
# runs", and an fp4 run is neither. (fp8_attention is taken in an fp4 run since fp4a28: TE's current-scaling
# attention recipe under NVFP4, docs/model.md#fp8-attention-casts; tests/test_fp4a28.py.)

@pytest.mark.parametrize("field", ["fp8_recipe=delayed", "fp8_recipe=mxfp8"])
def test_fp8_only_fields_in_an_fp4_run_say_what_fp4_is(cli, field: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", "-c", "dgx-b200", "-m", "llama3-8b", "-n", "8", "--precision", "fp4",
                   "--set", f"training.{field}")
    assert "needs precision fp8 (got 'fp4'); precision fp8, or leave it out (an fp4 run is NVFP4" in line, line
    assert "16- and 32-bit" not in line, line


# --- learned positions with MLA -------------------------------------------------------------------------------------
# A workload with mla and position_embeddings > 0 priced a learned position table and no rotary embedding (strategy
# eager_rope was "not priced: it needs rotary position embeddings"), though MLA's keys carry one
# (mla.qk_rope_head_dim > 0 is required).

def test_learned_positions_with_mla_are_refused(cli) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "deepseek-v3", "-n", "1024", "--ep", "64", "--pp", "16",
                   "--set", "model.position_embeddings=4096")
    assert line == ("error: --set model.position_embeddings: 4096 learned positions with mla, whose keys carry rotary "
                    "embeddings (mla.qk_rope_head_dim = 64); leave position_embeddings out (0) with mla"), line


# --- the 16-bit warning in a measured-runs file ---------------------------------------------------------------------
# A runs file on a V100 cluster (no bf16 peak) was told to "give --precision fp16 (precision)": calibrate runs has no
# --precision; a run writes precision: fp16.

def test_runs_file_on_a_v100_is_told_the_runs_field(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs.yaml"
    runs.write_text("- {name: a, cluster: dgx-1-v100, model: gpt-1.7b, gpus: 8, global_batch: 16, step_time: 5 s}\n"
                    "- {name: b, cluster: dgx-1-v100, model: gpt-1.7b, gpus: 16, global_batch: 32, step_time: 6 s}\n")
    r = cli("calibrate", "runs", str(runs), "--json")
    assert r.code == 0, r.err
    said = [w for w in json.loads(r.out)["warnings"] if "no bf16 peak" in w]
    assert said and all("give precision: fp16, the 16-bit format" in w and "--precision" not in w for w in said), said
    line = cli("predict", "-c", "dgx-1-v100", "-m", "gpt-1.7b", "-n", "8").err
    assert "give --precision fp16 (training.precision), the 16-bit format" in line, line


# --- check's cost assertion at a price of 0 -------------------------------------------------------------------------
# `--set cluster.price_per_gpu_hour=0` was refused as "the cluster 'dgx-h100' has no price_per_gpu_hour".

def test_check_cost_at_a_zero_price_says_zero(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cap = tmp_path / "cap.yaml"
    cap.write_text("kind: scenario\nname: c\ncluster: dgx-h100\nmodel: gpt-1.7b\ngpus: [8, 16]\n"
                   "training: {global_batch: 64, train_tokens: 1B}\nassertions: {max_cost_usd: 10}\n")
    line = refused(cli, "check", str(cap), "--set", "cluster.price_per_gpu_hour=0", inputs=(cap,))
    assert "the cluster 'dgx-h100' has a price_per_gpu_hour of 0, so cost cannot be computed; " in line, line
    line = refused(cli, "check", str(cap), inputs=(cap,))
    assert "the cluster 'dgx-h100' has no price_per_gpu_hour, so cost cannot be computed; " in line, line


# --- a spec file whose name does not say it is one ------------------------------------------------------------------
# `-m w.svg` beside a workload YAML named w.svg was "unknown built-in workload 'w.svg'; did you mean vgg16? (or give a
# path to a YAML file ...)", though the path was given and the file exists.

@pytest.mark.parametrize("option, kind", [("-m", "workload"), ("-c", "cluster")])
def test_an_existing_file_read_as_a_name_says_how_to_read_it(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
                                                             option: str, kind: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.svg").write_text("kind: transformer\nname: w\nlayers: 4\nhidden: 512\nheads: 8\nvocab: 1000\n"
                                    "seq_len: 256\n")
    args = {"-m": ["-c", "dgx-h100", "-m", "w.svg"], "-c": ["-c", "w.svg", "-m", "gpt-1.7b"]}[option]
    line = refused(cli, "predict", *args, "-n", "8", inputs=(tmp_path / "w.svg",))
    assert line == (f"error: {kind}: 'w.svg' is a file, but read as a built-in {kind} name: a spec file's name ends "
                    f"in .yaml, .yml or .json, or holds a /; ./w.svg to read it as a {kind} file, or a name ending "
                    "in .yaml"), line
    assert accepted(cli, "predict", "-c", "dgx-h100", "-m", "./w.svg", "-n", "8")["inputs"]["model"] == "w"


# --- huge arrays in spec fields -------------------------------------------------------------------------------------
# eager_rope=np.ones(10**8, dtype=bool) was turned into a 10**8-item list (27 s, gigabytes) to be refused as "not a
# valid boolean"; an array of more values than a 256 KiB spec file can hold is refused before that.

@pytest.mark.parametrize("call, said", [
    (lambda: scalemodel.predict("dgx-h100", "gpt-1.7b", 8, eager_rope=np.ones(10**7, dtype=bool)),
     "strategy.eager_rope: an array of shape (10000000,) (10,000,000 values) is larger than any spec field; "
     "at most 262,144 values"),
    (lambda: scalemodel.predict("dgx-h100", {"extends": "gpt-1.7b", "layers": np.zeros(10**6)}, 8),
     "model.layers: an array of shape (1000000,) (1,000,000 values) is larger than any spec field"),
], ids=["strategy", "model"])
def test_api_huge_arrays_in_spec_fields_are_refused_before_listing(call: Any, said: str) -> None:
    assert _refused(call).startswith(said)


@pytest.mark.parametrize("cluster, item, at", [
    ("tpu-v5p-pod", "cluster.accelerator.collective_units=8", "--set cluster.accelerator.collective_units: 8 without"),
    ("dgx-h100", "cluster.accelerator.compute_units=null",
     "--set cluster.accelerator.compute_units: accelerator.collective_units: 24 without"),
])
def test_collective_units_without_compute_units_are_refused(cli, cluster: str, item: str, at: str) -> None:  # type: ignore[no-untyped-def]
    # collective_units 8 on a TPU (no compute_units) priced exactly the step without them and said nothing
    line = refused(cli, "predict", "-c", cluster, "-m", "llama3-8b", "-n", "64", "--set", item)
    assert line.startswith(f"error: {at} compute_units: the share of the chip a collective occupies"), line
    assert line.endswith("; compute_units (the chip's SMs / CUs) too, or collective_units 0 or null"), line
