"""Memory entries in the portal (M8): a user lists, edits and deletes their own entries,
experts (staff) everyone's; someone else's entry is a 404. Writes go through
memory/entries/services.py, so the write gate applies as it does to the agent."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from memory.entries.gate import Draft, MemoryRefused
from memory.entries.selectors import memory_entries_visible_to
from memory.entries.services import (
    MemoryConflict,
    memory_entries_export,
    memory_entry_delete,
    memory_entry_update,
)
from memory.models import MemoryEntry, MemoryType
from portal.forms import PortalForm


class MemoryEntryForm(PortalForm):
    type = forms.ChoiceField(choices=MemoryType.choices)
    name = forms.CharField(max_length=200)
    description = forms.CharField(max_length=500, required=False)
    keywords = forms.CharField(required=False, help_text="comma-separated")
    project = forms.CharField(max_length=100, required=False, help_text="empty: every run")
    content = forms.CharField(widget=forms.Textarea(attrs={"rows": 10}))

    @classmethod
    def of(cls, entry: MemoryEntry) -> MemoryEntryForm:
        return cls(
            initial={
                "type": entry.type,
                "name": entry.name,
                "description": entry.description,
                "keywords": ", ".join(entry.keywords),
                "project": entry.project,
                "content": entry.content,
            }
        )

    def draft(self) -> Draft:
        data = self.cleaned_data
        keywords = [k.strip() for k in data["keywords"].split(",") if k.strip()]
        return Draft(data["type"], data["name"], data["description"], keywords, data["content"])


def _entry(request: HttpRequest, entry_id: int) -> MemoryEntry:
    entry = memory_entries_visible_to(request.user).filter(pk=entry_id).first() if entry_id < 2**63 else None
    if entry is None:
        raise Http404("no such memory entry")
    return entry


@login_required
@require_GET
def memory_list(request: HttpRequest) -> HttpResponse:
    entries = memory_entries_visible_to(request.user)
    kind = request.GET.get("type", "")
    if kind in MemoryType.values:
        entries = entries.filter(type=kind)
    q = request.GET.get("q", "").strip()
    if q:
        entries = entries.filter(Q(name__icontains=q) | Q(description__icontains=q))
    page = Paginator(entries, 30).get_page(request.GET.get("page"))
    return render(
        request,
        "portal/memory_entries.html",
        {"page": page, "types": MemoryType.values, "type": kind, "q": q, "nav": "memory"},
    )


@login_required
@require_http_methods(["GET", "POST"])
def memory_edit(request: HttpRequest, entry_id: int) -> HttpResponse:
    entry = _entry(request, entry_id)
    form = MemoryEntryForm(request.POST) if request.method == "POST" else MemoryEntryForm.of(entry)
    error = ""
    if request.method == "POST" and form.is_valid():
        try:
            memory_entry_update(entry=entry, draft=form.draft(), project=form.cleaned_data["project"])
        except (MemoryRefused, MemoryConflict) as exc:
            error = f"Not saved: {exc}"
        else:
            messages.success(request, f"Memory entry {entry.name!r} saved.")
            return redirect("portal:memory")
    elif request.method == "POST":
        error = form.first_error()
    return render(
        request,
        "portal/memory_entry_edit.html",
        {"entry": entry, "form": form, "error": error, "nav": "memory"},
    )


@login_required
@require_POST
def memory_delete(request: HttpRequest, entry_id: int) -> HttpResponse:
    entry = _entry(request, entry_id)
    memory_entry_delete(entry=entry)
    messages.success(request, f"Memory entry {entry.name!r} deleted.")
    return redirect("portal:memory")


@login_required
@require_GET
def memory_download(request: HttpRequest) -> HttpResponse:
    response = HttpResponse(
        memory_entries_export(entries=memory_entries_visible_to(request.user)),
        content_type="text/markdown; charset=utf-8",
    )
    response["Content-Disposition"] = 'attachment; filename="memory.md"'
    return response
