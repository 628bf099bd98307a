"""System checks: whether tool commands run in the sandbox on this server (X1)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from tools import browser, sandbox
from tools.browser import cgroup as browser_cgroup

UNSAFE_HINT = (
    "Commands the model writes, and everything it read, are untrusted. Install bubblewrap "
    "(Debian: apt-get install bubblewrap) and unset AGENT_SANDBOX."
)


@checks.register("sandbox")
def sandbox_status(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    if not settings.AGENT_SANDBOX:
        return [
            checks.Warning(
                "AGENT_SANDBOX=off: bash runs commands unconfined, as the server's user, with its "
                "files, network and database within reach. This is unsafe.",
                hint=UNSAFE_HINT,
                id="tools.W001",
            )
        ]
    reason = sandbox.unavailable_reason()
    if reason:
        return [
            checks.Warning(
                f"The sandbox cannot run here, so the bash tool is disabled: {reason}.",
                hint="Install bubblewrap and allow user namespaces, or (unsafe) set AGENT_SANDBOX=off.",
                id="tools.W002",
            )
        ]
    if sandbox.process_limit() is None:
        return [
            checks.Warning(
                "The server runs as root and no pids cgroup can be made, so the number of processes "
                "a sandboxed command starts is not bounded (a fork bomb can exhaust the machine).",
                hint="Run the service as an unprivileged user (RLIMIT_NPROC then holds per sandbox), "
                "or give it a writable cgroup hierarchy with the pids controller.",
                id="tools.W003",
            )
        ]
    return []


@checks.register("browser")
def browser_status(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    reason = browser.unavailable_reason()
    if reason:
        return [
            checks.Warning(
                f"The browser tools (browser_open, browser_act, ...) are disabled: {reason}.",
                hint="Install Debian's chromium (scripts/install_system_packages.sh) or set AGENT_BROWSER_CHROMIUM.",
                id="tools.W004",
            )
        ]
    if browser_cgroup.memory_limit() is None:
        return [
            checks.Warning(
                "No memory cgroup can be made for the browser, so Chromium's memory is not bounded "
                "(AGENT_BROWSER_MEMORY_MB does not apply; a page can use the machine's memory).",
                hint="Run the service as root with a writable memory cgroup hierarchy (v1 memory, or v2 "
                "with memory delegated to the server's cgroup).",
                id="tools.W005",
            )
        ]
    return []
