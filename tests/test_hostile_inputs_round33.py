"""Hostile-input round 33 (fuzz33): what this round's fuzzing found beyond rounds 6-32. The CLI contract is
test_hostile_inputs.py's: exit 2, one ``error:`` line naming the file / field / option, what was wrong and what is
allowed, nothing on stdout, no input changed.

The corpus (in processes, 30 s each, under nice): 81 DeepSpeed config JSONs (stage / batch / bucket / offload / hpZ /
MiCS values of every type, NaN, Infinity, 1e999999999, 5,000-digit integers, 100,000-deep arrays, duplicate keys,
comments, BOM, binary, Latin-1); 91 torchtitan TOMLs (every read key as 0, -1, 2**63, nan, inf, dates, strings,
tables, arrays; escaped control characters in keys, section names and values; 20,000 tables, 100,000 split points,
5,000-deep arrays); 111 Megatron-LM launch files (each numeric flag at 0 / -1 / 1e400 / a $VARIABLE / $(...),
unclosed quotes, heredocs, bash arrays, 5,000-deep $( and ${, a 5,000-variable chain, a 2**40-character variable
doubling, 100,000 continuation lines, layouts unrolling to 1e12 letters, an --moe-layer-freq that is Python code);
79 HuggingFace config.json files as a folder and as a file (each integer key at 0 / -1 / 1e12 / a string / a float /
true, text_config nesting, hybrid patterns of 100,001 layers, 30,000 unknown keys) through predict and memory; ~80
--set assignments and ~70 extreme numeric options over predict, memory, plan, sensitivity, scale, collective and
stragglers; 126 sweep / scenario cases (empty and 200,000-item lists, 1e12 GPUs, anchor and merge-key bombs, a
sweep naming itself, /dev/zero, a folder, a FIFO, a symlink loop, a dangling link, /proc/self/mem and '-' as each
spec, and -o / --plot at an input, a folder, /dev/full, /proc, a FIFO, '/' and ''); 31 model folders, check,
schema, hardware, calibrate and stragglers --samples files; 66 strategy YAML / JSON files by predict and plan: 813
processes in all. Everything else held the contract; the three findings are below.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_hostile_inputs import no_hang, refused  # noqa: F401 (no_hang: autouse)

from scalemodel.specs.hf import from_hf_config

ROOT = Path(__file__).resolve().parent.parent
FALCON_7B = json.loads((ROOT / "tests" / "data" / "hf" / "falcon-7b" / "config.json").read_text())


# --- a Falcon config's num_ln_in_parallel_attn, read with ``or`` and not checked ------------------------------------
# specs/hf.py took ``cfg.get("num_ln_in_parallel_attn") or <default>`` as the workload's norms_per_layer: a string "2"
# was coerced by the spec and priced, 0 fell back to the default without a word, and -5, 3, 1.5 or true were refused
# as "norms_per_layer: ...", a field the config.json does not have. Now the key is read as the other integer keys
# are (named, 1 or 2), and counted as transformers builds the block.
@pytest.mark.parametrize(("value", "said"), [
    ("2", "expected an integer, got '2'"), (0, "0 is out of range"), (-5, "-5 is out of range"),
    (3, "3 is out of range"), (1.5, "expected an integer, got '1.5'"), (True, "expected an integer, got 'True'")])
def test_falcon_norm_count_is_checked_at_its_key(cli: Any, tmp_path: Path, value: Any, said: str) -> None:
    folder = tmp_path / "falcon"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**FALCON_7B, "num_ln_in_parallel_attn": value}))
    line = refused(cli, "memory", "-m", str(folder), "-c", "dgx-h100", "-n", "8", "--json",
                   inputs=(folder / "config.json",))
    assert f"num_ln_in_parallel_attn: {said}" in line, line
    assert "an integer from 1 to 2" in line or "a positive integer" in line, line
    assert "norms_per_layer" not in line, line


@pytest.mark.parametrize(("parallel", "new_arch", "given", "norms"), [
    # transformers@00dcc6dd models/falcon/modeling_falcon.py FalconDecoderLayer.__init__: without parallel_attn,
    # input_layernorm and post_attention_layernorm whatever num_ln_in_parallel_attn says (the old ``or`` took 1)
    (False, False, 1, 2), (False, False, None, 2),
    # with it: ln_attn and ln_mlp when the value is 2 (null is 2 under new_decoder_architecture), else input_layernorm
    (True, False, None, 1), (True, True, None, 2), (True, True, 1, 1), (True, True, 2, 2), (True, False, 2, 2)])
def test_falcon_norms_follow_transformers(parallel: bool, new_arch: bool, given: int | None, norms: int) -> None:
    cfg = {**FALCON_7B, "parallel_attn": parallel, "new_decoder_architecture": new_arch,
           "num_ln_in_parallel_attn": given}
    if new_arch:
        cfg["num_kv_heads"] = 1  # falcon-7b's 71 heads
    assert from_hf_config(cfg, "falcon")["norms_per_layer"] == norms


# --- a DeepSpeed offload device that DeepSpeed refuses ---------------------------------------------------------------
# deepspeed_config.py warned "zero_optimization.offload_optimizer.device tape (CPU/NVMe offload is not modelled)" for
# any value but "none" or "" (and took "" as none): DeepSpeed's config refuses every value outside its
# OffloadDeviceEnum (deepspeedai/DeepSpeed@1978617c deepspeed/runtime/zero/offload_config.py: none, cpu, nvme).
@pytest.mark.parametrize("section", ["offload_optimizer", "offload_param"])
@pytest.mark.parametrize("device", ['"tape"', '""', "5", '"CPU"', "true"])
def test_an_offload_device_deepspeed_refuses_is_refused(cli: Any, tmp_path: Path, section: str, device: str) -> None:
    path = tmp_path / "ds.json"
    path.write_text(f'{{"zero_optimization": {{"stage": 3, "{section}": {{"device": {device}}}}}}}')
    line = refused(cli, "predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "64", "--json", "--strategy", str(path),
                   inputs=(path,))
    assert f"ds.json: zero_optimization.{section}.device: unknown offload device" in line, line
    assert '"cpu", "nvme" or "none"' in line, line


# offload35: device cpu is read as strategy offload_states (docs/model.md#state-offload); nvme stays not modelled
@pytest.mark.parametrize(("device", "warned", "states"), [('"cpu"', False, "optimizer"), ('"nvme"', True, "none"),
                                                          ('"none"', False, "none"), ("null", False, "none")])
def test_the_three_offload_devices_are_read(cli: Any, tmp_path: Path, device: str, warned: bool, states: str) -> None:
    path = tmp_path / "ds.json"
    path.write_text(f'{{"zero_optimization": {{"stage": 3, "offload_optimizer": {{"device": {device}}}}}}}')
    r = cli("predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "64", "--json", "--strategy", str(path))
    assert r.code == 0, r.err
    assert ("(NVMe offload is not modelled)" in r.err) is warned, r.err
    assert json.loads(r.out)["strategy"]["offload_states"] == states


# --- a --set path that indexes a list with brackets ---------------------------------------------------------------
# '--set cluster.tiers[0].latency=1us' (jq / Python indexing) was "unknown key 'tiers[0]'; did you mean 'tiers'?",
# naming the list the user did write and not how its item is written (after a dot: an index or the item's name).
@pytest.mark.parametrize(("path", "fixed"), [
    ("cluster.tiers[0].latency=1us", "cluster.tiers.0.latency"),
    ("cluster.tiers[-1].latency=1us", "cluster.tiers.0.latency"),
    ("cluster.tiers[ib-leaf].efficiency=0.5", "cluster.tiers.ib-leaf.efficiency"),
    ("strategy.stage_layers[0]=3", "strategy.stage_layers.0")])  # a list the strategy has not set: its declared type
def test_a_bracket_index_in_a_set_path_says_how_to_index(cli: Any, path: str, fixed: str) -> None:
    line = refused(cli, "predict", "-m", "llama2-7b", "-c", "dgx-h100", "-n", "64", "--json", "--set", path)
    assert "brackets do not index a list in a --set path" in line, line
    assert line.endswith(f"its index from 0 or its name: {fixed}"), line


def test_the_dotted_index_it_suggests_is_read(cli: Any) -> None:
    """The suggested path sets the item: the leaf tier's latency from its name and from its index alike."""
    ring = ("predict", "-m", "llama2-7b", "-c", "dgx-h100", "-n", "64", "--json", "--algo", "ring")
    by_name = cli(*ring, "--set", "cluster.tiers.ib-leaf.latency=1ms")
    by_index = cli(*ring, "--set", "cluster.tiers.1.latency=1ms")
    plain = cli(*ring)
    assert by_name.code == by_index.code == plain.code == 0, (by_name.err, by_index.err)
    name, index, base = ({k: v for k, v in json.loads(r.out).items() if k != "inputs"}  # inputs echo the --set
                         for r in (by_name, by_index, plain))
    assert name == index != base


def test_a_key_that_is_not_a_list_keeps_the_unknown_key_refusal(cli: Any) -> None:
    line = refused(cli, "predict", "-m", "llama2-7b", "-c", "dgx-h100", "-n", "64", "--json", "--set",
                   "model.layers[0]=1")
    assert "unknown key 'layers[0]'" in line, line
