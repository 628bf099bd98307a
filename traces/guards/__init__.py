"""Runtime guards (G2-G6): what keeps long, unattended runs safe.

`normalize` (G2 replies and tool names, G3 timeouts), `loop_detection` (G6),
`hooks` (G4 lifecycle hooks), `confirm` (G5 the confirm gate). The runner calls
them; they import nothing of the runner.
"""
