"""The engine below every audit: what keeps a query's host cost near nothing.

- :mod:`textaudit.token_ids`: sentences as token ids, spliced per word; padded batches packed to a
  token budget (``--batch-tokens``);
- :mod:`textaudit.engine.heap`: the garbage collector kept off the models' objects during a run;
- :mod:`textaudit.engine.scheduler`: searches that ask instead of call, many of them in flight, their
  asks merged into one batched call per step (``--in-flight``);
- :mod:`textaudit.engine.pace`: this machine's seconds per text and per context, for the time estimates.
"""

from textaudit.engine.heap import frozen_heap

__all__ = ["frozen_heap"]
