"""A goal's figures: messages, tokens, cost and time, its own (`self_stats`) and
with its sub-goals and sub-traces (`cumulative_stats`)."""

from __future__ import annotations

from typing import Any

EMPTY_STATS: dict[str, Any] = {
    "message_count": 0,
    "prompt_tokens": 0,
    "completion_tokens": 0,
    "total_tokens": 0,
    "total_cost": 0.0,
    "unpriced_calls": 0,  # model calls with no price: total_cost leaves them out
    "duration_ms": 0,
}


def goal_stats(raw: dict[str, Any] | None) -> dict[str, Any]:
    """`raw` figures with every key present (missing ones zero)."""
    return {**EMPTY_STATS, **(raw or {})}


def add_stats(stats: dict[str, Any] | None, delta: dict[str, Any]) -> dict[str, Any]:
    """`stats` plus `delta`, key by key (cost rounded to 10 places)."""
    merged = goal_stats(stats)
    for key, value in delta.items():
        merged[key] = merged.get(key, 0) + (value or 0)
    merged["total_cost"] = round(float(merged["total_cost"]), 10)
    return merged
