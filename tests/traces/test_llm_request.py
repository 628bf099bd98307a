"""The remembered request (traces/llm_request.py) against the full pass it replaces.

Every request `request_messages` builds must equal what the full pass
(`normalize_tool_call_ids(media_for_model(...))`) makes of the same messages, and be
the very same list when nothing changes, through long runs, rewinds, branch
switches, replaced messages and a memo forgetting its oldest half.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from traces.llm_request import RequestMemo, normalize_tool_call_ids, request_messages
from traces.media.request import media_for_model

OPENAI = "openai/scripted"
CLAUDE = "anthropic/scripted-claude"
LONG_ID = "call_" + "x" * 60  # too long for OpenAI (40)
ODD_ID = "call:abc.1"  # not an Anthropic id


def full_pass(messages: list[dict[str, Any]], model: str) -> list[dict[str, Any]]:
    return normalize_tool_call_ids(media_for_model(messages, model), model)


def step(rng: random.Random, number: int, *, odd: bool) -> list[dict[str, Any]]:
    """One tool round: an assistant call and its result; some ids fit no provider."""
    call_id = rng.choice([f"call_{number:06d}", f"{LONG_ID}{number}", f"{ODD_ID}.{number}"]) if odd else ""
    call_id = call_id or f"call_{number:06d}"
    call = {"id": call_id, "type": "function", "function": {"name": "note", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "name": "note", "content": f"result {number}"},
    ]


def head() -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are careful."}, {"role": "user", "content": "Go."}]


def check(memo: RequestMemo, request: list[dict[str, Any]], model: str) -> None:
    expected = full_pass(request, model)
    sent = memo.prepare(request, model)
    assert sent == expected
    assert (sent is request) == (expected is request)


@pytest.mark.parametrize("model", [OPENAI, CLAUDE])
def test_a_growing_history_gets_what_the_full_pass_gives_at_every_step(model: str) -> None:
    rng = random.Random(7)
    memo = RequestMemo()
    history = head()
    for number in range(400):
        history.extend(step(rng, number, odd=rng.random() < 0.05))
        # as the runner sends it: a new system prompt (project context) and a memory
        # message put in front, each call; the history's own dicts after them
        request = [{**history[0], "content": "You are careful.\n\nAGENTS"}, *history[1:]]
        request.insert(1, {"role": "user", "content": f"memory index {number}"})
        check(memo, request, model)


@pytest.mark.parametrize("model", [OPENAI, CLAUDE])
def test_rewinds_and_branch_switches_never_get_stale_ids(model: str) -> None:
    rng = random.Random(11)
    memo = RequestMemo()
    trunk = head()
    for number in range(600):
        trunk.extend(step(rng, number, odd=rng.random() < 0.1))
    check(memo, trunk, model)
    branches = {"trunk": trunk}
    for rewind in range(20):
        source = branches[rng.choice(sorted(branches))]
        cut = rng.randrange(2, len(source) // 2) * 2
        # a rewind loads the kept path afresh from the database: new dicts, same ids
        branch = copy.deepcopy(source[:cut])
        for number in range(rng.randrange(1, 40)):
            # the new branch reuses positions with other ids, some of them odd
            branch.extend(step(rng, 100_000 * (rewind + 1) + number, odd=rng.random() < 0.5))
        branches[f"b{rewind}"] = branch
        check(memo, branch, model)
        check(memo, branches[rng.choice(sorted(branches))], model)  # switch back and forth


def test_a_message_replaced_by_a_new_dict_is_looked_at_again() -> None:
    memo = RequestMemo()
    history = head() + step(random.Random(1), 1, odd=False)
    check(memo, history, OPENAI)
    # microcompact and shown-once results replace a message, never edit it
    history[3] = {**history[3], "tool_call_id": LONG_ID}
    history[2] = {**history[2], "tool_calls": [{**history[2]["tool_calls"][0], "id": LONG_ID}]}
    check(memo, history, OPENAI)
    assert memo.prepare(history, OPENAI)[3]["tool_call_id"] != LONG_ID
    assert history[3]["tool_call_id"] == LONG_ID  # the caller's messages are never changed


def test_a_memo_past_its_limit_forgets_its_oldest_and_stays_right() -> None:
    rng = random.Random(3)
    memo = RequestMemo(limit=100)
    runs = [head(), head()]
    for number in range(400):
        for run in runs:  # two runs share the memo, as runs of one worker do
            run.extend(step(rng, number, odd=rng.random() < 0.2))
            check(memo, run, OPENAI)
    assert all(len(m.entries) <= 100 for m in memo._memos.values())


def test_images_are_inlined_and_ids_fitted_together() -> None:
    image = {
        "type": "image_url",
        "image_url": {"url": "https://example.test/plot.png"},
        "media": {"name": "p"},
    }
    history = [
        *head(),
        *step(random.Random(5), 1, odd=False),
        {"role": "user", "content": [{"type": "text", "text": "Look."}, image]},
    ]
    history[2]["tool_calls"][0]["id"] = LONG_ID
    history[3]["tool_call_id"] = LONG_ID
    memo = RequestMemo()

    for _ in range(2):
        sent = memo.prepare(history, OPENAI)
        assert sent == full_pass(history, OPENAI)
        assert "media" not in sent[4]["content"][1]
        assert sent[2]["tool_calls"][0]["id"] == sent[3]["tool_call_id"] != LONG_ID
    assert "media" in history[4]["content"][1]


def test_the_shared_memo_returns_a_fitting_history_itself() -> None:
    history = head() + step(random.Random(9), 1, odd=False)

    assert request_messages(history, OPENAI) is history
    assert request_messages(history, CLAUDE) is history
