"""Portal forms (portal/forms.py): what a POST becomes before a service sees it."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile

from portal.forms import (
    MAX_UPLOAD_BYTES,
    ApprovalDecisionForm,
    ExperienceEditForm,
    ExperiencesUploadForm,
    ReturnForm,
)


def decided(**data: str) -> ApprovalDecisionForm:
    form = ApprovalDecisionForm(data)
    form.is_valid()
    return form


def test_approve_for_the_rest_of_the_run_is_an_approve_with_scope_run():
    data = decided(decision="approve-run").cleaned_data
    assert (data["decision"], data["scope"], data["edited_arguments"]) == ("approve", "run", None)


def test_arguments_count_only_when_the_page_marked_them_edited():
    assert (
        decided(decision="approve", arguments='{"a": 1}', edited="0").cleaned_data["edited_arguments"] is None
    )
    assert decided(decision="approve", arguments='{"a": 1}', edited="1").cleaned_data["edited_arguments"] == {
        "a": 1
    }
    assert decided(decision="deny", arguments="{oops", edited="1").is_valid()
    form = decided(decision="approve", arguments="{oops", edited="1")
    assert form.first_error().startswith("the edited arguments are not valid JSON (")


def test_an_unknown_decision_is_refused_naming_the_field():
    assert decided(decision="maybe").first_error().startswith("decision: ")


def test_next_keeps_only_a_path_on_this_site():
    def target(value: str) -> str:
        form = ReturnForm({"next": value})
        form.is_valid()
        return form.cleaned_data["next"]

    assert target("/experiences/?status=all") == "/experiences/?status=all"
    assert target("//evil.example/") == target("https://evil.example/") == target("/\\evil.example") == ""


def test_an_edit_keeps_the_category_unless_a_known_one_is_chosen():
    form = ExperienceEditForm({"rule": " Use wc. ", "category": "astrology", "intent": "Count Lines, , csv"})
    assert form.is_valid()
    changes = form.changes("tool_usage")
    assert changes["rule"] == "Use wc." and changes["category"] == "tool_usage"
    assert changes["tags"] == {"intent": ["Count Lines", "csv"], "state": []}
    empty = ExperienceEditForm({"rule": "  "})
    assert not empty.is_valid() and empty.first_message() == "the rule cannot be empty"


def test_an_upload_is_refused_when_missing_too_large_or_not_utf8():
    def upload(content: bytes | None) -> ExperiencesUploadForm:
        files = {} if content is None else {"file": SimpleUploadedFile("experiences.md", content)}
        form = ExperiencesUploadForm({}, files)
        form.is_valid()
        return form

    assert upload(None).first_message() == "Choose an experiences.md file to upload."
    assert upload(b"x" * (MAX_UPLOAD_BYTES + 1)).first_message() == "That file is too large (over 2 MiB)."
    assert upload(b"\xff\xfe").first_message() == "That file is not UTF-8 text; nothing was imported."
    assert upload(b"").cleaned_data["file"] == ""
