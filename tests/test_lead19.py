"""Lead fixes of round 19, each with a test that fails without it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scalemodel.specs import load_accelerator, load_cluster, load_workload
from scalemodel.specs.hf import seq_len_note

LLAMA_CONFIG = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
                "max_position_embeddings": 131072}


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_CONFIG))
    return path


def test_context_length_warning_only_for_the_configs_own_value(tmp_path: Path) -> None:
    """A workload extending a config.json with its own seq_len (or a --set of it) kept the config's citation
    "max_position_embeddings = 131072" for the value the user gave, so the context-length warning said "sequence
    length 4,096 is the model's context length from its config.json". The config read alone still warns."""
    config = _config(tmp_path)
    alone = load_workload(config)
    assert alone.seq_len == 131072
    assert seq_len_note(alone, None) is not None  # the control: the config's context length is warned about
    over = tmp_path / "w.yaml"
    over.write_text("extends: config.json\nseq_len: 4096\n")
    extended = load_workload(over)
    assert extended.seq_len == 4096
    assert seq_len_note(extended, None) is None
    assert extended.sources["seq_len"] == f"set in {over}"
    assert extended.sources["shape"].startswith("HuggingFace config.json")  # what the file did not set is kept
    by_set = load_workload(config, ["seq_len=4096"])
    assert by_set.seq_len == 4096 and seq_len_note(by_set, None) is None
    assert by_set.sources["seq_len"] == "set in --set seq_len"


def test_a_partial_override_is_said_in_the_fields_citation() -> None:
    """--set of one precision's peak keeps the datasheet citation of the others and says which entry was set;
    a cluster's --set into its accelerator restates the accelerator's own citation."""
    base = load_accelerator("h100-sxm")
    acc = load_accelerator("h100-sxm", ["peak_flops.bf16=1e15"])
    assert acc.sources["peak_flops"] == base.sources["peak_flops"] + "; bf16 set in --set peak_flops.bf16"
    assert acc.sources["memory_bandwidth"] == base.sources["memory_bandwidth"]
    cluster = load_cluster("dgx-h100", ["accelerator.memory_bandwidth=1e12"])
    assert cluster.accelerator.sources["memory_bandwidth"] == "set in --set accelerator.memory_bandwidth"


def test_zero_3_over_a_megatron_ddp_launch_names_the_option(tmp_path: Path, cli: Any) -> None:
    """--zero 3 over a Megatron-LM launch (Megatron-Core DDP: no --use-torch-fsdp2 / --use-megatron-fsdp) was refused
    as "strategy.megatron_ddp: true needs ... zero 0 or 1", a field the reader filled, not one the user wrote
    (review19a). It now names --zero (or the --set item) and says what the launch runs; --zero 1 still runs."""
    script = tmp_path / "run.sh"
    script.write_text("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 --micro-batch-size 1 "
                      "--global-batch-size 512 --bf16\n")

    def run(*args: str) -> Any:
        return cli("predict", "-m", "llama2-7b", "-n", "64", "--strategy", str(script), *args)

    for args, where, label in ((("--zero", "3"), "--zero", "ZeRO 3"),
                               (("--set", "strategy.zero=fsdp"), "--set strategy.zero", "FSDP")):  # not 'ZeRO fsdp'
        r = run(*args)
        assert r.code == 2, r.err
        assert r.err.startswith(f"error: {where}: {label} over the Megatron-LM launch"), r.err
        assert "Megatron-Core's DDP" in r.err and "megatron_ddp: true needs" not in r.err
    assert run("--zero", "1").code == 0
    assert run("--zero", "3", "--set", "strategy.megatron_ddp=false").code == 0


def test_setting_a_network_tier_bandwidth_says_it_is_per_gpu(cli: Any) -> None:
    """ux19's open finding: '10 GbE' written as --set cluster.tiers.ib-leaf.bandwidth=10Gbit/s on an 8-GPU DGX H100 is
    priced as an 80 Gbit/s node NIC; a warning now says so at the point of use (10 Gbit/s = 1.25 GB/s per GPU, x 8 =
    10 GB/s = 80 Gbit/s per node). The NVLink tier, per GPU in every datasheet, is not noted."""
    def warnings(*args: str) -> list[str]:
        r = cli(*args)
        assert r.code == 0, r.err
        return [line for line in r.err.splitlines() if "a tier's bandwidth is per GPU" in line]

    said = warnings("predict", "-m", "llama2-7b", "-c", "dgx-h100", "-n", "64",
                    "--set", "cluster.tiers.ib-leaf.bandwidth=10Gbit/s")
    assert said == ["warning: --set cluster.tiers.ib-leaf.bandwidth: a tier's bandwidth is per GPU: 1.25 GB/s "
                    "(10 Gbit/s) per GPU is 10 GB/s (80 Gbit/s) per node of 8 GPUs; a node NIC of B is B / 8 per GPU"]
    assert warnings("collective", "-c", "dgx-h100", "-n", "16",
                    "--set", "cluster.tiers.ib-leaf.bandwidth=10Gbit/s")
    assert not warnings("predict", "-m", "llama2-7b", "-c", "dgx-h100", "-n", "64",
                        "--set", "cluster.tiers.nvlink.bandwidth=400GB/s")


def test_a_bad_predict_at_is_refused_before_the_fit(monkeypatch: Any, tmp_path: Path) -> None:
    """calibrate runs --predict-at N with an N the cluster cannot hold ran the whole fit (seconds) before refusing it
    (testspeed19's finding); the target is now checked first, so the fit is never reached."""
    import scalemodel.commands.calibrate as calibrate_command
    from scalemodel.errors import InputError

    runs = tmp_path / "runs.yaml"
    runs.write_text("".join(f"- {{name: r{g}, cluster: dgx-a100, model: gpt-1.7b, gpus: {g}, global_batch: 64, "
                            f"micro_batch: 4, step_time: {0.5 + g / 100}}}\n" for g in (8, 16, 32)))
    called: list[int] = []
    monkeypatch.setattr(calibrate_command, "fit_runs", lambda *a, **k: called.append(1))
    with pytest.raises(InputError) as err:
        calibrate_command.calibrate_runs(str(runs), None, False, predict_at=7)
    assert err.value.where == "--predict-at" and not called
