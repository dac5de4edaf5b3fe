"""Hostile-input round 11: the newest options (loss_impl, attention_kernel and its fitted curves, Megatron's
cross-entropy switches), sweeps whose grid would not finish, measured runs given as a rate, and errors whose long
echoed value pushed out what is allowed.

Each case is one finding (a switch read as on when given "false", a field located at the mapping around it, a
message cut before its rule, a value that made a time infinite, a grid that ran for days); the contract is
test_hostile_inputs.py's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_hostile_inputs import MEG_BASE, accepted, megatron_launch, no_hang, refused  # noqa: F401 (no_hang: autouse guard)

BASE = MEG_BASE


# --- Megatron-LM's --cross-entropy-loss-fusion is a switch ---------------------------------------------------------

@pytest.mark.parametrize("flags, got", [
    ("--cross-entropy-loss-fusion=false", "'=false'"),
    ("--cross-entropy-loss-fusion false", "'false'"),
    ("--cross-entropy-loss-fusion 0", "'0'"),
    ("--cross-entropy-loss-fusion=true --cross-entropy-fusion-impl te", "'=true'"),
])
def test_cross_entropy_loss_fusion_with_a_value_is_refused(cli, tmp_path, flags: str, got: str) -> None:  # type: ignore[no-untyped-def]
    """``--cross-entropy-loss-fusion=false`` was priced as the fused cross-entropy (loss_impl megatron_fused): the
    reader listed the switch among the flags that take a value, so it took ``false`` as one and only asked whether
    the flag was there. Megatron-LM declares it ``action='store_true'`` (megatron/training/arguments.py), like the
    switches round 10 refuses with a value."""
    f = megatron_launch(tmp_path, flags)
    refused(cli, "predict", *BASE, "--strategy", str(f), "--json", inputs=(f,),
            match=f"--cross-entropy-loss-fusion: a switch takes no value, got {got}; --cross-entropy-loss-fusion "
                  "alone to turn it on")


@pytest.mark.parametrize("flags, impl", [
    ("--cross-entropy-loss-fusion", "megatron_fused"),
    ("--cross-entropy-loss-fusion --cross-entropy-fusion-impl te", "te"),
    ("--cross-entropy-fusion-impl te --cross-entropy-loss-fusion", "te"),
    ("", "megatron"),
])
def test_cross_entropy_loss_fusion_alone_still_turns_it_on(cli, tmp_path, flags: str, impl: str) -> None:  # type: ignore[no-untyped-def]
    f = megatron_launch(tmp_path, flags)
    assert accepted(cli, "predict", *BASE, "--strategy", str(f))["strategy"]["loss_impl"] == impl


def test_cross_entropy_loss_fusion_before_the_script_is_on(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A switch consumes no word: the script after it stays a positional (and the switch is on)."""
    f = tmp_path / "run.sh"
    f.write_text("torchrun --cross-entropy-loss-fusion pretrain_gpt.py --micro-batch-size 1\n")
    assert accepted(cli, "predict", *BASE, "--strategy", str(f))["strategy"]["loss_impl"] == "megatron_fused"


def test_megatron_switches_are_not_also_value_flags() -> None:
    """The reader's two lists overlapped (five switches were in both): one flag, one arity."""
    from scalemodel.specs.megatron_args import _MEG_KNOWN_VALUE, _MEG_STORE_TRUE

    assert not set(_MEG_STORE_TRUE) & _MEG_KNOWN_VALUE


# --- a long echoed value pushed what is allowed out of the line -------------------------------------------------

def test_a_long_recompute_modules_value_keeps_what_is_allowed(cli) -> None:  # type: ignore[no-untyped-def]
    """``--set strategy.recompute_modules=mlp,mlp,...`` (3000 words) ended in "error: strategy:
    recompute_modules='mlp,mlp,...ml...": the rule's text was cut at 300 characters together with the value, so
    neither what was wrong nor what is allowed was left."""
    mods = ",".join(["mlp"] * 3000)
    line = refused(cli, "predict", *BASE, "--set", f"strategy.recompute_modules={mods}", "--json",
                   match="needs recompute: selective (got 'none'); add recompute: selective, or leave "
                         "recompute_modules out")
    assert len(line) < 400, line


def test_a_long_tier_name_in_a_cluster_rule_keeps_what_is_allowed(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A rule's own "what; allowed" text (tier names must be unique, spans must grow) was cut as one: two 400-
    character tier names left "...nnnn..." and no rule. The allowed part is now kept apart from the cut."""
    name = "n" * 400
    f = tmp_path / "c.yaml"
    f.write_text("kind: cluster\nname: c\naccelerator: h100-sxm\ngpus_per_node: 8\ntiers:\n"
                 f"  - {{name: {name}, span: 8, bandwidth: 1 GB/s, latency: 1 us, efficiency: 0.5}}\n"
                 f"  - {{name: {name}, span: 16, bandwidth: 1 GB/s, latency: 1 us, efficiency: 0.5}}\n")
    line = refused(cli, "hardware", "validate", str(f), inputs=(f,), match="...; a distinct name for each tier")
    assert "tier names must be unique" in line and len(line) < 500


# --- a bad value inside a mapping (attention_efficiency.<kernel>) was reported at the mapping --------------------

_ACC = ("kind: accelerator\nname: acc-x\nfamily: hopper\npeak_flops: {bf16: 989 TFLOP/s}\nmemory: 80 GB\n"
        "memory_bandwidth: 3.35 TB/s\nattention_efficiency:\n  fa3:\n    fwd: {FWD}\n"
        "    bwd: {attn_max: 0.7, seq_half: 600, head_half: 30}\n")


@pytest.mark.parametrize("fwd, field, match", [
    ("{attn_max: -0.9, seq_half: 300, head_half: 50}", "attn_max", "Input should be greater than or equal to 1e-06"),
    ("{attn_max: 1.5, seq_half: 300, head_half: 50}", "attn_max", "Input should be less than or equal to 1 (got 1.5)"),
    ("{attn_max: 0.9, seq_half: -300, head_half: 50}", "seq_half", "Input should be greater than or equal to 0"),
    ("{attn_max: 0.9, seq_half: 300, head_half: 50, tflops: 3}", "tflops", "unknown key 'tflops'"),
])
def test_a_bad_attention_curve_field_is_named(cli, tmp_path, fwd: str, field: str, match: str) -> None:  # type: ignore[no-untyped-def]
    """``attn_max: -0.9`` in an accelerator's attention_efficiency.fa3.fwd said "attention_efficiency: Input should
    be greater than 0 (got {'fa3': {'fwd': ...}}) ..." cut before what is allowed: msgspec names a mapping's key
    ``[...]``, so the error stopped at the mapping and echoed all of it."""
    f = tmp_path / "acc.yaml"
    f.write_text(_ACC.replace("{FWD}", fwd))
    line = refused(cli, "hardware", "validate", str(f), inputs=(f,),
                   match=f"{f}:9: attention_efficiency.fa3.fwd.{field}: {match}")
    assert "{'fa3'" not in line


def test_a_bad_attention_curve_set_on_the_command_line_is_named(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", *BASE, "--set", "accelerator.attention_efficiency.cudnn.fwd.attn_max=2", "--json",
            match="error: --set accelerator.attention_efficiency.cudnn.fwd.attn_max: Input should be less than or "
                  "equal to 1 (got 2); a number >= 1e-06 and <= 1")


def test_a_kernel_that_is_not_a_mapping_is_named(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "acc.yaml"
    f.write_text(_ACC.split("attention_efficiency:")[0] + "attention_efficiency:\n  fa3: [0.9, 300, 50]\n")
    refused(cli, "hardware", "validate", str(f), inputs=(f,),
            match="attention_efficiency.fa3: Input should be a valid mapping (got [0.9, 300, 50]); a mapping of "
                  "AttentionKernel fields")


# --- an efficiency of 1e-320 or a half point of 1e308 made a time infinite ---------------------------------------

@pytest.mark.parametrize("item, match", [
    ("accelerator.compute_efficiency.gemm_max=1e-320", "greater than or equal to 1e-06 (got 1e-320)"),
    ("accelerator.compute_efficiency.memory=1e-320", "greater than or equal to 1e-06 (got 1e-320)"),
    ("cluster.tiers.ib-leaf.efficiency=1e-320", "greater than or equal to 1e-06 (got 1e-320)"),
    ("accelerator.attention_efficiency.cudnn.bwd.attn_max=1e-320", "greater than or equal to 1e-06 (got 1e-320)"),
    ("accelerator.compute_efficiency.gemm_half_dim=1e308", "less than or equal to 1e+06 (got 1e+308)"),
    ("accelerator.attention_efficiency.cudnn.fwd.head_half=1e308", "less than or equal to 1e+06 (got 1e+308)"),
])
@pytest.mark.parametrize("command", ["predict", "plan"])
def test_efficiencies_that_make_a_time_infinite_are_refused_at_the_field(cli, command: str, item: str,  # type: ignore[no-untyped-def]
                                                                         match: str) -> None:
    """gemm_max 1e-320 (a subnormal, > 0 as the field asked) ended in "error: comm_s: a communication time is
    negative or not finite" and attn_max 1e-320 in "error: mean: mean is not finite: array([inf])", internal
    functions and no field; plan ranked the same input, and head_half 1e308 priced a step of 8e302 s."""
    field = item.split("=")[0]
    refused(cli, command, *BASE, "--set", item, "--json", match=f"error: --set {field}: Input should be {match}")


def test_the_smallest_efficiency_and_largest_half_point_still_price(cli) -> None:  # type: ignore[no-untyped-def]
    base = accepted(cli, "predict", *BASE)["step_time_s"]
    slow = accepted(cli, "predict", *BASE, "--set", "accelerator.compute_efficiency.gemm_max=1e-6", "--set",
                    "accelerator.attention_efficiency.cudnn.fwd.head_half=1e6")["step_time_s"]
    assert base < slow < 1e12  # slower by the efficiency, and finite


# --- sweeps: repeated entries and grids that would not finish ------------------------------------------------------

def _sweep(tmp_path: Path, body: str) -> Path:
    f = tmp_path / "s.yaml"
    f.write_text("kind: sweep\nname: t\nmodels: [gpt-1.7b]\nclusters: [dgx-h100]\n" + body)
    return f


@pytest.mark.parametrize("body, match", [
    ("gpus: [8, 16, 8]\n", "s.yaml:5: gpus: gpus[2]: 8 repeats gpus[0]"),
    ("gpus: [8]\nstrategies: [best, best]\n", "strategies: strategies[1]: best repeats strategies[0]"),
    ("gpus: [8]\nstrategies: [best, {tp: 2}, {tp: 2}]\n", "strategies[2]: the same strategy repeats strategies[1]"),
    ("gpus: [8]\nstrategies: [{label: a, tp: 2}, {label: a, tp: 4}]\n", "strategies[1]: label 'a' repeats"),
])
def test_a_repeated_sweep_entry_is_refused(cli, tmp_path, body: str, match: str) -> None:  # type: ignore[no-untyped-def]
    """``strategies: [best, best, ...]`` (1000 of them) x 1000 GPU counts was 1,000,000 plans, within the point
    bound, of which 1000 were distinct: the sweep ran for days and printed each row a thousand times."""
    f = _sweep(tmp_path, body)
    refused(cli, "sweep", str(f), "--json", inputs=(f,), match=match)


def test_distinct_sweep_entries_still_run(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = _sweep(tmp_path, "gpus: [8, 16]\nstrategies: [best, {label: a, tp: 2}, {label: b, tp: 2, zero: '1'}]\n")
    assert len(accepted(cli, "sweep", str(f), "-j", "1")["rows"]) == 6


def test_a_grid_past_the_point_bound_is_refused_before_running(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """1000 GPU counts x 1000 fixed strategies (1,000,000 points, the old bound) ran for hours and held ~3 GB of
    rows; the bound is now 100,000 points."""
    gpus = ", ".join(str(8 * (i + 1)) for i in range(1000))
    strategies = "".join(f"  - {{label: s{i}, tp: 1}}\n" for i in range(101))
    f = _sweep(tmp_path, f"gpus: [{gpus}]\nstrategies:\n{strategies}")
    refused(cli, "sweep", str(f), "--json", inputs=(f,),
            match="the grid has 101,000 points; at most 100,000 (split the study into several sweeps)")


def test_too_many_best_points_are_refused_before_running(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Each `best` point is a whole plan (0.25-1 s of CPU): 11 models x 1000 GPU counts = 11,000 plans."""
    gpus = ", ".join(str(8 * (i + 1)) for i in range(1000))
    models = ["gpt-1.7b", "gpt3-175b", "llama3-70b", "llama3-8b", "llama2-7b", "mistral-7b", "mixtral-8x7b",
              "llama3-405b", "gpt-76b", "resnet50", "vgg16"]
    f = tmp_path / "s.yaml"
    f.write_text(f"kind: sweep\nname: t\nmodels: [{', '.join(models)}]\nclusters: [dgx-h100]\ngpus: [{gpus}]\n")
    refused(cli, "sweep", str(f), "--json", inputs=(f,),
            match=f"{f}: strategies: the grid has 11,000 best points, each a whole plan")


# --- measured runs given as a rate -------------------------------------------------------------------------------

@pytest.mark.parametrize("rate, step", [("1e-300", "1.31e+305 s"), ("1e12", "1.31e-07 s")])
def test_a_token_rate_that_makes_no_step_is_refused(cli, tmp_path, rate: str, step: str) -> None:  # type: ignore[no-untyped-def]
    """``tokens_per_s: 1e-300`` was fitted as a step of 1.3e305 s (and the overhead factor to 1.3e305 s): step_time
    is bounded to 1e-6 .. 1e12 s, the step a rate stands for was not. 64 x 2048 tokens a step (gpt-1.7b's global
    batch of one sequence per GPU) / 1e-300 tokens/s = 1.31e305 s."""
    f = tmp_path / "r.csv"
    f.write_text(f"cluster,model,gpus,tokens_per_s\ndgx-h100,gpt-1.7b,64,{rate}\n")
    refused(cli, "calibrate", "runs", str(f), "--json", inputs=(f,),
            match=f"error: {f}: row 1: tokens_per_s: {float(rate):.3g} tokens per second is a step of {step} "
                  "(this run's 1.311e+05 tokens a step); a rate that makes a step of 1e-06 s to 1e+12 s")


def test_a_runs_csv_with_bare_cr_line_ends_reads(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A CSV saved with CR line ends was refused with the csv module's "do you need to open the file in
    universal-newline mode?"."""
    f = tmp_path / "r.csv"
    f.write_bytes(b"cluster,model,gpus,step_time\rdgx-h100,gpt-1.7b,64,1.5 s\rdgx-h100,gpt-1.7b,128,0.9 s\r")
    assert accepted(cli, "calibrate", "runs", str(f))["inputs"]["n_runs"] == 2


# --- stragglers --samples --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, match", [
    ("1e308\n1e308\n", "line 1: step time 1e+308 s is outside the physical range 1e-12 .. 1e+12 s; a step time within"),
    ("1\n1e-320\n", "line 2: step time 1e-320 s is outside the physical range"),
    ("-0\n1\n2\n", "line 1: step time '-0' must be a positive finite time"),
    ("1" * 5000 + "\n", "line 1: '" + "1" * 56 + "... is not a finite number; a finite quantity"),  # 60 shown
])
def test_samples_outside_a_time_range_are_refused_at_their_line(cli, tmp_path, text: str, match: str) -> None:  # type: ignore[no-untyped-def]
    """1e308 s samples ended in "error: stragglers: mean: mean is not finite: array(inf)", 1e-320 s in "a result is
    not finite", a first line of "-0" was read as a YAML list ("expected a list of step times"), and a 5000-digit
    sample was echoed whole, cutting the rule off the line."""
    f = tmp_path / "s.txt"
    f.write_text(text)
    refused(cli, "stragglers", "-n", "64", "--samples", str(f), "--json", inputs=(f,), match=f"{f}: {match}")


def test_a_yaml_list_of_samples_still_reads(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("- 1.0\n- 1.2\n- 0.9\n")
    assert accepted(cli, "stragglers", "-n", "64", "--samples", str(f))


# --- memory --workspace ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ws, match", [
    ("1e30B", "error: --workspace: 1e+30 B is outside the physical range 1 .. 1e+21 B"),
    ("-1GB", "error: --workspace: '-1GB' is negative; a size >= 0"),
])
def test_memory_workspace_outside_a_size_is_refused(cli, ws: str, match: str) -> None:  # type: ignore[no-untyped-def]
    """``--workspace 1e30B`` was added to every GPU's memory; ``-1GB`` was refused as "workspace: workspace has a
    negative or non-finite value", the engine's name for it."""
    refused(cli, "memory", *BASE, f"--workspace={ws}", "--json", match=match)


# --- accelerators, extends -----------------------------------------------------------------------------------------

def test_more_collective_units_than_compute_units_is_refused(cli) -> None:  # type: ignore[no-untyped-def]
    """``collective_units: 500`` on a 132-SM chip was priced as a share of 1 (clamped) without a word."""
    refused(cli, "predict", *BASE, "--set", "accelerator.collective_units=500", "--json",
            match="error: --set accelerator.collective_units: 500 is more than the chip's compute_units 132; 0 to 132")
    assert accepted(cli, "predict", *BASE, "--set", "accelerator.collective_units=132")["step_time_s"] > 0


def test_extends_of_another_kind_names_the_kind(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A cluster extending a transformer file was merged into it and refused as "unknown key 'layers'"."""
    (tmp_path / "m.yaml").write_text("kind: transformer\nname: m\nlayers: 2\nhidden: 64\nheads: 2\nvocab: 100\n"
                                     "seq_len: 64\n")
    f = tmp_path / "c.yaml"
    f.write_text("kind: cluster\nextends: m.yaml\n")
    refused(cli, "hardware", "validate", str(f), inputs=(f,),
            match=f"error: {f}: extends: 'm.yaml' is a transformer spec, this file a cluster spec; a cluster spec")


def test_extends_of_a_device_names_the_file_that_extends_it(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "c.yaml"
    f.write_text("kind: cluster\nextends: /dev/zero\n")
    refused(cli, "hardware", "validate", str(f), inputs=(f,),
            match=f"error: {f}: extends: /dev/zero: is a character device, not a regular file")


# --- control characters: one line, and no escape sequence reaches the terminal ------------------------------------

@pytest.mark.parametrize("name, shown", [("a\nb.yaml", "a\\nb.yaml"), ("\x1b[31mred.yaml", "\\x1b[31mred.yaml"),
                                         ("a\rb.yaml", "a\\rb.yaml"), ("a\x9bb.yaml", "a\\x9bb.yaml")])
def test_a_file_name_with_control_characters_is_one_escaped_line(cli, name: str, shown: str) -> None:  # type: ignore[no-untyped-def]
    """``-m $'a\\nb.yaml'`` printed "error: a" and "b.yaml: file not found: ..." on two lines; an ESC in a name went
    to the terminal as an escape sequence."""
    line = refused(cli, "predict", "-c", "dgx-h100", "-m", name, "-n", "8", "--json")
    assert line.startswith(f"error: {shown}: file not found") and "\x1b" not in line and "\x9b" not in line


def test_a_usage_error_with_a_line_break_is_one_line(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "x\ny", match="Got unexpected extra argument(s) (x\\ny)")


def test_an_escaped_control_character_in_a_yaml_string_is_refused(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A sweep label ``"a\\x1b[31mred"`` (escaped in double quotes; the YAML reader refuses the raw character) was
    printed into the sweep's table as a terminal escape sequence."""
    f = _sweep(tmp_path, 'gpus: [8]\nstrategies:\n  - {label: "a\\x1b[31mred", tp: 1}\n')
    refused(cli, "sweep", str(f), "-j", "1", inputs=(f,),
            match=f"{f}:7: strategies[0].label: character U+001B (written as an escape) is not allowed in a string; "
                  "printable text")


def test_tabs_and_newlines_in_yaml_strings_still_read(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "a.yaml"
    f.write_text('kind: accelerator\nname: "a\\tb"\ndescription: "x\\ny"\npeak_flops: {bf16: 1 TFLOP/s}\n'
                 "memory: 1 GB\nmemory_bandwidth: 1 TB/s\n")
    r = cli("hardware", "validate", str(f), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["name"] == "a\tb"  # YAML's double-quoted "\t" escape is a tab (YAML 1.2 5.7) (ux37)
