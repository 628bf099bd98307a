"""Portal forms: what an expert may set when starting or continuing a run."""

from __future__ import annotations

from typing import Any

from django import forms

from traces.runner.run_settings import MAX_ITERATIONS_LIMIT, POLICY_ORDER


def _names(text: str) -> list[str] | None:
    names = [n.strip() for n in text.split(",") if n.strip()]
    return names or None


class RunSettingsForm(forms.Form):
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
        }
        return {name: value for name, value in values.items() if value is not None}

    def first_error(self) -> str:
        field, errors = next(iter(self.errors.items()))
        label = self.fields[field].label or field.replace("_", " ") if field in self.fields else field
        return f"{label}: {errors[0]}"


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
