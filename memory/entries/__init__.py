"""Memory entries (M8, seed 001): the agent's own notes about a user or a project.

- `gate.py` — the write gate: what `write_memory` (and every other writer) refuses.
- `services.py` / `selectors.py` — writes (overwrite by type + name) and reads (scopes).
- `index.py` — the index every model call of a run sees (200 lines / 25 KB caps).
- `recall.py` — the utility model's pick of relevant entries, filtered.
- `requests.py` — what a run's model requests get: the index, then what was recalled.
- `markdown.py` — memory.md export and import (a lossless round trip).
"""
