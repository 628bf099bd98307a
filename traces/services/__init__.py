"""Writes on traces that callers outside the runner make (HackSoft services):
`runs` (start, continue, reflect, stop), `approvals` (an expert's decision),
`sweep` (dead workers' runs). Views, admin, commands and tasks call these."""
