"""pywb, the web archive replay system, in a virtual environment of its own (it pins
``redis<3``, which the crawler's own environment cannot share), for the tests that replay
a crawl's archive as its users would and for docs/OPERATIONS.md's "Your crawl as a web archive".

    python scripts/pywb.py build    make the environment (pip, from PyPI; about a minute),
                                    or reuse the one there; prints its bin directory
    python scripts/pywb.py path     print its bin directory (exit 1 if not built)

Its ``wb-manager`` and ``wayback`` are then in that directory. The environment is kept
under CRAWLER_SERVICES_CACHE (default ~/.cache/crawler-services), as the other services.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from service import CACHE, ServiceError, fail, run_quietly

VERSION = "2.10.0"
HOME = CACHE / f"pywb-{VERSION}"
BIN = HOME / "bin"


def built() -> bool:
    return (BIN / "wayback").exists() and (BIN / "wb-manager").exists()


def build() -> Path:
    if built():
        return BIN
    run_quietly([sys.executable, "-m", "venv", str(HOME)], f"a virtual environment in {HOME}")
    run_quietly([str(BIN / "python"), "-m", "pip", "install", "-q", f"pywb=={VERSION}"], f"pip install pywb=={VERSION}")
    if not built():
        raise ServiceError(f"pywb {VERSION} installed, but no wayback or wb-manager in {BIN}")
    return BIN


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/pywb.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("build", "path"))
    args = parser.parse_args(argv)
    try:
        if args.action == "build":
            print(build())
        elif built():
            print(BIN)
        else:
            raise ServiceError(f"not built: run python scripts/pywb.py build (it goes in {HOME})")
    except ServiceError as exc:
        return fail("pywb", exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
