"""Model, tool and experience text as safe HTML (P5).

Markdown is rendered first, then nh3 keeps only an allow-list of tags and
attributes: no script or style, no event handler attribute, and links only
with http(s)/mailto URLs. Whatever a model or a tool writes, what reaches the
browser is inert.
"""

from __future__ import annotations

import json
from typing import Any

import markdown as md
import nh3
from django.utils.safestring import SafeString, mark_safe

ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "kbd", "li", "ol", "p", "pre", "s", "span",
    "strong", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "abbr": {"title"},
    "code": {"class"},
    "td": {"align"},
    "th": {"align"},
}
URL_SCHEMES = {"http", "https", "mailto"}
EXTENSIONS = ["fenced_code", "tables", "sane_lists", "nl2br"]


def sanitize_html(html: str) -> str:
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
    )


def render_markdown(text: str | None) -> SafeString:
    """Markdown to sanitised HTML, safe to put in a template unescaped."""
    if not text:
        return mark_safe("")
    html = md.markdown(str(text), extensions=EXTENSIONS, output_format="html")
    return mark_safe(sanitize_html(html))  # nh3 allow-list above


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a multimodal list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, dict) and part.get("type") == "image_url":
                continue  # a user's images are thumbnails (portal.templatetags.portal.user_images)
            elif isinstance(part, dict):
                parts.append(f"[{part.get('type', 'part')}]")
        return "\n\n".join(parts)
    return json.dumps(content, indent=2, ensure_ascii=False)


def pretty_arguments(arguments: Any) -> str:
    """Tool call arguments (a JSON string or object) pretty-printed for reading and editing."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return json.dumps(arguments, indent=2, ensure_ascii=False)
