"""Stored image references become what the model reads (L5), when a request is sent.

`traces/llm_request.py:request_messages` passes each image message through `media_message`:
a `media:` reference becomes a base64 data URL again (OpenAI-style; litellm turns it
into Anthropic's image blocks), the bookkeeping `media` key is dropped, and a model
that litellm knows cannot see images gets a text note in each image's place.
"""

from __future__ import annotations

import base64
from typing import Any

from traces.media.blobs import MediaMissing, blob_read
from traces.media.parts import describe, has_images, image_url, media_info, stored_sha


def accepts_images(model: str) -> bool:
    """False only when litellm's model table says the model has no vision; a model it
    does not know (a local endpoint) gets the images, and its own error if it refuses."""
    import litellm

    litellm.suppress_debug_info = True
    try:
        info = litellm.get_model_info(model)
    except Exception:
        return True
    return bool(info.get("supports_vision"))


def media_for_model(messages: list[dict[str, Any]], model: str) -> list[dict[str, Any]]:
    """The request as the model gets it; `messages` itself when it holds no image."""
    if not has_images(messages):
        return messages
    vision = accepts_images(model)
    return [media_message(message, vision, model) for message in messages]


def media_message(message: dict[str, Any], vision: bool, model: str) -> dict[str, Any]:
    """One message as the model gets it: itself when it holds no image."""
    content = message.get("content")
    if isinstance(content, list) and any(image_url(p) for p in content):
        return {**message, "content": [_for_model(p, vision, model) for p in content]}
    return message


def _for_model(part: dict[str, Any], vision: bool, model: str) -> dict[str, Any]:
    if not image_url(part):
        return part
    if not vision:
        return {"type": "text", "text": f"{describe(part)} (not shown: {model} does not accept images)"}
    sha = stored_sha(part)
    inner = dict(part["image_url"]) if isinstance(part.get("image_url"), dict) else {"url": image_url(part)}
    if sha is not None:
        try:
            data = blob_read(sha)
        except MediaMissing:
            return {"type": "text", "text": f"{describe(part)} (its bytes are missing from the media store)"}
        mime = media_info(part).get("mime") or "image/png"
        inner["url"] = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    return {"type": "image_url", "image_url": inner}
