"""Serving: any backend as an OpenAI-compatible model server."""
