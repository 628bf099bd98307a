"""Retrieval (M4, M5): tagging, ranking, injection into the first user message,
the get_experience tool, citations as usage, outcomes and expert gating."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory.retrieval import experience_search, query_words
from tests.scripted_llm import Reply, ToolCall
from traces.models import Trace, TraceEvent
from traces.runner import RunConfig
from traces.selectors import trace_main_path

pytestmark = pytest.mark.django_db


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def tags_reply(state: list[str], intent: list[str]) -> Reply:
    return Reply(text=json.dumps({"state": state, "intent": intent}))


def codes(found: list[Any]) -> list[str]:
    return [s.experience.code for s in found]


def test_ranking_is_intent_then_state_then_helpful(make_experience):
    both = make_experience(rule="r1", tags={"intent": ["optimization"], "state": ["docker"]})
    intent_only = make_experience(rule="r2", tags={"intent": ["optimization"]}, helpful=1)
    state_only = make_experience(rule="r3", tags={"state": ["docker"]}, helpful=50)
    intent_more_helpful = make_experience(rule="r4", tags={"intent": ["optimization"]}, helpful=9)
    make_experience(rule="unrelated", tags={"intent": ["translate"]})

    found = experience_search(tags={"intent": ["optimization"], "state": ["docker"]}, k=10)

    assert codes(found) == [both.code, intent_more_helpful.code, intent_only.code, state_only.code]


def test_full_text_finds_experiences_without_tags(make_experience):
    cache = make_experience(
        rule="Mount a BuildKit cache for pip downloads.", condition="docker builds are slow"
    )
    make_experience(rule="Write tests first.", condition="fixing a bug")

    found = experience_search(text="Speed up the slow docker builds of this project")

    assert codes(found) == [cache.code]


def test_only_approved_experiences_are_retrieved_by_default(make_experience):
    make_experience(rule="draft rule", tags={"intent": ["debug"]}, status="draft")
    make_experience(rule="retired rule", tags={"intent": ["debug"]}, status="retired")
    approved = make_experience(rule="approved rule", tags={"intent": ["debug"]})

    assert codes(experience_search(tags={"intent": ["debug"]})) == [approved.code]
    everything = experience_search(tags={"intent": ["debug"]}, statuses=("draft", "approved", "retired"))
    assert len(everything) == 3


def test_top_k_and_scope(make_experience, settings):
    for n in range(7):
        make_experience(rule=f"rule {n}", tags={"intent": ["debug"]})
    explore_only = make_experience(
        rule="explorer rule", tags={"intent": ["debug"]}, scope="agent:explore", helpful=99
    )
    settings.AGENT_EXPERIENCE_TOP_K = 3

    assert len(experience_search(tags={"intent": ["debug"]})) == 3
    assert explore_only.code not in codes(
        experience_search(tags={"intent": ["debug"]}, agent_type="default", k=20)
    )
    assert codes(experience_search(tags={"intent": ["debug"]}, agent_type="explore"))[0] == explore_only.code


def test_query_words_drop_stopwords_and_leave_stemming_to_the_database():
    assert query_words("Please make the Docker builds faster, using caching_layers") == [
        "docker",
        "builds",
        "faster",
        "caching",
        "layers",
    ]


def test_a_new_trace_gets_tagged_and_the_top_experiences_in_its_first_message(runner, llm, make_experience):
    hit = make_experience(
        rule="Use a BuildKit cache mount.",
        condition="docker builds are slow",
        tags={"state": ["docker"], "intent": ["optimization"]},
    )
    make_experience(rule="Unrelated.", tags={"intent": ["translate"]})
    llm.script("utility", ["Faster Docker builds", tags_reply(["docker", "ci"], ["optimization"])])
    llm.script("scripted", [Reply(text=f"Done, I applied [{hit.code}].")])

    result = runner.run_result(user("Make our Docker build faster"), RunConfig())

    first_user = next(m for m in llm.requests_for("scripted")[0].messages if m["role"] == "user")
    assert first_user["content"].startswith("Make our Docker build faster\n\n## Relevant experiences")
    assert f"- [{hit.code}] When docker builds are slow: Use a BuildKit cache mount." in first_user["content"]
    assert "Unrelated" not in first_user["content"]
    stored = next(m for m in trace_main_path(trace_id=result.trace_id) if m.role == "user")
    assert stored.content == first_user["content"]  # the main path holds what the model saw
    trace = Trace.objects.get(pk=result.trace_id)
    assert trace.context["experiences"]["tags"] == {"state": ["docker", "ci"], "intent": ["optimization"]}
    assert trace.context["experiences"]["retrieved"] == [hit.code]
    event = TraceEvent.objects.get(trace=trace, type="experiences_retrieved")
    assert event.payload["retrieved"] == [hit.code]
    hit.refresh_from_db()
    assert hit.usage_count == 1  # cited once
    assert (hit.outcome_runs, hit.outcome_successes, hit.success_rate, hit.helpful) == (1, 1, 1.0, 1)


def test_tagging_failure_leaves_no_tags_and_the_run_goes_on(runner, llm, make_experience):
    make_experience(rule="Retry with backoff.", condition="the API rate limits requests")
    llm.script("utility", ["A name", Reply(status=500, error="utility down")])
    llm.script("scripted", ["finished"])

    result = runner.run_result(user("Call the API that rate limits requests"), RunConfig())

    assert result.status == "completed"
    trace = Trace.objects.get(pk=result.trace_id)
    assert trace.context["experiences"]["tags"] == {}
    assert (
        "Retry with backoff" in llm.requests_for("scripted")[0].messages[1]["content"]
    )  # full text still found


def test_no_approved_experiences_means_no_tagging_call(runner, llm, make_experience):
    make_experience(rule="a draft", status="draft")
    llm.script("scripted", ["ok"])

    runner.run_result(user("anything"), RunConfig(name="named"))

    assert llm.requests_for("utility") == []
    assert llm.requests_for("scripted")[0].messages[1]["content"] == "anything"


def test_memory_can_be_switched_off_per_run(runner, llm, make_experience):
    make_experience(rule="Use caches.", tags={"intent": ["optimization"]}, condition="slow builds")
    llm.script("scripted", ["ok"])

    runner.run_result(user("slow builds"), RunConfig(name="n", enable_memory=False))

    assert llm.requests_for("utility") == []
    assert llm.requests_for("scripted")[0].messages[1]["content"] == "slow builds"


def test_a_failed_run_marks_the_cited_experience_harmful(runner, llm, make_experience, settings):
    bad = make_experience(rule="Always force push.", tags={"intent": ["deploy"]}, helpful=1)
    settings.AGENT_LLM_RETRIES = 0
    llm.script("utility", ["Deploy", tags_reply([], ["deploy"])])
    llm.script(
        "scripted",
        [
            Reply(text=f"Following [{bad.code}]", tool_calls=[ToolCall("list_files", {})]),
            *[Reply(status=400, error="the model refused")] * 3,  # a model error fails the run
        ],
    )

    result = runner.run_result(user("deploy it"), RunConfig())

    assert result.status == "failed"
    bad.refresh_from_db()
    assert (bad.usage_count, bad.harmful, bad.outcome_runs, bad.success_rate) == (1, 1, 1, 0.0)


def test_get_experience_tool_returns_matches(runner, llm, make_experience):
    hit = make_experience(
        rule="Run chmod on the script.",
        condition="permission denied running a script",
        tags={"state": ["permission_denied"], "intent": ["debug"]},
    )
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("get_experience", {"intent": "debug", "state": "permission denied"})]),
            "ok",
        ],
    )

    runner.run_result(user("x"), RunConfig(name="n", enable_memory=False))

    tool_message = next(m for m in llm.requests_for("scripted")[1].messages if m["role"] == "tool")
    assert f"[{hit.code}]" in tool_message["content"] and "chmod" in tool_message["content"]
    hit.refresh_from_db()
    assert (hit.outcome_runs, hit.outcome_successes) == (1, 1)  # what the tool returned counts too


def test_expert_marks_and_citations_of_unknown_codes(make_experience):
    from memory.services import experience_mark, experience_record_citations

    experience = make_experience(rule="r")
    experience_mark(experience=experience, helpful=True)
    experience_mark(experience=experience, helpful=False)
    trace = Trace(trace_id="t", context={})
    assert experience_record_citations(
        trace=trace, text=f"[{experience.code}] and [ex_999] and [{experience.code}]"
    ) == [experience.code]
    experience.refresh_from_db()
    assert (experience.helpful, experience.harmful, experience.usage_count) == (1, 1, 1)
    assert trace.context["experiences"]["cited"] == [experience.code]


FLAKY = dict(
    rule="After two identical reads, stop re-reading: run the test with `-p no:randomly --count 20` to reproduce.",
    condition="a flaky test needs reproducing",
    tags={"intent": ["debugging"], "state": ["flaky_test"]},
    helpful=3,
    confidence=0.9,
)


def test_failed_tagging_injects_only_full_text_matches_above_the_floor(runner, llm, make_experience):
    flaky = make_experience(**FLAKY)
    files = make_experience(
        rule="Create the parent directory before writing, then write the file in one call.",
        condition="writing a report file to a new directory",
        tags={"intent": ["write_file"], "state": []},
    )
    llm.script("utility", ["Report", Reply(text="Sure! The tags are: files, writing.")])  # not JSON
    llm.script("scripted", ["done"])

    result = runner.run_result(user("Write the failing tests into a report file under out/"), RunConfig())

    first_user = llm.requests_for("scripted")[0].messages[1]["content"]
    assert f"[{files.code}]" in first_user
    assert f"- [{flaky.code}]" not in first_user and "flaky" not in first_user
    event = TraceEvent.objects.get(trace_id=result.trace_id, type="experiences_retrieved")
    assert event.payload["tags"] == {} and event.payload["retrieved"] == [files.code]
    (why,) = event.payload["why"]
    assert why["code"] == files.code and why["relevance"] >= event.payload["floor"]
    assert set(why["matched"]["words"]) >= {"report", "file"} and why["matched"]["intent"] == []


def test_the_floor_drops_a_lesson_sharing_one_word(make_experience, settings):
    flaky = make_experience(**FLAKY)

    assert experience_search(text="Write the failing tests into a report file under out/") == []
    assert codes(experience_search(text="Write the failing tests into a report file", min_score=0.0)) == [
        flaky.code
    ]  # it is a candidate: the floor, not the query, keeps it out
    settings.AGENT_EXPERIENCE_MIN_SCORE = 0.0
    assert codes(experience_search(text="the failing tests")) == [flaky.code]


def test_full_text_ranks_tags_and_condition_above_rule(make_experience):
    for topic in ("translation", "charts", "email", "pricing", "backups", "fonts"):
        make_experience(rule=f"Ask about {topic} first.", condition=f"{topic} come up")
    in_rule = make_experience(
        rule="Check the lockfile when a migration stalls.", condition="a deploy is slow"
    )
    in_condition = make_experience(rule="Roll back first.", condition="a database migration stalls")
    in_tags = make_experience(rule="Read the logs.", tags={"state": ["migration"]}, condition="it stalls")

    found = experience_search(text="the migration stalls", min_score=0.0)

    assert codes(found) == [in_tags.code, in_condition.code, in_rule.code]


def test_a_run_given_an_experience_set_gets_only_lessons_from_it(runner, llm, make_experience):
    cache = make_experience(
        rule="Use a BuildKit cache mount.",
        condition="docker builds are slow",
        tags={"intent": ["optimization"]},
    )
    layers = make_experience(
        rule="Order the layers from stable to volatile.",
        condition="docker builds are slow",
        tags={"intent": ["optimization"]},
    )
    for codes, given, kept_out in ([layers.code], layers, cache), ([cache.code], cache, layers):
        llm.reset()
        llm.script("utility", ["Faster builds", tags_reply(["docker"], ["optimization"])])
        llm.script("scripted", ["ok"])
        result = runner.run_result(user("docker builds are slow"), RunConfig(name="n", experiences=codes))
        sent = llm.requests_for("scripted")[0].messages[1]["content"]
        assert given.rule in sent and kept_out.rule not in sent
        assert Trace.objects.get(pk=result.trace_id).context["experiences"]["retrieved"] == [given.code]

    llm.reset()
    llm.script("scripted", ["ok"])
    runner.run_result(user("docker builds are slow"), RunConfig(name="n", experiences=["ex_none"]))
    assert llm.requests_for("utility") == []  # nothing in the set: no tagging call, nothing injected
    assert llm.requests_for("scripted")[0].messages[1]["content"] == "docker builds are slow"
