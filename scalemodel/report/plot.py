"""Plots of scaling sweeps (matplotlib, the optional ``plot`` extra; Agg backend, PNG or SVG by extension)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from scalemodel.engine.parts import PARTS
from scalemodel.errors import InputError
from scalemodel.report.output import check_output_path, write_file

FORMATS = {".png": "png", ".svg": "svg"}


def _format(path: str, option: str) -> str:
    """The image format of ``path`` as written (fuzz35: ``--plot ''`` was said as '.', what Path('') reads)."""
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise InputError(f"cannot tell the image format of {path[:200]!r}", where=option,
                         allowed="a file name ending in .png or .svg")
    return fmt


def check_plot_path(path: str | Path, option: str = "--plot") -> str:
    """Refuse a bad plot path before the work: unknown extension, a folder, a missing folder, an input."""
    fmt = _format(str(path), option)
    check_output_path(path, option)
    return fmt


def _pyplot(option: str) -> Any:
    try:
        import matplotlib  # optional heavy dependency (the `plot` extra): only --plot needs it
    except ImportError:
        raise InputError("plotting needs matplotlib, which is not installed", where=option,
                         allowed="pip install 'scalemodel[plot]' (or pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # optional heavy dependency, after the backend is chosen

    return plt


def _plain_log_axis(axis: Any) -> None:
    """Log axis with plain tick labels (1, 2, 5, 10, 20, ...), not 4x10^-1 (readable on a slide)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # with matplotlib, loaded above

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.6g}"))
    axis.set_minor_formatter(NullFormatter())


def _throughput_unit(tokens: list[float]) -> tuple[float, str]:
    """Divisor and label so the throughput axis reads in plain numbers >= 1 (tokens/s, thousands, millions)."""
    low = min(t for t in tokens if t > 0) if any(t > 0 for t in tokens) else 1.0
    for div, name in ((1e6, "million tokens/s"), (1e3, "thousand tokens/s")):
        if low >= div:
            return div, name
    return 1.0, "tokens/s"


def scaling_figure(payload: dict[str, Any], plt: Any) -> Any:
    """The two-panel figure of :func:`plot_scaling` (returned open; the caller closes it).

    Slide rules: plain tick labels (GPU counts as numbers, efficiency in %, throughput in a unit that
    keeps the numbers >= 1), and every legend below its panel, outside the data.
    """
    from matplotlib.ticker import PercentFormatter  # with matplotlib, loaded by the caller

    points = payload["points"]
    gpus = [p["gpus"] for p in points]
    eff = [p["scaling_efficiency"] for p in points]
    causes = [c for c in points[0]["loss_attribution"]
              if any(p["loss_attribution"].get(c, 0.0) > 1e-6 for p in points)]
    # positive losses stacked on the efficiency; gains (negative losses) are not drawn as areas
    layers = [[max(p["loss_attribution"].get(c, 0.0), 0.0) for p in points] for c in causes]

    with plt.rc_context({"font.size": 12, "axes.titlesize": 13, "legend.fontsize": 10}):
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.6), layout="constrained")
        mode = payload.get("mode", "")
        inp = payload.get("inputs", {})
        fig.suptitle(f"{inp.get('model', '')} on {inp.get('cluster', '')}: {mode} scaling")

        ax1.stackplot(gpus, [eff, *layers], labels=["scaling efficiency", *[f"lost: {c}" for c in causes]],
                      colors=["tab:green", *[PARTS[c].colour for c in causes]], alpha=0.85)
        ax1.plot(gpus, eff, "k.-", linewidth=1.2)
        ax1.set_xscale("log", base=2)
        ax1.set_xticks(gpus)
        ax1.set_xticklabels([str(g) for g in gpus])
        ax1.minorticks_off()
        ax1.set_xlabel("GPUs")
        ax1.set_ylabel(f"per-GPU throughput vs {gpus[0]} GPUs")
        ax1.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        ax1.set_ylim(0, max(1.05, max(e + sum(layer[i] for layer in layers) for i, e in enumerate(eff)) + 0.02))
        ax1.axhline(1.0, color="k", linewidth=0.6, linestyle=":")
        ax1.set_title("Scaling efficiency and where the rest goes")
        ax1.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=min(3, 1 + len(causes)), frameon=False)
        ax1.grid(True, alpha=0.3)

        tokens = [p["tokens_per_s"] for p in points]
        div, unit = _throughput_unit(tokens)
        ideal = [tokens[0] * g / gpus[0] for g in gpus]  # per-GPU throughput of the first point kept
        ax2.plot(gpus, [t / div for t in tokens], "o-", color="tab:blue", label="tokens/s (model)")
        ax2.plot(gpus, [t / div for t in ideal], "--", color="tab:blue", alpha=0.5, label="tokens/s (linear scaling)")
        ax2.set_xscale("log", base=2)
        ax2.set_yscale("log")
        _plain_log_axis(ax2.yaxis)
        shown = [t / div for t in tokens + ideal if t > 0]
        if shown:
            ax2.set_ylim(min(shown) / 1.3, max(shown) * 1.3)  # room for a tick below the first point
        ax2.set_xticks(gpus)
        ax2.set_xticklabels([str(g) for g in gpus])
        ax2.xaxis.set_minor_formatter(plt.NullFormatter())
        ax2.set_xlabel("GPUs")
        ax2.set_ylabel(f"throughput ({unit})")
        ax2.grid(True, which="major", alpha=0.3)
        ax3 = ax2.twinx()
        ax3.plot(gpus, [p["tflops_per_gpu"] for p in points], "s-", color="tab:red", label="TFLOP/s per GPU")
        ax3.set_ylabel("model TFLOP/s per GPU", color="tab:red")
        ax3.set_ylim(0, max(p["tflops_per_gpu"] for p in points) * 1.15 or 1.0)
        ax2.set_title("Throughput and per-GPU TFLOP/s")
        h1, l1 = ax2.get_legend_handles_labels()
        h2, l2 = ax3.get_legend_handles_labels()
        ax2.legend(h1 + h2, l1 + l2, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    return fig


def plot_scaling(payload: dict[str, Any], path: str | Path, *, option: str = "--plot") -> Path:
    """Efficiency (with the lost efficiency as stacked areas by cause) and throughput against GPUs.

    ``payload`` is :meth:`scalemodel.engine.scaling.ScalingResult.payload`. Writes ``path``
    (.png or .svg) and returns it. The image is rendered in memory and written atomically
    (:func:`scalemodel.report.output.write_file`): an interrupted run leaves an older plot intact.
    """
    fmt = check_plot_path(path, option)
    if not payload["points"]:
        raise InputError("nothing to plot: no points", where=option, allowed="a sweep of at least one GPU count")
    plt = _pyplot(option)
    fig = scaling_figure(payload, plt)
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=fmt, dpi=120)
    finally:
        plt.close(fig)
    return Path(write_file(path, buf.getvalue(), option))
