"""Fixtures for the scripted model server (filled in by tests/scripted_llm.py)."""
