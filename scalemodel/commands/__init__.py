"""One module per CLI command; each exposes ``register(app)``. Heavy imports stay inside the commands."""

COMMAND_MODULES = (
    "hardware", "schema", "collective", "calibrate", "memory", "predict",
    "stragglers", "scale", "plan", "check", "sensitivity",
)
