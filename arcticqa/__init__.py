"""arcticqa: evidence-grounded science QA datasets built with LLMs, and an abstention evaluator."""

__version__ = "0.1.0"
__all__ = ["__version__"]
