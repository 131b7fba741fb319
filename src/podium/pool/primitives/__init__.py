"""Uno-Orchestra's primitives performed: each primitive of the vocabulary (:data:`podium.pool.config.Primitive`)
has its own tool (:mod:`podium.pool.primitives.tools`), which turns the route's instruction into the worker's task
with the primitive's prompt template (``podium/pool/prompts/primitives/*.md``) and does what the name says."""
