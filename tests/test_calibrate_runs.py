"""`calibrate runs FILE`: fitting compute, per-tier bandwidth and a per-step overhead to measured runs.

The measurements are synthetic: the step model itself with known factors (compute x0.8, the
inter-node tier's efficiency x0.7, 0.05 s per step) and 1 % multiplicative noise from a fixed seed;
the fit must recover each known factor inside its 95 % interval.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import conftest
import numpy as np
import pytest
import yaml
from conftest import _FITS, fit_runs_once, shared_once
from test_calibrate_checks import _h100_16_log

from scalemodel.engine import calibrate_runs
from scalemodel.engine.calibrate_runs import fit_runs, scaled_job
from scalemodel.engine.job import build_job, grid_from_strategy
from scalemodel.engine.predict import predict
from scalemodel.specs import load_cluster
from scalemodel.specs.runs import read_runs

#: `calibrate runs` and scalemodel.calibrate_runs fit through conftest's fit_runs_once: the command runs of the 8 runs'
#: default fit (the overlay, --predict-at, --out .yml, the Python API) reuse this file's ``fitted`` fit, made once
pytestmark = pytest.mark.usefixtures("fit_once")

TRUE = {"compute": 0.8, "ib-leaf": 0.7, "overhead_s": 0.05}

#: single-node and multi-node runs; DP traffic exposed (overlap off) in some so the network shows
RUNS = [
    {"name": "1.7b-8", "model": "gpt-1.7b", "gpus": 8, "global_batch": 64, "micro_batch": 4},
    {"name": "1.7b-32", "model": "gpt-1.7b", "gpus": 32, "global_batch": 128, "micro_batch": 4, "overlap": False},
    {"name": "1.7b-64", "model": "gpt-1.7b", "gpus": 64, "global_batch": 128, "micro_batch": 2, "overlap": False},
    {"name": "3.6b-16", "model": "gpt-3.6b", "gpus": 16, "tp": 2, "global_batch": 64, "micro_batch": 2},
    {"name": "3.6b-64", "model": "gpt-3.6b", "gpus": 64, "tp": 2, "global_batch": 256, "micro_batch": 2,
     "overlap": False},
    {"name": "7.5b-32", "model": "gpt-7.5b", "gpus": 32, "tp": 4, "pp": 2, "global_batch": 128, "micro_batch": 2},
    {"name": "7.5b-128", "model": "gpt-7.5b", "gpus": 128, "tp": 8, "global_batch": 128, "micro_batch": 1,
     "overlap": False},
    {"name": "1.7b-4", "model": "gpt-1.7b", "gpus": 4, "global_batch": 16, "micro_batch": 4},
]


def synthetic(tmp_path: Path, rows: list[dict], *, noise: float = 0.01, seed: int = 1, cluster: str = "dgx-a100",
              scale: Any = None, overhead_s: float | None = None) -> Path:
    """Runs file whose step times are the model's on ``cluster`` at the true factors (``scale(job)``, by default
    TRUE's compute and ib-leaf factors) plus ``overhead_s`` (default TRUE's), x (1 + noise N(0,1))."""
    from scalemodel.engine.calibrate_runs import _step

    cl = load_cluster(cluster)
    if scale is None:
        def scale(job: Any) -> Any:
            return scaled_job(job, TRUE["compute"], {"ib-leaf": TRUE["ib-leaf"]})
    overhead = TRUE["overhead_s"] if overhead_s is None else overhead_s
    rng = np.random.default_rng(seed)
    placeholder = tmp_path / "placeholder.yaml"
    placeholder.write_text(yaml.safe_dump([{"cluster": cluster, **r, "step_time": 1.0} for r in rows]))
    out = []
    for row, run in zip(rows, read_runs(placeholder), strict=True):
        job = scale(build_job(cl, run.workload, run.training))
        grid = grid_from_strategy(run.strategy, run.training, run.gpus, job)
        step = _step(job, grid, run.strategy.sync)[0] + overhead
        out.append({"cluster": cluster, **row, "step_time": float(step * (1 + noise * rng.standard_normal()))})
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump(out, sort_keys=False))
    return path


#: :func:`eight_runs_fit`'s runs file, runs and fit, by the session's temporary root
_EIGHT: dict[Path, Any] = {}


def eight_runs_fit(factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """:data:`RUNS` made by :func:`synthetic` (seed 1), their runs and their default fit: made once a session (keyed
    by the session's temporary root; ``factory`` is the session's tmp_path_factory) for this file's ``fitted`` and
    test_calib27's ``eight``, which fitted the same file the same way each (~25 s of CPU each). In-sample only, as
    conftest's ``_fits_without_leave_one_out`` has every fit outside test_calibrate_band.py: a module fixture is set
    up before that per-test switch, so both used to run the 8 leave-one-out refits too, which none of their tests
    reads (the refits are tested in test_calibrate_band.py, test_calibrate_runs_speed.py and test_calib27's
    test_leave_one_out_refits_keep_the_full_fits_selection). The tests read the file, the runs and the fit and
    change none of them. The fit is conftest's :func:`fit_runs_once`, whose entry the command's runs of the same
    file and factors (``fit_once``) reuse."""
    base = factory.getbasetemp()
    if base not in _EIGHT:
        path = synthetic(factory.mktemp("runs"), RUNS)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(calibrate_runs, "LOO_MAX_RUNS", 0)
            _EIGHT[base] = path, read_runs(path), fit_runs_once(read_runs(path), source=str(path))
    return _EIGHT[base]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return eight_runs_fit(tmp_path_factory)


def test_known_factors_recovered_within_intervals(fitted) -> None:  # type: ignore[no-untyped-def]
    _, _, fit = fitted
    for name, true in (("compute", TRUE["compute"]), ("bandwidth:ib-leaf", TRUE["ib-leaf"]),
                       ("overhead_s", TRUE["overhead_s"])):
        f = fit.factor(name)
        assert f.determined and f.ci is not None, name
        assert f.ci[0] <= true <= f.ci[1], (name, f.value, f.ci)
    assert abs(fit.factor("compute").value / TRUE["compute"] - 1) < 0.05
    assert abs(fit.factor("bandwidth:ib-leaf").value / TRUE["ib-leaf"] - 1) < 0.15
    # the residuals after the fit are at the noise level (1 %), far below those before
    assert fit.rms_log_error_after < 0.03 < fit.rms_log_error_before
    # no run crosses the spine or core: those factors are not fitted, and named in a warning
    for tier in ("ib-spine", "ib-core"):
        assert not fit.factor(f"bandwidth:{tier}").determined
        assert any(w.startswith(f"bandwidth:{tier}: not determined") for w in fit.warnings)


def test_one_node_runs_cannot_determine_the_inter_node_tier(tmp_path: Path) -> None:
    rows = [r for r in RUNS if r["gpus"] <= 8]
    fit = fit_runs(read_runs(synthetic(tmp_path, rows)), source="x")
    assert not fit.factor("bandwidth:ib-leaf").determined
    assert fit.factor("bandwidth:ib-leaf").value == 1.0
    assert any(w.startswith("bandwidth:ib-leaf: not determined") for w in fit.warnings)


def test_overlay_reproduces_the_fitted_predictions(fitted, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path, runs, fit = fitted
    out = tmp_path / "overlay.yaml"
    r = cli("calibrate", "runs", str(path), "--out", str(out), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    overhead = next(f for f in doc["factors"] if f["name"] == "overhead_s")["value"]
    raw = yaml.safe_load(out.read_text())
    assert raw["extends"] == "dgx-a100"
    assert raw["step_overhead"] == overhead  # the overlay carries every fitted factor, the overhead included
    overlay = load_cluster(out)
    assert overlay.step_overhead == overhead
    for run, row in zip(runs, doc["runs"], strict=True):
        p = predict(overlay, run.workload, run.gpus, run.training, run.strategy)
        assert p.step_time_s == pytest.approx(row["after_s"], rel=1e-6), run.label
        assert p.breakdown_s["overhead"] == overhead
    # the same, through `predict --cluster overlay.yaml` on the command line
    first = runs[0]
    r2 = cli("predict", "-c", str(out), "-m", "gpt-1.7b", "-n", str(first.gpus), "--global-batch", "64",
             "--micro-batch", "4", "--json")
    assert json.loads(r2.out)["step_time_s"] == pytest.approx(doc["runs"][0]["after_s"], rel=1e-6)


def test_csv_with_the_same_columns(fitted, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, runs, fit = fitted
    rows = yaml.safe_load(path.read_text())
    cols = sorted({k for r in rows for k in r})
    lines = [",".join(cols)] + [",".join("" if r.get(c) is None else str(r[c]).lower()
                                         if isinstance(r.get(c), bool) else str(r[c]) for c in cols) for r in rows]
    csv_path = tmp_path / "runs.csv"
    csv_path.write_text("\n".join(lines) + "\n")
    got = read_runs(csv_path)
    assert [(r.label, r.gpus, r.step_time_s, r.strategy, r.training) for r in got] == \
        [(r.label, r.gpus, r.step_time_s, r.strategy, r.training) for r in runs]


def test_tokens_per_s_equals_the_step_time_it_implies(tmp_path: Path) -> None:
    row = {"cluster": "dgx-a100", "model": "gpt-1.7b", "gpus": 8, "global_batch": 64, "seq_len": 2048}
    a = tmp_path / "a.yaml"
    a.write_text(yaml.safe_dump([{**row, "step_time": "2 s"}, {**row, "gpus": 16, "step_time": 1.5}]))
    b = tmp_path / "b.yaml"
    b.write_text(yaml.safe_dump([{**row, "tokens_per_s": 64 * 2048 / 2}, {**row, "gpus": 16, "step_time": 1.5}]))
    fa, fb = fit_runs(read_runs(a)), fit_runs(read_runs(b))
    assert fb.runs[0]["measured_s"] == pytest.approx(2.0, rel=1e-9)
    assert fa.runs[0]["after_s"] == pytest.approx(fb.runs[0]["after_s"], rel=1e-6)


@pytest.mark.parametrize(("rows", "where", "what"), [
    ([{"cluster": "dgx-a100", "model": "gpt-1.7b", "gpus": 8}], "run 1", "exactly one of step_time, tokens_per_s"),
    ([{"cluster": "dgx-a100", "model": "gpt-1.7b", "gpus": 8, "step_time": 1, "tpp": 2}], "run 1", "unknown field"),
    ([{"cluster": "dgx-a100", "model": "gpt-1.7b", "gpus": 0, "step_time": 1}], "run 1 (line 1): gpus", "GPU count"),
    ([{"cluster": "dgx-a100", "model": "gpt-1.7b", "gpus": 8, "step_time": -1}], "(line 1): step_time", "positive"),
    ([{"cluster": "dgx-a100", "model": "gpt-1.7b", "gpus": 8, "step_time": "3 GB"}], "run 1 (line 1): step_time", ""),
    ([{"cluster": "dgx-a100", "model": "nope-model", "gpus": 8, "step_time": 1}], "run 1 (line 1): model", "unknown"),
    ([{"cluster": "dgx-a100", "model": "gpt-1.7b", "gpus": 8, "step_time": 1, "tp": "x"}], "run 1", "tp"),
    ([{"cluster": "dgx-a100", "model": "gpt-1.7b", "gpus": 8, "step_time": 1},
      {"cluster": "dgx-h100", "model": "gpt-1.7b", "gpus": 8, "step_time": 1}], "runs.yaml", "2 clusters"),
    ({"a": 1}, "runs.yaml:1: a", "unknown top-level key 'a'"),  # the key named (ux38b)
])
def test_bad_rows_are_one_line_errors(tmp_path: Path, cli, rows, where: str, what: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump(rows))
    r = cli("calibrate", "runs", str(path))
    assert r.code == 2, r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.err
    assert where in lines[0] and what in lines[0], lines[0]


def test_csv_row_with_missing_cells_is_an_error(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "runs.csv"
    path.write_text("cluster,model,gpus,step_time\ndgx-a100,gpt-1.7b,8\n")
    r = cli("calibrate", "runs", str(path))
    assert r.code == 2 and r.err.startswith("error: ") and "row 1" in r.err and len(r.err.strip().splitlines()) == 1


def test_out_never_overwrites_the_input(fitted, cli) -> None:  # type: ignore[no-untyped-def]
    path, _, _ = fitted
    before = path.read_text()
    r = cli("calibrate", "runs", str(path), "--out", str(path))
    assert r.code == 2 and path.read_text() == before


def test_chosen_factors_only_and_a_bound_is_warned(fitted, cli) -> None:  # type: ignore[no-untyped-def]
    path, runs, _ = fitted
    fit = fit_runs(runs, only=["compute"])
    assert [f.name for f in fit.factors if f.determined] == ["compute"]
    assert fit.factor("overhead_s").value == 0.0 and fit.factor("bandwidth:ib-leaf").value == 1.0
    # without the overhead and the network the compute factor alone must absorb both: it moves below the truth
    assert fit.factor("compute").value < TRUE["compute"]
    # a fit that has to reach a physical limit: slower runs than compute x0.1 can explain
    slow = [replace_step(r, r.step_time_s * 50) for r in runs]
    f2 = fit_runs(slow, only=["compute"])
    assert f2.factor("compute").at_bound == "lower" and f2.factor("compute").ci is None
    assert any(w.startswith("compute: fitted value") and "lower bound" in w for w in f2.warnings)
    r = cli("calibrate", "runs", str(path), "--factors", "compute,bogus")
    assert r.code == 2 and r.err.startswith("error: --factors: unknown factor 'bogus'")


def replace_step(run, step: float):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    return replace(run, step_time_s=step)


def test_overlay_of_a_cluster_file_extends_it_by_relative_path(fitted, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path, _, _ = fitted
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "mine.yaml").write_text("extends: dgx-a100\nname: mine\n")
    rows = yaml.safe_load(path.read_text())
    runs_file = tmp_path / "runs.yaml"
    runs_file.write_text(yaml.safe_dump([{**r, "cluster": "specs/mine.yaml"} for r in rows]))
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "fit.yaml"
    r = cli("calibrate", "runs", str(runs_file), "--out", str(out), "--factors", "compute,overhead_s", "--json")
    assert r.code == 0, r.err
    assert yaml.safe_load(out.read_text())["extends"] == "../specs/mine.yaml"
    doc = json.loads(r.out)
    c = next(f for f in doc["factors"] if f["name"] == "compute")["value"]
    overlay = load_cluster(out)
    base = load_cluster(tmp_path / "specs" / "mine.yaml")
    from scalemodel.cost.compute import default_efficiency

    curve = base.accelerator.compute_efficiency or default_efficiency(base.accelerator.family)
    assert overlay.accelerator.compute_efficiency.gemm_max == pytest.approx(curve.gemm_max * c, rel=1e-8)
    assert overlay.accelerator.compute_efficiency.memory == pytest.approx(curve.memory * c, rel=1e-8)


def test_a_run_the_model_calls_infeasible_is_warned(tmp_path: Path) -> None:
    path = tmp_path / "runs.yaml"
    rows = [{"cluster": "dgx-a100", "model": "gpt3-175b", "gpus": 8, "global_batch": 8, "step_time": 100},
            {"cluster": "dgx-a100", "model": "gpt-1.7b", "gpus": 8, "global_batch": 8, "step_time": 1}]
    path.write_text(yaml.safe_dump(rows))
    fit = fit_runs(read_runs(path))
    assert any(w.startswith("run dgx-a100 gpt3-175b 8: the model says this run could not run") for w in fit.warnings)


def test_fp8_runs_get_their_own_compute_factor(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """bf16 and fp8 runs on dgx-h100 made with compute x0.85 (16-bit GEMMs and memory), fp8 GEMMs x0.75,
    0.03 s per step, 1 % noise: both factors and the overhead are recovered within their intervals, and
    the overlay's fp8 curve carries the fp8 factor."""
    truth = {"compute": 0.85, "compute:fp8": 0.75, "overhead_s": 0.03}
    rows = [{"model": m, "gpus": g, "global_batch": gb, "micro_batch": mb, "precision": p, "tp": tp}
            for m, g, gb, mb, tp in (("gpt-1.7b", 8, 64, 4, 1), ("gpt-3.6b", 8, 32, 2, 2), ("gpt-7.5b", 8, 16, 1, 4),
                                     ("gpt-1.7b", 4, 8, 1, 1))
            for p in ("bf16", "fp8")]
    cluster = load_cluster("dgx-h100")
    path = synthetic(tmp_path, rows, seed=2, cluster="dgx-h100", overhead_s=truth["overhead_s"],
                     scale=lambda job: scaled_job(job, truth["compute"], {}, truth["compute:fp8"]))
    overlay_path = tmp_path / "fit.yaml"
    r = cli("calibrate", "runs", str(path), "--factors", "compute,compute:fp8,overhead_s", "--out",
            str(overlay_path), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    got = {f["name"]: f for f in doc["factors"]}
    for name, true in truth.items():
        assert got[name]["ci"] is not None and got[name]["ci"][0] <= true <= got[name]["ci"][1], (name, got[name])
    spec = cluster.accelerator.compute_efficiency
    overlay = load_cluster(overlay_path).accelerator.compute_efficiency
    assert overlay.fp8.gemm_max == pytest.approx(spec.fp8.gemm_max * got["compute:fp8"]["value"], rel=1e-8)
    assert overlay.gemm_max == pytest.approx(spec.gemm_max * got["compute"]["value"], rel=1e-8)
    runs = read_runs(path)
    for run, row in zip(runs, doc["runs"], strict=True):
        p = predict(load_cluster(overlay_path), run.workload, run.gpus, run.training, run.strategy)
        assert p.step_time_s == pytest.approx(row["after_s"], rel=1e-6)


def test_python_api_gives_the_command_s_fit(fitted) -> None:  # type: ignore[no-untyped-def]
    import scalemodel

    path, _, fit = fitted
    got = scalemodel.calibrate_runs(path)
    assert [(f.name, f.value) for f in got.factors] == [(f.name, f.value) for f in fit.factors]
    assert "calibrate_runs" in dir(scalemodel)


def test_overlap_and_overhead_recovered_and_carried_by_the_overlay(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """Data-parallel runs whose gradient sync outlasts part of the backward window, made by the step model
    with compute x0.8, overlap efficiency 0.5 and 0.05 s per step (1 % noise): the three are recovered
    within their intervals, and `predict -c overlay.yaml` gives the fitted step of every run."""
    truth = {"compute": 0.8, "overlap": 0.5, "overhead_s": 0.05}
    rows = [{"model": m, "gpus": g, "global_batch": gb, "micro_batch": mb, "tp": tp}
            for m, g, gb, mb, tp in (("gpt-1.7b", 16, 16, 1, 1), ("gpt-1.7b", 32, 64, 2, 1),
                                     ("gpt-1.7b", 64, 64, 1, 1), ("gpt-1.7b", 64, 256, 4, 1),
                                     ("gpt-3.6b", 32, 32, 2, 2), ("gpt-3.6b", 64, 64, 1, 2),
                                     ("gpt-1.7b", 128, 128, 1, 1), ("gpt-3.6b", 128, 256, 4, 2))]
    path = synthetic(tmp_path, rows, seed=3, overhead_s=0.0,
                     scale=lambda job: scaled_job(job, truth["compute"], {}, overlap=truth["overlap"],
                                                  overhead=truth["overhead_s"]))
    overlay_path = tmp_path / "fit.yaml"
    r = cli("calibrate", "runs", str(path), "--factors", "compute,overlap,overhead_s", "--out", str(overlay_path),
            "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    got = {f["name"]: f for f in doc["factors"]}
    for name, true in truth.items():
        assert got[name]["ci"] is not None and got[name]["ci"][0] <= true <= got[name]["ci"][1], (name, got[name])
    assert abs(got["compute"]["value"] / truth["compute"] - 1) < 0.05 and got["overlap"]["ci"][1] < 0.9  # 1 is excluded
    raw = yaml.safe_load(overlay_path.read_text())
    assert raw["overlap_efficiency"] == pytest.approx(got["overlap"]["value"], rel=1e-8)  # dgx-a100's own is 1
    assert raw["step_overhead"] == got["overhead_s"]["value"]
    overlay = load_cluster(overlay_path)
    for run, row in zip(read_runs(path), doc["runs"], strict=True):
        p = predict(overlay, run.workload, run.gpus, run.training, run.strategy)
        assert p.step_time_s == pytest.approx(row["after_s"], rel=1e-6), run.label


@pytest.mark.parametrize("mode", ["strong", "weak"])
def test_predict_at_shows_the_largest_run_and_the_target_side_by_side(fitted, tmp_path: Path, cli, mode: str) -> None:  # type: ignore[no-untyped-def]
    """--predict-at N: the target column is what `predict -c overlay.yaml` gives at N GPUs (DP re-derived,
    the batch kept or grown N/128-fold), the measured column is the largest run's fitted step, and the
    parts named as grown are those whose share rose most."""
    path, _, _ = fitted
    out = tmp_path / "fit.yaml"
    r = cli("calibrate", "runs", str(path), "--out", str(out), "--predict-at", "1024", "--mode", mode, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    ch = doc["predict_at"]
    largest = next(x for x in doc["runs"] if x["name"] == "7.5b-128")  # 128 GPUs, tp 8, global batch 128
    assert ch["measured"]["gpus"] == 128 and ch["measured"]["step_s"] == pytest.approx(largest["after_s"], rel=1e-9)
    batch = 128 if mode == "strong" else 1024
    assert ch["target"]["global_batch"] == batch and ch["target"]["dp"] == 1024 // 8
    p = json.loads(cli("predict", "-c", str(out), "-m", "gpt-7.5b", "-n", "1024", "--tp", "8", "--global-batch",
                       str(batch), "--micro-batch", "1", "--no-overlap", "--json").out)
    assert ch["target"]["step_s"] == pytest.approx(p["step_time_s"], rel=1e-6)
    for k, v in p["breakdown_s"].items():
        assert ch["target"]["breakdown_s"][k] == pytest.approx(v, rel=1e-6, abs=1e-12), k
    rows = {x["part"]: x for x in ch["parts"]}
    for x in rows.values():
        assert x["from_share"] == pytest.approx(x["from_s"] / ch["measured"]["step_s"])
        assert x["to_share"] == pytest.approx(x["to_s"] / ch["target"]["step_s"])
    rising = sorted((x for x in rows.values() if x["change_share"] >= 0.005), key=lambda x: -x["change_share"])
    assert ch["grew"] == [x["part"] for x in rising][:3] and ch["grew"]
    assert "the parts whose share of the step grew most" in ch["why"]
    # strong scaling at 8x the GPUs: the gradient sync's share grows most (compute shrinks 8x, the sync does not)
    if mode == "strong":
        assert ch["grew"][0] == "dp_comm"
    human = cli("calibrate", "runs", str(path), "--predict-at", "1024", "--mode", mode)
    assert human.code == 0 and "the parts whose share of the step grew most" in " ".join(human.out.split())


@pytest.mark.parametrize(("args", "what"), [
    (["--predict-at", "0"], "--predict-at"),
    (["--predict-at", "1000"], "--predict-at"),  # dp 125 does not divide the batch of 128
    (["--predict-at", "1020"], "--predict-at"),  # not a multiple of tp 8
    (["--predict-at", "100000"], "--predict-at"),  # beyond the cluster
    (["--predict-at", "1024", "--mode", "sideways"], "--mode"),
])
def test_predict_at_bad_values_are_one_line_errors(fitted, cli, args: list[str], what: str) -> None:  # type: ignore[no-untyped-def]
    path, _, _ = fitted
    r = cli("calibrate", "runs", str(path), *args)
    assert r.code == 2 and r.err.startswith(f"error: {what}") and len(r.err.strip().splitlines()) == 1, r.err


def test_a_fast_run_keeps_every_scaled_kernel_under_its_peak(tmp_path: Path) -> None:
    """The compute factor multiplies the attention kernel's attn_max too (scaled_job); on dgx-b200 its cuDNN
    forward curve has attn_max 0.955, above the 16-bit GEMM curve's 0.591, so the factor's upper bound is
    1/0.955, not 1/0.591: runs measured far faster than the model pin the factor there instead of pricing a
    kernel above its peak (which was refused as an input error mid-fit). 1.5x faster, not 3x: the model's MFU is 41 %
    there, so a third of its step is faster than the FLOPs at peak, refused as input (calibrate_runs._flops_floor_s)."""
    rows = [{"name": "fast", "model": "gpt-1.7b", "gpus": 8, "global_batch": 64, "micro_batch": 4}]
    path = synthetic(tmp_path, rows, noise=0.0, cluster="dgx-b200", scale=lambda job: job, overhead_s=0.0)
    fast = [replace_step(r, r.step_time_s / 1.5) for r in read_runs(path)]
    fit = fit_runs(fast, only=["compute"])
    f = fit.factor("compute")
    assert f.bounds[1] == pytest.approx(1 / 0.955, rel=1e-9)
    assert f.at_bound == "upper" and f.value <= 1 / 0.955 * (1 + 1e-9)


@pytest.mark.parametrize("name", ["o.csv", "o.json", "o"])
def test_out_must_be_a_yaml_file(fitted, tmp_path: Path, cli, name: str) -> None:  # type: ignore[no-untyped-def]
    """Both calibrate forms write a YAML cluster overlay: --out o.csv wrote YAML into a .csv (refused now, exit 2,
    nothing written); .yml is taken as .yaml is."""
    path = fitted[0]
    log = tmp_path / "h100.log"
    log.write_text(_h100_16_log())
    for form in (["runs", str(path)], ["nccl-tests", str(log), "--cluster", "dgx-h100", "--force"]):
        r = cli("calibrate", *form, "--out", str(tmp_path / name))
        assert r.code == 2 and r.err.startswith("error: --out: ") and ".yaml or .yml" in r.err, r.err
        assert len(r.err.strip().splitlines()) == 1 and not (tmp_path / name).exists()


def test_out_may_be_a_yml_file(fitted, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """test_out_must_be_a_yaml_file's accepted case, fitted once rather than once per refused name."""
    r = cli("calibrate", "runs", str(fitted[0]), "--out", str(tmp_path / "o.yml"), "--json")
    assert r.code == 0 and yaml.safe_load((tmp_path / "o.yml").read_text())["extends"], r.err


def test_a_step_faster_than_physics_is_refused(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """Run 1.7b-8 (gpt-1.7b, 8 A100s, 64 x 2048 tokens) does Megatron's 72 B s L h^2 (1 + s/(6h) + V/(12hL))
    = 72 x 64 x 2048 x 24 x 2304^2 x (1 + 2048/13824 + 51200/663552) = 1.4732e15 model FLOPs a step; at 8 x 312
    TFLOP/s (A100 bf16 dense) no step is under 0.5902 s. Measured at 0.5 s it only lowered the compute factor's fit
    (exit 0); now it is one error line naming the file, the run and the floor (exit 2). At 0.6 s it is accepted."""
    flops = 72 * 64 * 2048 * 24 * 2304**2 * (1 + 2048 / (6 * 2304) + 51200 / (12 * 2304 * 24))
    floor = flops / (8 * 312e12)
    assert floor == pytest.approx(0.5902, abs=1e-4)
    path = synthetic(tmp_path, RUNS[:4], noise=0.0)
    rows = yaml.safe_load(path.read_text())
    for step, code in ((0.5, 2), (0.6, 0)):
        rows[0]["step_time"] = step
        path.write_text(yaml.safe_dump(rows, sort_keys=False))
        r = cli("calibrate", "runs", str(path), "--json")
        assert r.code == code, r.err
        if code == 2:
            line = r.err.strip()
            assert line.startswith(f"error: {path}: run 1 (line 1): step_time: ") and "\n" not in line, line
            assert "faster than the physical floor" in line and f"{floor:.4g} s" in line


def test_fit_runs_once_is_the_fit_and_is_keyed_on_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """conftest's fit_runs_once (the fits this file's command runs share): a hit is the fit fit_runs makes of the same
    arguments (its payload equal, ``out`` as the call gives it), a copy of its own (clearing one changes no later hit),
    and every change of content is a new fit: another measured step, another factor list, another LOO_MAX_RUNS."""
    path = synthetic(tmp_path, RUNS[:1])  # one run, one factor: the cheapest fit there is (a fit is a fit to the memo)
    runs = read_runs(path)
    direct = fit_runs(runs, source=str(path), out="a.yaml", only=["compute"])
    first = fit_runs_once(runs, source=str(path), out="a.yaml", only=["compute"])
    n = len(_FITS)
    again = fit_runs_once(read_runs(path), source=str(path), out="b.yaml", only=["compute"])  # a hit
    assert len(_FITS) == n and first.payload() == direct.payload()
    assert again.inputs == {**direct.inputs, "out": "b.yaml"} and again.factors == direct.factors
    again.factors.clear()
    assert fit_runs_once(runs, source=str(path), only=["compute"]).factors == direct.factors
    slower = [replace_step(r, r.step_time_s * 1.2) for r in runs]
    got = fit_runs_once(slower, source=str(path), only=["compute"])
    assert got.payload() == fit_runs(slower, source=str(path), only=["compute"]).payload()
    assert got.factor("compute").value < direct.factor("compute").value  # slower runs: a lower compute factor
    fit_runs_once(runs, source=str(path), only=["compute", "overhead_s"])
    monkeypatch.setattr(calibrate_runs, "LOO_MAX_RUNS", 7)
    fit_runs_once(runs, source=str(path), only=["compute"])
    assert len(_FITS) == n + 3


def test_shared_once_computes_once_a_run_and_hands_out_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """conftest's shared_once (validate_all and test_calibrate_extrapolation's series, once a pytest-xdist run): the
    first call computes and pickles under the run's root, keyed by the inputs' digest; a later one (another worker's)
    reads it, a copy of its own, without computing."""
    monkeypatch.setattr(conftest, "_RUN_ROOT", [tmp_path])  # as a worker's session fixture sets it
    calls: list[int] = []

    def compute() -> dict[str, list[float]]:
        calls.append(1)
        return {"a": [1.5]}

    first, again = shared_once("t", compute), shared_once("t", compute)
    assert first == again == {"a": [1.5]} and first is not again
    assert calls == ([1] if conftest.fcntl is not None else [1, 1])
    assert (tmp_path / f"t-{conftest._inputs_digest()}.pickle").is_file() == (conftest.fcntl is not None)
