"""scalemodel: closed-form models of distributed training performance.

The public API is the engine the CLI uses; names are imported lazily so that
``import scalemodel`` stays light.
"""

from __future__ import annotations

__version__ = "0.1.0"
