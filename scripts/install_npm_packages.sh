#!/usr/bin/env bash
# Install the npm packages the MCP tests use, pinned, into .cache/mcp-npm (not mid-test
# through npx): the reference server @modelcontextprotocol/server-everything and the
# conformance suite @modelcontextprotocol/conformance (0.1.11: the last release that runs on
# Node 20; later ones need Node 22). Needs Node 20+ and the npm registry.
# Usage: bash scripts/install_npm_packages.sh   (scripts/test runs it)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(@modelcontextprotocol/server-everything@2026.8.31 @modelcontextprotocol/conformance@0.1.11)
# conformance 0.1.11's test servers reconnect one Server per request, which the TypeScript SDK
# refuses since 1.26: keep the suite on the SDK it was released with.
manifest='{"private": true, "overrides": {"@modelcontextprotocol/conformance": {"@modelcontextprotocol/sdk": "1.25.2"}}}'
dir=.cache/mcp-npm
stamp=$dir/.installed

if ! command -v npm >/dev/null 2>&1; then
    echo "!! npm is missing (install Node 20+): the MCP reference server tests skip (fail with CI=true)" >&2
    exit 1
fi
if [[ -f $stamp && $(cat "$stamp") == "${packages[*]} $manifest" ]]; then
    exit 0
fi
mkdir -p "$dir"
echo "$manifest" >"$dir/package.json"
echo "Installing ${packages[*]} into $dir ..."
npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${packages[@]}"
echo "${packages[*]} $manifest" >"$stamp"
