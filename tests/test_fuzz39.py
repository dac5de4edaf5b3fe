"""Hostile input, round 39 (fuzz39): what this round's corpus and the four known faults of the brief found. The CLI
contract is test_hostile_inputs.py's: exit 2, one ``error:`` line naming the file / field / option, what was wrong
and what is allowed, nothing on stdout, no input changed.

The corpus is scripts/fuzz39.py (fuzz36's in-process harness, through the one reporting driver ``fuzz36.drive``).
Findings:

1. ``plan --set strategy.first_stage_layers=33`` on a 32-layer model with pp searched: 1,482,624 candidates, every
   one layers_not_divisible, exit 0, the pin unnamed. A pinned stage (or model-chunk) layer count that no pipeline
   plan searches can take (pp >= 2; interleaved V >= 2 for chunks) is refused at the pin; with pp (and V) pinned,
   predict's own refusal. first/last_chunk_layers beside first/last_stage_layers, refused by predict, was searched
   to no plan (exit 0). ``scale --best`` (the same planner, its pins from engine.planner.pins) said "no feasible
   strategy for 8 GPUs ... layers_not_divisible": it now runs plan's job.PIN_CHECKS on its pins too.
2. recompute_modules pinned beside recompute_layers (or recompute_method uniform) was refused one field at a time:
   "add recompute: selective" for the modules (plan, which searches recompute, and predict at recompute none), then
   "needs recompute: full" for the layers once selective was added. No mode takes both (Megatron-LM refuses a layer
   count or a method under selective granularity, and reads the modules under selective only): refused naming both.
   ``scale --best`` (which searches recompute) refused recompute_modules alone "add recompute: selective", where plan
   validates it at the mode it needs and keeps the search there (commands.plan._build_specs): now as plan.
3. ``scale --gpus 8,1180591620717411303424`` said "GPU counts must be positive integers, got '8,...'": neither the
   count nor the bound (1e8, MAX_GPUS; predict's -n names both). ``--gpus 8,2**70`` and a count of 31+ digits said
   "cannot read GPU counts" without the count at fault. Each now names the count, its place, and the range.
4. The fuzz drivers' reporting loops (options, the case loop, FINDING lines, negatives, the summary) were written
   four times (fuzz36, fuzz37, fuzz38, fuzzpin38), each a little different (fuzz37 / fuzz38 judged cut messages,
   fuzzpin38 wall clock and memory). One driver, ``fuzz36.drive``, with the differences as judges and runners;
   each script's ``--list`` gives the same cases as before (13,693 over fuzz36-38, 1,468 in fuzzpin38).
5. ``scale --gpus 8,8,...`` (300 counts) and a scenario's long ``gpus`` list that does not rise printed the whole
   list: the error was cut at 300 characters before it said what was allowed (scripts/fuzz39.py, section cmds). The
   list is shown to 60 characters and the first count at fault named.
6. A 300-character word in a boolean field (``--set strategy.check_for_nan_in_loss=xxx...``, a strategy file, a runs
   file) was echoed whole in "Input should be a valid boolean (got '...')": the error was cut at 300 characters and
   the allowed ("true or false") lost. A value of the wrong type is echoed to 80 characters.
7. ``plan --constraint bucket=1.5`` (or ``bucket=1KB``, 1000 B) ranked plans with a bucket predict refuses ("below
   the smallest bucket priced, 1 KiB"); ``memory=60GB`` searched for plans of exactly 60 GB a GPU and found none,
   exit 0. An '=' bucket pin under 1 KiB and an '=' / '!=' memory constraint are refused at the constraint.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
from conftest import ROOT, script_module
from test_hostile_inputs import no_hang, refused  # noqa: F401 (no_hang: autouse)

DENSE = ["-m", "llama3-8b", "-c", "dgx-h100", "-n", "16"]  # Llama 3 8B: 32 layers (its config.json)
LAYERS = 32


# --- 1. stage / chunk layer counts no searched pipeline takes ------------------------------------------------------

def _most(kind: str, edges: int) -> int:
    """The most layers the given edges may hold, by hand: every other part of the fewest plan searches keeps one.
    Stages: pp 2 (one edge leaves 1 stage, two edges none); chunks: pp 2 x V 2 = 4 (3 or 2 others)."""
    parts = 2 if kind == "stage" else 4
    return LAYERS - (parts - edges)


@pytest.mark.parametrize(("sets", "kind", "field"), [
    ({"first_stage_layers": 33}, "stage", "first_stage_layers"),
    ({"first_stage_layers": 32}, "stage", "first_stage_layers"),
    ({"last_stage_layers": 32}, "stage", "last_stage_layers"),
    ({"first_stage_layers": 20, "last_stage_layers": 13}, "stage", "first_stage_layers"),
    ({"first_chunk_layers": 30}, "chunk", "first_chunk_layers"),
    ({"first_chunk_layers": 20, "last_chunk_layers": 11}, "chunk", "first_chunk_layers")])
def test_edge_layers_no_searched_pipeline_takes_refused_at_the_pin(cli, sets: dict[str, int], kind: str,
                                                                   field: str) -> None:
    args = [a for k, v in sets.items() for a in ("--set", f"strategy.{k}={v}")]
    line = refused(cli, "plan", *DENSE, *args, "--top", "1", "--json", match=f"error: --set strategy.{field}: ")
    most = _most(kind, len(sets))
    assert f"first/last {kind} layers summing to at most {most}" in line, line
    assert "plan searches pp 2 or more" in line and "layers_not_divisible" not in line, line


@pytest.mark.parametrize(("sets", "kind"), [
    ({"first_stage_layers": 31}, "stage"), ({"first_stage_layers": 20, "last_stage_layers": 12}, "stage"),
    ({"first_chunk_layers": 29}, "chunk"), ({"first_chunk_layers": 20, "last_chunk_layers": 10}, "chunk")])
def test_edge_layers_at_the_bound_still_searched(cli, sets: dict[str, int], kind: str) -> None:
    # the bound itself runs at the fewest parts: 31 + 1 at pp 2; 20 + 12 at pp 2; 29 + 1 + 1 + 1 over 4 chunks
    assert sum(sets.values()) == _most(kind, len(sets))
    args = [a for k, v in sets.items() for a in ("--set", f"strategy.{k}={v}")]
    r = cli("plan", *DENSE, *args, "--top", "1", "--json")
    assert r.code == 0, r.err
    best = json.loads(r.out)["ranked"][0]["strategy"]
    assert best["pp"] == 2
    assert (best["schedule"] == "interleaved:2") == (kind == "chunk")


def test_edge_layers_with_pinned_pp_refused_as_predict_refuses(cli) -> None:
    # pp 4: 30 leaves 2 layers for 3 stages. Predict refuses it; plan ranked nothing, exit 0
    pins = ["--set", "strategy.pp=4", "--set", "strategy.first_stage_layers=30"]
    said = refused(cli, "predict", *DENSE, *pins)
    line = refused(cli, "plan", *DENSE, *pins, "--top", "1", "--json")
    assert line == said, (line, said)
    assert "leaves the 3 stages between 2 / 3 = 0.666667 each" in line


def test_edge_layers_with_pinned_pp_chunks_searched_over_v(cli) -> None:
    # pp 4 pinned, V searched from 2: 8 chunks at the fewest, so 26 leaves 6 for 7
    line = refused(cli, "plan", *DENSE, "--set", "strategy.pp=4", "--set", "strategy.first_chunk_layers=26",
                   "--top", "1", match="leaves 6 for the 7 other model chunks")
    assert "plan searches pp 4 and interleaved V 2 or more, so 8 model chunks at the fewest" in line
    r = cli("plan", *DENSE, "--set", "strategy.pp=4", "--set", "strategy.first_chunk_layers=25", "--top", "1")
    assert r.code == 0 and "error" not in r.err, r.err


def test_scale_best_checks_its_pins_as_plan_does(cli) -> None:
    line = refused(cli, "scale", *DENSE[:4], "--gpus", "8,16", "--best", "--set", "strategy.first_stage_layers=33",
                   "--json",
                   match="error: --set strategy.first_stage_layers: first 33 layers, more than the model's 32")
    assert "no feasible strategy" not in line
    r = cli("scale", *DENSE[:4], "--gpus", "8,16", "--best", "--set", "strategy.first_stage_layers=31", "--json")
    assert r.code == 0, r.err
    # 31 + 1 at pp 2 is the one split that holds 31 first-stage layers: each point's best runs it
    assert [(p["strategy"]["pp"], p["strategy"]["first_stage_layers"]) for p in json.loads(r.out)["points"]] == [
        (2, 31), (2, 31)]


def test_stage_and_chunk_layers_pinned_together_refused(cli) -> None:
    pins = ["--set", "strategy.first_stage_layers=4", "--set", "strategy.first_chunk_layers=4"]
    said = refused(cli, "predict", *DENSE, "--pp", "2", "--schedule", "interleaved:2", *pins)
    assert "first/last_chunk_layers and first/last_stage_layers are both set" in said
    refused(cli, "plan", *DENSE, *pins, "--top", "1", "--json",
            match="first/last_chunk_layers and first/last_stage_layers are both set; one way of splitting the layers")


# --- 2. recompute_modules beside recompute_layers / recompute_method uniform ----------------------------------------

BOTH = "needs recompute: selective and {full} needs recompute: full; no recompute mode takes both"


@pytest.mark.parametrize("recompute", [[], ["--recompute", "none"], ["--recompute", "full"],
                                       ["--recompute", "selective"]])
@pytest.mark.parametrize(("field", "value", "full"), [("recompute_layers", "4", "recompute_layers=4"),
                                                      ("recompute_method", "uniform", "recompute_method=uniform")])
def test_recompute_modules_with_a_full_recompute_field_refused_naming_both(cli, recompute: list[str], field: str,
                                                                          value: str, full: str) -> None:
    pins = ["--set", "strategy.recompute_modules=core_attn", "--set", f"strategy.{field}={value}"]
    # whatever recompute is, the one refusal: each mode refuses one of the two (predict named the modules at none
    # and full, the layers at selective)
    line = refused(cli, "predict", *DENSE, *recompute, *pins, match=BOTH.format(full=full))
    assert line.startswith("error: --set strategy.recompute_modules: 'core_attn' "), line
    assert "not both" in line


def test_plan_refuses_the_two_recompute_pins_naming_both(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # plan searches recompute: it said "add recompute: selective", which the pinned layers then refuse
    pins = ["--set", "strategy.recompute_modules=core_attn", "--set", "strategy.recompute_layers=2"]
    line = refused(cli, "plan", *DENSE, *pins, "--top", "1", "--json", match=BOTH.format(full="recompute_layers=2"))
    assert "add recompute: selective" not in line
    f = tmp_path / "s.yaml"
    f.write_text("recompute_layers: 2\nrecompute_modules: core_attn\n")
    refused(cli, "plan", *DENSE, "--strategy", str(f), "--top", "1", inputs=(f,),
            match=f"error: --strategy: {f}: strategy.recompute_modules: 'core_attn' "
                  + BOTH.format(full="recompute_layers=2"))


@pytest.mark.parametrize(("pin", "mode"), [("recompute_modules=core_attn", "selective"),
                                           ("recompute_layers=2", "full")])
def test_scale_best_searches_the_mode_a_recompute_pin_needs(cli, pin: str, mode: str) -> None:
    r = cli("scale", *DENSE[:4], "--gpus", "8,16", "--best", "--set", f"strategy.{pin}", "--json")
    assert r.code == 0, r.err
    key, value = pin.split("=")
    got = [(p["strategy"]["recompute"], str(p["strategy"][key])) for p in json.loads(r.out)["points"]]
    assert got == [(mode, value), (mode, value)]
    # a fixed strategy (no --best) is priced as given: refused as predict refuses it
    refused(cli, "scale", *DENSE[:4], "--gpus", "8,16", "--set", f"strategy.{pin}", match=f"needs recompute: {mode}")


def test_each_recompute_field_alone_still_priced(cli) -> None:
    # the check is on the pair only: each field with its own mode runs, and is priced as given
    for args, field, value in ((["--recompute", "selective", "--set", "strategy.recompute_modules=core_attn"],
                                "recompute_modules", "core_attn"),
                               (["--recompute", "full", "--set", "strategy.recompute_layers=4"],
                                "recompute_layers", 4)):
        r = cli("predict", *DENSE, *args, "--json")
        assert r.code == 0, r.err
        assert json.loads(r.out)["inputs"]["strategy"][field] == value


# --- 3. scale --gpus: the count at fault and the bound -------------------------------------------------------------

@pytest.mark.parametrize(("gpus", "said"), [
    (f"8,{2**70}", f"GPU count {2**70} (count 2 of 2) is past 1e+08, the most GPUs a spec holds"),
    ("100000001", "GPU count 100000001 is past 1e+08"),
    ("0,8", "GPU count 0 (count 1 of 2) is not positive"),
    ("8,-16,32", "GPU count -16 (count 2 of 3) is not positive"),
    ("8,2**70", "'2**70' (count 2 of 2) is not an integer (digits only, no expression)"),
    ("8," + "1" + "0" * 40, "(count 2 of 2) has 41 digits, outside 1 to 1e+08"),
    ("8,16.0", "'16.0' (count 2 of 2) is not an integer")])
def test_scale_gpu_count_refusal_names_the_count_and_the_bound(cli, gpus: str, said: str) -> None:
    line = refused(cli, "scale", "-m", "llama3-8b", "-c", "dgx-h100", "--gpus", gpus, "--json", match=said)
    assert line.startswith("error: --gpus: "), line
    assert line.endswith("comma-separated integers from 1 to 1e+08, e.g. 128,256,512,1024,2048"), line


def test_scale_gpu_count_at_the_bound_is_read(cli) -> None:
    # 1e8 itself is a count a spec holds (MAX_GPUS): read, then refused by the cluster's own bound, not the count's
    line = refused(cli, "scale", "-m", "llama3-8b", "-c", "dgx-h100", "--gpus", "8,100000000", "--json")
    assert "more GPUs than the cluster has (dgx-h100 has at most 16384)" in line, line
    assert "GPU count" not in line and "past 1e+08" not in line, line


# --- 4. one reporting driver for the fuzz corpora -------------------------------------------------------------------

@pytest.mark.parametrize("name", ["fuzz37", "fuzz38", "fuzzpin38", "fuzz39"])
def test_each_corpus_reports_through_the_one_driver(name: str) -> None:
    text = (ROOT / "scripts" / f"{name}.py").read_text()
    assert re.search(r"^from fuzz36 import .*\bdrive\b", text, re.M) and "return drive(" in text
    # no reporting loop of its own: no option parser, no summary line, no FINDING line
    assert "argparse" not in text and "FINDING" not in text and "exit statuses" not in text


def _drive(argv: list[str], **kw) -> tuple[int, list[str]]:  # type: ignore[no-untyped-def]
    fuzz = script_module("fuzz36")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = fuzz.drive("toy", "Toy corpus.\n\nMore.", argv=argv, **kw)
    return code, out.getvalue().splitlines()


def _toy(tmp: Path):  # type: ignore[no-untyped-def]
    yield "toy.a", ["collective", "-c", "dgx-h100", "-n", "8", "--json"], ()
    yield "toy.b", ["collective", "-c", "dgx-h100", "-n", "0", "--json"], ()  # exit 2: -n 0 refused


def test_the_driver_counts_judges_and_runners() -> None:
    fuzz = script_module("fuzz36")
    calls: list[str] = []

    def judge(argv: list[str], out) -> str | None:  # type: ignore[no-untyped-def]
        calls.append(f"{out.code} {argv[4]}")
        return "judged" if out.code == 2 else None

    def runner(tmp: Path) -> tuple[int, list[str]]:
        return 3, ["runner's finding"]

    code, lines = _drive([], sections={"toy": _toy}, runners={"sub": runner}, judges=(judge,))
    # by hand: two cases in process (exit 0 and exit 2), the judge flags the second; the runner adds 3 cases and 1
    assert code == 1
    assert calls == ["0 8", "2 0"]
    assert lines[0] == "FINDING [toy.b] collective -c dgx-h100 -n 0 --json" and lines[1] == "    judged"
    assert lines[2] == "FINDING [sub] runner's finding"
    assert lines[-1].startswith("toy: 5 cases, 2 findings, exit statuses {0: 1, 2: 1}, ")
    # --only a section: the runner is left out; --list runs nothing (no judge call) and skips the runners
    calls.clear()
    code, lines = _drive(["--only", "toy", "--list"], sections={"toy": _toy}, runners={"sub": runner},
                         judges=(judge,))
    assert code == 0 and calls == [] and lines[:2] == ["toy.a collective -c dgx-h100 -n 8 --json",
                                                       "toy.b collective -c dgx-h100 -n 0 --json"]
    assert lines[-1].startswith("toy: 2 cases, 0 findings, exit statuses {}")
    assert fuzz.judge_cut(["x"], fuzz.Outcome(2, 0.0, 0.0, 0, "error: --x: abc...; allowed")) is not None
    assert fuzz.judge_wall_rss(20.0, 1 << 20)(["x"], fuzz.Outcome(0, 0.0, 21.0, 0, "")) == "slow: 21.0 s of wall clock"


# --- 5. GPU counts that do not rise: the count at fault, the message whole -----------------------------------------

def test_a_long_gpu_list_that_does_not_rise_is_refused_whole(cli, tmp_path: Path) -> None:
    counts = ",".join(["8"] * 300)
    line = refused(cli, "scale", "-m", "llama3-8b", "-c", "dgx-h100", "--gpus", counts, "--json",
                   match="GPU counts must increase (the first is the baseline of every efficiency), got 8,8,8")
    assert "...: count 2 (8) is not above count 1 (8); strictly increasing counts, e.g. 8" in line, line
    assert len(line) < 300, line
    f = tmp_path / "s.yaml"
    f.write_text("kind: scenario\nname: s\nmodel: llama3-8b\ncluster: dgx-h100\ngpus: [8, 16, "
                 + ", ".join(str(16 + k) for k in range(1, 200)) + ", 100]\n")
    # counts 8, 16, 17, ..., 215, then 100: count 202 (100) is the first not above the one before it (215)
    line = refused(cli, "scale", "--scenario", str(f), "--json", inputs=(f,),
                   match=f"error: {f}:5: gpus: GPU counts must increase")
    assert "count 202 (100) is not above count 201 (215)" in line, line


# --- 6. a long value of the wrong type: echoed short, the allowed kept ---------------------------------------------

@pytest.mark.parametrize(("field", "value", "allowed"), [
    ("strategy.check_for_nan_in_loss", "x" * 300, "; true or false"),
    ("strategy.tp", "[" + ", ".join(["1"] * 200) + "]", "; an integer from 1 to 1e+09")])
def test_a_long_value_of_the_wrong_type_keeps_the_allowed(cli, tmp_path: Path, field: str, value: str,
                                                          allowed: str) -> None:
    line = refused(cli, "predict", *DENSE, "--set", f"{field}={value}", "--json",
                   match=f"error: --set {field}: Input should be a valid ")
    assert line.endswith(allowed) and "...)" in line and len(line) < 300, line
    runs = tmp_path / "runs.yaml"
    runs.write_text("".join(f"- {{cluster: dgx-h100, model: llama3-8b, gpus: {g}, {field.split('.')[1]}: {value}, "
                            f"step_time: {t}}}\n" for g, t in ((8, "4 s"), (16, "2.1 s"))))
    line = refused(cli, "calibrate", "runs", str(runs), "--json", inputs=(runs,))
    assert line.endswith(allowed) and len(line) < 400, line


# --- 7. '=' pins of bucket and memory -----------------------------------------------------------------------------

@pytest.mark.parametrize(("pin", "size"), [("bucket=1.5", "1.5 B"), ("bucket=1 KB", "1000 B"),
                                           ("bucket=1023", "1023 B")])
def test_bucket_pin_below_the_smallest_priced_refused(cli, pin: str, size: str) -> None:
    # predict refuses the same bucket at its field (MIN_BUCKET_BYTES, 1 KiB)
    said = refused(cli, "predict", *DENSE, "--zero", "1", "--set", f"strategy.bucket_size={size.replace(' ', '')}")
    assert "below the smallest bucket priced, 1 KiB" in said
    refused(cli, "plan", *DENSE, "--constraint", pin, "--top", "1", "--json",
            match=f"error: --constraint: constraint '{pin}' pins a bucket of {size}, below the smallest bucket priced, "
                  "1 KiB; bucket=SIZE from 1 KiB (1024 B)")


@pytest.mark.parametrize(("pin", "bucket"), [("bucket=1KiB", 1024.0), ("bucket=default", None), ("bucket=0", None),
                                             ("bucket<=1.5", None)])
def test_bucket_pin_at_the_bound_or_default_searched(cli, pin: str, bucket: float | None) -> None:
    # the pinned 1 KiB is the plan's bucket; 0 and <= 1.5 B are met by the framework's default bucket (none given)
    r = cli("plan", *DENSE, "--constraint", pin, "--top", "1", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["ranked"][0]["strategy"]["bucket_bytes"] == bucket


@pytest.mark.parametrize("pin", ["memory=60GB", "memory==1.5", "memory!=80GB"])
def test_memory_equality_refused(cli, pin: str) -> None:
    refused(cli, "plan", *DENSE, "--constraint", pin, "--top", "1",
            match="memory is a bound on each GPU's memory, got '" + pin + "'; memory<=SIZE or memory<SIZE")
