"""Template filters of the portal: Markdown, message text, numbers."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString

from portal.markdown import content_text, pretty_arguments, render_markdown

register = template.Library()


@register.filter
def markdown(text: Any) -> SafeString:
    return render_markdown(text if isinstance(text, str) else content_text(text))


@register.filter
def text(content: Any) -> str:
    return content_text(content)


@register.filter
def arguments(value: Any) -> str:
    return pretty_arguments(value)


@register.filter
def cost(value: Any) -> str:
    if value is None:
        return "—"
    value = float(value)
    if value == 0:
        return "$0"
    return f"${value:.4f}" if value < 1 else f"${value:.2f}"


@register.filter
def duration(ms: Any) -> str:
    if not ms:
        return "—"
    seconds = int(ms) / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


@register.filter
def tokens(value: Any) -> str:
    value = int(value or 0)
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return str(value)


@register.filter
def thousands(value: Any) -> str:
    """12345 -> "12,345"."""
    return f"{int(value or 0):,}"


@register.filter
def gist(content: Any, length: int = 80) -> str:
    flat = " ".join(content_text(content).split())
    return flat if len(flat) <= int(length) else flat[: int(length) - 1] + "…"


@register.filter
def get_item(mapping: dict[str, Any], key: str) -> Any:
    return mapping.get(key)
