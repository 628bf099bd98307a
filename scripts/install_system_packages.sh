#!/usr/bin/env bash
# Install the Debian packages the tests need, when missing: PostgreSQL 15 and Redis
# (the tests start throwaway servers), chromium (the portal's browser tests) and
# bubblewrap (the sandbox every tool command runs in). Needs root; otherwise it
# says loudly what is missing and which tests will be skipped.
# Usage: bash scripts/install_system_packages.sh   (scripts/test runs it first)
set -euo pipefail

packages=()
skipped=()
if [[ ! -x /usr/lib/postgresql/15/bin/postgres ]]; then
    packages+=(postgresql-15)
    skipped+=("the whole PostgreSQL run")
fi
if ! command -v redis-server >/dev/null 2>&1 && [[ ! -x /usr/bin/redis-server ]]; then
    packages+=(redis-server)
    skipped+=("the Redis tests (channel layer, django-q2 broker)")
fi
# Playwright's own browser download cannot work here; the tests drive Debian's chromium.
if [[ ! -x /usr/bin/chromium ]]; then
    packages+=(chromium)
    skipped+=("the portal's browser tests")
fi
if ! command -v bwrap >/dev/null 2>&1; then
    packages+=(bubblewrap)
    skipped+=("the sandbox tests (and bash is not offered to runs)")
fi

[[ ${#packages[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -ne 0 ]]; then
    {
        echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
        echo "!! WARNING: missing Debian packages: ${packages[*]}"
        echo "!! Not root, so not installing them. Skipped (with CI=true, the PostgreSQL and sandbox ones fail):"
        printf '!!   - %s\n' "${skipped[@]}"
        echo "!! Install: sudo apt-get install -y --no-install-recommends ${packages[*]}"
        echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
    } >&2
    exit 0
fi

echo "Installing ${packages[*]} ..."
export DEBIAN_FRONTEND=noninteractive
# The tests start their own throwaway servers; keep the packages' services from
# starting (exit 101 = "not allowed" for invoke-rc.d) while they install.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    trap 'rm -f "$policy"' EXIT
fi
apt-get update -q </dev/null
apt-get install -y -q --no-install-recommends "${packages[@]}" </dev/null
