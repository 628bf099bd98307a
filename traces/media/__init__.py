"""Images and PDF pages in messages (L5).

`intake.py` checks what a user sends (API, portal, run_agent) and stores the bytes
once in `blobs.py`'s content-addressed store; the stored message keeps a small
reference part (`parts.py`). `request.py` puts the bytes back into the request
when a model is called (or a text note for a model without vision); `pdf.py`
renders PDF pages to PNG.
"""
