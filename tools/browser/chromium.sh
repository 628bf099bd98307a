#!/bin/sh
# Chromium as the browser tool starts it (tools/browser/session.py): the kernel kills
# it when its parent (Playwright's driver) dies, so no browser outlives the worker.
# As root, the session's cgroups (tools/browser/cgroup.py) take this process before
# it execs, so every Chromium process is counted against their memory and task limits.
if [ -n "$AGENT_BROWSER_CGROUPS" ]; then
    old_ifs=$IFS; IFS=:
    for cgroup in $AGENT_BROWSER_CGROUPS; do
        echo $$ > "$cgroup/cgroup.procs" || { echo "$0: cannot join the cgroup $cgroup" >&2; exit 3; }
    done
    IFS=$old_ifs; unset AGENT_BROWSER_CGROUPS old_ifs cgroup
fi
exec setpriv --pdeathsig KILL -- "$AGENT_BROWSER_CHROMIUM" "$@"
