"""Memory pages (P4): the experience review queue, experiences.md, skills and presets.

Experts (staff) review; other users read approved experiences, as in the API (M5).
Every write goes through memory.services.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from memory.experiences_md import ExperiencesFileError
from memory.models import CATEGORIES, AgentPreset, Experience, ExperienceStatus
from memory.selectors import experience_list, experiences_visible_to
from memory.services import (
    experience_approve,
    experience_mark,
    experience_retire,
    experience_set_status,
    experience_update,
    experiences_export,
    experiences_import,
)
from memory.skills import load_skills
from portal.forms import ExperienceEditForm, ExperiencesUploadForm, ReturnForm


def _expert(request: HttpRequest) -> None:
    if not request.user.is_staff:
        raise PermissionDenied("only experts (staff) review experiences")


@login_required
@require_GET
def experience_list_view(request: HttpRequest) -> HttpResponse:
    default = ExperienceStatus.DRAFT if request.user.is_staff else ExperienceStatus.APPROVED
    status = request.GET.get("status", default)
    filters = {k: v for k in ("category", "q", "tag") if (v := request.GET.get(k, "").strip())}
    if status != "all":
        filters["status"] = status
    experiences = experience_list(user=request.user, filters=filters).select_related("trace", "reviewed_by")
    page = Paginator(experiences, 30).get_page(request.GET.get("page"))
    visible = experiences_visible_to(request.user)
    counts = {s: visible.filter(status=s).count() for s in ExperienceStatus.values}
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "portal/experiences.html",
        {
            "page": page,
            "status": status,
            "filters": filters,
            "counts": counts,
            "categories": CATEGORIES,
            "statuses": ExperienceStatus.values,
            "query": query.urlencode(),
        },
    )


def _experience(request: HttpRequest, code: str) -> Experience:
    experience = experiences_visible_to(request.user).filter(code=code).first()
    if experience is None:
        raise Http404("no such experience")
    return experience


def _back(form: ReturnForm) -> HttpResponse:
    """To the page the (validated) form came from, else the review queue."""
    return redirect(form.cleaned_data.get("next") or reverse("portal:experiences"))


@login_required
@require_POST
def experience_action(request: HttpRequest, code: str, action: str) -> HttpResponse:
    _expert(request)
    experience = _experience(request, code)
    form = ReturnForm(request.POST)
    form.is_valid()  # only `next`, which falls back to the review queue
    if action == "approve":
        experience_approve(experience=experience, user=request.user)
        messages.success(request, f"{code} approved: runs can now retrieve it.")
    elif action == "retire":
        experience_retire(experience=experience, user=request.user)
        messages.success(request, f"{code} retired: no run will retrieve it.")
    elif action == "draft":
        experience_set_status(experience=experience, status=ExperienceStatus.DRAFT, user=request.user)
        messages.success(request, f"{code} is back in the review queue.")
    elif action in ("helpful", "harmful"):
        experience_mark(experience=experience, helpful=action == "helpful")
        messages.success(request, f"{code} marked {action}.")
    else:
        raise Http404("unknown action")
    return _back(form)


@login_required
@require_POST
def experience_edit(request: HttpRequest, code: str) -> HttpResponse:
    _expert(request)
    experience = _experience(request, code)
    form = ExperienceEditForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"{code} was not changed: {form.first_message()}.")
        return _back(form)
    experience_update(experience=experience, **form.changes(experience.category))
    messages.success(request, f"{code} saved.")
    return _back(form)


@login_required
@require_GET
def experiences_download(request: HttpRequest) -> HttpResponse:
    text = experiences_export(queryset=experiences_visible_to(request.user))
    response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="experiences.md"'
    return response


@login_required
@require_POST
def experiences_upload(request: HttpRequest) -> HttpResponse:
    _expert(request)
    form = ExperiencesUploadForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, form.first_message())
        return _back(form)
    try:
        result = experiences_import(text=form.cleaned_data["file"])
    except ExperiencesFileError as exc:
        messages.error(request, f"Nothing was imported: {exc}")
    else:
        messages.success(
            request, f"Imported: {len(result['created'])} new, {len(result['updated'])} updated."
        )
    return _back(form)


@login_required
@require_GET
def library(request: HttpRequest) -> HttpResponse:
    """Skills and presets, with links to the admin for editing."""
    skills = sorted(load_skills().values(), key=lambda s: (s.source, s.name))
    return render(
        request,
        "portal/library.html",
        {"skills": skills, "presets": AgentPreset.objects.order_by("name")},
    )
