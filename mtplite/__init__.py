"""mtplite: a trained Multi-Token-Prediction drafter head for a frozen on-device LLM, exported to LiteRT."""
__version__ = "0.1.0"
