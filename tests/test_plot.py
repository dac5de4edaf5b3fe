"""Scaling plots: valid PNG and SVG files, and clear errors for bad extensions."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from scalemodel.errors import InputError


def payload():
    """A small hand-made sweep payload (the plot reads only these keys)."""
    def point(gpus, eff, losses, tokens, tflops):
        return {"gpus": gpus, "scaling_efficiency": eff, "loss_attribution": losses, "tokens_per_s": tokens,
                "tflops_per_gpu": tflops}

    zero = {"compute": 0.0, "dp_comm": 0.0, "bubble": 0.0, "optimizer": 0.0}
    return {"mode": "weak", "inputs": {"model": "gpt-test", "cluster": "test"},
            "points": [point(128, 1.0, zero, 1.0e5, 50.0),
                       point(512, 0.8, {**zero, "dp_comm": 0.18, "bubble": 0.03, "optimizer": -0.01}, 3.2e5, 40.0),
                       point(2048, 0.65, {**zero, "dp_comm": 0.3, "bubble": 0.06, "optimizer": -0.01}, 1.04e6, 32.5)]}


def test_png_is_a_valid_image(tmp_path):
    pytest.importorskip("matplotlib")
    from scalemodel.report.plot import plot_scaling

    out = plot_scaling(payload(), tmp_path / "curve.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 1000


def test_svg_is_valid_xml_with_svg_root(tmp_path):
    pytest.importorskip("matplotlib")
    from scalemodel.report.plot import plot_scaling

    out = plot_scaling(payload(), tmp_path / "curve.SVG")
    root = ET.parse(out).getroot()
    assert root.tag.endswith("svg")
    assert "GPUs" in out.read_text()  # axis label present


def test_bad_extension_is_an_input_error(tmp_path):
    from scalemodel.report.plot import plot_scaling

    with pytest.raises(InputError, match="png or .svg"):
        plot_scaling(payload(), tmp_path / "curve.jpg")


def test_missing_matplotlib_is_an_input_error(tmp_path, monkeypatch):
    import builtins

    from scalemodel.report.plot import plot_scaling

    real = builtins.__import__

    def no_mpl(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_mpl)
    with pytest.raises(InputError, match="matplotlib"):
        plot_scaling(payload(), tmp_path / "curve.png")


def test_cli_plot_writes_both_formats(cli, tmp_path):
    pytest.importorskip("matplotlib")
    for name in ("c.png", "c.svg"):
        res = cli("scale", "--gpus", "128,256,512", "--cluster", "pcie-25gbe", "--model", "gpt-1.7b", "--tp", "2",
                  "--pp", "8", "--global-batch", "64", "--plot", str(tmp_path / name), "--json")
        assert res.code == 0, res.err
        assert (tmp_path / name).stat().st_size > 0
