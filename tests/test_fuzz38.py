"""Hostile input, round 38 (fuzz38): what this round's corpus found. The CLI contract is test_hostile_inputs.py's:
exit 2, one ``error:`` line naming the file / field / option, what was wrong and what is allowed, nothing on stdout,
no input changed.

The corpus is scripts/fuzz38.py (fuzz36's in-process harness; a subprocess section for environment variables, stdin
and outputs). Findings:

1. A scenario's cluster, model or accelerator given as a file (``cluster: c.yaml``) with a refused value was named at
   the scenario's line (``s.yaml:4: cluster.host_memory``), a file and line without the field; ``sweep`` and
   ``calibrate runs`` named ``c.yaml:3``. The file is now validated alone when the scenario is refused, and its own
   error (its file, line and field) given.
2. ``tokens_per_s: 1e-320`` in a runs file: "1e-320 tokens per second is a step of inf s", an ``inf`` in the output.
3. A negative integer past the bound (``--set strategy.tp=-1e308``) was "beyond the largest integer a spec accepts".
4. A runs file's ``warmup_steps: 1e308`` was shown as int(1e308)'s first 40 of 309 digits, and ``null`` as 'None'.
5. A cluster file's accelerator file (``accelerator: a.yaml``) with a refused value was named at the cluster's line
   (``c.yaml:3: accelerator.memory``), as in 1; and "not a accelerator" of a TOML given as an accelerator.
6. ``plan`` with two pinned switches no ZeRO stage runs together (``bucket_fragments`` at zero 1 / 2,
   ``fsdp_per_param`` at fsdp / hsdp) was refused at zero 0 with "give zero too (--set strategy.zero, or
   --constraint zero=VALUE)": advice no stage could take. It now names each pin and the stages that refuse it.
7. A cluster file that inherits a refused value by ``extends: c.yaml`` (a user's file) was named at its own extends line
   (``d.yaml:1: host_memory``): the base is now read alone and, where it refuses the same field in the same words,
   its file and line are given.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_hostile_inputs import no_hang, refused  # noqa: F401 (no_hang: autouse)

RUN = "- {{cluster: dgx-h100, model: llama3-8b, gpus: {g}, {measure}}}\n"


# --- 1. a scenario's referenced file is named where its value is ---------------------------------------------------

def _scenario(tmp_path: Path, cluster: str = "c.yaml", model: str = "llama3-8b") -> Path:
    s = tmp_path / "s.yaml"
    s.write_text(f"kind: scenario\nname: s\nmodel: {model}\ncluster: {cluster}\ngpus: [8, 16]\n"
                 "assertions: {min_scaling_efficiency: 0.1}\n")
    return s


@pytest.mark.parametrize("command", [("check",), ("scale", "--scenario")])
def test_a_scenario_names_its_cluster_files_line(cli, tmp_path: Path, command: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    c = tmp_path / "c.yaml"
    c.write_text("extends: dgx-h100\nname: c\nhost_memory: -5 TB\n")  # line 3
    s = _scenario(tmp_path)
    line = refused(cli, *command, str(s), "--json", inputs=(s, c))
    # the file, the line and the field as the file writes them: -c c.yaml's own refusal
    assert line.startswith(f"error: {c}:3: host_memory: "), line
    assert "'-5 TB'" in line, line
    direct = refused(cli, "predict", "-m", "llama3-8b", "-c", str(c), "-n", "8", "--json")
    assert line == direct


def test_a_scenario_names_its_workload_and_accelerator_files(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    w = tmp_path / "w.yaml"
    w.write_text("kind: transformer\nname: w\nlayers: 0\nhidden: 1024\nheads: 8\nvocab: 32000\nseq_len: 2048\n")
    s = _scenario(tmp_path, cluster="dgx-h100", model="w.yaml")
    line = refused(cli, "check", str(s), "--json", inputs=(s, w))
    assert line.startswith(f"error: {w}:3: layers: "), line
    a = tmp_path / "a.yaml"
    a.write_text("extends: h100-sxm\nname: a\nmemory: -80 GB\n")
    s = _scenario(tmp_path, cluster="{extends: dgx-h100, accelerator: a.yaml}")
    line = refused(cli, "check", str(s), "--json", inputs=(s, a))
    assert line.startswith(f"error: {a}:3: memory: "), line


def test_a_scenario_refusal_of_its_own_field_still_names_the_scenario(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A valid cluster file and a bad scenario field: the scenario's line, as before."""
    c = tmp_path / "c.yaml"
    c.write_text("extends: dgx-h100\nname: c\n")
    s = tmp_path / "s.yaml"
    s.write_text("kind: scenario\nname: s\nmodel: llama3-8b\ncluster: c.yaml\ngpus: [8, 0]\n")
    line = refused(cli, "check", str(s), "--json", inputs=(s, c))
    assert line.startswith(f"error: {s}:5: gpus"), line


# --- 2. a rate so small its step overflows ---------------------------------------------------------------------------

def test_a_subnormal_rate_is_refused_without_inf(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs.yaml"
    runs.write_text("".join(RUN.format(g=g, measure="tokens_per_s: 1e-320" if g == 16 else "step_time: 1 s")
                            for g in (8, 16, 32)))
    line = refused(cli, "calibrate", "runs", str(runs), "--json", inputs=(runs,))
    assert not re.search(r"\binf\b", line), line
    # the step is tokens / 1e-320, past any float: said as past the bound the allowed part names
    assert "run 2 (line 2): tokens_per_s: 1e-320 tokens per second is a step longer than 1e+12 s" in line, line
    assert line.endswith("a rate that makes a step of 1e-06 s to 1e+12 s"), line


# --- 3. a negative integer past the bound -----------------------------------------------------------------------------

@pytest.mark.parametrize("value, shown", [("-1e308", "-1e+308"), (str(-2**70), str(-2**70))])
def test_a_negative_integer_past_the_bound_names_the_smallest(cli, value: str, shown: str) -> None:  # type: ignore[no-untyped-def]
    line = refused(cli, "predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "8", "--set", f"strategy.tp={value}",
                   "--json")
    # the field's own bound (tp >= 1), not the spec's -1e+09 (ux38b: one bound, the one that applies)
    assert f"strategy.tp: {shown} is below the smallest integer this field accepts (1); an integer from 1" in line, line


# --- 4. warmup_steps shown as written ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value, shown", [("1e308", "'1e+308'"), ("1e-320", "'1e-320'"), ("null", "'null'"),
                                          ("-1e308", "'-1e+308'")])
def test_warmup_steps_is_shown_as_written(cli, tmp_path: Path, value: str, shown: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "m.log").write_text("")
    runs = tmp_path / "runs.yaml"
    runs.write_text(f"- {{cluster: dgx-h100, model: llama3-8b, gpus: 8, log: m.log, warmup_steps: {value}}}\n")
    line = refused(cli, "calibrate", "runs", str(runs), "--json", inputs=(runs,))
    assert line.endswith(f"run 1 (line 1): warmup_steps: {shown} is not a step count; a whole number from 0 to "
                         "1e+09 (logged steps up to it are dropped)"), line


# --- 5. a cluster's accelerator file is named where its value is ----------------------------------------------------

def test_a_cluster_names_its_accelerator_files_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a = tmp_path / "a.yaml"
    a.write_text("extends: h100-sxm\nname: a\nmemroy: 80 GB\n")  # line 3, misspelt
    c = tmp_path / "c.yaml"
    c.write_text("extends: dgx-h100\nname: c\naccelerator: a.yaml\n")
    line = refused(cli, "predict", "-m", "llama3-8b", "-c", str(c), "-n", "8", "--json", inputs=(a, c))
    assert line.startswith(f"error: {a}:3: memroy: unknown key 'memroy'; did you mean 'memory'?"), line
    # a --set item into the accelerator keeps naming the item, and fixes what it writes
    a.write_text("extends: h100-sxm\nname: a\nmemory: -80 GB\n")
    refused(cli, "predict", "-m", "llama3-8b", "-c", str(c), "-n", "8", "--set", "accelerator.memory=-8GB", "--json",
            match="error: --set accelerator.memory: Input should be greater than 0 (got '-8GB')")
    r = cli("predict", "-m", "llama3-8b", "-c", str(c), "-n", "8", "--set", "accelerator.memory=80GB", "--json")
    assert r.code == 0, r.err


def test_a_toml_accelerator_is_refused_with_its_article(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    c = tmp_path / "c.yaml"
    c.write_text("extends: dgx-h100\nname: c\naccelerator: a.toml\n")
    line = refused(cli, "predict", "-m", "llama3-8b", "-c", str(c), "-n", "8", "--json", inputs=(c,))
    assert "looks like a training framework's launch config, not an accelerator;" in line, line


# --- 6. plan: pinned switches no stage runs together ------------------------------------------------------------------

@pytest.mark.parametrize("first, second, precision, firsts, seconds", [  # on dgx-b200 (FP4 on Blackwell only)
    # StrategySpec's rules (engine.planner.ZERO_SWITCHES): bucket_fragments and fp4_param_gather run at zero 1 and 2
    # only, fsdp_per_param at fsdp and hsdp only; zero 0 refuses the first (checked first), zero 3 too
    ("bucket_fragments", "fsdp_per_param", "bf16", "0, 3, fsdp and hsdp", "1 and 2"),
    ("fp4_param_gather", "fsdp_per_param", "fp4", "0, 3, fsdp and hsdp", "1 and 2"),
])
def test_plan_names_pins_no_stage_runs_together(cli, first: str, second: str, precision: str, firsts: str,  # type: ignore[no-untyped-def]
                                                seconds: str) -> None:
    line = refused(cli, "plan", "-m", "llama3-8b", "-c", "dgx-b200", "-n", "8", "--precision", precision, "--top", "1",
                   "--set", f"strategy.{first}=true", "--set", f"strategy.{second}=true", "--json")
    assert "give zero too" not in line, line
    assert (f"error: --set strategy.{first}: no ZeRO stage plan searches runs every pinned switch: refused at zero "
            f"{firsts}, --set strategy.{first}; at zero {seconds}, --set strategy.{second}; ") in line, line
    # each pin alone is planned, at its own stages
    for name, stages in ((first, {"1", "2"}), (second, {"fsdp", "hsdp"})):
        r = cli("plan", "-m", "llama3-8b", "-c", "dgx-b200", "-n", "8", "--precision", precision, "--top", "3", "--set",
                f"strategy.{name}=true", "--json")
        assert r.code == 0, r.err
        assert {p["strategy"]["zero"] for p in json.loads(r.out)["ranked"]} <= stages


# --- 7. a value inherited by extends is named in the file that writes it --------------------------------------------

def test_an_inherited_value_is_named_in_its_base_file(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    c, d, e, g = (tmp_path / f"{n}.yaml" for n in "cdeg")
    c.write_text("extends: dgx-h100\nname: c\nhost_memory: -5 TB\n")  # line 3
    d.write_text("extends: c.yaml\nname: d\n")
    e.write_text("extends: d.yaml\nname: e\n")  # two links down
    g.write_text("extends: c.yaml\nname: g\nhost_memory: -1 TB\n")  # its own value: its own line
    for f in (d, e):
        line = refused(cli, "predict", "-m", "llama3-8b", "-c", str(f), "-n", "8", "--json", inputs=(c, d, e))
        assert line.startswith(f"error: {c}:3: host_memory: Input should be greater than 0 (got '-5 TB')"), line
    line = refused(cli, "predict", "-m", "llama3-8b", "-c", str(g), "-n", "8", "--json")
    assert line.startswith(f"error: {g}:3: host_memory: Input should be greater than 0 (got '-1 TB')"), line
    # a --set item is named as the item; one that writes a good value over the base's runs
    refused(cli, "predict", "-m", "llama3-8b", "-c", str(d), "-n", "8", "--set", "cluster.host_memory=-3TB", "--json",
            match="error: --set cluster.host_memory: Input should be greater than 0 (got '-3TB')")
    assert cli("predict", "-m", "llama3-8b", "-c", str(d), "-n", "8", "--set", "cluster.host_memory=1TB",
               "--json").code == 0
