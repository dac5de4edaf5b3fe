"""speed31b: a query handles paths as str (scalemodel.specs.files.clean and its kin) so that it does not import
pathlib (+21 M instructions, urllib.parse and ipaddress with it); the text every error quotes stays as pathlib spells
it. The reference here is pathlib itself (CPython 3.11 Lib/pathlib.py), on hand-picked and random paths."""

from __future__ import annotations

import os
import random
from pathlib import Path, PurePosixPath

import pytest

from scalemodel.errors import InputError
from scalemodel.specs import files
from scalemodel.specs.loader import _snapshot_configs, builtin_names, builtin_path

PATHS = ["", ".", " ", "/", "//", "///", "a", "a/", "a//b", "./a", "a/./b", "//a", "///a", "/a/b/", "..", "../a",
         "a/..", "~", "~/x", "~//x", "~/./", "~root/x", ".bashrc", "x.", "x.y.z", "a/.b", "a/b.c/", "a\\b", "/./",
         "./", ".//.", "a.tar.gz", "dir.d/file", "~x"]


def _random_paths(n: int) -> list[str]:
    rng = random.Random(31)
    return ["".join(rng.choice("/.a~b") for _ in range(rng.randint(0, 9))) for _ in range(n)]


@pytest.mark.parametrize("ref", PATHS + _random_paths(400))
def test_path_text_is_pathlibs(ref: str) -> None:
    p = PurePosixPath(ref)
    text = files.clean(ref)
    assert text == str(p)
    assert (files.parent(text), files.name(text), files.suffix(text), files.stem(text)) == (
        str(p.parent), p.name, p.suffix, p.stem)
    for folder in ("a", "/x", ".", "//q", "/", "b/c"):
        assert files.join(files.clean(folder), ref) == str(PurePosixPath(folder) / ref)
    assert files.resolved(ref) == str(Path(ref).resolve())
    if ref == "":  # fuzz35: an empty path is refused where a path is first read, not taken as '.' as pathlib does
        with pytest.raises(InputError, match="empty path"):
            files.expand_user(ref)
        return
    try:
        expected = str(Path(ref).expanduser())
    except RuntimeError:
        with pytest.raises(InputError, match="no such user or home folder"):
            files.expand_user(ref)
    else:
        assert files.expand_user(ref) == expected


def test_catalog_listing_is_pathlibs_glob() -> None:
    folder = os.path.dirname(builtin_path("cluster", "dgx-a100") or "")
    assert builtin_names("cluster") == sorted(p.stem for p in Path(folder).glob("*.yaml"))


def test_snapshot_configs_are_pathlibs_glob(tmp_path: Path) -> None:
    snaps = tmp_path / "snapshots"
    for rev in ("r1", ".hidden", "r3"):
        (snaps / rev).mkdir(parents=True)
        (snaps / rev / "config.json").write_text("{}")
    (snaps / "empty").mkdir()
    (snaps / "afile").write_text("")
    (snaps / "dangling").mkdir()
    (snaps / "dangling" / "config.json").symlink_to(tmp_path / "missing.json")
    assert _snapshot_configs(str(snaps)) == [str(p) for p in snaps.glob("*/config.json")]
