"""Path converters of the API's URLs (mounted by traces/api/urls.py and memory/api/urls.py)."""

from __future__ import annotations

from django.urls import register_converter
from django.urls.converters import StringConverter


class KeyConverter(StringConverter):
    """A trace id, experience code or skill name: any path segment without NUL.

    No key holds a NUL, and PostgreSQL cannot even compare text with one, so such
    a URL matches no route and answers the API's JSON 404 instead of a 500.
    """

    regex = "[^/\x00]+"


register_converter(KeyConverter, "key")
