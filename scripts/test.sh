#!/usr/bin/env bash
# Run the test suite (sets up .venv first if needed). Extra arguments go to pytest.
#
# Two tests at a time (pytest-xdist; MHINDEX_TEST_WORKERS=1 runs them one by one): most of the suite waits on
# a one-thread model or a JVM starting, so on two cores the whole suite took 30 minutes against 36-42 one by
# one (413 tests; the slowest first-come, as --dist worksteal hands them out).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
workers=${MHINDEX_TEST_WORKERS:-2}
if [ "$workers" = 1 ]; then exec .venv/bin/python -m pytest "$@"; fi
exec .venv/bin/python -m pytest -n "$workers" --dist worksteal "$@"
