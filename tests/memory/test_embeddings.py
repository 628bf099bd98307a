"""Optional embeddings (M4): batches, retries, reciprocal rank fusion with the lexical order,
the floor, and the lexical fallback, through the real litellm client against the scripted
server's `/v1/embeddings` (deterministic bag-of-words vectors, tests/scripted_llm.py)."""

from __future__ import annotations

import logging
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from memory.models import Experience
from memory.retrieval import embed_missing, embed_text, experience_search
from memory.retrieval.embeddings import unpack
from tests.scripted_llm import Reply

pytestmark = pytest.mark.django_db

MODEL = "embedder"  # the scripted server's queue for "openai/embedder" (the `embedder` fixture)
TRANSIENT = Reply(status=503, error="overloaded", headers={"retry-after": "0"})


def calls(llm: Any) -> list[Any]:
    return [r for r in llm.requests_for(MODEL) if r.path == "/v1/embeddings"]


def codes(found: list[Any]) -> list[str]:
    return [s.experience.code for s in found]


def test_experiences_are_embedded_in_batches_one_call_each(llm, make_experience, settings):
    made = [make_experience(rule=f"lesson {n} about caching", condition=f"case {n}") for n in range(7)]
    settings.AGENT_EMBEDDING_MODEL = f"openai/{MODEL}"
    settings.AGENT_EMBEDDING_API_BASE, settings.AGENT_EMBEDDING_API_KEY = llm.url, "sk-test"
    settings.AGENT_EMBEDDING_BATCH = 3
    out = StringIO()

    call_command("embed_experiences", stdout=out)

    assert [len(r.body["input"]) for r in calls(llm)] == [3, 3, 1]
    assert "7 approved experience(s) to embed" in out.getvalue() and "  6/7" in out.getvalue()
    stored = Experience.objects.filter(pk__in=[e.pk for e in made])
    assert {e.embedding_model for e in stored} == {f"openai/{MODEL}"}
    assert all(abs(sum(x * x for x in unpack(e.embedding)) - 1) < 1e-3 for e in stored)  # unit vectors
    assert embed_missing() == 0 and len(calls(llm)) == 3  # nothing left to embed
    call_command("embed_experiences", "--all", stdout=StringIO())
    assert [len(r.body["input"]) for r in calls(llm)] == [3, 3, 1] * 2


def test_the_command_needs_an_embedding_model(db, settings):
    settings.AGENT_EMBEDDING_MODEL = ""
    with pytest.raises(CommandError, match="AGENT_EMBEDDING_MODEL is not set"):
        call_command("embed_experiences", stdout=StringIO())


def test_the_admin_embeds_the_selected_approved_experiences_again(admin_client, embedder, make_experience):
    approved = make_experience(rule="Cache the wheels.")
    draft = make_experience(rule="Not yet.", status="draft")
    embedder.reset()

    response = admin_client.post(
        "/admin/memory/experience/",
        {"action": "embed", "_selected_action": [approved.pk, draft.pk]},
        follow=True,
    )

    assert "1 approved experience(s) embedded" in response.content.decode()
    assert [r.body["input"] for r in calls(embedder)] == [[approved.search_text]]


def test_an_edit_of_the_text_is_embedded_again(embedder, make_experience):
    experience = make_experience(rule="Cache the wheels.", tags={"intent": ["optimization"]})
    before = Experience.objects.get(pk=experience.pk).embedding
    from memory.services import experience_update

    experience_update(experience=Experience.objects.get(pk=experience.pk), rule="Translate the strings.")

    after = Experience.objects.get(pk=experience.pk)
    assert after.embedding_model == f"openai/{MODEL}" and after.embedding != before
    experience_update(experience=after, helpful=3)  # no text change: no new call
    assert len(calls(embedder)) == 2


def test_a_transient_failure_is_retried(embedder, make_experience):
    embedder.script(MODEL, [TRANSIENT])

    experience = make_experience(rule="Cache the wheels.")

    assert [r.status for r in calls(embedder)] == [503, 200]
    assert Experience.objects.get(pk=experience.pk).embedding_model == f"openai/{MODEL}"


def test_a_failing_provider_blocks_neither_approval_nor_retrieval(
    embedder, make_experience, settings, caplog
):
    settings.AGENT_LLM_RETRIES = 1
    embedder.script(MODEL, [TRANSIENT] * 4)  # the approval's call and retry, then the task's
    caplog.set_level(logging.WARNING, logger="memory.retrieval.embeddings")

    experience = make_experience(rule="Mount a BuildKit cache.", condition="slow docker builds")
    query = embed_text("speed up the slow docker builds")
    found = experience_search(text="speed up the slow docker builds", query_embedding=query)

    assert Experience.objects.get(pk=experience.pk).embedding is None  # approved, not embedded
    assert query is None and codes(found) == [experience.code] and found[0].fusion is None
    assert len(calls(embedder)) == 4
    assert "stay lexical-only" in caplog.text and "retrieving lexically" in caplog.text


def test_fusion_puts_first_what_both_orders_rank_well(embedder, make_experience, settings):
    pinned = make_experience(
        rule="Pin the base image digest so rebuilds are reproducible.",
        condition="a docker image is rebuilt",
        tags={"intent": ["optimization"], "state": ["docker"]},
        helpful=5,
    )
    wheels = make_experience(
        rule="Cache pip wheels between builds with a BuildKit cache mount.",
        condition="docker builds download the same pip wheels",
        tags={"intent": ["optimization"]},
    )
    layers = make_experience(
        rule="Order the Dockerfile so the pip install layer is cached.",
        condition="slow builds",
        tags={"intent": ["optimization"]},
    )
    task = "Speed up the slow docker builds: pip downloads the same wheels every time"
    tags = {"intent": ["optimization"], "state": ["docker"]}

    lexical = experience_search(tags=tags, text=task)
    fused = experience_search(tags=tags, text=task, query_embedding=embed_text(task), explain=True)

    assert codes(lexical) == [pinned.code, wheels.code, layers.code]  # the shared tag wins
    assert codes(fused) == [wheels.code, pinned.code, layers.code]
    why = fused[0].why()["fusion"]
    assert (why["lexical_rank"], why["embedding_rank"], why["rrf_k"], why["embedding_weight"]) == (
        2,
        1,
        60,
        2.0,
    )
    assert why["fused"] == pytest.approx(1 / 62 + 2 / 61, abs=1e-5) and why["cosine"] > 0.5
    # the embedding order weighs AGENT_EMBEDDING_WEIGHT: at 0 it only admits, the lexical order ranks
    settings.AGENT_EMBEDDING_WEIGHT = 0.0
    unweighted = experience_search(tags=tags, text=task, query_embedding=embed_text(task), explain=True)
    assert codes(unweighted) == codes(lexical)
    assert unweighted[0].why()["fusion"]["fused"] == pytest.approx(1 / 61, abs=1e-5)


def test_the_floor_holds_with_embeddings(embedder, make_experience, settings):
    settings.AGENT_EMBEDDING_MIN_COSINE = 0.6
    task = "Rotate the nginx access logs weekly"
    strong = make_experience(rule="Rotate nginx access logs weekly with logrotate.")  # no tag, no condition
    make_experience(rule="Read the logs before guessing.", condition="a deploy failed")  # one shared word
    query = embed_text(task)

    found = experience_search(text=task, query_embedding=query)

    # neither is lexically relevant (words in the rule alone do not count); only the strong
    # cosine clears the floor, and the trace says it came by its embedding alone
    assert experience_search(text=task) == []
    assert codes(found) == [strong.code]
    assert found[0].fusion is not None and found[0].fusion["lexical_rank"] is None
    assert found[0].fusion["cosine"] >= 0.6
    settings.AGENT_EMBEDDING_MIN_COSINE = 0.99
    assert experience_search(text=task, query_embedding=query) == []


def test_a_run_with_failed_tagging_and_embeddings_injects_nothing_below_the_floor(
    runner, embedder, make_experience
):
    from tests.memory.test_retrieval import FLAKY, user
    from traces.models import TraceEvent
    from traces.runner import RunConfig

    flaky = make_experience(**FLAKY)
    files = make_experience(
        rule="Create the parent directory before writing, then write the file in one call.",
        condition="writing a report file to a new directory",
        tags={"intent": ["write_file"], "state": []},
    )
    embedder.script("utility", ["Report", Reply(text="Sure! The tags are: files, writing.")])  # not JSON
    embedder.script("scripted", ["done"])

    result = runner.run_result(user("Write the failing tests into a report file under out/"), RunConfig())

    first_user = embedder.requests_for("scripted")[0].messages[1]["content"]
    assert f"- [{files.code}]" in first_user and f"- [{flaky.code}]" not in first_user
    event = TraceEvent.objects.get(trace_id=result.trace_id, type="experiences_retrieved")
    (why,) = event.payload["why"]
    assert why["code"] == files.code and why["fusion"]["lexical_rank"] == 1
    assert why["fusion"]["embedding_rank"] == 1 and why["fusion"]["cosine"] > 0


def test_an_import_embeds_its_approved_experiences_in_one_batch(embedder, make_experience):
    from memory.services import experiences_export, experiences_import

    for n in range(3):
        make_experience(rule=f"Lesson {n} about caching.", tags={"intent": ["optimization"]})
    text = experiences_export()
    Experience.objects.all().delete()
    embedder.reset()

    experiences_import(text=text)

    assert [len(r.body["input"]) for r in calls(embedder)] == [3]
    assert Experience.objects.filter(embedding__isnull=True).count() == 0


def _embed_as(experience: Experience, vector: list[float]) -> None:
    """Store `vector` as the configured model's embedding of `experience` (as a real model
    would give a paraphrase: the scripted endpoint's bag of words cannot)."""
    from django.utils import timezone

    from memory.retrieval.embeddings import pack, unit

    Experience.objects.filter(pk=experience.pk).update(
        embedding=pack(unit(vector)), embedding_model=f"openai/{MODEL}", embedded_at=timezone.now()
    )


def test_a_paraphrase_sharing_no_word_and_no_tag_is_found_by_its_embedding(embedder, make_experience):
    paraphrase = make_experience(
        rule="Split the batch and run the parts in parallel.", condition="the batch is slow"
    )
    other = make_experience(rule="Check the cron schedule first.", condition="a nightly job did not start")
    _embed_as(paraphrase, [1.0, 0.2, 0.0, 0.0])
    _embed_as(other, [0.0, 0.0, 1.0, 0.1])
    task = "Make the overnight export finish sooner"

    assert experience_search(text=task) == []  # no word of it is in either lesson
    found = experience_search(text=task, query_embedding=[1.0, 0.0, 0.0, 0.0], explain=True)

    assert codes(found) == [paraphrase.code]  # the other's cosine is ~0: below the floor
    assert found[0].fusion is not None
    assert (found[0].fusion["lexical_rank"], found[0].fusion["embedding_rank"]) == (None, 1)
    assert found[0].fusion["cosine"] > 0.9


def test_the_embedding_search_keeps_to_the_runs_scopes(embedder, make_experience):
    mine = make_experience(rule="Split the batch.", condition="the batch is slow", scope="user:7")
    _embed_as(mine, [1.0, 0.0, 0.0])
    task = "Make the overnight export finish sooner"

    assert experience_search(text=task, query_embedding=[1.0, 0.0, 0.0], user_id=8) == []
    assert codes(experience_search(text=task, query_embedding=[1.0, 0.0, 0.0], user_id=7)) == [mine.code]
    assert experience_search(text=task, query_embedding=[1.0, 0.0, 0.0], user_id=7, codes=["ex_none"]) == []


def test_the_library_matrix_follows_approvals_and_new_embeddings(embedder, make_experience):
    from memory.models import ExperienceStatus

    draft = make_experience(
        rule="Split the batch.", condition="the batch is slow", status=ExperienceStatus.DRAFT
    )
    _embed_as(draft, [1.0, 0.0, 0.0])
    task, query = "Make the overnight export finish sooner", [1.0, 0.0, 0.0]
    assert experience_search(text=task, query_embedding=query) == []  # a draft is not in the library

    draft.refresh_from_db()
    draft.status = ExperienceStatus.APPROVED
    draft.save()  # the approval moves the fingerprint: seen at once
    assert codes(experience_search(text=task, query_embedding=query)) == [draft.code]

    later = make_experience(rule="Profile first.", condition="a report crawls")  # embedded on approval
    assert codes(experience_search(text=task, query_embedding=query)) == [draft.code]  # another size
    _embed_as(later, [1.0, 0.1, 0.0])  # re-made in place: same count, same updated_at
    assert codes(experience_search(text=task, query_embedding=query)) == [draft.code, later.code]
    _embed_as(later, [0.0, 0.0, 1.0])
    assert codes(experience_search(text=task, query_embedding=query)) == [draft.code]


def test_a_search_beyond_approved_compares_the_lexical_candidates_vectors_only(embedder, make_experience):
    from memory.models import ExperienceStatus

    draft = make_experience(
        rule="Split the batch.", condition="the batch export is slow", status=ExperienceStatus.DRAFT
    )
    unrelated_words = make_experience(rule="Profile first.", condition="a report crawls")
    _embed_as(draft, [1.0, 0.0, 0.0])
    _embed_as(unrelated_words, [1.0, 0.05, 0.0])  # as close, but sharing no word with the task
    task, query = "the batch export is slow", [1.0, 0.0, 0.0]
    everything = (ExperienceStatus.DRAFT, ExperienceStatus.APPROVED)

    found = experience_search(text=task, query_embedding=query, statuses=everything, explain=True)

    assert codes(found) == [draft.code]  # the library's matrix is for approved searches only
    assert found[0].fusion is not None and found[0].fusion["embedding_rank"] == 1
    assert found[0].fusion["cosine"] > 0.99
    assert codes(experience_search(text=task, query_embedding=query)) == [unrelated_words.code]
