"""Full-text ranking on both databases (FTS5 bm25 on SQLite, ts_rank_cd on PostgreSQL),
canonical tags, scope, and confidence from outcomes (M4, M5)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from memory.fulltext import ensure_sqlite_fulltext
from memory.models import Experience
from memory.retrieval import experience_search
from memory.services import _count_outcome
from memory.tags import canonical_tag

pytestmark = pytest.mark.django_db


def codes(found: list[Any]) -> list[str]:
    return [s.experience.code for s in found]


def test_stemming_is_the_databases_own(make_experience):
    hit = make_experience(rule="Pin the versions.", condition="dependencies were upgraded unexpectedly")
    make_experience(rule="Other.", condition="the charts look wrong")

    found = experience_search(text="upgrading dependency", min_score=0.0)

    assert codes(found) == [hit.code]  # "upgrading" meets "upgraded", "dependency" meets "dependencies"


def test_the_index_follows_edits_and_deletes_made_without_save(make_experience):
    experience = make_experience(rule="Use a cache.", condition="builds are slow")
    Experience.objects.filter(pk=experience.pk).update(condition="uploads time out")  # no save(), no signal

    assert experience_search(text="slow builds", min_score=0.0) == []
    assert codes(experience_search(text="uploads time out", min_score=0.0)) == [experience.code]
    Experience.objects.filter(pk=experience.pk).delete()
    assert experience_search(text="uploads time out", min_score=0.0) == []


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the FTS5 table is SQLite's")
def test_sqlite_full_text_table_is_rebuilt_when_a_table_rebuild_dropped_its_triggers(make_experience):
    experience = make_experience(rule="Use a cache.", condition="builds are slow")
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER memory_experience_fts_insert")
        cursor.execute("DELETE FROM memory_experience_fts")
    assert experience_search(text="slow builds", min_score=0.0) == []

    assert ensure_sqlite_fulltext(connection) is True
    assert codes(experience_search(text="slow builds", min_score=0.0)) == [experience.code]
    assert ensure_sqlite_fulltext(connection) is False  # nothing left to repair
    later = make_experience(rule="Split the job.", condition="slow builds again")
    assert later.code in codes(experience_search(text="slow builds", min_score=0.0))


def test_canonical_tags_meet_across_spellings(make_experience):
    assert canonical_tag("Dockerfile") == canonical_tag("containers") == "docker"
    assert canonical_tag("Container build") == canonical_tag("docker builds") == "docker_build"
    assert canonical_tag("speed up") == "optimization"
    experience = make_experience(rule="Cache layers.", tags={"state": ["Dockerfile"], "intent": ["speed up"]})

    found = experience_search(tags={"state": ["containers"], "intent": ["optimisation"]})

    assert codes(found) == [experience.code]
    assert experience.tags == {"state": ["dockerfile"], "intent": ["speed_up"]}  # stored as written


def test_user_scope_reaches_only_that_users_runs(make_experience, expert, stranger):
    mine = make_experience(
        rule="Use my staging host.", tags={"intent": ["deploy"]}, scope=f"user:{expert.pk}"
    )
    everyone = make_experience(rule="Tag the release.", tags={"intent": ["deploy"]})

    assert set(codes(experience_search(tags={"intent": ["deploy"]}, user_id=expert.pk))) == {
        mine.code,
        everyone.code,
    }
    assert codes(experience_search(tags={"intent": ["deploy"]}, user_id=stranger.pk)) == [everyone.code]
    assert codes(experience_search(tags={"intent": ["deploy"]})) == [everyone.code]


def test_outcomes_move_confidence_and_confidence_moves_the_ranking(make_experience):
    first = make_experience(rule="Approach A.", tags={"intent": ["debug"]}, confidence=0.5)
    second = make_experience(rule="Approach B.", tags={"intent": ["debug"]}, confidence=0.5)
    assert codes(experience_search(tags={"intent": ["debug"]})) == [first.code, second.code]

    _count_outcome([first.code, second.code], {second.code}, success=True)  # B applied, run succeeded
    _count_outcome([first.code], set(), success=False)

    first.refresh_from_db()
    second.refresh_from_db()
    assert second.confidence == 0.625 and first.confidence == pytest.approx(0.495, abs=1e-3)
    assert codes(experience_search(tags={"intent": ["debug"]})) == [second.code, first.code]
    assert first.prompt_line().endswith("(helpful 0, harmful 0, succeeded in 1/2 runs (50%))")


def test_votes_order_near_ties_but_do_not_lift_a_lesson_that_matches_less(make_experience):
    task = "the nightly export job times out writing invoices to the archive bucket of the billing region"
    for topic in ("charts", "email", "fonts", "backups"):  # "invoices" is a common word, not a rare one
        make_experience(rule=f"Check the invoices {topic}.", condition=f"invoices in {topic}")
    better = make_experience(
        rule="Stream the rows.",
        tags={"intent": ["export"]},
        condition="an export job times out writing invoices",
    )
    voted = make_experience(  # one word fewer, ten helpful votes and full confidence
        rule="Stream the rows.",
        tags={"intent": ["export"]},
        condition="an export job times out writing",
        helpful=10,
        confidence=1.0,
    )
    tie = make_experience(
        rule="Stream the rows.",
        tags={"intent": ["export"]},
        condition="an export job times out writing",
        helpful=3,
    )

    found = experience_search(tags={"intent": ["export"]}, text=task, min_score=0.0)

    assert codes(found)[:3] == [better.code, voted.code, tie.code]  # words first; votes break the tie
    assert found[0].matched == {} and found[1].parts["trust"] > found[0].parts["trust"]


def test_one_query_ranks_and_says_which_words_matched_however_long_the_task(
    make_experience, django_assert_num_queries
):
    hit = make_experience(
        rule="Bound the cache.",
        tags={"state": ["memory_leak"], "intent": ["debug"]},
        condition="worker memory grows",
    )
    make_experience(rule="Other.", condition="the charts look wrong")
    text = "the python worker memory grows until the kernel kills it after many hours of queued report jobs"

    # the ranking (with each row's words), then the top rows; on PostgreSQL the ranking
    # also sets and resets its planner setting in a savepoint (here: inside the test's transaction)
    planner = 4 if connection.vendor == "postgresql" else 0
    with django_assert_num_queries(2 + planner) as queries:
        found = experience_search(
            tags={"state": ["memory_leak"], "intent": ["debug"]}, text=text, explain=True
        )

    assert sum("memory_experience" in q["sql"] for q in queries.captured_queries) == 2

    assert codes(found) == [hit.code]
    assert found[0].matched["words"] == ["worker", "memory", "grows"]
    assert found[0].matched["state"] == ["memory_leak"] and found[0].matched["intent"] == ["debug"]


def test_the_ranking_returns_as_many_rows_as_asked_beyond_its_first_stage(db):
    from memory.models import ExperienceStatus
    from memory.retrieval.lexical import RANK_POOL, ranked
    from memory.retrieval.search import WEIGHTS

    lessons = [
        Experience(code=f"ex_{n:03d}", condition=f"a deploy stalls at step {n}", rule="Retry.", tags={})
        for n in range(RANK_POOL + 30)
    ]
    for lesson in lessons:
        lesson.status = ExperienceStatus.APPROVED
        lesson.build_indexes()
    Experience.objects.bulk_create(lessons)

    rows = ranked(
        statuses=[ExperienceStatus.APPROVED],
        scopes=[""],
        tags={"intent": [], "state": []},
        words=["deploy", "stalls"],
        weights=WEIGHTS,
        limit=RANK_POOL + 50,  # what fusion asks for (memory/retrieval/fusion.py:EMBEDDING_POOL)
    )

    assert len(rows) == RANK_POOL + 30 and {tuple(row["words"]) for row in rows} == {("deploy", "stalls")}


def test_with_a_floor_candidates_come_from_tags_and_condition_only(make_experience):
    from memory.models import ExperienceStatus
    from memory.retrieval.lexical import ranked
    from memory.retrieval.search import WEIGHTS

    in_rule = make_experience(rule="When the migration stalls, check the lock.", condition="a deploy is slow")
    in_condition = make_experience(rule="Roll back first.", condition="a database migration stalls")
    in_tags = make_experience(rule="Read the logs.", tags={"state": ["migration"]}, condition="it hangs")

    def candidates(applies_only: bool) -> set[str]:
        rows = ranked(
            statuses=[ExperienceStatus.APPROVED],
            scopes=[""],
            tags={"intent": [], "state": []},
            words=["migration", "stalls"],
            weights=WEIGHTS,
            limit=10,
            applies_only=applies_only,
        )
        found = dict(Experience.objects.filter(pk__in=[r["pk"] for r in rows]).values_list("pk", "code"))
        return {found[r["pk"]] for r in rows}

    assert candidates(applies_only=True) == {in_condition.code, in_tags.code}
    assert candidates(applies_only=False) == {in_rule.code, in_condition.code, in_tags.code}
    # the search asks for the smaller set only when the floor would drop the rule-only match anyway
    assert codes(experience_search(text="the migration stalls", min_score=0.0))[-1] == in_rule.code
    assert in_rule.code not in codes(experience_search(text="the migration stalls", min_score=0.01))


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the planner setting is PostgreSQL's")
def test_the_index_only_plan_does_not_leak_into_the_callers_transaction(make_experience):
    from django.db import transaction

    make_experience(rule="Roll back first.", condition="a database migration stalls")

    def seqscan() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW enable_seqscan")
            return cursor.fetchone()[0]

    with transaction.atomic():
        assert codes(experience_search(text="the migration stalls"))
        assert seqscan() == "on"
    assert codes(experience_search(text="the migration stalls")) and seqscan() == "on"
