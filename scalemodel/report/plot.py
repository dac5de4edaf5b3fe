"""Plots of scaling sweeps (matplotlib, the optional ``plot`` extra; Agg backend, PNG or SVG by extension)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scalemodel.engine.parts import PARTS
from scalemodel.errors import InputError

FORMATS = {".png": "png", ".svg": "svg"}


def _format(path: Path, option: str) -> str:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise InputError(f"cannot tell the image format of {str(path)!r}", where=option,
                         allowed="a file name ending in .png or .svg")
    return fmt


def check_plot_path(path: str | Path, option: str = "--plot") -> str:
    """Refuse a bad plot path before the work: unknown extension, a folder, a missing folder, an input."""
    from scalemodel.report.output import check_output_path

    fmt = _format(Path(path), option)
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


def plot_scaling(payload: dict[str, Any], path: str | Path, *, option: str = "--plot") -> Path:
    """Efficiency (with the lost efficiency as stacked areas by cause) and throughput against GPUs.

    ``payload`` is :meth:`scalemodel.engine.scaling.ScalingResult.payload`. Writes ``path``
    (.png or .svg) and returns it. The image is rendered in memory and written atomically
    (:func:`scalemodel.report.output.write_file`): an interrupted run leaves an older plot intact.
    """
    import io

    from scalemodel.report.output import write_file

    fmt = check_plot_path(path, option)
    points = payload["points"]
    if not points:
        raise InputError("nothing to plot: no points", where=option)
    plt = _pyplot(option)

    gpus = [p["gpus"] for p in points]
    eff = [p["scaling_efficiency"] for p in points]
    causes = [c for c in points[0]["loss_attribution"]
              if any(p["loss_attribution"].get(c, 0.0) > 1e-6 for p in points)]
    # positive losses stacked on the efficiency; gains (negative losses) are not drawn as areas
    layers = [[max(p["loss_attribution"].get(c, 0.0), 0.0) for p in points] for c in causes]

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    mode = payload.get("mode", "")
    inp = payload.get("inputs", {})
    fig.suptitle(f"{inp.get('model', '')} on {inp.get('cluster', '')}: {mode} scaling")

    ax1.stackplot(gpus, [eff, *layers], labels=["scaling efficiency", *[f"lost: {c}" for c in causes]],
                  colors=["tab:green", *[PARTS[c].colour for c in causes]], alpha=0.85)
    ax1.plot(gpus, eff, "k.-", linewidth=1.2)
    ax1.set_xscale("log", base=2)
    ax1.set_xticks(gpus)
    ax1.set_xticklabels([str(g) for g in gpus])
    ax1.set_xlabel("GPUs")
    ax1.set_ylabel(f"per-GPU throughput relative to {gpus[0]} GPUs")
    ax1.set_ylim(0, max(1.05, max(e + sum(layer[i] for layer in layers) for i, e in enumerate(eff)) + 0.02))
    ax1.axhline(1.0, color="k", linewidth=0.6, linestyle=":")
    ax1.set_title("Scaling efficiency and where the rest goes")
    ax1.legend(loc="lower left", fontsize=8)
    ax1.grid(True, alpha=0.3)

    tokens = [p["tokens_per_s"] for p in points]
    ideal = [tokens[0] * g / gpus[0] for g in gpus]  # per-GPU throughput of the first point kept
    ax2.plot(gpus, [t / 1e6 for t in tokens], "o-", color="tab:blue", label="tokens/s (model)")
    ax2.plot(gpus, [t / 1e6 for t in ideal], "--", color="tab:blue", alpha=0.5, label="tokens/s (linear scaling)")
    ax2.set_xscale("log", base=2)
    ax2.set_yscale("log")
    ax2.set_xticks(gpus)
    ax2.set_xticklabels([str(g) for g in gpus])
    ax2.set_xlabel("GPUs")
    ax2.set_ylabel("throughput (million tokens/s)")
    ax2.grid(True, which="both", alpha=0.3)
    ax3 = ax2.twinx()
    ax3.plot(gpus, [p["tflops_per_gpu"] for p in points], "s-", color="tab:red", label="TFLOP/s per GPU")
    ax3.set_ylabel("model TFLOP/s per GPU", color="tab:red")
    ax3.set_ylim(0, max(p["tflops_per_gpu"] for p in points) * 1.15 or 1.0)
    ax2.set_title("Throughput and per-GPU TFLOP/s")
    h1, l1 = ax2.get_legend_handles_labels()
    h2, l2 = ax3.get_legend_handles_labels()
    ax2.legend(h1 + h2, l1 + l2, loc="upper left", fontsize=8)

    fig.tight_layout()
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=fmt, dpi=120)
    finally:
        plt.close(fig)
    return write_file(path, buf.getvalue(), option)
