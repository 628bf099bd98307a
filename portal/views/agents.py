"""The user's own AGENTS text (M9), edited in the portal: the last layer of their runs' project context."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from portal.forms import AgentsTextForm
from traces.projects import projects
from traces.services.agents_text import user_agents_text, user_agents_update


@login_required
def agents_text(request: HttpRequest) -> HttpResponse:
    """GET: the user's AGENTS text in a form; POST: save it (their next runs read it)."""
    form = AgentsTextForm(request.POST or None, initial={"text": user_agents_text(user=request.user)})
    if request.method == "POST" and form.is_valid():
        try:
            user_agents_update(user=request.user, text=form.cleaned_data["text"])
        except ValueError as exc:
            form.add_error("text", str(exc))
        else:
            messages.success(request, "Saved: your next runs read it.")
            return redirect("portal:agents-text")
    return render(
        request,
        "portal/agents_text.html",
        {
            "form": form,
            "nav": "agents",
            "deployment_file": settings.AGENT_USER_AGENTS_FILE,
            "projects": sorted(projects().values(), key=lambda p: p.name),
        },
    )
