"""Reciprocal rank fusion of the lexical order and the embedding order (M4).

    fused(e) = 1 / (RRF_K + lexical rank of e) + W / (RRF_K + embedding rank of e)

(a missing rank adds nothing). RRF (Cormack, Clarke & Buettcher, SIGIR 2009)
fuses ranks, not scores, so the lexical score's scale (tag weights, bm25 or
ts_rank_cd) and the cosine's (which depends on the embedding model) never need
calibrating against each other; RRF_K = 60 is the paper's constant: it keeps the
top few of either order close, so an experience both orders place well beats
one that only one order places first. W (AGENT_EMBEDDING_WEIGHT, 2) weighs the
embedding order, as weighted RRF does: the lexical order cannot see a paraphrase,
and with equal weights a real model's paraphrase matches lost to lessons that only
share words (bench/retrieval.py --embedder minilm: fused 0.58 against the embeddings'
own 0.78 on the paraphrased set; 0.78 at W = 2).

Candidates: the rows the lexical query returned (memory/retrieval/lexical.py:
ranked, widened from 50 to EMBEDDING_POOL rows when fusing): the best of everything
sharing a tag or a word with the task; and the EMBEDDING_POOL approved experiences
closest to the task's vector (task + tags: memory/retrieval/embeddings.py:embed_task)
among every one embedded by the configured model in the run's scopes, which the
process holds as one matrix (memory/retrieval/vectors.py: numpy, ~1 ms for 10,000 x
512), so a paraphrase sharing no word and no tag is found too. The embedding rank is
the rank in that whole library. A search for other statuses than approved (none in
the product) compares the lexical candidates' stored vectors only.

The floor: an experience is injected only if it is lexically relevant
(relevance >= AGENT_EXPERIENCE_MIN_SCORE, the rule of memory/retrieval/search.py)
or its cosine reaches AGENT_EMBEDDING_MIN_COSINE (a strong semantic match that
shares too few words). Below both, fusion cannot lift it: a good embedding
rank of a weak match does not make it relevant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings

from memory.models import Experience
from memory.retrieval import vectors
from memory.retrieval.embeddings import dot, unit, unpack

if TYPE_CHECKING:
    from memory.retrieval.search import Scored

RRF_K = 60
EMBEDDING_POOL = 200  # lexical rows fusion looks at; as many of the library's best by cosine


@dataclass(frozen=True)
class Library:
    """Where fusion may look beyond the lexical pool: the approved experiences embedded by
    `model`, in `scopes` (and `codes`, a run's experience set)."""

    model: str
    scopes: list[str]
    codes: list[str] | None = None


def fuse(
    lexical: list[Scored],
    *,
    extra: list[int],
    query_embedding: list[float],
    floor: float,
    k: int,
    make: Callable[[Experience], Scored],
    library: Library | None = None,
) -> list[Scored]:
    """The top `k` of `lexical` (scored rows, any order), the `extra` candidates (primary
    keys beyond the lexical pool) and, with `library`, the library's best by cosine, by
    fused rank, at or above the floor.

    `make(experience)` builds the Scored of a candidate with no lexical part. Each
    result's `fusion` records its lexical rank, embedding rank, cosine and fused score.
    """
    min_cosine = settings.AGENT_EMBEDDING_MIN_COSINE
    weight = settings.AGENT_EMBEDDING_WEIGHT
    relevant = sorted((s for s in lexical if s.relevance >= floor), key=lexical_order)
    lexical_rank = {s.experience.pk: rank for rank, s in enumerate(relevant, 1)}
    pks = [s.experience.pk for s in lexical] + extra
    if library is not None:  # every approved embedding of the scope (memory/retrieval/vectors.py)
        found = vectors.ranks(
            query_embedding,
            model=library.model,
            scopes=library.scopes,
            codes=library.codes,
            wanted=set(pks),
            top=EMBEDDING_POOL,
        )
        embedding_rank = {pk: rank for pk, (rank, _) in found.items()}
        cosines = {pk: cosine for pk, (_, cosine) in found.items()}
        pks += sorted(set(found) - set(pks), key=embedding_rank.__getitem__)
    else:  # the candidates' stored vectors only
        query = unit(query_embedding)
        stored = Experience.objects.filter(pk__in=pks, embedding__isnull=False).values_list("pk", "embedding")
        cosines = {pk: dot(query, unpack(v)) for pk, v in stored}
        by_cosine = sorted((pk for pk, c in cosines.items() if c > 0), key=lambda pk: (-cosines[pk], pk))
        embedding_rank = {pk: rank for rank, pk in enumerate(by_cosine, 1)}
    eligible = set(lexical_rank) | {pk for pk, c in cosines.items() if c >= min_cosine}

    def fused(pk: int) -> float:
        score = 1 / (RRF_K + lexical_rank[pk]) if pk in lexical_rank else 0.0
        return score + (weight / (RRF_K + embedding_rank[pk]) if pk in embedding_rank else 0.0)

    by_pk = {s.experience.pk: s for s in lexical}
    position = {pk: i for i, pk in enumerate(pks)}  # ties: the lexical order
    best = sorted(eligible, key=lambda pk: (-fused(pk), lexical_rank.get(pk, 1 << 30), position[pk]))[:k]
    missing = [pk for pk in best if pk not in by_pk]
    for experience in Experience.objects.defer("embedding").filter(pk__in=missing):
        by_pk[experience.pk] = make(experience)
    top = [by_pk[pk] for pk in best]
    for s in top:
        pk = s.experience.pk
        s.fusion = {
            "lexical_rank": lexical_rank.get(pk),
            "embedding_rank": embedding_rank.get(pk),
            "cosine": round(cosines.get(pk, 0.0), 3),
            "fused": round(fused(pk), 5),
            "rrf_k": RRF_K,
            "embedding_weight": weight,
        }
    return top


def lexical_order(s: Scored) -> tuple[float, int, str]:
    """The lexical ranking's order: score, then helpful votes, then code."""
    return (-s.score, -s.experience.helpful, s.experience.code)
