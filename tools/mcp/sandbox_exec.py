"""Exec bubblewrap for a stdio MCP server (tools/mcp/launch.py); runs as `python -I sandbox_exec.py`.

Reads the sandbox's spec from AGENTSITE_MCP_SANDBOX, makes the in-memory files bwrap
binds (left open across exec), writes the options to one more, and becomes bwrap
with an empty environment. stdin and stdout stay the MCP channel. Standard library only.
"""

import json
import os
import sys


def main() -> None:
    spec = json.loads(os.environ.pop("AGENTSITE_MCP_SANDBOX"))
    fds = {}
    for placeholder, text in spec["data"].items():
        fds[placeholder] = str(_memfd(placeholder, text))
    options = [fds.get(option, option) for option in spec["options"]]
    args_fd = _memfd("bwrap-args", "".join(f"{option}\0" for option in options))
    argv = [spec["bwrap"], "--args", str(args_fd), *spec["argv"]]
    try:
        os.execve(spec["bwrap"], argv, {})
    except OSError as exc:
        sys.stderr.write(f"could not start bubblewrap ({spec['bwrap']}): {exc}\n")
        sys.exit(127)


def _memfd(name: str, text: str) -> int:
    fd = os.memfd_create(name.strip("@:"), 0)  # no CLOEXEC: bwrap inherits it
    os.write(fd, text.encode())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


if __name__ == "__main__":
    main()
