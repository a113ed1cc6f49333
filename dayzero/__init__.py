"""dayzero: a conformance harness for LLM serving."""

__version__ = "0.1.0"
