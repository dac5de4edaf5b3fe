"""Bad or extreme input anywhere on the command line: one `error:` line on stderr and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT

LOG = str(ROOT / "tests" / "data" / "nccl" / "synthetic_current.log")


@pytest.mark.parametrize("args", [
    ("predict", "--gpus", "abc"),                      # not an integer
    ("predict", "--bogus"),                            # unknown option
    ("collective", "--gpus", "8"),                     # missing required option
    ("schema", "bogus"),                               # bad choice
    ("calibrate", LOG, "--cluster", "dgx-a100", "--op", "bogus"),
    ("calibrate", LOG, "--cluster", "dgx-a100", "--out", "/nonexistent/dir/x.yaml"),
    ("collective", "--cluster", "dgx-h100", "--gpus", "64", "--size", "1e307B"),  # result overflows
    ("collective", "--cluster", "dgx-h100", "--gpus", "64", "--size", "1e307B", "--json"),
    ("predict", "--model", "llama2-7b", "--gpus", "99999999999999999999999"),
    ("predict", "--model", "llama2-7b", "--gpus", "64", "--sync", "hier:3"),
    ("predict", "--model", "mixtral-8x7b", "--gpus", "64", "--ep", "3"),
    ("predict", "--model", "llama2-7b", "--gpus", "64", "--pp", "8", "--schedule", "interleaved"),
    ("predict", "--model", "llama2-7b", "--gpus", "64", "--dp-comm", "ps:0"),
])
def test_one_line_error_and_exit_2(cli, args) -> None:  # type: ignore[no-untyped-def]
    r = cli(*args)
    assert r.code == 2, (r.out, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.err
    assert "Traceback" not in r.err


def test_deeply_nested_yaml_is_an_error(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    deep = tmp_path / "deep.yaml"
    deep.write_text("x: " + "{a: " * 2000 + "1" + "}" * 2000)
    r = cli("hardware", "validate", str(deep))
    assert r.code == 2 and r.err.startswith("error: ") and "deep" in r.err


def test_single_gpu_collective_prints_no_warnings(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("collective", "--cluster", "dgx-h100", "--gpus", "1", "--size", "1GiB")
    assert r.code == 0 and r.err == ""
    # one rank moves nothing in 0 s: not "over 1 GPUs", nor "bandwidth-bound: 0% of it is the zero-byte latency"
    text = " ".join(r.out.split())
    assert "over 1 GPU on dgx-h100" in text and "bound" not in text and "nothing crosses a link" in text


def test_group_without_subcommand_shows_help(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("hardware")
    assert r.code == 0 and "validate" in r.out


@pytest.mark.parametrize(("args", "needle"), [
    (("predict", "--tp"), "--tp: expected one argument"),                      # missing value
    (("predict", "--straggler-cv", "x"), "'x' is not a number"),
    (("predict", "--gpus", "1.5"), "'1.5' is not an integer"),
    (("predict", "--jso"), "No such option: --jso (Possible options: --json"),  # no abbreviations
    (("predict", "foo"), "unexpected extra argument(s) (foo)"),
    (("predci",), "No such command 'predci'. Did you mean 'predict'?"),
    (("hardware", "bogus"), "No such command 'bogus'"),
    (("--bogus",), "No such option: --bogus"),
    (("collective", "-n", "8"), "required: -c/--cluster"),
    (("schema", "bogus"), "invalid choice: 'bogus'"),
])
def test_usage_errors_say_where_and_what(cli, args, needle) -> None:  # type: ignore[no-untyped-def]
    r = cli(*args)
    lines = r.err.strip().splitlines()
    assert r.code == 2 and len(lines) == 1 and needle in lines[0], r.err
    cmd = " ".join(["scalemodel", *(a for a in args[:1] if not a.startswith("-") and a != "predci")])
    if args[0] == "hardware":
        cmd = "scalemodel hardware"
    assert lines[0].startswith(f"error: {cmd}: ") and lines[0].endswith(f"; see `{cmd} --help`"), lines[0]
    assert r.out == ""


def test_framework_flags_point_to_strategy_files(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("predict", "--tensor-model-parallel-size", "8")
    assert r.code == 2 and r.err.count("\n") == 1 and "--strategy FILE" in r.err


def test_help_lists_commands_and_options(cli) -> None:  # type: ignore[no-untyped-def]
    from scalemodel.commands import COMMAND_MODULES

    for args in ((), ("--help",)):
        r = cli(*args)
        assert r.code == 0 and all(f"  {name} " in r.out for name in COMMAND_MODULES), r.out
    r = cli("predict", "--help")
    for flag in ("-n, --gpus <int>", "--overlap, --no-overlap", "--staleness-kappa", "--set PATH=VALUE",
                 "[default: 1024]", "Number of GPUs."):
        assert flag in r.out, flag
    assert cli("hardware", "show", "--help").out.startswith("usage: scalemodel hardware show [OPTIONS] NAME")


def test_every_option_table_matches_its_function() -> None:
    """Each command's parsed values (here its defaults) bind to its function's parameters."""
    import importlib
    import inspect

    from scalemodel.commands import COMMAND_MODULES
    from scalemodel.commands.args import Command, parser

    def check(cmd: Command) -> None:
        for sub in cmd.subcommands:
            check(sub)
        if cmd.run is None:
            return
        p = parser(cmd.name, cmd, cmd.name)
        values = {a.dest: a.default for a in p._actions if a.dest != "help"}
        inspect.signature(cmd.run).bind(**values)
        assert len(values) == len(cmd.options)  # no two options share a parameter

    for name in COMMAND_MODULES:
        check(importlib.import_module(f"scalemodel.commands.{name}").COMMAND)


def test_flag_pairs_and_repeats(cli) -> None:  # type: ignore[no-untyped-def]
    import json

    base = ("predict", "-m", "llama2-7b", "-c", "dgx-h100", "-n", "8", "--json")
    on = json.loads(cli(*base, "--overlap", "--set", "training.global_batch=16", "--set", "strategy.tp=2").out)
    off = json.loads(cli(*base, "--no-overlap").out)
    assert on["inputs"]["strategy"]["overlap"] is True and off["inputs"]["strategy"]["overlap"] is False
    assert on["inputs"]["set"] == ["training.global_batch=16", "strategy.tp=2"]
    assert on["inputs"]["training"]["global_batch"] == 16 and on["inputs"]["strategy"]["tp"] == 2


def test_a_value_may_start_with_a_dash(cli) -> None:  # type: ignore[no-untyped-def]
    """As before argparse: an option's value is the next word even when it starts with '-' (not an option)."""
    r = cli("stragglers", "-n", "8", "--mean", "-1s")
    assert r.code == 2 and r.err == "error: --mean: --mean must be > 0, got '-1s'; a time > 0, e.g. 1.5s\n"
    r = cli("predict", "--tp", "--json")  # an option is not taken as a value
    assert r.code == 2 and "--tp: expected one argument" in r.err
