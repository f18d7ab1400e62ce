"""Print the last recorded mutation score (`docs/mutation/score.json`, written by
`make mutation`): per module, how many mutants ran, were killed, survived, and the score.

Mutation testing is too slow for every `make verify`; this shows what it measured last.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCORE = ROOT / "docs" / "mutation" / "score.json"


def lines(score: dict[str, object]) -> list[str]:
    """The report, one line per module."""
    modules = score.get("modules")
    if not isinstance(modules, dict) or not modules:
        return ["mutation score: none recorded (run `make mutation`)"]
    out = [f"mutation score (cosmic-ray {score.get('cosmic_ray')}, last `make mutation`):"]
    for name, m in modules.items():
        value = m.get("score")
        shown = "-" if value is None else f"{100 * value:.0f}%"
        sample = f"sample of {m['sample']}" if m.get("sample") else "all mutants"
        out.append(
            f"  {name:<24} {shown:>5}  {m['killed'] + m['timed_out'] + m.get('incompetent', 0)}/"
            f"{m['mutants'] - m['equivalent']} killed, {m['survived']} survived, "
            f"{m['equivalent']} equivalent ({sample} of {m['all_mutants']}, {m.get('date')})"
        )
    return out


def main() -> int:
    if not SCORE.exists():
        print("mutation score: none recorded (run `make mutation`)")
        return 0
    print("\n".join(lines(json.loads(SCORE.read_text()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
