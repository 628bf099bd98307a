"""The REST API (W2): DRF views over traces.services and traces.selectors."""
