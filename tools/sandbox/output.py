"""A command's combined output, read as it comes and capped."""

from __future__ import annotations

import codecs
import os
import threading
from typing import IO

from tools.workspace import truncation_note

READ_CHUNK_BYTES = 65536


class OutputCollector:
    """Reads a pipe in a thread, keeping the first `limit` characters and counting the rest.

    Reading as the output arrives keeps a chatty command from blocking on a full
    pipe or filling memory.
    """

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self._limit = limit
        self._kept: list[str] = []
        self._kept_chars = 0
        self._total_chars = 0
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def text(self) -> str:
        text = "".join(self._kept)
        if self._thread.is_alive():
            return text + "\n[output still open: a detached process kept it; it was not waited for]"
        if self._total_chars > self._kept_chars:
            text += truncation_note(self._total_chars - self._kept_chars)
        return text

    def _read(self, stream: IO[bytes]) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        fd = stream.fileno()
        try:
            while chunk := os.read(fd, READ_CHUNK_BYTES):
                self._add(decoder.decode(chunk))
            self._add(decoder.decode(b"", final=True))
        finally:
            stream.close()

    def _add(self, text: str) -> None:
        self._total_chars += len(text)
        room = self._limit - self._kept_chars
        if room > 0:
            piece = text[:room]
            self._kept.append(piece)
            self._kept_chars += len(piece)
