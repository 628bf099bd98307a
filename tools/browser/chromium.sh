#!/bin/sh
# Chromium as the browser tool starts it (tools/browser/session.py): the kernel kills
# it when its parent (Playwright's driver) dies, so no browser outlives the worker.
exec setpriv --pdeathsig KILL -- "$AGENT_BROWSER_CHROMIUM" "$@"
