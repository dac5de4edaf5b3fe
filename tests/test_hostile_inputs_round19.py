"""Hostile-input round 19: a ``--set`` that names a root and no field, a sweep's models/clusters entry that does not
resolve, and nccl-tests data rows the reader drops.

Each case is one finding; the contract is test_hostile_inputs.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hostile_inputs import LOG, accepted, no_hang, refused  # noqa: F401 (no_hang: autouse)

DENSE = ["-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "64"]


# --- --set ROOT with no field --------------------------------------------------------------------------------------
# "--set cluster" was refused as "does not start with a known root" (it starts with one); "--set
# cluster.gpus_per_node" (no '=') as "override 'gpus_per_node' has no '='", the root cut off what the user wrote.

@pytest.mark.parametrize("item, said", [
    ("cluster", "override 'cluster' names no field of cluster; cluster.<field>=VALUE"),
    ("cluster=", "override 'cluster=' names no field of cluster; cluster.<field>=VALUE"),
    ("model", "override 'model' names no field of model; model.<field>=VALUE"),
    ("cluster.gpus_per_node", "override 'cluster.gpus_per_node' has no '='; cluster.gpus_per_node=VALUE"),
])
def test_set_root_without_a_field_is_said(cli, item: str, said: str) -> None:  # type: ignore[no-untyped-def]
    assert said in refused(cli, "predict", *DENSE, "--set", item)


def test_set_unknown_root_still_says_so(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", *DENSE, "--set", "nonsense.x=1", match="does not start with a known root")


# --- a sweep's entry that does not resolve ---------------------------------------------------------------------------
# "error: cluster: unknown built-in cluster 'nope'" named neither the sweep file nor the entry.

SWEEP = ("kind: sweep\nname: s\nmodels: [{models}]\nclusters: [{clusters}]\ngpus: [16]\n"
         "strategies: [{{label: a, tp: 1}}]\n")


@pytest.mark.parametrize("models, clusters, where, what", [
    ("gpt-1.7b", "dgx-h100, nope", "clusters[1]", "unknown built-in cluster 'nope'"),
    ("gpt-1.7b, ./missing.yaml", "dgx-h100", "models[1]", "file not found: ./missing.yaml"),
])
def test_sweep_entry_that_does_not_resolve_names_file_and_entry(cli, tmp_path: Path, models: str, clusters: str,  # type: ignore[no-untyped-def]
                                                                 where: str, what: str) -> None:
    f = tmp_path / "sweep.yaml"
    f.write_text(SWEEP.format(models=models, clusters=clusters))
    line = refused(cli, "sweep", str(f), "-j", "1", inputs=(f,))
    assert line.startswith(f"error: {f}: {where}: ") and what in line, line


# --- nccl-tests data rows the reader drops ---------------------------------------------------------------------------
# A row whose time is NaN, inf, negative or 0, whose size is not an integer of at most 30 digits, or that is cut
# short was dropped without a word and the tier fitted to the rest (exit 0, nothing on stderr).

def _log_with(tmp_path: Path, row_index: int, col: int, value: str | None) -> tuple[Path, int]:
    lines = LOG.read_text().splitlines()
    data = [i for i, ln in enumerate(lines) if ln.strip() and not ln.startswith("#")]
    at = data[row_index]
    parts = lines[at].split()
    lines[at] = lines[at][:30] if value is None else "  ".join(parts[:col] + [value] + parts[col + 1:])
    f = tmp_path / "bad.log"
    f.write_text("\n".join(lines) + "\n")
    return f, at + 1


@pytest.mark.parametrize("col, value", [(5, "nan"), (5, "inf"), (5, "-55.0"), (5, "0.00"), (0, "9" * 40),
                                        (7, "nan"), (0, None)])
def test_nccl_row_not_fitted_is_said(cli, tmp_path: Path, col: int, value: str | None) -> None:  # type: ignore[no-untyped-def]
    f, lineno = _log_with(tmp_path, 5, col, value)
    r = cli("calibrate", str(f), "-c", "dgx-a100", "--json")
    assert r.code == 0 and "Traceback" not in r.err, r.err
    assert f"{f}: 1 data row(s) not fitted: line {lineno} (" in r.err, r.err


def test_nccl_clean_log_says_nothing(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("calibrate", str(LOG), "-c", "dgx-a100", "--json")
    assert r.code == 0 and "not fitted" not in r.err, r.err


# --- plan --top beyond what can be printed ----------------------------------------------------------------------------
# Each ranked row is priced and explained in full (about 10 ms): -k 1000000 over gpt-1.7b's 5 million feasible plans
# ran for hours (the corpus's 20 s timeout).

def test_plan_top_beyond_the_cap_is_refused(cli) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "plan", *DENSE, "-k", "1000000", "--json",
            match="--top: --top 1,000,000 would price and print 1,000,000 strategies in full")
    refused(cli, "plan", *DENSE, "-k", "501", match="an integer from 1 to 500")


# --- a tier protocol the model does not know ------------------------------------------------------------------------
# The label picks NCCL's link class (nvlink / pci / net), LL128 and the per-step net overhead; 'carrier-pigeon' or a
# typo 'nvlnik' was priced as a network link without a word.

CLUSTER = """kind: cluster
name: proto
accelerator: h100-sxm
gpus_per_node: 8
max_gpus: 64
tiers:
  - {{name: nvlink, span: 8, bandwidth: 450 GB/s, latency: 2 us, efficiency: 0.8, protocol: {inner}}}
  - {{name: ib, span: 64, bandwidth: 50 GB/s, latency: 5 us, efficiency: 0.9, protocol: rdma}}
"""


@pytest.mark.parametrize("label", ["nvlnik", "carrier-pigeon"])
def test_unknown_tier_protocol_is_refused(cli, tmp_path: Path, label: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "c.yaml"
    f.write_text(CLUSTER.format(inner=label))
    line = refused(cli, "predict", "-c", str(f), "-m", "gpt-1.7b", "-n", "64", inputs=(f,))
    assert line.startswith(f"error: {f}:") and f"tiers[0] ('nvlink') protocol '{label}' is not a link" in line, line
    assert "nvlink, nvswitch" in line


@pytest.mark.parametrize("label", ["NVLink", "nvswitch", "''"])
def test_known_tier_protocol_in_any_case_runs(cli, tmp_path: Path, label: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "c.yaml"
    f.write_text(CLUSTER.format(inner=label))
    assert accepted(cli, "predict", "-c", str(f), "-m", "gpt-1.7b", "-n", "64")["feasible"] is True


def test_known_protocols_hold_every_label_the_cost_model_reads() -> None:
    # the link classes and the labels the spec takes are one vocabulary (scalemodel.choices); NCCL's LL128 rule is
    # cost/nccl.py's own set, which must name labels the spec takes
    from scalemodel.choices import KNOWN_PROTOCOLS, NVLINK_CLASS, PCI_CLASS
    from scalemodel.cost.nccl import NO_LL128_PROTOCOLS
    assert NVLINK_CLASS | PCI_CLASS | NO_LL128_PROTOCOLS <= KNOWN_PROTOCOLS


# --- scale --scenario whose strategy does not divide the scenario's GPU counts ------------------------------------
# check named "FILE: gpus"; scale over the same file said "--gpus", an option never given.

SCENARIO = """kind: scenario
name: s
cluster: dgx-h100
model: gpt-1.7b
gpus: [16, 32]
training: {micro_batch: 1, global_batch: 64}
strategy: {tp: 3}
assertions: {max_step_time: 100s}
"""


@pytest.mark.parametrize("command", ["scale", "check"])
def test_scenario_gpus_a_strategy_does_not_divide_names_the_file(cli, tmp_path: Path, command: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text(SCENARIO)
    args = ["scale", "--scenario", str(f)] if command == "scale" else ["check", str(f)]
    refused(cli, *args, inputs=(f,), match=f"error: {f}: gpus: 16 GPUs is not a multiple of tp x pp x cp = 3")


def test_scale_gpus_given_a_strategy_does_not_divide_still_names_the_flag(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text(SCENARIO)
    refused(cli, "scale", "--scenario", str(f), "-n", "16,32", match="error: --gpus: 16 GPUs is not a multiple")


# --- a symbolic link that does not resolve ---------------------------------------------------------------------------
# A dangling link or a loop given as a cluster, scenario or sweep was "file not found", while ls shows the link;
# --strategy already said "Too many levels of symbolic links".

@pytest.mark.parametrize("command", [["predict", "-c", "{f}", "-m", "gpt-1.7b", "-n", "8"], ["check", "{f}"],
                                     ["sweep", "{f}", "-j", "1"]])
def test_symlink_that_does_not_resolve_is_said(cli, tmp_path: Path, command: list[str]) -> None:  # type: ignore[no-untyped-def]
    dangling, a, b = tmp_path / "dangling.yaml", tmp_path / "a.yaml", tmp_path / "b.yaml"
    dangling.symlink_to(tmp_path / "none.yaml")
    a.symlink_to(b)
    b.symlink_to(a)
    line = refused(cli, *[w.format(f=dangling) for w in command])
    assert f"error: {dangling}: a symbolic link to '{tmp_path / 'none.yaml'}', which does not resolve" in line, line
    line = refused(cli, *[w.format(f=a) for w in command])
    assert f"error: {a}: a symbolic link that loops back on itself" in line, line


def test_missing_plain_file_is_still_not_found(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "predict", "-c", str(tmp_path / "none.yaml"), "-m", "gpt-1.7b", "-n", "8", match="file not found")


# --- memory --optimizer-bytes / --grad-bytes out of the spec's range ------------------------------------------------
# nan, inf or 1e308 was refused at "training.optimizer_bytes_per_param", a field the user never wrote; a negative
# value at "--optimizer-bytes/--grad-bytes", both options for the one given.

@pytest.mark.parametrize("option, value, said", [
    ("--optimizer-bytes", "nan", "error: --optimizer-bytes: --optimizer-bytes nan bytes per parameter is outside 0"),
    ("--optimizer-bytes", "1e308", "error: --optimizer-bytes: --optimizer-bytes 1e+308 bytes per parameter is outside"),
    ("--grad-bytes", "inf", "error: --grad-bytes: --grad-bytes inf bytes per parameter is outside 0.125 .. 8"),
    ("--grad-bytes", "0", "error: --grad-bytes: --grad-bytes 0 bytes per parameter is outside 0.125 .. 8"),
    ("--grad-bytes", "-1", "error: --grad-bytes: --grad-bytes -1 bytes per parameter is outside 0.125 .. 8; a number "
                           "from 0.125 to 8"),  # review19e: not 'a number >= 0', which 0 is not
])
def test_memory_bytes_per_parameter_out_of_range_names_the_option(cli, option: str, value: str, said: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "memory", *DENSE, option, value, "--json", match=said)


def test_memory_bytes_per_parameter_at_the_bounds_run(cli) -> None:  # type: ignore[no-untyped-def]
    assert accepted(cli, "memory", *DENSE, "--optimizer-bytes", "64", "--grad-bytes", "0.125")


# --- expert parallelism on a dense model -----------------------------------------------------------------------------
# "--ep 2 x etp 1 needs an MoE model whose 0 experts ep divides": the model has no experts at all.

@pytest.mark.parametrize("command", ["predict", "memory", "sensitivity"])
def test_ep_on_a_dense_model_says_it_is_dense(cli, command: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, command, *DENSE, "--ep", "2",
            match="error: --ep: --ep 2 x etp 1 needs an MoE model; gpt-1.7b has no experts (a dense model); ep 1")


# --- calibrate runs --mode without --predict-at --------------------------------------------------------------------
# --mode shapes only the change to --predict-at N GPUs; without it, --mode weak was ignored without a word.

def test_calibrate_runs_mode_without_predict_at_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "runs.yaml"
    run = "- {{cluster: dgx-a100, model: gpt-1.7b, gpus: {n}, global_batch: 128, micro_batch: 4, step_time: {t}}}\n"
    f.write_text(run.format(n=8, t=1.2) + run.format(n=32, t=1.0))
    refused(cli, "calibrate", "runs", str(f), "--mode", "weak", inputs=(f,),
            match="error: --mode: --mode weak scales the fitted runs to --predict-at N GPUs, and no --predict-at")


# --- a scenario without its cluster or model -----------------------------------------------------------------------
# The loader put None in the missing key: "cluster: Input should be a valid mapping (got None)", a field not written.

@pytest.mark.parametrize("field", ["cluster", "model"])
@pytest.mark.parametrize("command", ["check", "scale"])
def test_scenario_missing_cluster_or_model_is_said_missing(cli, tmp_path: Path, field: str, command: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("\n".join(ln for ln in SCENARIO.splitlines() if not ln.startswith(f"{field}:")) + "\n")
    args = ["scale", "--scenario", str(f)] if command == "scale" else ["check", str(f)]
    refused(cli, *args, inputs=(f,), match=f"{f}:1: {field}: missing required field")


# --- plan --constraint / --allow of nothing but commas ----------------------------------------------------------------
# Both searched as if not given, without a word; --sync-modes already refuses its empty list.

@pytest.mark.parametrize("option, value, said", [("--constraint", ",,,", "error: --constraint: no constraint in ',,,'"),
                                                 ("--allow", ", ,", "error: --allow: no search named in ', ,'")])
def test_plan_option_of_only_commas_is_refused(cli, option: str, value: str, said: str) -> None:  # type: ignore[no-untyped-def]
    refused(cli, "plan", *DENSE, option, value, match=said)


def test_plan_constraint_with_a_trailing_comma_still_runs(cli) -> None:  # type: ignore[no-untyped-def]
    ranked = accepted(cli, "plan", *DENSE, "--constraint", "tp<=2,", "-k", "3")["ranked"]
    assert ranked and all(row["strategy"]["tp"] <= 2 for row in ranked)
