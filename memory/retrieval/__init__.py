"""Experience retrieval (M4, M5): tag the task, rank experiences, format them for the prompt.

- `lexical.py`: one SQL query ranks tag matches, covered words and the database's
  full-text rank (PostgreSQL ts_rank_cd, SQLite FTS5 bm25) for the best of those;
- `search.py`: `experience_search`, the weights, the relevance floor, scope, the "why";
- `task.py`: a new trace's tagging, `retrieve_for_task`, the prompt block;
- `embeddings.py`: optional embeddings (AGENT_EMBEDDING_MODEL), computed in batches and stored;
- `fusion.py`: reciprocal rank fusion of the lexical order and the embedding order;
- `vectors.py`: the approved embeddings as one matrix per process, ranked at once;
- `pgvector.py`: the same ranks computed by PostgreSQL where the pgvector extension is installed.
"""

from __future__ import annotations

from memory.retrieval.embeddings import embed_missing, embed_task, embed_text, experiences_embed
from memory.retrieval.lexical import query_words
from memory.retrieval.search import Scored, experience_search
from memory.retrieval.task import (
    Retrieval,
    format_experiences,
    parse_json_object,
    retrieve_for_task,
    task_tags,
)

__all__ = [
    "Retrieval",
    "Scored",
    "embed_missing",
    "embed_task",
    "embed_text",
    "experiences_embed",
    "experience_search",
    "format_experiences",
    "parse_json_object",
    "query_words",
    "retrieve_for_task",
    "task_tags",
]
