"""HealthBench data: typed records, official sources and the demo dataset."""
