"""Placeholder: being written (see the open issues)."""

from __future__ import annotations

import argparse

HELP = "(not yet available)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser


def run(args: argparse.Namespace) -> int:
    del args
    print("queueref: this command is not available yet")
    return 2
