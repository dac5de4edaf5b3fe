"""Rich rendering of a Prediction."""

from __future__ import annotations

from typing import Any

from scalemodel.choices import zero_label
from scalemodel.engine.intervals import QUANTILE_FROM, runs_phrase
from scalemodel.engine.parts import PARTS
from scalemodel.engine.predict import Prediction
from scalemodel.report.output import duration, emit_json, new_console, print_table, verbatim
from scalemodel.units import _DISPLAY
from scalemodel.units import format_quantity as fq


def _seq(inputs: dict[str, object]) -> str:
    """The training sequence length for a header (transformers only)."""
    seq = inputs.get("seq_len")
    return f", seq {seq:,}" if isinstance(seq, int) and inputs.get("model_kind") != "generic" else ""


def strategy_header(model: object, gpus: object, where: object, s: dict[str, Any], seq: str) -> str:
    """The line above predict's and memory's tables: the run and every strategy choice, in one wording ("DP 64 x
    TP 4", as plan's rows). ``s`` holds the strategy's keys; a global batch of None (memory without one) and a rank
    order memory does not price are left out."""
    batch = s.get("global_batch")
    return (f"[bold]{verbatim(model)}[/bold] on {gpus} x {verbatim(where)}: "
            f"DP {s['dp']} x TP {s['tp']} x PP {s['pp']} x CP {s['cp']} (EP {s['ep']}), micro-batch "
            f"{s['micro_batch']}, " + (f"global batch {batch}, " if batch is not None else "")
            + f"{s['schedule']}, {zero_label(s['zero'], ' ')}, "
            f"recompute {s['recompute']}, " + ("SP, " if s["sequence_parallel"] else "")
            + f"sync {s['sync']}" + (f", rank order {s['layout']}" if "layout" in s else "") + _stage_split(s)
            + _host_states(s) + seq)


def _host_states(s: dict[str, Any]) -> str:
    """', model states in host memory (offload_states optimizer)': strategy offload_states keeps them there
    (docs/model.md#state-offload), so that a table whose optimizer states read 0 B says where they went (review35c:
    the header of an offloaded 70B on one node read as a plain ZeRO-3 run)."""
    mode = s.get("offload_states", "none")
    return "" if mode in (None, "none") else f", model states in host memory (offload_states {mode})"


def _stage_split(s: dict[str, Any]) -> str:
    """', layers per stage 7, 8 x14, 7' or ', first stage 7 / last stage 7 layers': an uneven pipeline split given with
    --set strategy.stage_layers / first_stage_layers / ... (Llama 3.1 405B on PP 16 printed the header of an even
    split)."""
    stages = s.get("stage_layers")
    if stages:
        runs: list[list[int]] = []
        for n in stages:
            if runs and runs[-1][0] == n:
                runs[-1][1] += 1
            else:
                runs.append([n, 1])
        return ", layers per stage " + ", ".join(f"{n} x{k}" if k > 1 else str(n) for n, k in runs)
    ends = [f"{w} {unit} {s[f'{w}_{unit}_layers']}" for unit in ("stage", "chunk") for w in ("first", "last")
            if s.get(f"{w}_{unit}_layers") is not None]
    return f", {' / '.join(ends)} layers" if ends else ""


def render_prediction(p: Prediction, *, as_json: bool) -> None:
    """The JSON document, or the breakdown table and one line each for throughput, compute, memory."""
    if as_json:
        emit_json(p.payload(), "predict")
        return
    from rich.table import Table  # tables only

    console = new_console()
    s = p.strategy
    console.print(strategy_header(p.inputs.get("model", ""), s["gpus"], p.inputs.get("cluster", ""), s, _seq(p.inputs)))
    if not p.feasible:
        console.print(f"[bold red]infeasible:[/bold red] {p.infeasible_reason}")
        if p.infeasible_detail:
            console.print(f"  here: {p.infeasible_detail}")
    # an infeasible step is still priced (the JSON says feasible: false beside it): the table's title said so nowhere,
    # and 'Step time 6.19 s' with a 'likely' band read as a plan that runs
    t = Table(title=f"Step time {fq(p.step_time_s, 'time')}" + ("" if p.feasible else ", priced as if it ran"))
    t.add_column("part")
    t.add_column("time", justify="right")
    t.add_column("share", justify="right")
    # what each part is (the --json breakdown_s keys, docs/model.md#<part>): the table named parts such as
    # 'contention' and 'jitter' and explained only the dominant one
    t.add_column("what it is")
    for k, v in p.breakdown_s.items():
        if v > 0:
            t.add_row(k, fq(v, "time"), f"{v / p.step_time_s:.1%}" if p.step_time_s else "-", PARTS[k].description)
    print_table(console, t)
    zero = [k for k, v in p.breakdown_s.items() if v <= 0]
    if zero:  # the JSON lists every part; the table left the zero ones out without a word
        zero = [f"{k} ({p.zero_because[k]})" if k in p.zero_because else k for k in zero]
        console.print(f"0 s (not listed): {', '.join(zero)}; each part's formula: docs/model.md#<part> "
                      "(tp_comm: #tp-comm)", highlight=False)
    if p.reported_interval:  # the validated runs' band is for a step that runs
        console.print(interval_line(p.reported_interval))
    th, fl, mem = p.throughput, p.flops, p.memory
    if p.inputs.get("model_kind") == "generic":
        console.print(f"throughput: {th['samples_per_s']:,.1f} samples/s "
                      f"({th['samples_per_s'] / s['gpus']:,.1f} samples/s/GPU)")
    else:
        console.print(f"throughput: {th['tokens_per_s']:,.0f} tokens/s "
                      f"({th['tokens_per_s_per_gpu']:,.0f} tokens/s/GPU), {th['samples_per_s']:,.2f} sequences/s")
    console.print(f"compute: {fl['tflops_per_gpu']:.1f} model TFLOP/s per GPU, MFU {fl['mfu']:.1%}, "
                  f"HFU {fl['hfu']:.1%} of the {fq(fl['peak_flops_per_gpu'], 'flop_rate')} {fl['peak_format']} "
                  "dense peak")
    console.print(f"memory: {fq(mem['per_gpu_bytes'], 'bytes')} of "
                  f"{fq(mem['capacity_bytes'], 'bytes', binary=False)} per GPU"
                  f" ({'fits' if mem['fits'] else 'DOES NOT FIT'})"
                  # the parts and the levers left are memory's (report.memory._nothing_fits); predict named neither
                  + ("" if mem["fits"] else "; `scalemodel memory` with the same options shows the parts and what "
                     "would make it fit"))
    if p.sync["mode"] != "bsp":
        console.print(f"sync {p.sync['mode']}: {p.sync['updates_per_s']:.3g} updates/s, mean staleness "
                      f"{p.sync['mean_staleness']:.3g} steps, statistical efficiency "
                      f"{p.sync['statistical_efficiency']:.1%}")
    if p.time_to_train_s:
        cost = f", {p.cost_usd:,.0f} USD" if p.cost_usd else ""
        console.print(f"time to train: {duration(p.time_to_train_s)}{cost}")
    console.print(f"[italic]{p.dominant}[/italic]")
    for note in p.notes:  # the JSON's notes (where a staleness kappa came from, ...): the table view left them out
        if note != p.infeasible_reason:  # printed as 'infeasible:' above
            console.print(f"note: {note}", markup=False)


def _same_unit(lo: float, hi: float) -> str:
    """'48.87 s to 84.9 s': both ends of a range in the lower end's unit ('48.87 s to 1.415 min' made the reader
    convert one of them)."""
    low = fq(lo, "time")
    unit = low.rsplit(" ", 1)[-1]
    factor = dict(_DISPLAY["time"]).get(unit)
    if factor is None or abs(hi / factor) >= 1e4:  # '500 ms to 12 s', not '500 ms to 1.2e+04 ms' (:.4g's exponent)
        return f"{low} to {fq(hi, 'time')}"
    return f"{low} to {hi / factor:.4g} {unit}"


def _beyond_decile(n: int) -> int:
    """How many of n errors are surely on the far side of zero when the 10th percentile (numpy's linear method,
    intervals.quantile: position (n - 1) / 10 in the sorted errors, interpolated) is: every one from the order
    statistic at ceil((n - 1) / 10) on, n - ceil((n - 1) / 10). Not '90 %': with 12 runs the quantile sits between
    the 2nd and 3rd smallest, so only the 10 from the 3rd on (83 %) are sure to share its sign."""
    return n - -(-(n - 1) // 10)


def interval_line(band: dict) -> str:  # type: ignore[type-arg]
    """'likely 1.93-2.48 s per step (ampere TP/PP/DP dense 16-bit: 18 published runs)' or the OOD warning; on a
    calibrated cluster the basis follows (which of the calibration's errors the band is, or why it is the published
    runs' band)."""
    lo, hi = band["step_time_s"]
    fam = " ".join(band["family"].values()) or "all validated runs"
    text = f"likely {_same_unit(lo, hi)} per step ({fam}: {runs_phrase(band)}"
    # a band wholly on one side of the step printed above read as a second, contradicting answer (12.13 s, 'likely
    # 12.82 s to 15.08 s'): it is the step time corrected by the model's error on those runs, which all went one way.
    # Said out of distribution too (its range doubled keeps the side): llama3-8b FSDP on 64 MI300X printed 'Step
    # time 4.137 s' then 'likely 6.698 s to 8.122 s per step' with no word why
    lo_e, hi_e = band["speed_error_range"]
    share = "every one of" if band["cases"] < QUANTILE_FROM else f"at least {_beyond_decile(band['cases'])} of"
    side = (f"; the model was too fast on {share} them, so the band lies above the step" if lo_e > 0 else
            f"; the model was too slow on {share} them, so the band lies below the step" if hi_e < 0 else "")
    if band["out_of_distribution"]:
        return f"[bold yellow]out of distribution:[/bold yellow] {band['basis']}; {text}{side})"
    if band.get("calibration") is not None:  # a calibrated cluster: which errors the band is, or why not its runs'
        text = f"{text}: {band['basis']}"
    return f"{text}{side}; docs/model.md#intervals)"
