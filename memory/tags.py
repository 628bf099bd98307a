"""Experience tags that mean something (M4): one spelling per idea.

Two levels. `normalize_tag` is the stored, shown form: lowercase words joined by
underscores ("Docker Build" -> "docker_build"), so experiences.md round-trips
what people wrote. `canonical_tag` is what retrieval matches: each word
singularised and mapped through a small vocabulary of synonyms, so
"Dockerfile", "containers" and "docker" all become "docker" and "Container
build" becomes "docker_build". It fills the tag index columns
(`Experience.build_indexes`) and normalises a task's tags, so both sides meet.
Experts merge what the vocabulary misses in the admin
(memory/services.py:experience_tags_merge).
"""

from __future__ import annotations

import re
from typing import Any

# word -> canonical word (applied per word, after singularising)
SYNONYMS = {
    "dockerfile": "docker",
    "container": "docker",
    "compose": "docker",
    "k8": "kubernetes",
    "k8s": "kubernetes",
    "kube": "kubernetes",
    "debugging": "debug",
    "bug": "debug",
    "bugfix": "debug",
    "troubleshoot": "debug",
    "troubleshooting": "debug",
    "optimisation": "optimization",
    "optimise": "optimization",
    "optimize": "optimization",
    "perf": "performance",
    "speedup": "optimization",
    "testing": "test",
    "unittest": "test",
    "pytest": "test",
    "intermittent": "flaky",
    "repo": "git",
    "repository": "git",
    "db": "database",
    "sql": "database",
    "postgres": "postgresql",
    "psql": "postgresql",
    "config": "configuration",
    "cfg": "configuration",
    "doc": "documentation",
    "docs": "documentation",
    "auth": "authentication",
    "login": "authentication",
    "deployment": "deploy",
    "deploying": "deploy",
    "refactoring": "refactor",
    "ci_cd": "ci",
    "cicd": "ci",
    "pipeline": "ci",
}
# whole tag -> canonical tag (phrases a word map cannot express)
PHRASES = {
    "speed_up": "optimization",
    "make_faster": "optimization",
    "rate_limited": "rate_limit",
    "rate_limiting": "rate_limit",
}
_KEEP_S = ("ss", "us", "is", "ics", "ous")


def _singular(word: str) -> str:
    if len(word) <= 3 or word.endswith(_KEEP_S) or word in SYNONYMS:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    if word.endswith("s"):
        return word[:-1]
    return word


def normalize_tag(tag: Any) -> str:
    """Tags are lowercase words joined by underscores: "Docker Build" -> "docker_build"."""
    return "_".join(re.findall(r"\w+", str(tag).lower()))


def canonical_tag(tag: Any) -> str:
    """ "Docker Builds" -> "docker_build", "Dockerfile" -> "docker", "speed up" -> "optimization"."""
    words = re.findall(r"[^\W_]+", str(tag).lower())
    joined = "_".join(words)
    if joined in PHRASES:
        return PHRASES[joined]
    canonical: list[str] = []
    for word in words:
        word = SYNONYMS.get(word, SYNONYMS.get(_singular(word), _singular(word)))
        if not canonical or canonical[-1] != word:  # "docker container" -> "docker"
            canonical.append(word)
    return "_".join(canonical)


def normalize_tags(tags: Any, *, canonical: bool = False) -> dict[str, list[str]]:
    """`{"state": [...], "intent": [...]}` with normalised (or canonical), de-duplicated tags
    (order kept)."""
    tags = tags if isinstance(tags, dict) else {}
    out: dict[str, list[str]] = {}
    for key in ("state", "intent"):
        values = tags.get(key) or []
        if isinstance(values, str):
            values = [values]
        seen: list[str] = []
        for value in values:
            tag = canonical_tag(value) if canonical else normalize_tag(value)
            if tag and tag not in seen:
                seen.append(tag)
        out[key] = seen
    return out
