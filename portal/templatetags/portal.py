"""Template filters of the portal: Markdown, message text, numbers."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from portal.markdown import content_text, pretty_arguments, render_markdown
from traces.media.parts import image_parts, image_url, media_info, stored_sha
from traces.models import Trace, cost_state
from traces.totals import Totals, cost_note, cost_text, dollars

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
    """One figure (a message's cost): "—" when unknown. Totals use `trace_cost`."""
    if value is None:
        return "—"
    return dollars(float(value))


def _cost_html(total: float, unpriced_calls: int) -> str:
    note = cost_note(total, unpriced_calls)
    if not note:
        return cost_text(total, unpriced_calls)
    state = cost_state(total, unpriced_calls)
    return format_html(
        '<span class="cost-{}" title="{}">{}</span>', state, note, cost_text(total, unpriced_calls)
    )


@register.filter
def trace_cost(value: Trace | Totals) -> str:
    """A trace's (or `trace_totals` figures') cost: "$0.0123", "≥ $0.0123" or "unknown",
    with a title saying how many calls were unpriced."""
    if isinstance(value, Totals):
        return _cost_html(value.cost, value.unpriced_calls)
    return _cost_html(value.total_cost, value.unpriced_calls)


@register.filter
def stats_cost(stats: dict[str, Any]) -> str:
    """A goal's self or cumulative stats' cost, read as `trace_cost`."""
    return _cost_html(float(stats.get("total_cost") or 0.0), int(stats.get("unpriced_calls") or 0))


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


THUMBNAIL_CSS_SIDE = 160


@register.filter
def user_images(message: Any) -> list[dict[str, Any]]:
    """The image parts of a *user* message, for thumbnails (L5, P5): stored ones are
    served by portal/views/media.py; a URL the user gave is only a link, never loaded."""
    if getattr(message, "role", None) != "user":
        return []
    images = []
    for index, part in image_parts(message.content):
        info, url = media_info(part), image_url(part)
        width, height = int(info.get("width") or 0), int(info.get("height") or 0)
        scale = min(1.0, THUMBNAIL_CSS_SIDE / max(width, height, 1))
        pdf = info.get("pdf") if isinstance(info.get("pdf"), dict) else None
        label = f"{pdf['name']}, page {pdf['page']} of {pdf['pages']}" if pdf else info.get("name") or "image"
        images.append(
            {
                "index": index,
                "stored": stored_sha(part) is not None,
                "url": url if url.startswith(("https://", "http://")) else "",
                "width": max(1, round(width * scale)),
                "height": max(1, round(height * scale)),
                "label": label,
                "pdf": pdf is not None,
            }
        )
    return images
