"""Hostile-input round 29: round 28's leftovers (a help text that stdout refused, the rule across two fields read
through a second route) and what this round's fuzzing found. The CLI contract is test_hostile_inputs.py's: exit 2,
one ``error:`` line naming the file / field / option, what was wrong and what is allowed, nothing on stdout, no input
changed.

The corpus (~7,800 cases, in-process under a 20 s guard, ~80 more by hand in processes): 884 --set values of the
newest fields (training.fp8_attention with fp4, nvfp4_disable, module_precision, strategy.fp4_param_gather) on
Blackwell and off it, on predict / memory / plan / scale / sensitivity; 2,548 wrong-typed --set values (null, [], {},
nan, 1e308, 30-digit ints, escapes) on every field of strategy, training, cluster, a tier, the accelerator and the
model; 192 encodings (BOM, CRLF, CR, UTF-16, tabs, NBSP, U+2028, NEL, Latin-1, a zero-width key) of every file kind;
145 output paths (an input by symlink, hard link, ../ and // spellings, FIFOs, /dev/full, folders, missing folders);
306 `calibrate runs` sets (one run, repeats, 1e-300 / 1e300 / -0 / nan times, mixed clusters and models, CSV quirks,
fp4 runs) x --factors / --predict-at / --out; 616 env cases (COLUMNS 0, -5, 1, 1e20, Arabic digits; NO_COLOR,
TERM=dumb, PYTHONIOENCODING=ascii) x 13 commands; 300 `check` thresholds (nan, -1, inf, units), plan constraints that
exclude everything, sweeps of 4,485 plans and 1,584 strategies; 507 nccl-tests logs (truncated, units in sizes, two
tests, mixed types, 30-digit sizes, ANSI colour, JSON truncated / NaN / deep); 221 bad files (FIFO, folder,
/dev/zero, 8 GiB sparse, binary, empty, dangling and looping links, /proc) behind every reference (runs' cluster and
log, a sweep's model, a cluster's accelerator, extends, a scenario's model, an HF folder, .args); 1,262 hostile
option values; 388 odd names (control characters, 100,000 characters, URLs, '--').

Left, for the owner of scalemodel/report (not this round's files): ``COLUMNS=25 scalemodel hardware show dgx-h100``
(42 of the 90 built-in specs at COLUMNS 20 or 25) is a yaml.scanner.ScannerError traceback: report.hardware.yaml_within
folds a line into a plain scalar whose continuation holds ": ", and its check ``yaml.safe_load(text) == data`` raises
instead of falling back to PyYAML's own folding.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT
from test_hostile_inputs import no_hang, refused  # noqa: F401 (no_hang: autouse)

from scalemodel.errors import InputError
from scalemodel.specs import StrategySpec, TrainingSpec
from scalemodel.specs.loader import validate

PREDICT = ["predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "64", "--json"]
FULL = ("error: stdout: cannot write the result: No space left on device; a stdout that takes it: a terminal, a pipe, "
        "or a file on a disk with space\n")


def _scalemodel(*args: str, stdout: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scalemodel", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=120)


# --- --help into a stdout that refuses it -----------------------------------------------------------------------------
# `scalemodel --help > /dev/full` (and every command's and group's --help) exited 0 with nothing written and nothing
# said: argparse's help action writes through ArgumentParser._print_message, which drops an OSError, then exits 0.
# The help is now written as every result is (commands.args._Help), so a full disk is one error line and exit 2, and a
# pipe closed early stays exit 0. --version, a group without its subcommand and `schema` were already refused.

HELPS = [["--help"], ["predict", "--help"], ["hardware", "--help"], ["hardware", "show", "--help"],
         ["calibrate", "--help"], ["schema", "--help"], ["sweep", "--help"], ["predict", "--tp", "2", "--help"]]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("args", [*HELPS, ["--version"], ["hardware"], ["schema", "workload"],
                                  ["--show-completion", "bash"]])
def test_a_help_that_stdout_refuses_is_one_error_line(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        r = _scalemodel(*args, stdout=full.fileno())
    assert (r.returncode, r.stderr) == (2, FULL)


@pytest.mark.parametrize("args", [["--help"], ["predict", "--help"]])
def test_a_help_into_a_pipe_closed_early_ends_with_exit_0(args: list[str]) -> None:
    read, write = os.pipe()
    os.close(read)
    try:
        r = _scalemodel(*args, stdout=write)
    finally:
        os.close(write)
    assert (r.returncode, r.stderr) == (0, "")


@pytest.mark.parametrize("args", HELPS)
def test_the_help_is_still_printed_and_exits_0(cli, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    r = cli(*args)
    assert r.code == 0 and r.err == "" and r.out.startswith("usage: scalemodel") and "--help" in r.out, r


# --- a rule across two fields: one route --------------------------------------------------------------------------
# commands.common.validate_written called specs.base.convert and specs.loader.validation_error itself (loader.validate
# unwrapped) to read SpecError's `also`, the other field of the rule; the InputError that loader.validate raises now
# carries it. The messages are test_hostile28's, unchanged.

@pytest.mark.parametrize("model, raw, also", [
    (StrategySpec, {"megatron_ddp": True, "zero": "3"}, ("zero",)),
    (StrategySpec, {"fsdp_reshard_after_forward": False, "zero": "1"}, ("zero",)),
    (TrainingSpec, {"fp8_attention": True}, ("precision",)),
    (StrategySpec, {"tp": 0}, ()),
])
def test_validate_says_the_other_field_of_a_rule(model: type, raw: dict[str, object],
                                                 also: tuple[str, ...]) -> None:
    with pytest.raises(InputError) as exc:
        validate(model, raw, prefix=["x"])
    assert exc.value.also == also and exc.value.at("f.yaml").also == also


# --- a text field given something that is not text -------------------------------------------------------------------
# `schedule:` left empty in a strategy file (null), or `--set strategy.sync=5`, was "Input should be a valid string (got
# None); a string": the field's vocabulary unnamed. Now the parser's own allowed text is said (specs.training._text,
# specs.cluster._PROTOCOL).

@pytest.mark.parametrize("item, allowed", [
    ("strategy.schedule=null", "; use 1f1b, interleaved:V (V from 2 to 999999999), gpipe or zb"),
    ("strategy.sync=5", "; bsp | backup:B | asp | ssp:S | local:H | hier:G | hier:G:H (B, S >= 0"),
    ("strategy.algorithm=[]", "; use auto, ring, tree, rhd, rd, direct or hierarchical"),
    ("strategy.compression=null", "; use none, fp16, bf16, int8 or topk:FRACTION"),
    ("strategy.dp_comm=1", "; use allreduce or ps:K[:colocated|:dedicated]"),
    ("training.sequence_lengths=5", "; use fixed (every sample seq_len tokens, e.g. packed) or uniform:LO:HI"),
    ("cluster.tiers.1.protocol=[]", "; one of nvlink, nvswitch, xgmi"),
])
def test_a_text_field_given_no_text_names_its_values(cli, item: str, allowed: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, *PREDICT, "--set", item)
    assert line.startswith(f"error: --set {item.split('=')[0]}: Input should be a valid string"), line
    assert allowed in line and not line.endswith("; a string"), line


# --- a sweep's strategy given a training field, its training a strategy field -----------------------------------------
# `strategies: [{precision: fp4}]` was "unknown key 'precision'; did you mean 'compression'?": a sweep's strategy entry
# (SweepStrategy) extends StrategySpec, and the hint that names the other section looked up the class by its own name.
# A strategy field under the sweep's training: named "strategy.tp", a section a sweep does not have.

@pytest.mark.parametrize("body, said", [
    ("strategies: [{precision: fp4, tp: 2}]\n",
     ":6: strategies[0].precision: unknown key 'precision'; precision is a training field (training.precision); "),
    ("strategies: [best, {label: x, fp8_attention: true}]\n",
     ":6: strategies[1].fp8_attention: unknown key 'fp8_attention'; fp8_attention is a training field "
     "(training.fp8_attention); "),
    ("training: {tp: 2}\n",
     ":6: training.tp: unknown key 'tp'; tp is a strategy field (an entry of strategies: [{tp: ...}]); "),
])
def test_a_sweep_field_in_the_wrong_section_says_where_it_goes(cli, tmp_path, body: str,  # type: ignore[no-untyped-def]
                                                               said: str) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("kind: sweep\nname: s\nmodels: [llama3-8b]\nclusters: [dgx-b200]\ngpus: [64]\n" + body)
    line = refused(cli, "sweep", str(f), "--json", "-j", "1", inputs=(f,))
    assert line.startswith(f"error: {f}{said}") and "did you mean" not in line, line


# --- a strategy file none of whose keys is read ----------------------------------------------------------------------
# A mapping whose every key is unknown (`stratgy: {tp: 8}`, a stray YAML such as /proc/self/status, the JSON
# {"stratgy": ...}) warned "settings not used: stratgy" and priced the default strategy with exit 0, where an empty
# file is refused as "not a strategy file". A file with one key read still warns about the others (round 14, 22g).

@pytest.mark.parametrize("name, text, said", [
    ("s.yaml", "stratgy:\n  tp: 8\n", "not a strategy file: none of its keys is a strategy or training setting "
                                      "(stratgy); strategy: and training: mappings, or their fields at the top"),
    ("s.yaml", "".join(f"k{i}: {i}\n" for i in range(9)), "(k0, k1, k2, k3, k4, k5 and 3 more)"),
    ("s.yaml", "gpus: 64\n", "(gpus (the command's --gpus is the GPU count))"),
    ("s.json", '{"stratgy": {"tp": 2}}', "not a strategy file: none of its keys is a DeepSpeed config's or a strategy "
                                         "setting (stratgy); a DeepSpeed config (train_batch_size, zero_optimization"),
    ("s.json", '{"' + "k" * 5000 + '": 1}', f"setting ({'k' * 60}); "),
])
@pytest.mark.parametrize("command", [["predict"], ["plan"], ["memory"], ["scale", "--best"]])
def test_a_strategy_file_with_nothing_read_is_refused(cli, tmp_path, name: str, text: str, said: str,  # type: ignore[no-untyped-def]
                                                      command: list[str]) -> None:
    f = tmp_path / name
    f.write_text(text)
    line = refused(cli, *command, "-m", "llama3-8b", "-c", "dgx-h100", "-n", "64", "--strategy", str(f), "--json",
                   inputs=(f,))
    assert line.startswith(f"error: --strategy: {f}: not a strategy file: ") and said in line, line


@pytest.mark.parametrize("name, text", [("s.yaml", "kind: strategy\nname: x\n"), ("s.yaml", "strategy:\nbogus: 1\n"),
                                        ("s.json", '{"steps_per_print": 10, "bogus": 1}'), ("s.json", "{}")])
def test_a_strategy_file_that_reads_nothing_on_purpose_still_prices(cli, tmp_path, name: str,  # type: ignore[no-untyped-def]
                                                                    text: str) -> None:
    f = tmp_path / name
    f.write_text(text)
    r = cli("predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "64", "--strategy", str(f), "--json")
    assert r.code == 0 and r.out.startswith("{"), r.err


# --- "a accelerator spec" ---------------------------------------------------------------------------------------------

def test_an_empty_accelerator_file_says_an_accelerator(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    acc, cl = tmp_path / "acc.yaml", tmp_path / "cl.yaml"
    acc.write_text("")
    cl.write_text("kind: cluster\nname: c\naccelerator: acc.yaml\ngpus_per_node: 8\ntiers:\n"
                  "  - {name: nv, span: 8, bandwidth: 450 GB/s, latency: 2 us, efficiency: 0.8}\n")
    refused(cli, "predict", "-m", "llama3-8b", "-n", "8", "-c", str(cl), inputs=(cl,),
            match=f"error: {cl}:3: accelerator: {acc}: file is empty; an accelerator spec (a YAML mapping)")


# --- '--' as an option's value ---------------------------------------------------------------------------------------
# argparse takes the end-of-options marker out of an option's words, so `-c --` (or --cluster=--, -c--) gave the option
# the empty list []: an AttributeError traceback in the spec reader ("'list' object has no attribute 'strip'") for a
# text option, "--tp: Input should be a valid integer (got [])" for a number, and a list inside --set's list.

@pytest.mark.parametrize("args, flag", [
    (["predict", "-c", "--", "-m", "llama3-8b", "-n", "8"], "-c/--cluster"),
    (["predict", "-c", "dgx-h100", "-m", "--", "-n", "8"], "-m/--model"),
    (["predict", "-c-- ", "-m", "llama3-8b", "-n", "8"], None),
    (["predict", "-c--", "-m", "llama3-8b", "-n", "8"], "-c/--cluster"),
    (["memory", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "8", "--tp=--"], "--tp"),
    (["predict", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "8", "--set", "strategy.tp=2", "--set", "--"], "--set"),
    (["plan", "-c", "dgx-h100", "-m", "llama3-8b", "-n", "8", "--strategy", "--"], "--strategy"),
    (["scale", "--scenario", "--"], "--scenario"),
    (["stragglers", "-n", "8", "--mean", "--"], "--mean"),
    (["collective", "-c", "dgx-h100", "-n", "8", "--size", "--"], "--size"),
    (["calibrate", "runs", "x.yaml", "--out", "--"], "--out"),
])
def test_the_end_of_options_marker_is_no_option_value(cli, args: list[str], flag: str | None) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, *args, "--json")
    if flag is not None:
        assert f": argument {flag}: expected one argument, not '--' (the end of the options); see `scalemodel " in line
