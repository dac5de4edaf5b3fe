"""Rich rendering of a planner result, and the lazy progress bar of long searches."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from scalemodel.engine.planner import PlanResult
from scalemodel.engine.step import INFEASIBLE_REASONS, REASON_KEYS
from scalemodel.report.explain import describe_layout, describe_settings, explained
from scalemodel.report.output import duration, emit_json, new_console, print_table, verbatim
from scalemodel.units import format_quantity as fq


def _may_be_terminal() -> bool:
    """False where rich's ``Console(stderr=True).is_terminal`` is certainly False (rich 13-15, console.py
    ``is_terminal``): no TTY_COMPATIBLE or FORCE_COLOR in the environment (either can make it True) and a stderr
    that is not a terminal (isatty false, missing or failing). A search piped to a file, as every benchmark and
    script runs it, then never imports rich for its progress bar."""
    if "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:
        return True
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except ValueError:
        return False


class LazyProgress:
    """A transient rich progress bar on stderr that appears only once a search has run for
    ``after_s`` seconds (and only on a terminal). Call it as ``progress(done, total)``. rich is imported only
    then (and by the tables), so ``plan --json`` and a quick search never load it."""

    def __init__(self, label: str, after_s: float = 1.0) -> None:
        self.label = label
        self.after_s = after_s
        self.t0 = time.perf_counter()
        self._progress: Any = None
        self._task: Any = None
        self._off = False

    def __call__(self, done: int, total: int) -> None:
        if self._off:
            return
        if self._progress is None:
            if time.perf_counter() - self.t0 < self.after_s or done >= total:
                return
            if not _may_be_terminal():  # rich would find no terminal: not imported (~25 ms) to be told so
                self._off = True
                return
            from rich.console import Console  # only a long search on a terminal draws a bar
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # same

            console = Console(stderr=True)
            if not console.is_terminal:
                self._off = True
                return
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), console=console, transient=True)
            self._progress.start()
            self._task = self._progress.add_task(self.label, total=total)
        self._progress.update(self._task, completed=done, total=total)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        self._off = True


#: How a choice that did not matter is named in the table's words (describe_settings writes "bucket 2 GB").
_CHOICE_LABEL = {"bucket_bytes": "bucket"}


def _choice(key: str, value: Any) -> str:
    """One value of a choice that did not matter, as the table writes it: bytes in readable units."""
    if value is None:
        return "default"
    if key.endswith("_bytes") and isinstance(value, int | float) and not isinstance(value, bool):
        return fq(value, "bytes")
    return str(value)


def _shares(breakdown: dict[str, float], step: float, n: int = 3) -> str:
    """The ``n`` largest parts' shares of the step, named by their JSON keys as predict's and scale's tables and
    --json name them ('contention 10%', not a short label of its own), one a line so a narrow terminal never
    splits a name from its share."""
    parts = sorted(((v, k) for k, v in breakdown.items() if v > 0), reverse=True)[:n]
    return "\n".join(f"{k} {v / step:.0%}" for v, k in parts) if step > 0 else "-"


def render_plan(result: PlanResult, *, as_json: bool) -> None:
    """The JSON document, or the ranked table, the infeasible counts and the explanation."""
    result = explained(result)
    if as_json:
        emit_json(result.payload(), "plan")
        return
    from rich.table import Table  # tables only: plan --json never imports rich

    console = new_console()
    inp = result.inputs
    batches = inp.get("global_batch")
    searched = isinstance(batches, list)  # time to target over the batch too (planner._search_batches)
    batch = (f"global batch searched over {', '.join(map(str, batches))} sequences" if searched  # type: ignore[arg-type]
             else f"global batch {batches}")
    console.print(
        f"[bold]{verbatim(inp.get('model', ''))}[/bold] on {inp.get('gpus', '')} x {verbatim(inp.get('cluster', ''))}, "
        f"{batch} "
        f"x {inp.get('seq_len', '')} tokens, {inp.get('precision', '')}; objective {result.objective}")
    evaluated = result.search.get("evaluated", result.candidates_evaluated)
    console.print(f"searched {result.candidates_evaluated:,} candidates ({evaluated:,} evaluated, the rest bounded) "
                  f"in {result.elapsed_s:.2f} s: {result.feasible:,} feasible")
    if result.ranked:
        t = Table(title=f"Top {len(result.ranked)} strategies" if len(result.ranked) > 1 else "Top strategy")
        for col, just in (("#", "right"), ("layout", "left"), ("settings", "left"), ("step", "right"),
                          ("tokens/s", "right"), ("MFU", "right"), ("mem/GPU", "right")):
            t.add_column(col, justify=just)  # type: ignore[arg-type]
        shares = [_shares(p.breakdown_s, p.step_time_s) for p in result.ranked]
        t.add_column("breakdown", no_wrap=True)  # one 'part share' a line: a narrow terminal wraps the others
        # a ranked asp/ssp/local/backup row trades statistical efficiency for step time: the table ranked 'local:8'
        # first on throughput with nothing on its row of the 80 % it keeps (the JSON's statistical_efficiency)
        # "sync eff.": the sync mode's; "batch eff.": the critical-batch efficiency a batch-searched time to train
        # divides by too, (B_ref + B_noise) / (B + B_noise) against the smallest batch searched (at most 100 %), so
        # the row's time to train is read from its columns and the budget restated at B_ref (the line below)
        stat = any(p.sync["mode"] != "bsp" for p in result.ranked)
        batch_eff = result.batch_efficiency
        if stat:
            t.add_column("sync eff.", justify="right")
        if batch_eff:
            t.add_column("batch eff.", justify="right")
        extra = result.objective != "throughput"
        if extra:
            t.add_column("time to train" if result.objective == "time-to-train" else "cost", justify="right")
        for i, p in enumerate(result.ranked):
            custom = result.custom[i] if i < len(result.custom) else []
            settings = describe_settings(p.strategy) + (r" \[custom]" if custom else "")  # \[: text, not markup
            if searched:  # each row's own batch: the rows differ in it, and their time to train with it
                settings = f"batch {p.strategy['global_batch']:,}, {settings}"
            row = [str(i + 1), describe_layout(p.strategy), settings, fq(p.step_time_s, "time"),
                   f"{p.throughput['tokens_per_s']:,.0f}", f"{p.flops['mfu']:.1%}",
                   fq(p.memory["per_gpu_bytes"], "bytes"), shares[i]]
            if stat:
                row.append(f"{p.sync['statistical_efficiency']:.1%}")
            if batch_eff:
                row.append(f"{batch_eff[i]:.1%}" if i < len(batch_eff) else "-")
            if extra:
                if result.objective == "cost":
                    row.append(f"{p.cost_usd:,.0f} USD" if p.cost_usd else "-")
                else:
                    row.append(duration(p.time_to_train_s) if p.time_to_train_s else "-")
            t.add_row(*row)
        print_table(console, t)
        ref_tokens = result.search.get("reference_tokens")
        if batch_eff and ref_tokens:
            console.print(f"  batch eff.: progress per sequence against the smallest batch searched, "
                          f"{result.search['reference_batch']:,}; time to train = {ref_tokens:.3g} tokens "
                          "(train_tokens at the default batch, restated at that one) / (tokens/s x sync eff. x batch "
                          "eff.)")
        if stat and result.objective == "throughput":
            console.print("  ranked by step throughput alone: the statistical efficiency a sync mode keeps (sync "
                          "eff.) is not in it; --objective time-to-train weighs it in")
        for i, same in enumerate(result.equivalents[:len(result.ranked)]):
            if same:
                text = "; ".join(f"{_CHOICE_LABEL.get(k, k)} {' | '.join(_choice(k, v) for v in vals)}"
                                 for k, vals in same.items())
                console.print(f"  #{i + 1}: did not matter (within 0.5 %): {text}")
        for i, custom in enumerate(result.custom[:len(result.ranked)]):
            if custom:
                console.print(f"  #{i + 1} \\[custom]: {', '.join(custom)} (not run by mainstream frameworks)")
    if result.pareto:
        tp = Table(title="Pareto front: step throughput vs time to target vs cost")
        for col in ("layout", "settings", "tokens/s", "sync eff.", "effective tokens/s", "time to train", "cost"):
            tp.add_column(col, justify="left" if col in ("layout", "settings") else "right")
        for p in result.pareto:
            eff = p.sync["statistical_efficiency"]
            tp.add_row(describe_layout(p.strategy), describe_settings(p.strategy),
                       f"{p.throughput['tokens_per_s']:,.0f}", f"{eff:.3f}",
                       f"{p.throughput['tokens_per_s'] * eff:,.0f}",
                       duration(p.time_to_train_s) if p.time_to_train_s else "-",
                       f"{p.cost_usd:,.0f} USD" if p.cost_usd else "-")
        print_table(console, tp)
    if result.infeasible_by_reason:
        t2 = Table(title="Infeasible candidates")
        t2.add_column("reason")
        t2.add_column("count", justify="right")
        t2.add_column("meaning")
        meaning = {REASON_KEYS[k]: v for k, v in INFEASIBLE_REASONS.items()}
        meaning["memory_constraint"] = "exceeds the --constraint memory limit"
        for k, n in sorted(result.infeasible_by_reason.items(), key=lambda kv: -kv[1]):
            t2.add_row(k, f"{n:,}", meaning.get(k, ""))
        print_table(console, t2)
    console.print(f"[italic]{result.why}[/italic]")
