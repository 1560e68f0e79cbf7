"""composegen: profile YAMLs in, pinned Docker Compose stacks for vLLM out, and a driver for
them."""

__version__ = "0.1.0"
