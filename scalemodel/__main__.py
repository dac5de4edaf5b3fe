"""The program's entry: ``python -m scalemodel`` and the ``scalemodel`` console script (pyproject's
``[project.scripts]``), the one place the garbage collector is set (benchmarks/README.md, round 31).

The objects the package and its libraries make while they import (modules, classes, functions, numpy's tables, the
specs' validators) live until the process ends, yet the cyclic collector walks them in every collection that reaches
the oldest generation while the command runs and again in the collections of interpreter exit. So the collector is
off while they import, and ``gc.freeze()`` moves what they made into the permanent generation, which no collection
walks (Python's gc docs: "disable the collector early ... freeze"); then it is on again (where it was on before) for
the command, whose loops (plan, sweep, calibrate) make reference cycles as before. Only a program run reaches this
module: a library user's or a test's ``import scalemodel.cli`` leaves the collector as it was
(tests/test_speed30b.py).
"""

import gc

_enabled = gc.isenabled()
gc.disable()
from scalemodel.cli import main  # noqa: E402  (imported with the collector off; module docstring)

gc.freeze()
if _enabled:
    gc.enable()

if __name__ == "__main__":
    main()
