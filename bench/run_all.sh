#!/usr/bin/env bash
# Run both benchmarks and keep what they print in bench/results/latest.txt.
#
#   bash bench/run_all.sh [--quick]
#
# DEV_PYTHON   interpreter with requirements.txt (default .venv/bin/python; `bash scripts/test` makes it)
# BENCH_VENV   virtualenv for the LangGraph side (default .cache/venv-bench, created on first use
#              with requirements.txt + bench/requirements.txt, so the dev venv stays clean)
# --quick      fewer steps and repeats: a smoke run, not figures to quote
set -euo pipefail
cd "$(dirname "$0")/.."

DEV_PYTHON=${DEV_PYTHON:-.venv/bin/python}
BENCH_VENV=${BENCH_VENV:-.cache/venv-bench}
STEP_ARGS=()
VS_ARGS=()
if [[ ${1:-} == --quick ]]; then
    STEP_ARGS=(--steps 10 --repeats 1 --main-path-runs 5)
    VS_ARGS=(--steps 20,50 --repeats 1)
fi

if [[ ! -x $DEV_PYTHON ]]; then
    echo "no $DEV_PYTHON: run 'bash scripts/test' once, or set DEV_PYTHON" >&2
    exit 2
fi
if [[ ! -x $BENCH_VENV/bin/python ]]; then
    echo "creating $BENCH_VENV (requirements.txt + bench/requirements.txt) ..." >&2
    python3 -m venv "$BENCH_VENV"
    "$BENCH_VENV/bin/python" -m pip install --quiet -r requirements.txt -r bench/requirements.txt 2>&1 |
        { grep -v "^WARNING: Location '.*' is ignored" || true; }
fi

mkdir -p bench/results
out=bench/results/latest.txt
{
    echo "# agentsite bench, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- traces tools || echo ' + local changes')"
    echo "# machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# $("$DEV_PYTHON" -V), $("$DEV_PYTHON" -c 'import django; print("Django", django.__version__)')"
    echo
    "$DEV_PYTHON" bench/step_overhead.py "${STEP_ARGS[@]}"
    echo
    "$BENCH_VENV/bin/python" bench/vs_langgraph.py "${VS_ARGS[@]}"
    echo
    echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
} 2>&1 | grep --line-buffered -v -e 'Provider List' -e 'Failed to fetch remote model cost map' | tee "$out"
echo "written to $out" >&2
