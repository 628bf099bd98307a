"""Seeing where time, tokens and context go (issue 22, X5).

- `models.py`: what each model call was sent, stored compactly (`ModelRequest`, `RequestPart`);
  `requests.py:model_request` reads one back exactly ("what the model saw").
"""
