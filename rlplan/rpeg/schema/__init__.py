"""The instance format: YAML loading, sections and their checks, presets, input limits, pins."""
