"""L2 generic rules: deterministic transforms (lenient object literal / YAML / JSON) answered without a model."""
