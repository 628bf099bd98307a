#!/usr/bin/env bash
# Install Arize Phoenix (the OTLP receiver the end-to-end OpenTelemetry test sends to) into its
# own virtualenv, .cache/phoenix-venv: its dependencies (SQLAlchemy, pandas, grpc, its own
# OpenTelemetry packages) must not meet the app's pins in .venv. Pinned; a second run with the
# same pin does nothing. Needs python3 (3.10+) and PyPI.
# Usage: bash scripts/install_phoenix.sh   (scripts/test runs it; tests/e2e/phoenix.py reads the pin)
set -euo pipefail
cd "$(dirname "$0")/.."

package=arize-phoenix==20.26.1
dir=.cache/phoenix-venv
stamp=$dir/.installed

mkdir -p .cache
exec 9>.cache/phoenix-venv.lock
flock 9 # scripts/test and the test's own call may overlap
if [[ -f $stamp && $(cat "$stamp") == "$package" && -x $dir/bin/phoenix ]]; then
    exit 0
fi
rm -rf "$dir"
echo "Installing $package into $dir ..."
started=$SECONDS
python3 -m venv "$dir"
# This machine's pip config names optional local indexes; drop its warnings about them.
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$package" 2>&1 |
    { grep -v "^WARNING: Location '.*' is ignored" || true; }
[[ ${PIPESTATUS[0]} -eq 0 ]] || exit 1
echo "$package" >"$stamp"
echo "Installed $package in $((SECONDS - started)) s"
