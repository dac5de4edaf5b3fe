"""The longer run of tests/test_prop39.py: every property with PROP39_SCALE times its examples, randomised seeds.

    python scripts/prop39.py [scale]      (default 10; about 10 s of CPU per unit of scale)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    scale = sys.argv[1] if len(sys.argv) > 1 else "10"
    env = {**os.environ, "PROP39_SCALE": scale, "PYTHONPATH": str(ROOT)}
    return subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                            str(ROOT / "tests" / "test_prop39.py")], env=env, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
