"""`make upstream`: queueref's checks run on vLLM's own released code.

Installs the released vLLM wheels into a cache outside the checkout (reused
between runs), then, for each release, runs the differential scenarios of
`tests/upstream/differential.py` (vLLM's real `Scheduler` beside
`WaitingQueues`) and the tests of `tests/upstream/` with that release
importable, and writes `build/upstream-report.json`.

The cache (`$QUEUEREF_VLLM_CACHE`, default `~/.cache/queueref/vllm`) holds one
venv with vLLM 0.33.0 and its dependencies (torch included; about 9 GB, a few
minutes the first time) and one folder per older release, installed with
`--no-deps` and imported against the venv's dependencies (PYTHONPATH puts the
folder first). Anything that cannot be installed ends the run with one line
naming it: never a skip.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RELEASES = ("0.30.0", "0.31.0", "0.32.0", "0.33.0")
# The release installed with its dependencies; the others import against them.
DEPS_RELEASE = "0.33.0"
# What the tests need beside vLLM (pinned as in pyproject.toml's `test` extra).
TEST_DEPS = ("icontract>=2.7", "hypothesis==6.170.17", "pytest==9.2.0")
REPORT = ROOT / "build" / "upstream-report.json"


class InstallError(Exception):
    """Something could not be installed; the message is the one line printed."""


def cache_dir() -> Path:
    return Path(os.environ.get("QUEUEREF_VLLM_CACHE", "~/.cache/queueref/vllm")).expanduser()


def venv_python(cache: Path) -> Path:
    return cache / "venv" / "bin" / "python"


def release_path(cache: Path, release: str) -> Path | None:
    """The folder that shadows the venv's vLLM for `release` (None: the venv's own)."""
    return None if release == DEPS_RELEASE else cache / release


def _pip(python: Path, args: list[str], what: str) -> None:
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        lines = [x for x in proc.stderr.splitlines() if x.strip() and "WARNING" not in x]
        reason = lines[-1].strip() if lines else f"pip exited with {proc.returncode}"
        raise InstallError(f"make upstream: could not install {what}: {reason}")


def install(cache: Path, releases: tuple[str, ...] = RELEASES) -> None:
    """Install what `releases` need and is missing (the venv always: the older releases
    import against its dependencies); a stamp file marks each finished install."""
    cache.mkdir(parents=True, exist_ok=True)
    python = venv_python(cache)
    stamp = cache / "venv" / f".installed-vllm-{DEPS_RELEASE}"
    if not stamp.exists():
        print(
            f"upstream: installing vllm=={DEPS_RELEASE} with its dependencies into "
            f"{cache / 'venv'} (the first time takes minutes)",
            flush=True,
        )
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(cache / "venv")], check=True)
        _pip(python, [f"vllm=={DEPS_RELEASE}", *TEST_DEPS], f"vllm=={DEPS_RELEASE}")
        stamp.touch()
    for release in releases:
        folder = release_path(cache, release)
        if folder is None or (folder / ".installed").exists():
            continue
        print(f"upstream: installing vllm=={release} (--no-deps) into {folder}", flush=True)
        shutil.rmtree(folder, ignore_errors=True)  # a partial install from an earlier run
        _pip(python, ["--no-deps", "--target", str(folder), f"vllm=={release}"], f"vllm=={release}")
        (folder / ".installed").touch()
    for release in releases:
        found = subprocess.run(
            [str(python), "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
            env=release_env(cache, release),
            capture_output=True,
            text=True,
        )
        if found.returncode != 0 or found.stdout.strip() != release:
            reason = (found.stderr.strip().splitlines() or [found.stdout.strip()])[-1]
            raise InstallError(
                f"make upstream: vllm=={release} in {cache} does not import as {release}: {reason}"
            )


def release_env(cache: Path, release: str) -> dict[str, str]:
    """The environment a release's checks run in: its vLLM first, then queueref."""
    folder = release_path(cache, release)
    paths = [str(folder)] if folder is not None else []
    paths += [str(ROOT / "reference"), str(ROOT / "tests" / "upstream")]
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join(paths),
        QUEUEREF_UPSTREAM_RELEASE=release,
        VLLM_LOGGING_LEVEL="ERROR",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def run(cache: Path, releases: list[str], scenarios: int) -> int:
    """Run tests/upstream once per release; merge the entries its sweeps wrote."""
    python = venv_python(cache)
    out_dir = ROOT / "build" / "upstream"
    out_dir.mkdir(parents=True, exist_ok=True)
    entries, failed = [], []
    for release in releases:
        started = time.monotonic()
        out = out_dir / f"{release}.json"
        out.unlink(missing_ok=True)
        (out_dir / f"admission-{release}.json").unlink(missing_ok=True)
        print(
            f"upstream: vllm=={release}: {scenarios} scenarios and the planted divergences",
            flush=True,
        )
        env = {**release_env(cache, release), "QUEUEREF_UPSTREAM_SCENARIOS": str(scenarios)}
        tests = subprocess.run(
            [
                str(python),
                "-m",
                "pytest",
                "-q",
                "-s",
                "-p",
                "no:cacheprovider",
                "-m",
                "upstream",
                str(ROOT / "tests" / "upstream"),
            ],
            env=env,
            cwd=ROOT,
        )
        if not out.exists():
            failed.append(
                f"vllm=={release}: the sweep wrote no result (pytest exit {tests.returncode})"
            )
            continue
        entry = json.loads(out.read_text())
        entry["tests"] = "pass" if tests.returncode == 0 else "fail"
        # test_spawned_admission's counts (None: it did not get as far as writing them).
        admission = out_dir / f"admission-{release}.json"
        entry["spawned_admission"] = (
            json.loads(admission.read_text()) if admission.exists() else None
        )
        entries.append(entry)
        if tests.returncode != 0:
            failed.append(
                f"vllm=={release}: tests/upstream failed ({entry['differences']} "
                f"differences, {entry['crashes']} crashes in the sweep)"
            )
        print(f"upstream: vllm=={release} done in {time.monotonic() - started:.0f} s", flush=True)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps({"versions": entries}, indent=2) + "\n")
    print(f"upstream: wrote {REPORT.relative_to(ROOT)}")
    for line in failed:
        print(f"upstream: FAILED {line}", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--releases",
        default=",".join(RELEASES),
        help="comma-separated releases to check (default: all four)",
    )
    parser.add_argument(
        "--scenarios",
        type=int,
        default=1000,
        help="differential scenarios per release (default 1000)",
    )
    parser.add_argument("--install-only", action="store_true")
    args = parser.parse_args(argv)
    releases = args.releases.split(",")
    unknown = [r for r in releases if r not in RELEASES]
    if unknown:
        parser.error(f"unknown release {unknown[0]!r}; known: {', '.join(RELEASES)}")
    if args.scenarios < 1:
        parser.error(f"--scenarios must be >= 1, got {args.scenarios}")
    cache = cache_dir()
    try:
        install(cache, tuple(releases))
    except InstallError as error:
        print(error, file=sys.stderr)
        return 1
    if args.install_only:
        return 0
    return run(cache, releases, args.scenarios)


if __name__ == "__main__":
    sys.exit(main())
