"""One module per CLI command; each exposes ``COMMAND`` (its function and option table, commands/args.py). cli.py
imports a command's module only when it runs."""

# The order `scalemodel --help` lists them in: the questions users ask most first.
COMMAND_MODULES = (
    "scale", "predict", "plan", "sweep", "check", "sensitivity", "collective", "calibrate", "memory",
    "stragglers", "hardware", "schema",
)
