"""One module per CLI command; each exposes ``register(app)``. Heavy imports stay inside the commands."""

# The order `scalemodel --help` lists them in: the questions users ask most first.
COMMAND_MODULES = (
    "scale", "predict", "plan", "check", "sensitivity", "collective", "calibrate", "memory",
    "stragglers", "hardware", "schema",
)
