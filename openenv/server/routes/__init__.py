"""Routers, one module per resource: `info` (health, metadata, schema), `http` (stateful REST), `ws`."""
