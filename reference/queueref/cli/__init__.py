"""The `queueref` command: `main` dispatches to one module per subcommand.

Each subcommand module defines `HELP` (one line), `add_arguments(parser)` and
`run(args) -> int` (the exit code); `args` holds the options they share.
"""
