"""Hostile-input round 30: what this round's fuzzing found beyond rounds 6-29. The CLI contract is
test_hostile_inputs.py's: exit 2, one ``error:`` line naming the file / field / option, what was wrong and what is
allowed, nothing on stdout, no input changed.

The corpus (~9,200 cases, in-process under a 20 s CPU guard, ~150 more by hand in processes): 1,059 --set values of
the newest fields (strategy.offload_tensors x every recompute module, offload_layers on five clusters, bf16_layers x
precision x fp8_recipe, nvfp4_disable, module_precision, fp8_attention, fp4_param_gather) checked for nan / inf /
negative output; 2,604 hostile option values (nan, -0, 1e308, subnormals, 5,000 digits, '1_000', 0x10, Arabic and
full-width digits, zero-width / bidi / NUL / ESC characters, units) on every option of collective, calibrate,
stragglers, memory, plan, scale, sensitivity and check; 3,326 leaf mutations (0, -1, 1e-300, 1e300, nan, null, true,
[], {}, 10**30, unit strings) of every field of the gaudi2, gb300, tpu-v6e and mi355x accelerator files and their
clusters (gaudi2-8, gb300-nvl72, tpu-v6e-pod, mi355x-8), priced by predict and collective; 980 JSON files (cluster,
HuggingFace config.json, DeepSpeed config, strategy) with 1e999, -0.0, 30-digit integers and \\u escapes in every
field, the text output scanned for control characters; 252 --set paths (list indexes into offload_tensors /
nvfp4_disable, tiers by -1 / 99 / 1e0 / full-width digits, attention_releases keys holding dots, empty parts) at three
precisions on gb300; 660 Megatron-LM launch flags of the newest fields (bf16 layers, CPU offload, fp4 / fp8 formats,
hierarchical CP) and torchtitan TOML values; 196 scenario and sweep files in JSON; scale --plot paths; names with
control, bidi and non-UTF-8 characters in specs, folders and file names, every command's stdout scanned.

Left, for the owner of scalemodel/report (not this round's files): ``hardware validate PATH`` prints the path raw in
its "ok: PATH is a valid ..." line (report.hardware.render_validation), where every other command writes a path through
errors.shown: a folder named with ESC colours the terminal, and one with a byte not UTF-8 is a UnicodeEncodeError
traceback (exit 1) under a strict UTF-8 stdout (PYTHONIOENCODING=utf-8, or a UTF-8 locale Python does not run in
surrogateescape). Not changed, as YAML allows them too: bidi controls (U+202E) and NEL (U+0085) in a spec's name reach
the text output raw (errors and warnings write them as escapes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT
from test_hostile_inputs import no_hang, refused  # noqa: F401 (no_hang: autouse)

PREDICT = ["predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "8"]
ALLOWED = "; printable text (no NUL or control characters; tab and newline are fine)"
CLUSTER = {"kind": "cluster", "name": "c", "accelerator": "h100-sxm", "gpus_per_node": 8,
           "tiers": [{"name": "nv", "span": 8, "bandwidth": "450 GB/s", "latency": "2 us", "efficiency": 0.8}]}


# --- a JSON string holding a character YAML refuses -------------------------------------------------------------------
# A spec read as JSON (a cluster.json, a HuggingFace config.json, a DeepSpeed or strategy .json, an nccl-tests -J log)
# took any character written as \uXXXX (or \b, \f, or a C1 control raw), where the YAML reader refuses them in a string
# (yamlread.StrictConstructor.construct_core_str): a cluster.json's "name": "\u001b[31m" reached the terminal from
# predict's title as an escape sequence, "\u0000" wrote a NUL there, and a lone surrogate "\ud800" made the text
# output (predict, collective, hardware show / validate) a UnicodeEncodeError traceback with exit 1. Now
# specs.loader.load_json refuses them as YAML does, at the file's line and the key path.

ESCAPES = [("\\u001b[31m", "U+001B"), ("\\ud800", "U+D800"), ("\\udfff\\ud800", "U+DFFF"), ("\\u0000", "U+0000"),
           ("\\u009b", "U+009B"), ("\\b", "U+0008"), ("\\u007F", "U+007F"), ("\\uffff", "U+FFFF")]


def _cluster_json(tmp_path: Path, name: str) -> Path:
    f = tmp_path / "c.json"
    f.write_text(json.dumps(CLUSTER, indent=1).replace('"name": "nv"', f'"name": "{name}"'))
    return f


@pytest.mark.parametrize("escape, char", ESCAPES)
@pytest.mark.parametrize("command", [["predict", "-m", "llama3-8b", "-n", "8"], ["collective", "-n", "8"],
                                     ["hardware", "validate"], ["hardware", "show"]])
def test_a_json_cluster_name_with_a_control_character_is_refused(cli, tmp_path, escape: str,  # type: ignore[no-untyped-def]
                                                                 char: str, command: list[str]) -> None:
    f = _cluster_json(tmp_path, "a" + escape + "b")
    args = [*command, str(f)] if command[0] == "hardware" else [*command, "-c", str(f)]
    refused(cli, *args, inputs=(f,), match=f"error: {f}:8: tiers[0].name: character {char} (written as an escape) "
                                          f"is not allowed in a string{ALLOWED}")


def test_a_raw_c1_control_in_a_json_string_is_refused(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = _cluster_json(tmp_path, "a\u009bb")  # JSON's decoder refuses raw C0 controls in a string only
    refused(cli, *PREDICT[:3], "-n", "8", "-c", str(f), inputs=(f,),
            match=f"error: {f}:8: tiers[0].name: character U+009B is not allowed in a string{ALLOWED}")


def test_a_control_character_in_a_json_key_is_named_escaped(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A key is not refused for it (a third-party config keeps its unread keys): it is named as an unknown key, the
    character written as its escape."""
    f = tmp_path / "k.json"
    f.write_text(json.dumps({**CLUSTER, "k\u0000ey": 1}, indent=1))
    refused(cli, *PREDICT[:3], "-n", "8", "-c", str(f), inputs=(f,), match="unknown key 'k\\x00ey'")


@pytest.mark.parametrize("name", ["a\\ud83d\\ude00b", "a\\\\u0007b", "a\\tb", "caf\\u00e9"])
def test_printable_json_escapes_are_still_read(cli, tmp_path, name: str) -> None:  # type: ignore[no-untyped-def]
    """A surrogate pair (one character beyond U+FFFF), an escaped backslash before 'u', a tab and a Latin letter."""
    f = _cluster_json(tmp_path, name)
    r = cli("hardware", "validate", str(f))
    assert r.code == 0 and r.out.startswith("ok: "), r.err


@pytest.mark.parametrize("route", ["hf", "deepspeed", "strategy", "nccl"])
def test_every_json_reader_refuses_them(cli, tmp_path, route: str) -> None:  # type: ignore[no-untyped-def]
    if route == "hf":
        f = tmp_path / "m" / "config.json"
        f.parent.mkdir()
        cfg = json.loads((ROOT / "tests/data/hf/Meta-Llama-3-8B/config.json").read_text())
        f.write_text(json.dumps({**cfg, "model_type": "llama\u001b", "k\u001b": 1}))
        args, where = ["predict", "-c", "dgx-h100", "-n", "8", "-m", str(f.parent)], f"error: {f}:1: model_type: "
    elif route in ("deepspeed", "strategy"):
        f = tmp_path / "s.json"
        doc = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1, "x": "\u001b"}} \
            if route == "deepspeed" else {"strategy": {"tp": 2, "schedule": "1f1b\u001b"}}
        f.write_text(json.dumps(doc))
        key = "zero_optimization.x" if route == "deepspeed" else "strategy.schedule"
        args, where = [*PREDICT, "--strategy", str(f)], f"error: --strategy: {f}:1: {key}: "
    else:
        f = tmp_path / "n.json"
        f.write_text((ROOT / "tests/data/nccl/synthetic_json.json").read_text()
                     .replace('"test": "all_reduce"', '"test": "all_reduce\\u001b"'))
        args, where = ["calibrate", str(f), "-c", "dgx-a100"], f"error: {f}:1: config.test: "
    refused(cli, *args, "--json", inputs=(f,),
            match=where + "character U+001B (written as an escape) is not allowed in a string" + ALLOWED)


# --- a HuggingFace model named by a folder or file name that holds a control character --------------------------------
# A config.json's model is named by its folder (or a config file by its stem); a folder named "a\x1b[31mb" put the
# escape sequence raw into the title of predict / memory / plan on stdout, and one with a byte not UTF-8 (os.fsdecode's
# surrogate) a lone surrogate there. The name is now the folder's name with them written as escapes (errors.one_line),
# as errors and --json already wrote the path.

@pytest.mark.parametrize("folder, said", [("a\x1b[31mb\x07c", "a\\x1b[31mb\\x07c"), ("a\u202eb", "a\\u202eb"),
                                          ("b\udcffc", "b\\xffc")])
@pytest.mark.parametrize("config_file", [False, True])
def test_a_model_named_by_its_folder_is_shown_escaped(cli, tmp_path, folder: str, said: str,  # type: ignore[no-untyped-def]
                                                      config_file: bool) -> None:
    cfg = (ROOT / "tests/data/hf/Meta-Llama-3-8B/config.json").read_bytes()
    if config_file:
        model = tmp_path / f"{folder}.json"
    else:
        (tmp_path / folder).mkdir()
        model = tmp_path / folder / "config.json"
    try:
        model.write_bytes(cfg)
    except UnicodeEncodeError:  # pragma: no cover - a file system that takes no such name
        pytest.skip("the file system refuses the name")
    r = cli("predict", "-c", "dgx-h100", "-n", "8", "-m", str(model if config_file else model.parent))
    assert r.code == 0, r.err
    title = r.out.splitlines()[0]
    assert title.startswith(f"{said} on 8 x dgx-h100"), title
    assert not any(c in r.out for c in "\x1b\x07\u202e\udcff"), title
