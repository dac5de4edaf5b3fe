"""Loose ends that fuzz38 and ux38 found and left (ux38b), each against test_hostile_inputs.py's contract: a refusal
exits 2 with one ``error:`` line naming where the value was written, what was wrong and what is allowed.

1. ``plan --precision fp4 --set strategy.bucket_fragments=true`` on dgx-h100 said "give zero too": bucket_fragments
   runs at zero 1 and 2 only, where --precision refuses FP4 on Hopper, so no stage takes both. The refusal names the
   option refused where the pin runs (with its reason), and the stages that refuse the pin.
2. A GPU count of 2**70 in a scenario was "beyond the largest integer a spec accepts (1e+09); an integer from 1 to
   1e+08": two bounds, the first not the field's. The field's own bound is named where it is tighter than the spec's.
3. A YAML merge key in a runs file was refused with "a cluster, accelerator or workload spec can start from another
   with extends: BASE": a runs file has no extends. It says what a runs file allows.
4. A runs file's mapping with a key besides ``runs`` was "expected a list of runs", the key not named.
5. A cluster file's accelerator file (fuzz38's finding 5) was named by its absolute path ("/home/.../sub/a.yaml:3:
   memory", "file not found: /home/.../sub/nope.yaml") where a scenario's cluster file and an extends base are named
   as given ("sub/c.yaml:3"). The cluster's path as given, joined with its accelerator: line, names it now.
6. A pinned recompute_layers / recompute_method uniform / recompute_modules without recompute was refused "add
   recompute: full" though plan searches recompute: the search keeps to the mode the field runs under
   (engine.planner.RECOMPUTE_SWITCHES, one table beside ZERO_SWITCHES) and plan says so.
7. A pinned first/last_chunk_layers beside a pinned deepspeed_pipeline or nanotron_trainer (flat schedules only):
   with deepspeed_pipeline plan ranked 1f1b plans predict refuses (the trainer's 1f1b pin replaced the interleaved
   one), with nanotron_trainer it ranked none ("no split ... meets what was asked"). Refused naming both pins.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_hostile_inputs import no_hang, refused  # noqa: F401 (no_hang: autouse)

_BIG = str(2**70)


# --- 1. a pinned switch whose stages another option refuses -------------------------------------------------------

_FP4 = "precision fp4 (NVFP4) needs Blackwell tensor cores; h100-sxm is hopper"


@pytest.mark.parametrize(("pin", "runs", "refuses"), [  # the stages each switch runs at: engine.planner.ZERO_SWITCHES
    ("bucket_fragments=true", "1 and 2", "0, 3, fsdp and hsdp"),
    ("fp8_param_gather=true", "1, 2, fsdp and hsdp", "0 and 3"),
    ("fsdp_per_param=true", "fsdp and hsdp", "0, 1, 2 and 3"),
    ("fsdp_reshard_after_forward=false", "3, fsdp and hsdp", "0, 1 and 2")])
def test_plan_names_the_option_refused_where_the_pin_runs(cli, pin: str, runs: str, refuses: str) -> None:  # type: ignore[no-untyped-def]
    name = pin.split("=")[0]
    line = refused(cli, "plan", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "8", "--precision", "fp4", "--top", "1",
                   "--set", f"strategy.{pin}", "--json")
    assert "give zero too" not in line, line
    assert line == (f"error: --precision: no ZeRO stage plan searches takes the pinned --set strategy.{name} with "
                    f"--precision: refused at zero {runs}, --precision: {_FP4}; at zero {refuses}, --set "
                    f"strategy.{name}; bf16, fp16 or fp8 on this accelerator (--precision), or leave out --set "
                    f"strategy.{name}"), line
    # predict's own refusal of the precision, in the same words, without any pin
    refused(cli, "predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "8", "--precision", "fp4", "--json",
            match=f"error: --precision: {_FP4}; bf16, fp16 or fp8 on this accelerator")


# --- 2. one bound, the one that applies -------------------------------------------------------------------------------

def test_a_gpu_count_past_every_bound_names_the_fields_bound(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    s = tmp_path / "s.yaml"
    s.write_text(f"kind: scenario\nname: s\nmodel: llama3-8b\ncluster: dgx-h100\ngpus: [8, {_BIG}]\n")
    line = refused(cli, "check", str(s), "--json", inputs=(s,))
    # MAX_GPUS is 10**8 (specs.base): the bound the allowed part names, and the only one
    assert line == (f"error: {s}:5: gpus[1]: {_BIG} is beyond the largest integer this field accepts (1e+08); "
                    "an integer from 1 to 1e+08"), line
    assert "1e+09" not in line


@pytest.mark.parametrize(("item", "said"), [
    ("cluster.gpus_per_node=1e12", "1e+12 is beyond the largest integer this field accepts (1e+08); an integer from 1 "
                                   "to 1e+08"),
    ("strategy.tp=-1e308", "-1e+308 is below the smallest integer this field accepts (1); an integer from 1 to 1e+09"),
    # a field bounded only by the spec's integer keeps that bound's words
    ("strategy.tp=1e308", "1e+308 is beyond the largest integer a spec accepts (1e+09); an integer from 1 to 1e+09")])
def test_a_set_item_past_every_bound_names_one(cli, item: str, said: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "8", "--set", item, "--json",
            match=f"error: --set {item.split('=')[0]}: {said}")


# --- 3. and 4. a runs file says what it allows -----------------------------------------------------------------------

_RUN = "{cluster: dgx-h100, model: llama3-8b, gpus: 8, step_time: 1 s}"


def test_a_merge_key_in_a_runs_file_says_what_a_runs_file_allows(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs.yaml"
    runs.write_text(f"- &a {_RUN}\n- {{<<: *a, gpus: 16}}\n")
    line = refused(cli, "calibrate", "runs", str(runs), "--json", inputs=(runs,))
    assert line.startswith(f"error: {runs}:2: YAML merge keys ('<<: *anchor') are not supported; each run's fields "
                           "written out"), line
    assert "extends: BASE" not in line and "a runs file has no extends:" in line, line
    # the advice runs: the alias standing for a whole value is read
    runs.write_text("- {cluster: dgx-h100, model: llama3-70b, gpus: 64, pp: 4, step_time: 9 s, stage_layers: &s "
                    "[20, 20, 20, 20]}\n- {cluster: dgx-h100, model: llama3-70b, gpus: 128, pp: 4, step_time: 5 s, "
                    "stage_layers: *s}\n")
    r = cli("calibrate", "runs", str(runs), "--json")
    assert r.code == 0, r.err


@pytest.mark.parametrize(("text", "where", "what"), [
    (f"runs:\n- {_RUN}\nnote: two runs\n", ":3: note", "unknown top-level key 'note'"),
    (f"note: x\nruns:\n- {_RUN}\n", ":1: note", "unknown top-level key 'note'"),
    ("a: 1\n", ":1: a", "unknown top-level key 'a'")])
def test_a_runs_mapping_names_its_other_key(cli, tmp_path: Path, text: str, where: str, what: str) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs.yaml"
    runs.write_text(text)
    refused(cli, "calibrate", "runs", str(runs), "--json", inputs=(runs,),
            match=f"error: {runs}{where}: {what}; a runs file is a list of runs, or a mapping with the one key runs: "
                  "(the list)")


def test_one_run_written_as_the_mapping_is_told_to_be_a_list_item(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    runs = tmp_path / "runs.yaml"
    runs.write_text("cluster: dgx-h100\nmodel: llama3-8b\ngpus: 8\nstep_time: 1 s\n")
    refused(cli, "calibrate", "runs", str(runs), "--json", inputs=(runs,),
            match=f"error: {runs}:1: a mapping of one run's fields ('cluster' at the top), not a list of runs; each "
                  "run a list item ('- cluster: ...')")
    runs.write_text("- cluster: dgx-h100\n  model: llama3-8b\n  gpus: 8\n  step_time: 1 s\n")  # as advised
    assert cli("calibrate", "runs", str(runs), "--json").code == 0


# --- 7. a chunk layer count beside a trainer of flat schedules -------------------------------------------------------

@pytest.mark.parametrize(("trainer", "runs"), [("deepspeed_pipeline", "DeepSpeed's TrainSchedule (1f1b)"),
                                               ("nanotron_trainer", "1f1b or afab (gpipe)")])
@pytest.mark.parametrize("name", ["first_chunk_layers", "last_chunk_layers"])
def test_plan_refuses_a_chunk_count_beside_a_flat_trainer(cli, trainer: str, runs: str, name: str) -> None:  # type: ignore[no-untyped-def]
    plan = ("plan", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--global-batch", "32", "--top", "2")
    refused(cli, *plan, "--set", f"strategy.{name}=2", "--set", f"strategy.{trainer}=true", "--json",
            match=f"error: --set strategy.{name}: {name} 2 splits an interleaved pipeline's model chunks, and the "
                  f"pinned {trainer} (--set strategy.{trainer}) runs {runs} only, a flat schedule; "
                  f"first/last_stage_layers for a flat schedule's stages, or leave out {name} or {trainer}")
    # predict refuses the pair at the trainer's schedule too (a chunk count needs an interleaved one)
    refused(cli, "predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--global-batch", "32", "--pp", "2",
            "--set", f"strategy.{name}=2", "--set", f"strategy.{trainer}=true", "--json",
            match=f"error: --set strategy.{name}: {name} is set but the schedule is 1f1b")
    # the advice runs: a stage layer count beside the trainer is planned, each plan at a flat schedule
    r = cli(*plan, "--set", "strategy.first_stage_layers=2", "--set", f"strategy.{trainer}=true", "--json")
    assert r.code == 0, r.err
    ranked = json.loads(r.out)["ranked"]
    assert ranked and all(not p["strategy"]["schedule"].startswith("interleaved") for p in ranked)


# --- 5. a cluster's accelerator file is named as given ----------------------------------------------------------------

def test_a_clusters_accelerator_file_is_named_as_given(cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)  # relative paths, as a user types them
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "a.yaml").write_text("extends: h100-sxm\nname: a\nmemory: -80 GB\n")  # line 3
    (sub / "c.yaml").write_text("extends: dgx-h100\nname: c\naccelerator: a.yaml\n")
    (sub / "e.yaml").write_text("")
    (sub / "c2.yaml").write_text("extends: dgx-h100\nname: c2\naccelerator: nope.yaml\n")
    (sub / "c3.yaml").write_text("extends: dgx-h100\nname: c3\naccelerator: e.yaml\n")
    (sub / "s.yaml").write_text("kind: scenario\nname: s\nmodel: llama3-8b\ncluster: c.yaml\ngpus: [8]\n")
    (sub / "s2.yaml").write_text("kind: scenario\nname: s\nmodel: llama3-8b\ncluster: c2.yaml\ngpus: [8]\n")
    pred = ("predict", "-m", "llama3-8b", "-n", "8", "--json")
    said = "memory: Input should be greater than 0 (got '-80 GB')"
    assert refused(cli, *pred, "-c", "sub/c.yaml").startswith(f"error: sub/a.yaml:3: {said}")
    assert refused(cli, "check", "sub/s.yaml", "--json").startswith(f"error: sub/a.yaml:3: {said}")
    refused(cli, *pred, "-c", "sub/c2.yaml", match="error: sub/c2.yaml:3: accelerator: sub/nope.yaml: file not found: "
                                                   "sub/nope.yaml; ")
    refused(cli, "check", "sub/s2.yaml", "--json",
            match="error: sub/s2.yaml: cluster.accelerator: sub/nope.yaml: file not found: sub/nope.yaml; ")
    refused(cli, *pred, "-c", "sub/c3.yaml", match="error: sub/c3.yaml:3: accelerator: sub/e.yaml: file is empty; ")
    # a cluster given by its absolute path names its accelerator absolutely, as given
    assert refused(cli, *pred, "-c", str(sub / "c.yaml")).startswith(f"error: {sub / 'a.yaml'}:3: {said}")
    # and the file read is the same one: mended, the cluster is priced as -c sub/c.yaml from any folder
    (sub / "a.yaml").write_text("extends: h100-sxm\nname: a\nmemory: 40 GB\n")
    r = cli(*pred, "-c", "sub/c.yaml")
    assert r.code == 0, r.err
    monkeypatch.chdir(sub)
    assert cli(*pred, "-c", "c.yaml").out == r.out


# --- 6. a pinned recompute field keeps the search to its mode ---------------------------------------------------------

_PLAN = ("plan", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--global-batch", "32", "--top", "4")


@pytest.mark.parametrize(("item", "mode", "others"), [
    # StrategySpec's rules (specs.training): recompute_layers and recompute_method uniform need full, recompute_modules
    # selective
    ("recompute_layers=2", "full", "none or selective"), ("recompute_method=uniform", "full", "none or selective"),
    ("recompute_modules=core_attn", "selective", "none or full")])
def test_plan_keeps_a_pinned_recompute_field_to_its_mode(cli, tmp_path: Path, item: str, mode: str,  # type: ignore[no-untyped-def]
                                                         others: str) -> None:
    name, value = item.split("=")
    r = cli(*_PLAN, "--set", f"strategy.{item}", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["warnings"] == [f"plan searches recompute {mode} only: the pinned {name} {value} cannot run at "
                               f"recompute {others} (predict refuses it there)"], doc["warnings"]
    assert doc["ranked"] and all(p["strategy"]["recompute"] == mode for p in doc["ranked"])
    for i, p in enumerate(doc["ranked"]):  # each plan is one predict accepts, at the plan's step
        f = tmp_path / f"p{i}.yaml"
        f.write_text(yaml.safe_dump(p["strategy"]))
        r = cli("predict", "-m", "llama3-8b", "-c", "dgx-h100", "-n", "16", "--global-batch", "32", "--strategy",
                str(f), "--json")
        assert r.code == 0, r.err
        assert json.loads(r.out)["step_time_s"] == pytest.approx(p["step_time_s"], rel=1e-9)
    # the same ranking as the mode pinned by hand (a second route), which says nothing of it
    by_hand = cli(*_PLAN, "--set", f"strategy.{item}", "--set", f"strategy.recompute={mode}", "--json")
    assert by_hand.code == 0 and "plan searches" not in by_hand.err, by_hand.err
    assert [p["step_time_s"] for p in json.loads(by_hand.out)["ranked"]] == [p["step_time_s"] for p in doc["ranked"]]


def test_a_constraint_leaving_no_mode_for_the_pin_names_it(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, *_PLAN, "--set", "strategy.recompute_layers=2", "--constraint", "recompute=none",
            match="error: --constraint: no recompute meets recompute=none, recompute=full together: recompute is also "
                  "constrained by the pinned recompute_layers (--set strategy.recompute_layers)")
    # recompute pinned to another mode: the spec's refusal, as predict's
    refused(cli, *_PLAN, "--set", "strategy.recompute_layers=2", "--set", "strategy.recompute=selective",
            match="error: --set strategy.recompute_layers: recompute_layers=2 needs recompute: full (got 'selective')")
