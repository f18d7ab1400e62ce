"""The `queueref` subcommands, one module each.

Each module defines `HELP` (one line), `add_arguments(parser)` and
`run(args) -> int` (the exit code). `queueref.cli` lists them.
"""
