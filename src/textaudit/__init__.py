"""textaudit: audit NLP text classifiers beyond their test set.

The top-level import is deliberately light (no torch, no transformers): heavy libraries are
imported inside the functions that need them, so ``audit --help`` stays instant.
"""

from textaudit.errors import TextAuditError
from textaudit.version import __version__

__all__ = ["TextAuditError", "__version__", "replay"]


def __getattr__(name: str):
    """``textaudit.replay(findings, model, baseline=None)`` (:func:`textaudit.findings.replay`), imported
    when first used: the top-level import stays light."""
    if name == "replay":
        from textaudit.findings import replay

        return replay
    raise AttributeError(f"module 'textaudit' has no attribute {name!r}")
