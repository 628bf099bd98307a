"""Where the project lives (the settings modules' one shared value)."""

from __future__ import annotations

from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
