"""Portal forms: every POST the portal takes (runs, approvals, answers, reflection,
experiences) is read and checked here; the views call one service with the result."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS
from django.utils.http import url_has_allowed_host_and_scheme

from memory.models import CATEGORIES
from traces.projects import projects
from traces.runner.run_settings import MAX_ITERATIONS_LIMIT, POLICY_ORDER, STRATEGIES


def _names(text: str) -> list[str] | None:
    names = [n.strip() for n in text.split(",") if n.strip()]
    return names or None


class PortalForm(forms.Form):
    """A form whose first fault is shown as a sentence on the page."""

    def first_message(self) -> str:
        return str(next(iter(self.errors.values()))[0])

    def first_error(self) -> str:
        """The first fault, after the label of the field it is about (if any)."""
        field = next(iter(self.errors))
        if field == NON_FIELD_ERRORS:
            return self.first_message()
        label = self.fields[field].label or field.replace("_", " ") if field in self.fields else field
        return f"{label}: {self.first_message()}"


class AgentsTextForm(PortalForm):
    """The user's own AGENTS text (M9)."""

    text = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 16, "class": "mono"}),
        label="Your AGENTS text",
    )


class RunSettingsForm(PortalForm):
    """The run settings of traces/runner/run_settings.py; empty = keep the trace's (or the preset's)."""

    temperature = forms.FloatField(required=False, min_value=0, max_value=2)
    max_iterations = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_ITERATIONS_LIMIT, label="Step limit"
    )
    tools = forms.CharField(required=False, help_text="comma-separated tool names")
    skills = forms.CharField(required=False, help_text="comma-separated skill names")
    confirm_policy = forms.ChoiceField(
        required=False, choices=[("", "—"), *((p, p) for p in POLICY_ORDER)], label="Approvals"
    )
    llm_params = forms.JSONField(required=False, label="Model parameters (JSON)")
    strategy = forms.ChoiceField(required=False, choices=[("", "—"), *((n, n) for n in STRATEGIES)])
    reflexion = forms.ChoiceField(required=False, choices=[("", "—"), ("on", "on"), ("off", "off")])
    # M9: a name of AGENT_PROJECTS and a directory inside it; checked by the run-settings
    # check (traces/runner/run_settings.py), so an unknown name is refused as the API refuses it.
    project = forms.CharField(required=False, max_length=200)
    project_dir = forms.CharField(required=False, max_length=500, label="Project sub-directory")

    def project_choices(self) -> list[tuple[str, str]]:
        """The configured projects, each named as the select shows it (read-only marked)."""
        return [
            (name, name if project.writable else f"{name} (read-only)")
            for name, project in sorted(projects().items())
        ]

    def run_settings(self) -> dict[str, Any]:
        """The settings the expert filled in (blanks left out)."""
        data = self.cleaned_data
        values = {
            "temperature": data.get("temperature"),
            "max_iterations": data.get("max_iterations"),
            "tools": _names(data.get("tools") or ""),
            "skills": _names(data.get("skills") or ""),
            "confirm_policy": data.get("confirm_policy") or None,
            "llm_params": data.get("llm_params") or None,
            "strategy": data.get("strategy") or None,
            "reflexion": {"on": True, "off": False}.get(data.get("reflexion") or ""),
            "project": self._project(),
        }
        return {name: value for name, value in values.items() if value is not None}

    def _project(self) -> str | None:
        name = (self.cleaned_data.get("project") or "").strip()
        sub = (self.cleaned_data.get("project_dir") or "").strip().strip("/")
        if not name:
            return None
        return f"{name}/{sub}" if sub else name

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if (data.get("project_dir") or "").strip() and not (data.get("project") or "").strip():
            raise forms.ValidationError("a project sub-directory needs a project")
        return data


class NewRunForm(RunSettingsForm):
    task = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 6}))
    preset = forms.CharField(required=False)
    model = forms.CharField(required=False, max_length=200)
    name = forms.CharField(required=False, max_length=200)
    system_prompt = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    disable_memory = forms.BooleanField(required=False, label="No experiences")

    def run_settings(self) -> dict[str, Any]:
        values = super().run_settings()
        if self.cleaned_data.get("system_prompt"):
            values["system_prompt"] = self.cleaned_data["system_prompt"]
        if self.cleaned_data.get("disable_memory"):
            values["enable_memory"] = False
        return values


class ContinueForm(RunSettingsForm):
    text = forms.CharField(required=False)
    after_sequence = forms.IntegerField(required=False, min_value=1)


class ReflectForm(PortalForm):
    focus = forms.CharField(required=False)


class AnswerForm(PortalForm):
    """The answer to an ask_human question; the service refuses an empty one."""

    answer = forms.CharField(required=False, strip=False)
    back = forms.CharField(required=False)  # the asking trace, whose page to return to


class ApprovalDecisionForm(PortalForm):
    """Approve (this call, or the tool for the rest of the run), edit and approve, or deny."""

    decision = forms.ChoiceField(
        choices=[("approve", "approve"), ("approve-run", "approve for the rest of the run"), ("deny", "deny")]
    )
    arguments = forms.CharField(required=False)
    edited = forms.CharField(required=False)  # "1" once the page saw the arguments change
    note = forms.CharField(required=False)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        decision = data.get("decision", "")
        data["scope"] = "run" if decision == "approve-run" else "call"
        data["decision"] = "approve" if decision == "approve-run" else decision
        data["edited_arguments"] = None
        raw = data.get("arguments", "")
        if data["decision"] == "approve" and raw and data.get("edited") == "1":
            try:
                data["edited_arguments"] = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise forms.ValidationError(
                    f"the edited arguments are not valid JSON ({exc.msg} at line {exc.lineno})"
                ) from None
        return data


class ReturnForm(PortalForm):
    """`next`: the portal page to go back to; anything but a path on this site is dropped."""

    next = forms.CharField(required=False)

    def clean_next(self) -> str:
        target = self.cleaned_data["next"]
        local = target.startswith("/") and url_has_allowed_host_and_scheme(target, allowed_hosts=None)
        return target if local else ""


def _words(text: str) -> list[str]:
    return [w.strip() for w in text.split(",") if w.strip()]


class ExperienceEditForm(ReturnForm):
    rule = forms.CharField(error_messages={"required": "the rule cannot be empty"})
    condition = forms.CharField(required=False)
    category = forms.CharField(required=False)  # one of CATEGORIES; anything else keeps the current one
    intent = forms.CharField(required=False, help_text="comma-separated tags")
    state = forms.CharField(required=False, help_text="comma-separated tags")

    def changes(self, current_category: str) -> dict[str, Any]:
        """The experience_update arguments the expert's edit makes."""
        data = self.cleaned_data
        category = data["category"]
        return {
            "rule": data["rule"],
            "condition": data["condition"],
            "category": category if category in CATEGORIES else current_category,
            "tags": {"intent": _words(data["intent"]), "state": _words(data["state"])},
        }


MAX_UPLOAD_BYTES = 2 * 1024 * 1024


class ExperiencesUploadForm(ReturnForm):
    file = forms.FileField(
        allow_empty_file=True, error_messages={"required": "Choose an experiences.md file to upload."}
    )

    def clean_file(self) -> str:
        """The file's text."""
        upload = self.cleaned_data["file"]
        if upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError("That file is too large (over 2 MiB).")
        try:
            return upload.read().decode("utf-8")
        except UnicodeDecodeError:
            raise forms.ValidationError("That file is not UTF-8 text; nothing was imported.") from None
