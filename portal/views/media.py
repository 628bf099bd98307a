"""A user's images in a trace (L5): thumbnails and full size, for those who may see the trace.

Only image parts of *user* messages stored in the media store are served (never a
URL from a message, never anything a model wrote); the browser reaches them only
through this view, which checks the trace's visibility like every trace page.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from traces.media.blobs import MediaMissing, blob_read, thumbnail
from traces.media.parts import media_info, stored_sha
from traces.models import Message
from traces.selectors import traces_visible_to


@login_required
@require_GET
def message_media(request: HttpRequest, trace_id: str, sequence: int, index: int) -> HttpResponse:
    """Part `index` of user message `sequence`: a JPEG thumbnail, or the image itself with ?full=1."""
    if not traces_visible_to(request.user).filter(pk=trace_id).exists():
        raise Http404("no such trace")
    content = (
        Message.objects.filter(trace_id=trace_id, sequence=sequence, role="user")
        .values_list("content", flat=True)
        .first()
    )
    part = content[index] if isinstance(content, list) and 0 <= index < len(content) else None
    sha = stored_sha(part)
    if part is None or sha is None:
        raise Http404("no such image")
    full = request.GET.get("full") == "1"
    try:
        data = blob_read(sha) if full else thumbnail(sha)
    except MediaMissing:
        raise Http404("the image's bytes are missing") from None
    mime = media_info(part).get("mime", "image/png") if full else "image/jpeg"
    response = HttpResponse(data, content_type=mime)
    response["Cache-Control"] = "private, max-age=86400"  # content-addressed: never changes
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'"
    return response
