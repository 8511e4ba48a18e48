#!/usr/bin/env bash
# Run the test suite (sets up .venv first if needed). Extra arguments go to pytest.
#
# Two tests at a time (pytest-xdist; MHINDEX_TEST_WORKERS=1 runs them one by one): most of the suite waits on
# a one-thread model or a JVM starting. On two cores the whole suite took 42 minutes (617 tests, 2026-11-30; 53
# the day before, until the slowest tests read shorter prompts); a loaded machine takes longer, and no test has a
# wall-clock limit that load can trip (tests/conftest.py, HANG_S).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
workers=${MHINDEX_TEST_WORKERS:-2}
if [ "$workers" = 1 ]; then exec .venv/bin/python -m pytest "$@"; fi
exec .venv/bin/python -m pytest -n "$workers" --dist worksteal "$@"
