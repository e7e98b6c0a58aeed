"""textaudit: audit NLP text classifiers beyond their test set.

The top-level import is deliberately light (no torch, no transformers): heavy libraries are
imported inside the functions that need them, so ``audit --help`` stays instant.
"""

from textaudit.errors import TextAuditError

__version__ = "0.1.0"

__all__ = ["TextAuditError", "__version__"]
