"""Hostile input, round 35 (fuzz35): what this round's fuzzing found beyond rounds 6-34. The CLI contract is
test_hostile_inputs.py's: exit 2, one ``error:`` line naming the file / field / option, what was wrong and what is
allowed, nothing on stdout, no input changed.

The corpus (in-process, each case under a 10 s wall guard, checked for exit 0/1/2, one ``error:`` line on exit 2,
nothing on stdout then, no traceback, strict JSON under ``json.loads(parse_constant=raise)``, no NaN / inf in any
output, no input changed; 48 more as subprocesses piped into ``head -1`` / ``head -c 1`` for SIGPIPE): 714 strategy
files (torchtitan TOML: 6 fields x 23 numbers, 13 format / control characters x 5 places, 21 appended tables, 12
raw byte files; Megatron-LM .args: 12 flags x 31 values, 13 characters x 5 places, 23 raw files; .sh scripts with
format characters), 2,151 cases over --set (21 paths x 22 values and 8 characters, 4 more commands), 13 string
options x 14 hostile spellings, 6 commands' numeric options x 16 numbers, collective sizes, 12 world sizes x 5
commands, 25 cluster files with 0 / negative / 1e300 / NaN tiers and GPUs per node, DeepSpeed JSON (5 keys x 16
values, 13 raw files), HuggingFace config.json (13 keys x 14 values), workload YAML (8 keys x 24 values); 354 output
paths (28 paths x calibrate --out, sweep -o, scale --plot: the input, a symlink to it, a folder, /dev/full, a read-
only folder, a missing folder, a path through a file, 300-character and 2,000-deep names, bidi and surrogate
names), calibrate runs files (YAML: 20 hostile runs x 2, --predict-at, --factors; 17 CSVs), nccl-tests logs (11
hostile cells, --ranks / --tolerance / --tier / --op / --algo extremes), 38 sweep files, stragglers (8
distributions x 5 cvs, 14 samples files, worker and backup counts), hardware show and schema names, 21 check
files; 245 plan --constraint / --allow / --objective / --sync-modes, scale --gpus / --mode / --critical-batch,
--set paths, strategy degrees to 1e8, schedules, precisions, ZeRO forms, TOML integers and strings, .sh scripts;
339 SweepStrategy -> StrategySpec round trips (engine/grid.py's model_validate: the one caller whose SpecError could
reach a user; none failed); 110 FIFO, device, 15 MiB and link-loop files as every file argument; 18
commands on a 1e8-GPU cluster and at 1e9 layers / batches, timed in CPU seconds. 3,640 invocations in all (and
the 339 round trips). Findings, each fixed where the input is read:

1. a bidirectional control, invisible format character or escaped control in a torchtitan TOML string
   (``flavor = "8B\\u202e"``, ``x = "\\u001b[31m"``), which YAML and JSON strings refuse, was accepted and echoed;
   in a Megatron-LM launch a U+200B inside a flag name made it a flag Megatron has not (warned "not used", tp 1
   priced): both now refused as YAML refuses them (files.refuse_unprintable_strings, the one walk of parsed JSON
   and TOML strings; the Megatron text as a whole, as its control-character check);
2. U+2028 / U+2029 (line and paragraph separators) in a spec string (``--set model.name=x<U+2028>y``) printed a
   table row across two lines: refused with the format characters (error lines already escaped them);
3. an empty option value was taken for the option left out: ``collective --size ''`` priced 1 GiB, ``calibrate
   --op ''`` read the log's own collective, and ``calibrate runs F --tier '' / --ranks 0`` passed the check that
   these belong to the nccl-tests form;
4. an empty path ('') was read as '.', the working folder ("'.' is a directory", a path not written), or as "not
   found" of no path: refused as an empty path wherever a path is first read (files.expand_user,
   files.refuse_trailing_slash, the stat of every reader);
5. a log within the 64 MiB byte limit but of millions of short lines held its reader for a minute of CPU (60 MiB
   of empty lines: 64 s in the nccl-tests reader; 30 Mi lines of "a": 34 s; a training log of them: 8.8 s): every
   log is now at most files.MAX_LOG_LINES (2,000,000) lines, counted in C as str.splitlines would split them,
   before a reader walks them (2 M lines of junk: 2.6 s of CPU on this loaded machine);
6. predict's "what would divide" detail of a global batch or layer count that does not divide listed divisors by
   trial of 1..n: --global-batch 100000001 on 64 GPUs took 3.7 s of CPU, 999999999 about ten times that; now by
   trial to sqrt(n) (engine.divisors), the same text, 0.4 s.

Found here, fixed after (rhdbig35): `collective -n 10000000 --op allgather --algo rhd` on a cluster of 1e8 GPUs
took 15 s of CPU and 400 MB (1e8: over 120 s): cost/algorithms.py's fold listed every pair of every halving /
doubling step; it now prices a few pairs a piece (0.26 s / 40 MB at 1e8, tests/test_rhdbig35.py). Still open:
`plan -n 73513440` (a highly composite count) on such a cluster takes 7.8 s of CPU (tidy36: its closed configurations'
memory is no longer priced, 20-24 -> 14-15 s at load 8-10; benchmarks/README.md).

Checked and accepted (not findings): a TOML or JSON key holding such a character is warned "not used" with the
character escaped (keys are read only as field names: specs/files.refuse_unprintable_strings); a soft hyphen U+00AD
passes as in YAML (a visible hyphen at a line break, no reordering); TOML integers 0x8 / 0o10 / +8 are 8 (TOML 1.0);
an unterminated quote at the end of a runs CSV is read by Python's csv as the rest of the cell (its value is still
validated); `plan --allow ''` is the default (no extra search). Spec.model_validate raises SpecError (a ValueError)
only to Python callers: the loader, the API and every command convert it to InputError, and its one engine caller
(grid.py) re-validates a spec that was validated already (the 339 round trips above).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT
from test_hostile_inputs import accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

from scalemodel.engine.divisors import divisors
from scalemodel.specs import files

RUN = ("-m", "llama3-8b", "-c", "dgx-h100", "-n", "64", "--json")
LOG = ROOT / "tests" / "data" / "nccl" / "synthetic_current.log"
BIDI = "(\\u202e, a bidirectional control: it reorders the text a terminal shows after it)"
ALLOWED = "text without bidirectional controls, invisible format characters or line separators (U+061C"


# --- 1. format characters in torchtitan TOML and Megatron-LM strings ------------------------------------------------

@pytest.mark.parametrize(("body", "said"), [
    ('[model]\nname = "llama3"\nflavor = "8B\u202e"\n', f":3: model.flavor: character U+202E {BIDI} is not allowed"),
    ('[training]\nmixed_precision_param = "\\u202ebfloat16"\n',
     f":2: training.mixed_precision_param: character U+202E {BIDI} (written as an escape) is not allowed"),
    ('[training]\ndataset = "c4\\U0000200B"\n',
     ":2: training.dataset: character U+200B (\\u200b, an invisible format character) (written as an escape)"),
    ('x = "\\u001b[31m"\n', ":1: x: character U+001B (written as an escape) is not allowed in a string; printable"),
    ('[job]\nx = [["a", "\u2066"]]\n', ":2: job.x[0][1]: character U+2066 (\\u2066, a bidirectional control"),
])
def test_a_toml_string_is_checked_as_a_yaml_string_is(cli, tmp_path: Path, body: str, said: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "t.toml"
    f.write_text(body, encoding="utf-8")
    line = refused(cli, "predict", *RUN, "--strategy", str(f), inputs=(f,), match=f"--strategy: {f}{said}")
    assert (ALLOWED in line) == ("U+001B" not in said), line  # a control character: printable text is allowed


@pytest.mark.parametrize(("body", "line_no", "char"), [
    ("--tensor-model\u200b-parallel-size 8 --micro-batch-size 1\n", 1, "U+200B (\\u200b, an invisible format"),
    ("--micro-batch-size 1\n--recompute-method uni\u202eform --recompute-granularity full\n", 2, f"U+202E {BIDI}"),
    ("# launch \u2067note\u2069\ntorchrun pretrain_gpt.py --tensor-model-parallel-size 2\n", 1, "U+2067"),
    ("torchrun pretrain_gpt.py --tensor-model-parallel-size 2 \\\n  --bf16\ufeff\n", 2, "U+FEFF"),
])
def test_a_megatron_launch_with_a_format_character_is_refused_at_its_line(cli, tmp_path: Path, body: str,  # type: ignore[no-untyped-def]
                                                                          line_no: int, char: str) -> None:
    f = tmp_path / "launch.sh"
    f.write_text(body, encoding="utf-8")
    line = refused(cli, "predict", *RUN, "--strategy", str(f), inputs=(f,),
                   match=f"--strategy: {f}: line {line_no}: character {char}")
    assert "is not allowed in a string; text without bidirectional controls" in line, line


def test_a_megatron_launch_saved_with_a_byte_order_mark_is_still_read(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """U+FEFF as the file's first character is a UTF-8 byte-order mark, dropped by the reader: tp 2 is read."""
    f = tmp_path / "launch.args"
    f.write_bytes(b"\xef\xbb\xbf--tensor-model-parallel-size 2 --micro-batch-size 1\n")
    assert accepted(cli, "predict", *RUN[:-1], "--strategy", str(f))["inputs"]["strategy"]["tp"] == 2


# --- 2. line and paragraph separators in a spec string ---------------------------------------------------------------

def test_a_line_separator_in_a_set_name_is_refused(cli) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", *RUN, "--set", "model.name=x\u2028y",
                   match="--set model.name: character U+2028 (\\u2028, a line or paragraph separator: a terminal "
                         "breaks the line at it) is not allowed in a string")
    assert ALLOWED in line and "\u2028" not in line, line


def test_a_paragraph_separator_escaped_in_a_yaml_file_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "c.yaml"
    f.write_text('kind: cluster\nname: "c\\u2029x"\nextends: dgx-h100\n')
    refused(cli, "hardware", "validate", str(f), inputs=(f,),
            match=f"{f}:2: name: character U+2029 (\\u2029, a line or paragraph separator: a terminal breaks the line "
                  "at it) (written as an escape) is not allowed")


# --- 3. an empty option value is not the option left out ------------------------------------------------------------

def test_an_empty_collective_size_is_refused(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "collective", "-c", "dgx-h100", "-n", "64", "--size", "", "--json",
            match="--size: cannot read '' as a bytes quantity; a number followed by one of: B")


def test_an_empty_calibrate_op_is_refused(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "calibrate", str(LOG), "-c", "dgx-h100", "--op", "", "--json", inputs=(LOG,),
            match="--op: unknown collective ''; one of: allreduce, reducescatter")


@pytest.mark.parametrize("option", [("--tier", ""), ("--ranks", "0"), ("--op", "")])
def test_nccl_tests_options_given_empty_to_calibrate_runs_are_refused(cli, tmp_path: Path, option) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "runs.yaml"
    f.write_text("- {cluster: dgx-h100, model: llama3-8b, gpus: 64, step_time: 2 s}\n")
    refused(cli, "calibrate", "runs", str(f), *option, inputs=(f,),
            match="calibrate runs: --cluster, --set, --tier, --ranks and --op belong to the nccl-tests form")


# --- 4. an empty path ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "said"), [
    (("predict", *RUN, "--strategy", ""), "--strategy: an empty path (''); a file path"),
    (("stragglers", "-n", "8", "--samples", "", "--json"), "--samples: an empty path (''); a file path (the samples "
                                                            "file)"),
    (("calibrate", "", "-c", "dgx-h100"), "an empty path (''); a file path (the nccl-tests log)"),
    (("calibrate", "runs", ""), "an empty path (''); a file path (the runs file)"),
    (("hardware", "validate", ""), "an empty path (''); a file path (the spec file)"),
    (("sweep", ""), "an empty path (''); a file path (the sweep file)"),
    (("scale", "-m", "llama3-8b", "-c", "dgx-h100", "--plot", ""), "--plot: cannot tell the image format of ''"),
])
def test_an_empty_path_is_refused_as_empty_not_read_as_the_working_folder(cli, args, said: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, *args, match=said)
    assert "'.'" not in line and ".: " not in line, line


# --- 5. a log of millions of short lines ----------------------------------------------------------------------------

@pytest.mark.parametrize("line", ["\n", "a\n", "\f", "\r\n"])
def test_an_nccl_tests_log_of_more_lines_than_the_limit_is_refused_before_its_rows_are_read(
        cli, tmp_path: Path, line: str) -> None:  # type: ignore[no-untyped-def]
    """64 MiB (the byte limit) of empty lines held the reader for 64 s of CPU, 30 Mi lines of "a" for 34 s; each
    kind of line break str.splitlines makes counts (a form feed is one), CR LF once."""
    f = tmp_path / "big.log"
    f.write_text(LOG.read_text() + line * (files.MAX_LOG_LINES + 1), newline="")
    refused(cli, "calibrate", str(f), "-c", "dgx-h100", inputs=(f,),
            match=f"{f}: nccl-tests log has more than 2,000,000 lines (2,000,0")


def test_an_nccl_tests_log_at_the_line_limit_is_read(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = LOG.read_text()
    f = tmp_path / "ok.log"
    f.write_text(text + "\n" * (files.MAX_LOG_LINES - text.count("\n")))
    assert accepted(cli, "calibrate", str(f), "-c", "dgx-h100")["command"] == "calibrate"


def test_a_training_log_of_more_lines_than_the_limit_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "train.log").write_text("x\n" * (files.MAX_LOG_LINES + 1))
    f = tmp_path / "runs.yaml"
    f.write_text("- {cluster: dgx-h100, model: llama3-8b, gpus: 64, log: train.log}\n")
    refused(cli, "calibrate", "runs", str(f), inputs=(f,),
            match=f"run 1 (line 1): log: {tmp_path / 'train.log'}: training log has more than 2,000,000 lines "
                  "(2,000,001); a training log of at most 2,000,000 lines")


# --- 6. what would divide, said without scanning 1..n -----------------------------------------------------------------

def test_a_global_batch_near_the_limit_that_does_not_divide_is_said_at_once(cli) -> None:  # type: ignore[no-untyped-def]
    """The detail listed the divisors of B / b by trial of 1..B (1e9 steps: ~30 s of CPU, beyond the hang guard's
    20 s). 999999999 = 3^4 x 37 x 333667 (by hand): its divisors nearest dp 64 are 37, 81, 27 and 111."""
    doc = accepted(cli, "predict", *RUN[:-1], "--global-batch", "999999999")
    assert "global batch 999999936 or 1000000000 would divide; at micro-batch 1, dp 27, 37, 81, 111 would" \
        in doc["infeasible_detail"], doc["infeasible_detail"]


def test_a_layer_count_near_the_limit_that_does_not_divide_is_said_at_once(cli) -> None:  # type: ignore[no-untyped-def]
    """999999990 / pp 2 = 499999995 = 3^2 x 5 x 11 x 73 x 101 x 137 (by hand), odd, so v = 4 does not divide and
    its divisors from 2 up do: 3, 5, 9, 11, 15, 33 first."""
    doc = accepted(cli, "predict", *RUN[:-1], "--pp", "2", "--schedule", "interleaved:4",
                   "--set", "model.layers=999999990")
    assert "(v = 3, 5, 9, 11, 15, 33 would divide)" in doc["infeasible_detail"], doc["infeasible_detail"]


@pytest.mark.parametrize("n", [1, 2, 12, 97, 360, 1001])
def test_divisors_are_those_of_the_definition(n: int) -> None:
    assert divisors(n).tolist() == [d for d in range(1, n + 1) if n % d == 0]
