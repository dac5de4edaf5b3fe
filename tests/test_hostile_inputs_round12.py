"""Hostile-input round 12: framework files and options an expert pastes or mistypes: digits that ``str.isdigit``
takes and ``int`` refuses, a TOML key that tomllib reads in quadratic time, a sweep naming one file twice, and counts
or dtypes of a torchtitan TOML / DeepSpeed JSON refused at a field the file does not have.

Each case is one finding; the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from test_hostile_inputs import MEG_BASE, accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

BASE = MEG_BASE


# --- '²'.isdigit() is true, int('²') raises -------------------------------------------------------------------------

def test_a_superscript_selective_ac_option_is_refused(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``selective_ac_option = "²"`` in a torchtitan TOML ended in a traceback (ValueError: invalid literal for int()):
    the reader asked ``str.isdigit()``, which is true for superscript digits, before ``int()``."""
    f = tmp_path / "job.toml"
    f.write_text('[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "\u00b2"\n')
    refused(cli, "predict", *BASE, "--strategy", str(f), "--json", inputs=(f,),
            match=f"{f}: activation_checkpoint.selective_ac_option: unknown selective_ac_option '\u00b2'; 'op' "
                  "(op-level policy) or a non-negative integer N")


@pytest.mark.parametrize("option, recompute, modules", [('"op"', "selective", "titan_op"), ('"2"', "full", ""),
                                                        ("0", "full", "")])
def test_selective_ac_options_in_ascii_still_read(cli, tmp_path, option: str, recompute: str,  # type: ignore[no-untyped-def]
                                                  modules: str) -> None:
    f = tmp_path / "job.toml"
    f.write_text(f'[activation_checkpoint]\nmode = "selective"\nselective_ac_option = {option}\n')
    got = accepted(cli, "predict", *BASE, "--strategy", str(f))["strategy"]
    assert (got["recompute"], got["recompute_modules"]) == (recompute, modules)


def test_a_superscript_num_layers_is_not_read_as_a_count(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``--num-layers=² --num-layers-per-virtual-pipeline-stage 3`` ended in a traceback: the virtual stages were
    derived from --num-layers after ``str.isdigit()``. It is now named as not used, as a non-number was."""
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --micro-batch-size 1 --pipeline-model-parallel-size 2 --num-layers=\u00b2 "
                 "--num-layers-per-virtual-pipeline-stage 3\n")
    r = cli("predict", *BASE, "--strategy", str(f), "--json")
    assert r.code == 0 and "Traceback" not in r.err, r.err
    assert "--num-layers-per-virtual-pipeline-stage 3 (needs --num-layers divisible" in r.err
    assert json.loads(r.out)["strategy"]["schedule"] == "1f1b"


def test_num_layers_in_ascii_still_gives_the_virtual_stages(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "run.sh"  # 24 layers / (pp 2 x 3 layers a virtual stage) = 4 virtual stages
    f.write_text("torchrun pretrain_gpt.py --micro-batch-size 1 --pipeline-model-parallel-size 2 --num-layers=24 "
                 "--num-layers-per-virtual-pipeline-stage 3\n")
    assert accepted(cli, "predict", *BASE, "--strategy", str(f))["strategy"]["schedule"] == "interleaved:4"


def test_a_superscript_sizes_factor_is_refused(cli) -> None:  # type: ignore[no-untyped-def]
    """``collective --sizes 1KiB:8GiB:²`` ended in a traceback (could not convert string to float: '²')."""
    refused(cli, "collective", "-c", "dgx-h100", "-n", "8", "--op", "allreduce", "--sizes", "1KiB:8GiB:\u00b2",
            "--json", match="error: --sizes: bad factor '\u00b2'; a number > 1")


def test_an_ascii_sizes_factor_still_reads(cli) -> None:  # type: ignore[no-untyped-def]
    rows = accepted(cli, "collective", "-c", "dgx-h100", "-n", "8", "--op", "allreduce", "--sizes",
                    "1KiB:1MiB:4")["rows"]
    assert [r["size_bytes"] for r in rows] == [1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0]  # x4 steps


# --- a TOML dotted key of thousands of parts ---------------------------------------------------------------------

@pytest.mark.parametrize("text, line", [
    ("[training]\nlocal_batch_size = 1\n" + "a" + ".a" * 20000 + " = 1\n", 3),
    ('"a"' + '."a"' * 20000 + " = 1\n", 1),
    ("[" + ".".join(["a"] * 40000) + "]\n", 1),
    ("x = {" + " . ".join(["a"] * 20000) + " = 1}\n", 1),
])
def test_a_toml_key_of_thousands_of_parts_is_refused_at_once(cli, tmp_path, text: str, line: int) -> None:  # type: ignore[no-untyped-def]
    """A torchtitan TOML holding one dotted key of 20,000 parts (40 KB) took 24 s to read (tomllib looks each part's
    flags up by the whole path: quadratic), one of 256 KiB about 20 minutes; a table name of 40,000 parts 1.9 s."""
    f = tmp_path / "job.toml"
    f.write_text(text)
    t0 = time.perf_counter()
    refused(cli, "predict", *BASE, "--strategy", str(f), "--json", inputs=(f,),
            match=f"{f}: a dotted key or table name of more than 32 parts on line {line}; a torchtitan job TOML")
    assert time.perf_counter() - t0 < 2.0


def test_toml_keys_of_a_few_parts_still_read(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "job.toml"
    f.write_text('[model]\nconverters = ["quantize.linear.float8"]\n[quantize.linear.float8]\nrecipe_name = '
                 '"tensorwise"\n' + ".".join(["k"] * 32) + ' = "a.b.c"\n[parallelism]\ntensor_parallel_degree = 2\n')
    assert accepted(cli, "predict", *BASE, "--strategy", str(f))["strategy"]["tp"] == 2


# --- a sweep naming one file twice ---------------------------------------------------------------------------------

_MODEL = "kind: transformer\nname: m\nlayers: 4\nhidden: 512\nheads: 8\nvocab: 1000\nseq_len: 256\n"


@pytest.mark.parametrize("models, match", [("[m.yaml, ./m.yaml]", "'./m.yaml' is the file of models[0] ('m.yaml')"),
                                           ("[m.yaml, sub/../m.yaml]", "'sub/../m.yaml' is the file of models[0]"),
                                           ("[m.yaml, ABS]", "is the file of models[0] ('m.yaml')")])
def test_a_sweep_naming_one_file_twice_is_refused(cli, tmp_path, models: str, match: str) -> None:  # type: ignore[no-untyped-def]
    """``models: [m.yaml, ./m.yaml]`` passed round 11's repeat check (the names differ) and ran every point twice,
    each row printed twice."""
    (tmp_path / "m.yaml").write_text(_MODEL)
    (tmp_path / "sub").mkdir()
    f = tmp_path / "s.yaml"
    f.write_text("kind: sweep\nname: t\nmodels: " + models.replace("ABS", str(tmp_path / "m.yaml"))
                 + "\nclusters: [dgx-h100]\ngpus: [8]\n")
    line = refused(cli, "sweep", str(f), "-j", "1", "--json", inputs=(f, tmp_path / "m.yaml"),
                   match=f"{f}: models: models[1]: ")
    assert match in line and line.endswith("; each file once (a repeat runs the same points again)")


def test_a_sweep_cluster_file_named_twice_is_refused(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "c.yaml").write_text("kind: cluster\nname: c\nextends: dgx-h100\n")
    f = tmp_path / "s.yaml"
    f.write_text("kind: sweep\nname: t\nmodels: [gpt-1.7b]\nclusters: [c.yaml, ./c.yaml]\ngpus: [8]\n")
    refused(cli, "sweep", str(f), "-j", "1", "--json", inputs=(f,),
            match="clusters: clusters[1]: './c.yaml' is the file of clusters[0] ('c.yaml')")


def test_a_sweep_of_distinct_files_still_runs(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "m.yaml").write_text(_MODEL)
    (tmp_path / "n.yaml").write_text(_MODEL.replace("name: m", "name: n"))
    (tmp_path / "c.yaml").write_text("kind: cluster\nname: c\nextends: dgx-h100\n")
    f = tmp_path / "s.yaml"
    f.write_text("kind: sweep\nname: t\nmodels: [m.yaml, ./n.yaml]\nclusters: [dgx-h100, c.yaml]\ngpus: [8]\n")
    assert len(accepted(cli, "sweep", str(f), "-j", "1")["rows"]) == 4


# --- counts and dtypes of a framework file refused at a field the file does not have ---------------------------------

@pytest.mark.parametrize("name, text, field", [
    ("job.toml", "[parallelism]\ntensor_parallel_degree = 0\n", "parallelism.tensor_parallel_degree"),
    ("job.toml", "[parallelism]\ntensor_parallel_degree = -0\n", "parallelism.tensor_parallel_degree"),
    ("job.toml", "[parallelism]\ncontext_parallel_degree = 0\n", "parallelism.context_parallel_degree"),
    ("job.toml", "[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_microbatch_size = 0\n",
     "parallelism.pipeline_parallel_microbatch_size"),
    # (tensor_parallel.autotp_size 0 is DeepSpeed's default, AutoTP off: read since round 17)
    ("ds.json", '{"train_micro_batch_size_per_gpu": 0}', "train_micro_batch_size_per_gpu"),
    ("ds.json", '{"train_batch_size": -0}', "train_batch_size"),
])
def test_a_zero_count_in_a_framework_file_names_its_field(cli, tmp_path, name: str, text: str, field: str) -> None:  # type: ignore[no-untyped-def]
    """``tensor_parallel_degree = 0`` (or ``-0``) said "strategy.tp: Input should be greater than 0 (got 0)" and a
    DeepSpeed ``train_micro_batch_size_per_gpu: 0`` "training.micro_batch: ...": fields the file does not have.
    torchtitan (ParallelDims._validate) and DeepSpeed assert each of them >= 1."""
    f = tmp_path / name
    f.write_text(text)
    line = refused(cli, "predict", *BASE, "--strategy", str(f), "--json", inputs=(f,),
                   match=f"{f}: {field}: expected at least 1, got 0; an integer from 1 to 1e8")
    assert "strategy." not in line and "Input should be" not in line


@pytest.mark.parametrize("dtype", ['"float8"', '"bf16"', "16", '["bfloat16"]'])
def test_an_unknown_torchtitan_dtype_names_the_file_field(cli, tmp_path, dtype: str) -> None:  # type: ignore[no-untyped-def]
    """``mixed_precision_param = "float8"`` said "training.precision: unknown precision 'float8'; use fp32, tf32,
    bf16, fp16 or fp8": scalemodel's field and spellings, which the TOML does not take (torchtitan reads torch dtype
    names: "bf16" there was priced as bf16, torchtitan refuses it)."""
    f = tmp_path / "job.toml"
    f.write_text(f"[training]\nmixed_precision_param = {dtype}\n")
    refused(cli, "predict", *BASE, "--strategy", str(f), "--json", inputs=(f,),
            match=f"{f}: training.mixed_precision_param: unknown dtype ")


@pytest.mark.parametrize("dtype, precision", [("bfloat16", "bf16"), ("float16", "fp16"), ("float32", "fp32")])
def test_torchtitan_dtypes_still_read(cli, tmp_path: Path, dtype: str, precision: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "job.toml"
    f.write_text(f'[training]\nmixed_precision_param = "{dtype}"\n')
    assert accepted(cli, "predict", *BASE, "--strategy", str(f))["inputs"]["training"]["precision"] == precision


# --- a HuggingFace layer_types name other than the two read -------------------------------------------------------

_HF = {"model_type": "mistral", "hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 16,
       "num_key_value_heads": 4, "intermediate_size": 4096, "vocab_size": 32000, "max_position_embeddings": 4096}


@pytest.mark.parametrize("name", ["full-attention", "FULL_ATTENTION", "chunked_attention", "linear_attention"])
def test_an_unknown_layer_type_is_named_not_read_as_a_window(cli, tmp_path, name: str) -> None:  # type: ignore[no-untyped-def]
    """``layer_types: ["full-attention", ...]`` (a typo) with ``sliding_window: 128`` priced every layer as a
    128-token sliding window without a word: every name but "full_attention" was read as local. Only
    "sliding_attention" is a window now; the other names are full attention, and named."""
    windowed = tmp_path / "config.json"
    windowed.write_text(json.dumps(dict(_HF, sliding_window=128, layer_types=[name] * 8)))
    full = tmp_path / "full" / "config.json"
    full.parent.mkdir()
    full.write_text(json.dumps(_HF))
    args = ["-c", "dgx-h100", "-n", "16", "--seq-len", "4096"]
    r = cli("predict", "-m", str(windowed), *args, "--json")
    assert r.code == 0, r.err
    assert f"layer_types names '{name}' (read: sliding_attention, full_attention): modelled as full attention" in r.err
    assert json.loads(r.out)["step_time_s"] == accepted(cli, "predict", "-m", str(full), *args)["step_time_s"]


def test_sliding_and_full_layer_types_still_read(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "config.json"
    f.write_text(json.dumps(dict(_HF, sliding_window=128, layer_types=["sliding_attention", "full_attention"] * 4)))
    r = cli("predict", "-m", str(f), "-c", "dgx-h100", "-n", "16", "--seq-len", "4096", "--json")
    assert r.code == 0 and "layer_types" not in r.err, r.err
    from scalemodel.specs.loader import load_spec
    from scalemodel.specs.workload import Workload

    w = load_spec("workload", f, Workload)
    assert (w.sliding_window, w.sliding_window_pattern) == (128, 2)  # every 2nd layer global


# --- top-level fields of a scalemodel strategy YAML ---------------------------------------------------------------

@pytest.mark.parametrize("model, text, section, key, value", [
    ("gpt-1.7b", "precision: fp8\nfp8_attention: true\n", "training", "fp8_attention", True),
    ("gpt-1.7b", "precision: fp8\nfp8_recipe: tensorwise\n", "training", "fp8_recipe", "tensorwise"),
    ("gpt-1.7b", "optimizer: sgd\n", "training", "optimizer", "sgd"),
    ("gpt-1.7b", "sequence_lengths: uniform:512:2048\n", "training", "sequence_lengths", "uniform:512:2048"),
    ("gpt-1.7b", "zero: hsdp\nshard_group: 4\n", "strategy", "shard_group", 4),
    ("gpt-1.7b", "recompute: selective\nrecompute_modules: core_attn\n", "strategy", "recompute_modules", "core_attn"),
    ("mixtral-8x7b", "ep: 8\nep_dispatch_sms: 20\n", "strategy", "ep_dispatch_sms", 20),
    ("mixtral-8x7b", "ep: 8\nmoe_layer_host_s: 9 ms\n", "strategy", "moe_layer_host_s", 0.009),
])
def test_every_spec_field_reads_at_the_top_of_a_strategy_yaml(cli, tmp_path, model: str, text: str, section: str,  # type: ignore[no-untyped-def]
                                                              key: str, value: object) -> None:
    """``zero: hsdp`` with ``shard_group: 4`` at the top of a strategy YAML priced HSDP with the default group and
    warned "settings not used: shard_group": the reader's hand-written field lists had fallen behind the specs (eight
    fields: fp8_attention, fp8_recipe, optimizer, sequence_lengths, shard_group, recompute_modules, ep_dispatch_sms,
    moe_layer_host_s), while the same fields under ``strategy:`` / ``training:`` were read."""
    f = tmp_path / "s.yaml"
    f.write_text(text)
    r = cli("predict", "-c", "dgx-h100", "-m", model, "-n", "64", "--strategy", str(f), "--json")
    assert r.code == 0 and "not used" not in r.err, r.err
    got = json.loads(r.out)
    assert (got["inputs"]["training"] if section == "training" else got["strategy"])[key] == value


# --- the newest switches where the strategy around them leaves nothing to price ---------------------------------

@pytest.mark.parametrize("cluster, model, flags, switch, said", [
    ("dgx-h100", "mixtral-8x7b", ["--ep", "8"], "strategy.ep_dispatch_sms=20",
     "strategy.ep_dispatch_sms = 20 is not priced: the dispatcher's SMs slow only the compute that hides the "
     "expert-parallel all-to-alls, and moe_a2a_overlap is off"),
    ("dgx-h100", "gpt-1.7b", [], "strategy.tp_async_allreduce=false",
     "strategy.tp_async_allreduce = false is not priced: tp is 1"),
    ("dgx-h100", "gpt-1.7b", ["--tp", "4", "--sequence-parallel"], "strategy.tp_async_allreduce=false",
     "strategy.tp_async_allreduce = false is not priced: with sequence_parallel the backward reduce-scatters"),
    # review26a: not on an H100 any more, whose FP8 core has a measured rate (docs/model.md#fp8-attention-rate)
    ("mi300x-8", "gpt-1.7b", ["--precision", "fp8"], "training.fp8_attention=true",
     "training.fp8_attention = true is not priced: it prices the FP8 backward of sliding-window layers"),
])
def test_newest_switches_without_effect_are_warned(cli, cluster: str, model: str, flags: list[str], switch: str,  # type: ignore[no-untyped-def]
                                                   said: str) -> None:
    """``--ep 8 --set strategy.ep_dispatch_sms=20`` (no moe_a2a_overlap), ``tp_async_allreduce=false`` at tp 1 or
    with sequence parallelism, and ``fp8_attention`` on a model without sliding-window layers priced exactly what
    the run without them prices, and said nothing (round 8 warns the same for tp_comm_overlap and
    overlap_param_gather)."""
    args = ["-c", cluster, "-m", model, "-n", "64", *flags]
    r = cli("predict", *args, "--set", switch, "--json")
    assert r.code == 0, r.err
    got = json.loads(r.out)
    assert any(w.startswith(said) for w in got["warnings"]), got["warnings"]
    assert got["step_time_s"] == accepted(cli, "predict", *args)["step_time_s"]


@pytest.mark.parametrize("model, flags", [
    ("mixtral-8x7b", ["--ep", "8", "--set", "strategy.ep_dispatch_sms=20", "--set", "strategy.moe_a2a_overlap=true"]),
    ("gpt-1.7b", ["--tp", "4", "--set", "strategy.tp_async_allreduce=false"]),
    ("mistral-7b", ["--precision", "fp8", "--set", "training.fp8_attention=true"]),
])
def test_newest_switches_with_effect_are_not_warned(cli, model: str, flags: list[str]) -> None:  # type: ignore[no-untyped-def]
    got = accepted(cli, "predict", "-c", "dgx-h100", "-m", model, "-n", "64", *flags)
    assert not any("is not priced" in w for w in got["warnings"]), got["warnings"]
