#!/bin/sh
# Chromium under bubblewrap, as the browser tools start it with AGENT_SANDBOX on
# (tools/browser/session.py). It sees the system's programs and libraries, the few
# /etc files a browser needs (fonts, certificates, name resolution), its own profile
# and the session's scratch directory (downloads land there first), and a private
# /tmp, PID, IPC and UTS namespace: no server files, no database, no secrets. It
# shares the network (pages are fetched), which the route guard polices. It dies
# with Playwright's driver (setpriv --pdeathsig) and bwrap with it (--die-with-parent).
# As root, the session's cgroups (tools/browser/cgroup.py) take this process before
# it execs, so every Chromium process is counted against their memory and task limits.
if [ -n "$AGENT_BROWSER_CGROUPS" ]; then
    old_ifs=$IFS; IFS=:
    for cgroup in $AGENT_BROWSER_CGROUPS; do
        echo $$ > "$cgroup/cgroup.procs" || { echo "$0: cannot join the cgroup $cgroup" >&2; exit 3; }
    done
    IFS=$old_ifs; unset AGENT_BROWSER_CGROUPS old_ifs cgroup
fi
profile=""
for arg in "$@"; do
    case "$arg" in --user-data-dir=*) profile="${arg#--user-data-dir=}" ;; esac
done
[ -n "$profile" ] || { echo "chromium-sandboxed.sh: no --user-data-dir" >&2; exit 2; }
set -- --die-with-parent --new-session --cap-drop ALL --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try \
    --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
    --symlink usr/sbin /sbin \
    --ro-bind-try /etc/fonts /etc/fonts --ro-bind-try /etc/ssl /etc/ssl \
    --ro-bind-try /etc/ca-certificates /etc/ca-certificates --ro-bind-try /etc/resolv.conf /etc/resolv.conf \
    --ro-bind-try /etc/hosts /etc/hosts --ro-bind-try /etc/nsswitch.conf /etc/nsswitch.conf \
    --ro-bind-try /etc/ld.so.cache /etc/ld.so.cache --ro-bind-try /etc/alternatives /etc/alternatives \
    --ro-bind-try /etc/chromium /etc/chromium --ro-bind-try /etc/chromium.d /etc/chromium.d \
    --ro-bind-try /etc/passwd /etc/passwd --ro-bind-try /etc/group /etc/group \
    --proc /proc --dev /dev --tmpfs /tmp \
    --bind "$AGENT_BROWSER_SCRATCH" "$AGENT_BROWSER_SCRATCH" --bind "$profile" "$profile" \
    -- "$AGENT_BROWSER_CHROMIUM" "$@"
exec setpriv --pdeathsig KILL -- bwrap "$@"
