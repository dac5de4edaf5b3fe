"""Hostile-input round 7: the open decisions of round 6 and a fuzz pass over the recently added inputs.

Each case is one finding (a wrong value accepted silently, a message without what is allowed or pointing at the
wrong place, a warning before the error line, a traceback); the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

BASE = ["-c", "dgx-h100", "-m", "gpt-1.7b"]


# --- scale: GPU counts that do not increase -----------------------------------------------------------

@pytest.mark.parametrize("gpus", ["16,8", "8,8", "8,32,16"])
def test_scale_counts_that_do_not_increase_are_refused(cli, gpus: str) -> None:  # type: ignore[no-untyped-def]
    """``scale -n 16,8`` took 16 as the baseline: 8 GPUs had a scaling efficiency above 1 and every loss_attribution
    negative (a loss read backwards). The first count is every point's baseline, so counts must increase."""
    line = refused(cli, "scale", *BASE, "-n", gpus, "--json", match="--gpus: GPU counts must increase")
    assert "strictly increasing counts, e.g. " + ",".join(str(n) for n in sorted({int(g) for g in gpus.split(",")})) \
        in line


def test_scale_increasing_counts_have_efficiency_from_the_first(cli) -> None:  # type: ignore[no-untyped-def]
    out = accepted(cli, "scale", *BASE, "-n", "8,16")
    assert [p["gpus"] for p in out["points"]] == [8, 16]
    assert out["points"][0]["scaling_efficiency"] == 1.0


def test_scenario_counts_that_do_not_increase_are_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("kind: scenario\nname: s\ncluster: dgx-h100\nmodel: gpt-1.7b\ngpus: [32, 16]\n"
                 "assertions: {min_scaling_efficiency: 0.5}\n")
    for args in (["scale", "--scenario", str(f)], ["check", str(f)]):
        refused(cli, *args, "--json", inputs=(f,), match=f"{f}:5: gpus: GPU counts must increase")
    f.write_text("kind: scenario\nname: s\ncluster: dgx-h100\nmodel: gpt-1.7b\ngpus: [16, 32]\n")
    refused(cli, "check", str(f), "--set", "gpus=[16, 16]", "--json", inputs=(f,),
            match="--set gpus: GPU counts must increase")


def test_the_engine_sweep_refuses_counts_that_do_not_increase() -> None:
    from scalemodel.engine.scaling import sweep
    from scalemodel.errors import InputError
    from scalemodel.specs import StrategySpec, TrainingSpec, load_cluster, load_workload

    with pytest.raises(InputError, match="GPU counts must increase"):
        sweep(load_cluster("dgx-h100"), load_workload("gpt-1.7b"), TrainingSpec(), StrategySpec(), [16, 8], "weak")


# --- the error line is the only line ------------------------------------------------------------------

def test_warnings_do_not_come_before_the_error(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A Megatron file with a shell variable warned ("not a number: a shell variable is not expanded") on the line
    before the error line; an unknown HuggingFace model_type warned twice before it."""
    f = tmp_path / "launch.sh"
    f.write_text('--tensor-model-parallel-size "$TP" --pipeline-model-parallel-size 3\n')
    refused(cli, "predict", *BASE, "-n", "8", "--strategy", str(f), "--json", inputs=(f,),
            match="--gpus: 8 GPUs is not a multiple of tp x pp x cp")
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "weird", "num_hidden_layers": 2, "hidden_size": 64,
                                               "num_attention_heads": 4, "vocab_size": 100,
                                               "max_position_embeddings": -5}))
    refused(cli, "memory", "-c", "dgx-h100", "-m", str(d), "-n", "8", "--json", match="max_position_embeddings")


def test_warnings_still_print_when_the_command_succeeds(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "launch.sh"
    f.write_text('--tensor-model-parallel-size "$TP" --micro-batch-size 1\n')
    r = cli("predict", *BASE, "-n", "8", "--strategy", str(f))
    assert r.code == 0 and "warning: " in r.err and "shell variable is not expanded" in r.err, r.err


# --- spec messages say what is allowed ----------------------------------------------------------------

@pytest.mark.parametrize("field, value, allowed", [
    ("layers", "abc", "; an integer from 1 to 1e+09"),
    ("layers", "[1]", "; an integer from 1 to 1e+09"),
    ("layers", "true", "; an integer from 1 to 1e+09"),
    ("kv_heads", "2.5", "; an integer from 1 to 1e+09, or null (not set)"),
    ("mtp_layers", "-1", "greater than or equal to 0 (got -1); an integer from 0 to 1000"),  # was "greater than -1"
    ("norms_per_layer", "3", "; an integer from 1 to 2"),
    ("gated_mlp", "maybe", "; true or false"),
    ("params", "{a: 1}", "; a number or a string with one of: K, k, M, B, G, T"),
    ("params", "0.5", "; a count > 0, bare or with a suffix (K, k, M, B, G, T), within 1 .. 1e+30"),
    ("moe", "7", "; a mapping of MoESpec fields (experts, top_k"),
])
def test_workload_type_errors_say_what_is_allowed(cli, tmp_path: Path, field: str, value: str,  # type: ignore[no-untyped-def]
                                                  allowed: str) -> None:
    """``layers: abc`` in a workload file said "Input should be a valid integer, unable to parse string as an
    integer (got 'abc')" and stopped: no type or range to fix it with."""
    fields = {"kind": "transformer", "name": "m", "layers": "4", "hidden": "512", "heads": "8", "vocab": "1000",
              "seq_len": "256", field: value}
    f = tmp_path / "m.yaml"
    f.write_text("".join(f"{k}: {v}\n" for k, v in fields.items()))
    line = refused(cli, "memory", "-c", "dgx-h100", "-m", str(f), "-n", "8", "--json", inputs=(f,),
                   match=f"{f}:")
    assert allowed in line, line


@pytest.mark.parametrize("sets, allowed", [
    ("cluster.overlap_efficiency=high", "; a number >= 1e-06 and <= 1"),
    ("accelerator.family=hopper2", "not one of the known values (got 'hopper2'); one of 'pascal'"),
    ("accelerator.memory=[80]", "; a number or a string with one of: B, bytes"),
    ("accelerator.memory=-3", "; a number of B > 0, bare or with a unit"),
    ("cluster.variability=5", "; a mapping of Variability fields (dist, cv, source)"),
    ("cluster.tiers.nvlink.efficiency=x", "; a number >= 1e-06 and <= 1"),
    ("model.moe={experts: 8, top_k: 2, bogus: 1}", "known keys: experts, top_k"),  # known keys were not listed
])
def test_set_type_errors_say_what_is_allowed(cli, sets: str, allowed: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "memory", *BASE, "-n", "8", "--set", sets, "--json")
    assert allowed in line, line


@pytest.mark.parametrize("text, allowed", [
    ("experts: 8, top_k: 9", "top_k from 1 to experts"),
    ("experts: 8, top_k: 2, every: 99", "every from 1 to layers"),
])
def test_cross_field_rules_say_what_is_allowed(cli, tmp_path: Path, text: str, allowed: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "m.yaml"
    f.write_text("kind: transformer\nname: m\nlayers: 4\nhidden: 512\nheads: 8\nvocab: 1000\nseq_len: 256\n"
                 f"moe: {{{text}}}\n")
    line = refused(cli, "memory", "-c", "dgx-h100", "-m", str(f), "-n", "8", "--json", inputs=(f,))
    assert line.endswith(allowed), line


def _leaf_fields() -> list[tuple[str, str]]:
    from scalemodel.specs import AcceleratorSpec, ClusterSpec, StrategySpec, TrainingSpec
    from scalemodel.specs.workload import TransformerWorkload

    roots = {"model": TransformerWorkload, "cluster": ClusterSpec, "accelerator": AcceleratorSpec,
             "training": TrainingSpec, "strategy": StrategySpec}
    return [(root, f.name) for root, cls in roots.items() for f in msgspec.structs.fields(cls)
            if f.name not in ("sources", "kind", "name", "description", "source", "protocol", "vendor",
                              "recompute_modules", "tiers")]


@pytest.mark.parametrize("root, field", _leaf_fields())
def test_every_spec_field_refuses_a_wrong_type_with_what_is_allowed(cli, root: str, field: str) -> None:  # type: ignore[no-untyped-def]
    """Each field, given a value of a type it never takes, is refused with an error line that ends in what is
    allowed (``; ...``), naming the --set item."""
    for value in ("not-a-value-x", "[[1]]", "{zz_unknown: 1}"):
        line = refused(cli, "memory", *BASE, "-n", "8", "--set", f"{root}.{field}={value}", "--json")
        if root in ("model", "cluster", "accelerator"):
            assert line.startswith(f"error: --set {root}.{field}"), line
        assert "; " in line.split(f"{field}", 1)[-1], line


# --- --set errors name the --set item -----------------------------------------------------------------

@pytest.mark.parametrize("sets, start", [
    ("model.layers=abc", "error: --set model.layers: Input should be a valid integer"),
    ("model.foo=1", "error: --set model.foo: unknown key 'foo'"),
    ("model.kv_heads=7", "error: --set model.kv_heads: heads 24 is not a multiple of kv_heads 7"),  # a rule across
    ("accelerator.memory=0", "error: --set accelerator.memory: Input should be greater than 0"),
    ("cluster.tiers.ib-leaf.span=12", "error: --set cluster.tiers.ib-leaf.span: tiers: tiers[1]"),
    ("model.moe.experts=8", "error: --set model.moe.experts: moe is not set, so it has no fields to set one by one"),
    ("cluster.tiers.ib.bandwidth=1", "error: --set cluster.tiers.ib.bandwidth: no item 'ib' in tiers"),
])
def test_set_errors_name_the_set_item(cli, sets: str, start: str) -> None:  # type: ignore[no-untyped-def]
    """``--set model.layers=abc`` was reported at ``examples/workloads/gpt-1.7b.yaml:5: layers``, a line of the
    built-in file that holds a valid value; ``--set model.moe.experts=8`` on a dense model said "moe is a value"."""
    line = refused(cli, "memory", *BASE, "-n", "8", "--set", sets, "--json")
    assert line.startswith(start), line
    assert "gpt-1.7b.yaml" not in line and "dgx-h100.yaml" not in line


def test_set_errors_on_a_scenario_name_the_set_item(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("kind: scenario\nname: s\ncluster: dgx-h100\nmodel: gpt-1.7b\ngpus: [16, 32]\n")
    refused(cli, "check", str(f), "--set", "model.layers=x", "--json", inputs=(f,),
            match="error: --set model.layers: Input should be a valid integer")


# --- Megatron-LM virtual pipeline sizes ---------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--virtual-pipeline-model-parallel-size", "--num-virtual-stages-per-pipeline-rank",
                                  "--num-layers-per-virtual-pipeline-stage"])
def test_megatron_zero_virtual_pipeline_size_is_refused(cli, tmp_path: Path, flag: str) -> None:  # type: ignore[no-untyped-def]
    """``--virtual-pipeline-model-parallel-size 0`` was dropped silently (no interleaving); Megatron-LM's
    validate_args divides by the layers per virtual stage and reads 1 virtual stage as not interleaved, so 0 of
    either would not start a job."""
    f = tmp_path / "launch.sh"
    f.write_text(f"--pipeline-model-parallel-size 2 --num-layers 24 {flag} 0\n")
    refused(cli, "predict", *BASE, "-n", "8", "--strategy", str(f), "--json", inputs=(f,),
            match=f"{flag}: expected at least 1, got 0; an integer >= 1")


@pytest.mark.parametrize("flag, value, schedule", [
    ("--num-virtual-stages-per-pipeline-rank", "1", "1f1b"),
    ("--num-virtual-stages-per-pipeline-rank", "3", "interleaved:3"),
    ("--virtual-pipeline-model-parallel-size", "2", "interleaved:2"),
    ("--num-layers-per-virtual-pipeline-stage", "4", "interleaved:3"),  # 24 layers / (pp 2 x 4)
])
def test_megatron_virtual_pipeline_sizes_still_read(cli, tmp_path: Path, flag: str, value: str,  # type: ignore[no-untyped-def]
                                                    schedule: str) -> None:
    f = tmp_path / "launch.sh"
    f.write_text(f"--pipeline-model-parallel-size 2 --num-layers 24 {flag} {value}\n")
    out = accepted(cli, "predict", *BASE, "-n", "8", "--strategy", str(f))
    assert out["strategy"]["schedule"] == schedule


# --- fuzz findings: refusals without what is allowed ---------------------------------------------------

@pytest.mark.parametrize("name, text, match", [
    ("ds.json", '{"train_micro_batch_size_per_gpu": 1,\n "zero_optimization": {"stage": 3}} x', "malformed JSON"),
    ("ds.json", '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"overlap_comm": 1.5}}',
     "overlap_comm: expected true or false, got '1.5'; true or false"),
    ("job.toml", "[parallelism]\ntensor_parallel_degree = \n", "malformed TOML"),
    ("job.toml", "parallelism = 3\n[training]\nseq_len = 8\n", "[parallelism]: expected a table, got int; a "),
    ("s.yaml", "strategy: {tp: [\n", "malformed YAML"),
])
def test_strategy_file_syntax_errors_say_what_is_allowed(cli, tmp_path: Path, name: str, text: str,  # type: ignore[no-untyped-def]
                                                         match: str) -> None:
    """A DeepSpeed JSON with trailing text, a TOML with a missing value, a DeepSpeed flag that is not a boolean: the
    line said what was wrong and stopped."""
    f = tmp_path / name
    f.write_text(text)
    line = refused(cli, "predict", *BASE, "-n", "8", "--strategy", str(f), "--json", inputs=(f,), match=match)
    assert "; " in match or "; " in line.split(match, 1)[1], line


def test_hf_config_syntax_error_says_what_is_allowed(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text('{"num_hidden_layers": 2,\n "hidden_size": 64\n "vocab_size": 10}')
    line = refused(cli, "memory", "-c", "dgx-h100", "-m", str(d), "-n", "8", "--json",
                   match="config.json:3: malformed JSON: Expecting ',' delimiter (column 2); strict JSON")
    assert line


@pytest.mark.parametrize("text, match", [
    ("extends: [a]\nname: x\n", "extends must be a name or a path, got list; a built-in workload name or a path"),
    ("extends: ./m.yaml\nname: x\n", "extends cycle"),
])
def test_extends_errors_say_what_is_allowed(cli, tmp_path: Path, text: str, match: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "m.yaml"
    f.write_text(text)
    line = refused(cli, "memory", "-c", "dgx-h100", "-m", str(f), "-n", "8", "--json", inputs=(f,), match=match)
    assert "; " in match or "; " in line.split(match, 1)[1], line


def test_sweep_strategy_field_errors_say_what_is_allowed(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A field of a strategy inside a sweep's ``strategies`` list (a union of "best" and a mapping) had no allowed
    part: its type was not found through the union."""
    f = tmp_path / "sweep.yaml"
    f.write_text("kind: sweep\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\ngpus: [8]\n"
                 "strategies: [best, {tp: 2, sequence_parallel: [1, 2]}]\n")
    refused(cli, "sweep", str(f), "-j", "1", "--json", inputs=(f,),
            # null too since sequence_parallel may be left unset (docs/model.md#moe-sp-required)
            match="strategies[1].sequence_parallel: Input should be a valid boolean or null (got [1, 2]); true or "
                  "false, or null (not set)")


@pytest.mark.parametrize("args, match", [
    (["sweep", str(Path(__file__).resolve().parents[1] / "examples/sweeps/capacity.yaml"), "-j", "0"],
     "--workers must be from 1 to 4096, got 0; an integer"),
    (["stragglers", "-n", "300000000"], "; an integer"),
    (["memory", *BASE, "-n", "8", "--optimizer-bytes", "-1"],  # review19e: one bounds check, the option's range
     "--optimizer-bytes -1 bytes per parameter is outside 0 .. 64; a number from 0 to 64"),
])
def test_command_option_errors_say_what_is_allowed(cli, args: list[str], match: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, *args, "--json", match=match)


def test_calibrate_log_of_one_size_says_what_is_allowed(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "a.log"
    f.write_text("# nccl-tests all_reduce_perf\n#  Rank  0 Group  0 Pid 1 on h device  0 [0x01] H100\n"
                 "#  Rank  1 Group  0 Pid 1 on h device  1 [0x02] H100\n"
                 " 1048576 262144 float sum -1 50.0 20.9 39.2 0 49.0 21.4 40.1 0\n")
    refused(cli, "calibrate", str(f), "-c", "dgx-a100", "--json", inputs=(f,),
            match="need at least two rows with size > 0 to fit latency and bandwidth; an nccl-tests log of a size "
                  "sweep")


def test_shard_group_without_hsdp_is_warned(cli) -> None:  # type: ignore[no-untyped-def]
    """``--zero 1 --set strategy.shard_group=64`` was accepted without a word: the group sizes HSDP only."""
    out = accepted(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--zero", "1", "--set",
                   "strategy.shard_group=64")
    assert any("strategy.shard_group = 64 is not used" in w for w in out["warnings"]), out["warnings"]
    out = accepted(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--zero", "hsdp", "--set",
                   "strategy.shard_group=8")
    assert not any("shard_group" in w for w in out["warnings"])


# --- scripts/validate_attention.py on a measurement file of the user's -----------------------------------

_ATT_POINT = ("  - {src: FA2-A100, panel: '(a)', acc: a100-sxm-80g, kernel: fa1, dir: fwd+bwd, causal: false, "
              "dtype: fp16, b: 32, h: 32, d: 64, s: 512, tflops: 91}\n")


def _attention_file(tmp_path: Path, point: str) -> Path:
    from conftest import script_module

    text = script_module("validate_attention").DEFAULT.read_text()
    f = tmp_path / "attention.yaml"
    f.write_text(text[:text.index("points:")] + "points:\n" + point + _ATT_POINT)
    return f


@pytest.mark.parametrize("edit, match", [
    (("src: FA2-A100", "src: [FA2-A100]"), "src ['FA2-A100']; a string"),  # TypeError: unhashable type: 'list'
    (("dir: fwd+bwd", "dir: [fwd]"), "dir ['fwd']; a string"),
    (("kernel: fa1", "kernel: null"), "kernel None; a string"),  # TypeError in the report's format
    (("tflops: 91", "tflops: 1e-320"), "tflops 1e-320; a number from 1e-06 to 1e+06"),  # inf in the JSON: ValueError
    (("b: 32", "b: 1.0e300"), "b 1e+300; a number from 1 to 1e+09"),
    (("b: 32", "b: " + "9" * 5000), "integer with 5000 digits"),  # int() of 5000 digits: ValueError
    (("causal: false", "causal: yes"), "causal 'yes'; true or false"),  # YAML 1.1 read yes as true
    (("b: 32", "b: 32, b: 64"), "duplicate key 'b'"),  # the second silently won
])
def test_validate_attention_refuses_a_bad_point_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            edit: tuple[str, str], match: str) -> None:
    from conftest import script_module

    f = _attention_file(tmp_path, _ATT_POINT.replace(*edit))
    for flags in ([], ["--json"]):
        assert script_module("validate_attention").main([str(f), *flags]) == 2
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and match in lines[0], err
        assert out == ""


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_validate_attention_refuses_files_it_cannot_read_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               kind: str) -> None:
    """A FIFO or /dev/zero was read with Path.read_text: the script blocked (or filled memory) for ever."""
    import os

    from conftest import script_module

    f = tmp_path / "attention.yaml"
    if kind == "fifo":
        os.mkfifo(f)
    else:
        os.symlink("/dev/zero", f)
    assert script_module("validate_attention").main([str(f)]) == 2
    assert "not a regular file" in capsys.readouterr().err


def test_validate_attention_reads_the_published_file(capsys: pytest.CaptureFixture[str]) -> None:
    from conftest import script_module

    assert script_module("validate_attention").main(["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["points"]


# --- torchtitan TOML keys ---------------------------------------------------------------------------------

def _titan(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "job.toml"
    f.write_text(text)
    return f


def test_torchtitan_default_global_batch_size_is_read(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``global_batch_size = -1`` is torchtitan's default (local_batch_size x the data-parallel degree, trainer.py):
    it was refused as "expected a count"; 0 (which torchtitan's assert refuses) was ignored."""
    f = _titan(tmp_path, "[training]\nlocal_batch_size = 2\nglobal_batch_size = -1\n[parallelism]\n"
                         "tensor_parallel_degree = 2\n")
    out = accepted(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--strategy", str(f))
    assert out["strategy"]["global_batch"] == 2 * 32  # micro-batch x dp, one accumulation step
    f = _titan(tmp_path, "[training]\nlocal_batch_size = 2\nglobal_batch_size = 0\n")
    refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--strategy", str(f), "--json",
            inputs=(f,),
            match="training.global_batch_size: expected at least 1, got 0; an integer from 1 to 1e8 (or -1")


@pytest.mark.parametrize("text, match", [
    ("[model]\nconverters = ['float8']\n[float8]\nenable_fsdp_float8_all_gather = 1\n",
     "float8.enable_fsdp_float8_all_gather: expected true or false, got '1'"),
    ("[float8]\nenable_float8_linear = 'yes'\n", "float8.enable_float8_linear: expected true or false, got 'yes'"),
    ("[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_layers_per_stage = 0\n",
     "parallelism.pipeline_parallel_layers_per_stage: expected at least 1, got 0"),
    ("[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_layers_per_stage = 'x'\n",
     "parallelism.pipeline_parallel_layers_per_stage: expected a count, got 'x'"),
    ("[parallelism]\ndata_parallel_replicate_degree = 99999999999999999999\n",
     "shard >= 1 or -1 (the rest), each at most"),
])
def test_torchtitan_keys_of_the_wrong_type_are_refused(cli, tmp_path: Path, text: str, match: str) -> None:  # type: ignore[no-untyped-def]
    """torchtitan types these keys (bool, int): a float8 flag of 1 silently meant false (no float8 all-gather), a
    layers-per-stage of 0 or 'x' was accepted without a word, a replicate degree of 1e20 was echoed as a setting."""
    f = _titan(tmp_path, text)
    refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--precision", "fp8", "--strategy", str(f),
            "--json", inputs=(f,), match=match)


# --- scripts/fit_convergence.py --write -----------------------------------------------------------------

def test_fit_convergence_never_writes_over_its_input(tmp_path: Path) -> None:
    """``fit_convergence.py FILE --write FILE`` replaced the convergence data with the fitted table (Path.write_text,
    not atomic); the output goes through the CLI's writer now, which refuses an input of the run."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    data = tmp_path / "convergence.yaml"
    data.write_bytes((root / "validation" / "convergence.yaml").read_bytes())
    before = data.read_bytes()
    res = subprocess.run([sys.executable, str(root / "scripts" / "fit_convergence.py"), str(data), "--write",
                          str(data)], capture_output=True, text=True, env={"PYTHONPATH": str(root)}, timeout=120)
    assert res.returncode == 2 and data.read_bytes() == before
    assert res.stderr.strip().splitlines() == [f"error: --write: {str(data)!r} is an input of this command ({data}); "
                                               "writing it would replace it; a different output file"], res.stderr
    res = subprocess.run([sys.executable, str(root / "scripts" / "fit_convergence.py"), "/dev/zero"],
                         capture_output=True, text=True, env={"PYTHONPATH": str(root)}, timeout=60)
    assert res.returncode == 2 and "not a regular file" in res.stderr


# --- first/last stage layers beyond the model's layers ---------------------------------------------------

@pytest.mark.parametrize("last", ["33", "999999999"])
def test_stage_layers_beyond_the_model_are_infeasible_not_a_cost_error(cli, tmp_path: Path, last: str) -> None:  # type: ignore[no-untyped-def]
    """``--decoder-last-pipeline-num-layers 999999999`` (or last_stage_layers 33 of 32 layers) left the other stages
    a negative share of layers: the cost layer refused it as "stage_layers: stage_layers must be finite and >= 0"
    (no --set or file named), and plan failed as a whole. plan counts the split infeasible, as any split that does not
    fit; predict refuses it since round 24 (split24: Megatron-Core's rule, tests/test_pipeline_split_rules.py).
    fuzz39: plan refuses it at the pin too (no pipeline it searches takes it: tests/test_fuzz39.py), where it searched
    every candidate to layers_not_divisible, exit 0."""
    f = tmp_path / "launch.sh"
    f.write_text(f"--pipeline-model-parallel-size 4 --micro-batch-size 1 --decoder-last-pipeline-num-layers {last}\n")
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--strategy", str(f), inputs=(f,))
    assert "--decoder-last-pipeline-num-layers: last" in line and "leaves the 3 stages between none" in line, line
    refused(cli, "plan", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "64", "--set", f"strategy.last_stage_layers={last}",
            match=f"error: --set strategy.last_stage_layers: last {last} layers, more than the model's 32")


def test_chunk_layers_beyond_the_model_are_infeasible_not_a_cost_error(cli) -> None:  # type: ignore[no-untyped-def]
    """The interleaved form of the same finding: last_chunk_layers 999999999 left the other model chunks a negative
    share of DeepSeek-V3's 61 layers (refused since round 24, as the stages' form above)."""
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", "deepseek-v3", "-n", "1024", "--pp", "8", "--ep", "8",
                   "--schedule", "interleaved:2", "--set", "strategy.last_chunk_layers=999999999")
    assert "strategy.last_chunk_layers: last 999999999 of 61 layers leaves the 15 model chunks between none" in line
