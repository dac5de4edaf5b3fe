"""Per-cuDNN-release attention curves (accelerator ``attention_releases``, training.cudnn_release;
scripts/fit_attention.py RELEASE_FITS; scripts/validate_training.py CONTAINER_CUDNN; docs/model.md#cudnn-release)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, load_yaml, script_module

from scalemodel.engine.job import build_job, warn_unfused_attention
from scalemodel.errors import InputError
from scalemodel.specs import load_cluster, load_workload, notices
from scalemodel.specs.training import TrainingSpec

ATTENTION = ROOT / "hardware" / "measurements" / "attention.yaml"
PEAK_16 = {"b200": 2250e12, "gb200": 2500e12, "gb300": 2500e12}  # the YAMLs' bf16 peaks


def _releases(name: str) -> dict[str, Any]:
    doc = load_yaml(ROOT / "hardware" / "accelerators" / f"{name}.yaml")
    return doc["attention_releases"]  # type: ignore[no-any-return]


def _point(src: str, acc: str, direction: str, causal: bool, s: int) -> dict[str, Any]:
    pts = load_yaml(ATTENTION)["points"]
    (p,) = [q for q in pts if q["src"] == src and q["acc"] == acc and q["kernel"] == "cudnn"
            and q["dir"] == direction and q["causal"] is causal and q["s"] == s and not q.get("window")]
    return p  # type: ignore[no-any-return]


def _hand_time(p: dict[str, Any], c: dict[str, float], peak: float) -> float:
    """docs/model.md#attention-kernel written out again: forward F = 2 s k (2 d) b h, backward 2.5 F, over
    peak x attn_max x k/(k + seq_half) x d/(d + head_half); k = (s + 1)/2 causal, s without mask."""
    s, d = p["s"], p["d"]
    k = (s + 1) / 2 if p["causal"] else s
    flops = 2.0 * s * k * 2 * d * p["b"] * p["h"] * (2.5 if p["dir"] == "bwd" else 1.0)
    return flops / (peak * c["attn_max"] * k / (k + c["seq_half"]) * d / (d + c["head_half"]))


@pytest.mark.parametrize(("acc", "release", "src", "direction", "causal", "s", "tol"), [
    # the sweeps run the frontend graph directly (no per-call host latency): the curve alone is the time
    ("gb200", "9.19", "CUDNN-919", "bwd", True, 16384, 0.05),
    ("gb200", "9.19", "CUDNN-919", "fwd", False, 8192, 0.07),
    ("gb200", "9.17", "CUDNN-GB200-9.17", "bwd", True, 8192, 0.07),
    ("gb200", "9.22", "CUDNN-GB200-9.22", "bwd", False, 4096, 0.12),
    ("gb300", "9.19", "CUDNN-919", "bwd", True, 8192, 0.05),
    # torch's SDPA path, timed from the host launch: at 32k the call's latency is < 0.2 % of its 40+ ms
    ("b200", "9.13", "CUDNN-B200-9.13", "bwd", True, 32768, 0.06),
    ("b200", "9.10", "CUDNN-B200-9.10", "bwd", True, 32768, 0.04),
])
def test_release_curve_reproduces_the_published_point(acc: str, release: str, src: str, direction: str,
                                                     causal: bool, s: int, tol: float) -> None:
    """A release's catalog curve, priced by hand, against the time NVIDIA/cudnn-frontend printed for that release
    on that GPU (attention.yaml, ``ms`` where the source prints it, else fa-benchmark FLOPs / TFLOP/s)."""
    p = _point(src, acc, direction, causal, s)
    measured = p["ms"] * 1e-3 if "ms" in p else (
        4.0 * p["b"] * p["h"] * s * s * p["d"] * (0.5 if causal else 1.0) * (2.5 if direction == "bwd" else 1.0)
        / (p["tflops"] * 1e12))
    priced = _hand_time(p, _releases(acc)[release]["cudnn"][direction], PEAK_16[acc])
    assert abs(priced / measured - 1.0) < tol, (priced, measured)


def test_later_release_backward_is_faster_at_a_training_shape() -> None:
    """The published sweeps' backward gain, read off the points themselves (same die, each as a fraction of its
    own peak): GB200 at cuDNN 9.19 against B200 at 9.13, causal, d 128, s 8192. The 9.19 curve keeps it."""
    old = _point("CUDNN-B200-9.13", "b200", "bwd", True, 8192)["tflops"] / 2250.0
    new = _point("CUDNN-919", "gb200", "bwd", True, 8192)["tflops"] / 2500.0
    assert 1.1 < new / old < 1.5
    p = {"s": 8192, "d": 128, "b": 1, "h": 1, "causal": True, "dir": "bwd"}
    b = _releases("b200")
    gain = _hand_time(p, b["9.13"]["cudnn"]["bwd"], 1.0) / _hand_time(p, b["9.19"]["cudnn"]["bwd"], 1.0)
    assert abs(gain / (new / old) - 1.0) < 0.08


def _job(cluster: str, release: str | None) -> Any:
    return build_job(load_cluster(cluster, []), load_workload("gpt3-175b", []),
                     TrainingSpec(global_batch=64, cudnn_release=release))


@pytest.mark.parametrize(("cluster", "acc", "release"), [
    ("dgx-b200", "b200", "9.19"), ("gb200-nvl72", "gb200", "9.10"), ("gb300-nvl72", "gb300", "9.22"),
    ("dgx-b300", "b300", "9.13")])
def test_release_selects_its_curve(cluster: str, acc: str, release: str) -> None:
    """training.cudnn_release prices the cudnn core on that release's block of the YAML; unset, the default."""
    doc = load_yaml(ROOT / "hardware" / "accelerators" / f"{acc}.yaml")
    want = {k: float(v) for k, v in doc["attention_releases"][release]["cudnn"]["bwd"].items()}
    j = _job(cluster, release)
    assert j.attention_kernel == "cudnn" and j.attention_bwd == want
    default = {k: float(v) for k, v in doc["attention_efficiency"]["cudnn"]["bwd"].items()}
    assert _job(cluster, None).attention_bwd == default


@pytest.fixture(scope="module")
def release_fits() -> dict[tuple[str, str], dict[str, Any]]:
    """scripts/fit_attention.py's release fits, made once for the two tests that read them (~3 s of CPU each time;
    neither changes them)."""
    return script_module("fit_attention").release_fits()  # type: ignore[no-any-return]


def test_releases_held_are_the_fits_and_borrowings(release_fits: dict[tuple[str, str], dict[str, Any]]) -> None:
    """b200 and gb200 hold every fitted release (each other's borrowed), b300 b200's, gb300 only its own sweeps."""
    fa = script_module("fit_attention")
    assert fa.check_releases(release_fits) == 0
    assert set(_releases("b200")) == set(_releases("gb200")) == set(_releases("b300")) == {
        "9.10", "9.13", "9.17", "9.19", "9.22"}
    assert set(_releases("gb300")) == {"9.19", "9.22"}


def test_release_fits_use_sources_of_that_release() -> None:
    """scripts/fit_attention.py RELEASE_FITS fits each release to sources whose run log / CSV names that release
    (attention.yaml ``cudnn_release``), and every cuDNN Blackwell source that names one is fitted at it."""
    fa = script_module("fit_attention")
    sources = load_yaml(ATTENTION)["sources"]
    used = set()
    for release, per_acc in fa.RELEASE_FITS.items():
        for srcs in per_acc.values():
            for src in srcs:
                assert sources[src]["cudnn_release"] == release, src
                used.add(src)
    named = {k for k, v in sources.items() if v.get("cudnn_release") and not v.get("twins")}  # windows: not fitted
    assert named == used


def _bwd(acc: str, release: str) -> dict[str, float]:
    """A release's backward cudnn curve as the YAML writes it (not through the spec reader)."""
    return {k: float(v) for k, v in _releases(acc)[release]["cudnn"]["bwd"].items()}


@pytest.mark.parametrize(("cluster", "acc", "release", "priced_on", "warned"), [
    ("dgx-b200", "b200", "9.15", "9.13", True),      # between two held releases: the earlier one, never 9.17
    ("dgx-b200", "b200", "9.21.1", "9.19", True),    # a container's full version (NeMo 26.06)
    ("dgx-b200", "b200", "9.20.0", "9.19", True),    # NeMo 26.04's
    ("dgx-b200", "b200", "10.0", "9.22", True),      # later than every held release: the latest held
    ("dgx-b200", "b200", "9.19.1", "9.19", False),   # a patch of a held release is that release
    ("gb300-nvl72", "gb300", "9.21", "9.19", True),  # gb300 holds 9.19 and 9.22 only
    ("gb300-nvl72", "gb300", "9.22.0", "9.22", False),
])
def test_a_release_not_held_prices_the_nearest_held_at_or_below(cluster: str, acc: str, release: str,
                                                                priced_on: str, warned: bool) -> None:
    """Any well-formed cuDNN release or version is priced on the YAML block of the latest release the accelerator
    holds whose (major, minor) is at or below it (numeric order: 9.9 < 9.10 < 10.0), with a warning naming that
    curve where it is another release's; the held releases are read from the YAML here, not from the reader."""
    notices.clear()
    j = _job(cluster, release)
    assert j.attention_kernel == "cudnn" and j.attention_bwd == _bwd(acc, priced_on)
    warn_unfused_attention(j, flash_attention=True)  # said where a strategy runs the fused kernel (review 15a)
    said = [w for w in notices.current() if w.startswith(f"training.cudnn_release = {release}:")]
    if warned:
        assert said == [f"training.cudnn_release = {release}: {acc} holds no curve of that release; the cudnn "
                        f"attention core is priced on the {priced_on} curve (the nearest release held at or below "
                        "it)"], notices.current()
    else:
        assert said == [], notices.current()


def test_a_release_below_every_held_one_is_an_input_error() -> None:
    """Older than every held release: refused with the held ones (not priced on the default curve, a fit at a later
    release than the run had); off Blackwell no release is held at all."""
    with pytest.raises(InputError, match=r"no attention curve for cuDNN 9.9 on b200 \(releases held: 9\.10, 9\.13, "
                                         r"9\.17, 9\.19, 9\.22, all later\); a release at or above 9\.10"):
        _job("dgx-b200", "9.9")
    with pytest.raises(InputError, match=r"no attention curve for cuDNN 9.13.1 on gb300 \(releases held: 9\.19, "
                                         r"9\.22, all later\)"):
        _job("gb300-nvl72", "9.13.1")  # NeMo 25.11's cuDNN on gb300
    with pytest.raises(InputError, match="no attention curve for cuDNN 9.19 on h100-sxm"):
        _job("dgx-h100", "9.19")  # no per-release curves off Blackwell


@pytest.mark.parametrize("text", ["9.13.1.26", "9.01", "9.19.01", "1000.0", "9.1000", "9", "9.", "9.19.", "v9.19",
                                  "9.19.1a", " 9.19"])
def test_a_malformed_release_is_refused_by_its_form(cli, text: str) -> None:  # type: ignore[no-untyped-def]
    """Only major.minor or major.minor.patch of at most three digits each, without leading zeros (or a bare YAML
    number, read as its text): a package's build number, a leading zero or a trailing dot is refused at the field."""
    r = cli("predict", "-m", "gpt-1.7b", "-c", "dgx-b200", "-n", "8", "--set", f"training.cudnn_release='{text}'")
    assert r.code == 2 and r.err.count("\n") == 1, r.err
    assert r.err.startswith("error: --set training.cudnn_release: String is not of the allowed form"), r.err
    assert "major.minor or major.minor.patch" in r.err


def test_bad_release_exits_2_with_one_line(cli) -> None:  # type: ignore[no-untyped-def]
    base = ("predict", "-m", "gpt-1.7b", "-c", "dgx-b200", "-n", "8")
    r = cli(*base, "--set", "training.cudnn_release='9.5'")
    assert r.code == 2 and r.out == "" and r.err.count("\n") == 1
    assert r.err.startswith("error: --set training.cudnn_release") and "9.10, 9.13, 9.17, 9.19, 9.22" in r.err
    r = cli(*base, "--set", "training.cudnn_release=9.10")  # a bare 9.10 is the number 9.1
    assert r.code == 2 and "quote it" in r.err
    r = cli(*base, "--set", "training.cudnn_release=nine")
    assert r.code == 2 and r.err.count("\n") == 1 and "cudnn_release" in r.err
    r = cli(*base, "--json", "--set", "training.cudnn_release='9.10'")
    assert r.code == 0, r.err
    assert math.isfinite(float(json.loads(r.out)["step_time_s"]))


def test_validation_cases_never_take_a_later_release_than_their_container() -> None:
    """scripts/validate_training.py: each Blackwell case's release is at or below its container's cuDNN, and the
    nearest such one held; a container below every held release keeps the default curve."""
    vt = script_module("validate_training")
    gb200 = load_cluster("gb200-nvl72", []).accelerator
    case = {"id": "mb2604_gb200_x", "model": {}, "hardware": {"gpu": "GB200"}}
    assert vt.cudnn_release(case, gb200) == (  # 26.04: cuDNN 9.20.0, the container's version itself
        "9.20.0", "cuDNN 9.20.0 (26.04 container) -> attention on the 9.19 curve (nearest held at or below)")
    assert vt.cudnn_release({**case, "id": "mb2511_gb200_x"}, gb200)[0] == "9.13.1"  # 25.11: cuDNN 9.13.1
    j = build_job(load_cluster("gb200-nvl72", []), load_workload("gpt3-175b", []),
                  TrainingSpec(global_batch=64, cudnn_release="9.20.0"))
    assert j.attention_bwd == _bwd("gb200", "9.19")  # the engine prices it on the curve the note names
    release, note = vt.cudnn_release({**case, "id": "nemo2502_gb200_x"}, gb200)
    assert release is None and "default attention curve" in note
    gb300 = load_cluster("gb300-nvl72", []).accelerator
    assert vt.cudnn_release({**case, "id": "mb2511_gb300_x"}, gb300)[0] is None  # gb300 holds 9.19, 9.22 only
    assert vt.cudnn_release({**case, "id": "mb2511_h100_x"}, load_cluster("dgx-h100", []).accelerator) == (None, "")


def test_calibration_overlay_scales_every_release_curve() -> None:
    """`calibrate runs`' overlay multiplies every fitted attention curve's attn_max by the compute factor, the
    per-release ones too (else a run naming its release would escape the calibration)."""
    from types import SimpleNamespace

    from scalemodel.engine.calibrate_runs import overlay_doc

    compute = SimpleNamespace(name="compute", value=0.8, determined=True)
    none = SimpleNamespace(name="overhead_s", value=0.0, determined=False)
    fit = SimpleNamespace(factors=[compute, none], factor=lambda n: compute if n == "compute" else none,
                          calibration=None)  # RunsFit's residual block (calib19band), not what this test reads
    cluster = load_cluster("gb200-nvl72", [])
    doc = overlay_doc(fit, cluster, extends="gb200-nvl72")  # type: ignore[arg-type]
    want = _releases("gb200")["9.19"]["cudnn"]["bwd"]["attn_max"] * 0.8
    assert doc["accelerator"]["attention_releases"]["9.19"]["cudnn"]["bwd"]["attn_max"] == pytest.approx(want)


def test_release_on_another_kernel_is_warned(cli) -> None:  # type: ignore[no-untyped-def]
    """A release names cuDNN's curve; a run whose core runs FlashAttention-2 prices the same with or without it, and
    says so (as the other switches without effect do)."""
    base = ("predict", "-m", "gpt-1.7b", "-c", "dgx-b200", "-n", "8", "--json")
    args = (*base, "--set", "training.attention_kernel=fa2")
    r = cli(*args, "--set", "training.cudnn_release='9.19'")
    assert r.code == 0, r.err
    got = json.loads(r.out)
    assert any(w.startswith("training.cudnn_release = 9.19 is not priced") for w in got["warnings"]), got["warnings"]
    assert got["step_time_s"] == json.loads(cli(*args).out)["step_time_s"]
    r = cli(*base, "--set", "training.cudnn_release='9.19'")
    assert not any("cudnn_release" in w for w in json.loads(r.out)["warnings"])


def test_release_reads_at_the_top_of_a_strategy_yaml(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "s.yaml"
    f.write_text("cudnn_release: '9.19'\n")
    r = cli("predict", "-c", "dgx-b200", "-m", "gpt-1.7b", "-n", "8", "--strategy", str(f), "--json")
    assert r.code == 0 and "not used" not in r.err, r.err
    assert json.loads(r.out)["inputs"]["training"]["cudnn_release"] == "9.19"


def _accelerator_file(tmp_path: Path, releases: str, extends: str = "b200") -> Path:
    f = tmp_path / "acc.yaml"
    f.write_text(f"kind: accelerator\nname: x\nextends: {extends}\nattention_releases:\n{releases}")
    return f


def test_a_release_key_of_thousands_of_digits_is_refused_in_one_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A release is major.minor of a few digits: a 5000-digit minor in an accelerator file's ``attention_releases``
    ended in Python's int-conversion ValueError traceback (exit 1) when a run named a release not held; the field is
    now refused where it is read."""
    big = "9." + "1" * 5000
    acc = _accelerator_file(tmp_path, f"  ? '{big}'\n  : cudnn:\n      fwd: {{attn_max: 0.9, seq_half: 700, head_half: "
                                      "51}\n      bwd: {attn_max: 0.7, seq_half: 800, head_half: 29}\n")
    r = cli("predict", "-c", "dgx-b200", "-m", "gpt-1.7b", "-n", "8", "--set", f"cluster.accelerator={acc}",
            "--set", "training.cudnn_release='9.15'")
    assert r.code == 2 and r.err.count("\n") == 1 and "attention_releases" in r.err, (r.code, r.err[-300:])
    r = cli("predict", "-c", "dgx-b200", "-m", "gpt-1.7b", "-n", "8", "--set", f"training.cudnn_release='{big}'")
    assert r.code == 2 and r.err.count("\n") == 1 and "not of the allowed form" in r.err, r.err[-300:]


def test_a_release_block_holds_only_a_cudnn_curve(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A release names cuDNN's kernel, so ``attention_releases`` holds cudnn curves only: a release block holding an
    fa2 curve was accepted, and a run naming that release was priced on the default cudnn curve without a word."""
    acc = _accelerator_file(tmp_path, "  '9.19':\n    fa2:\n      fwd: {attn_max: 0.2, seq_half: 700, head_half: 16}\n"
                                      "      bwd: {attn_max: 0.2, seq_half: 800, head_half: 12}\n", extends="h100-sxm")
    r = cli("predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--set", f"cluster.accelerator={acc}",
            "--set", "training.cudnn_release='9.19'")
    assert r.code == 2 and r.err.count("\n") == 1 and "attention_releases" in r.err and "cudnn" in r.err, r.err
    acc = _accelerator_file(tmp_path, "  '9.19': {}\n", extends="h100-sxm")  # empty: the run took the default
    r = cli("predict", "-c", "dgx-h100", "-m", "gpt-1.7b", "-n", "8", "--set", f"cluster.accelerator={acc}",
            "--set", "training.cudnn_release='9.19'")
    assert r.code == 2 and r.err.count("\n") == 1 and "attention_releases" in r.err, r.err


def test_release_order_is_numeric_not_text() -> None:
    """One ordering for the engine's list of held releases and the scripts' nearest-below pick: 9.9 before 9.10
    (text order puts 9.10 first), a version's patch ignored."""
    from scalemodel.specs.accelerator import cudnn_release_key

    assert sorted(["9.10", "9.9", "10.0", "9.22"], key=cudnn_release_key) == ["9.9", "9.10", "9.22", "10.0"]
    assert cudnn_release_key("9.21.1") == (9, 21) == cudnn_release_key("9.21")


def test_release_check_sees_a_release_curve_on_an_accelerator_the_fits_do_not_name(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """`fit_attention.py --check` compared only the accelerators RELEASE_FITS / RELEASE_DONORS name: a hand-written
    ``attention_releases`` block on any other built-in accelerator (priced for every run that names its release)
    passed the check. Here h100-sxm is given b200's blocks, and no fit is passed at all."""
    import msgspec

    fa = script_module("fit_attention")
    real = fa.load_accelerator
    b200 = real("b200", overrides=[])

    def patched(name: str, overrides: list[str]) -> Any:
        acc = real(name, overrides=overrides)
        return msgspec.structs.replace(acc, attention_releases=b200.attention_releases) if name == "h100-sxm" else acc

    monkeypatch.setattr(fa, "load_accelerator", patched)
    assert fa.check_releases({}) == 1
    assert "check: h100-sxm cuDNN 9.19: in the catalog, not fitted" in capsys.readouterr().out


def test_a_borrowed_release_curve_names_the_accelerator_it_was_fitted_on(
        release_fits: dict[tuple[str, str], dict[str, Any]]) -> None:
    """b300 takes b200's release curves, and b200's 9.17 / 9.19 / 9.22 are gb200's (no B200 sweep at those releases):
    b300's source said "BORROWED from b200's fit of that release", a fit that does not exist."""
    fa = script_module("fit_attention")
    rel = release_fits
    for (name, release), f in rel.items():
        if "borrowed" in f:  # the accelerator named as fitted holds a sweep of that release (RELEASE_FITS)
            fitted_on = set(fa.RELEASE_FITS[release])
            assert any(f"from {a}'s fit of that release" in f["how"] for a in fitted_on), (name, release, f["how"])
    assert "gb200's fit of that release, via b200" in rel[("b300", "9.19")]["how"]
    assert "b200's fit of that release" in rel[("b300", "9.13")]["how"] and "via" not in rel[("b300", "9.13")]["how"]
