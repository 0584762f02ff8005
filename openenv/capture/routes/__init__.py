"""HTTP routes of the capture proxy: one module per resource."""
