"""Sentences as token ids: a per-word id cache for every tokenizer we support, and padded batches
packed to a token budget.

A neighbour differs from its parent in one word, so re-tokenising its text from scratch (a regex
pass and a vocabulary lookup per word, or a HuggingFace tokenizer call) is wasted host work. Here
every *word* of a :class:`~textaudit.sentence.Sentence` is tokenised once and its ids are kept in a
dictionary; a sentence's ids are the concatenation of its words' cached ids, so
``Sentence.replace(i, w)`` costs one lookup of ``w`` (a splice) and nothing is re-tokenised on the
hot path. Two encoders:

- :class:`WordIds` — the zoo's word models (``bow``/``cnn``/``lstm``/``transformer``): a word's ids
  are ``Vocab.encode(word_tokenize(word))`` (one word may give several tokens: ``doesn't`` →
  ``does`` + ``n't``).
- :class:`PieceIds` — HuggingFace tokenizers: WordPiece (BERT), SentencePiece (XLM-R, CamemBERT) and
  byte-level BPE (RoBERTa, GPT-2): a word's pieces in two forms, after a space (``Ġword``,
  ``▁word``) and glued to the previous token (``word`` after ``film`` in ``film.``), with the
  tokenizer's special tokens around the sentence and its mask token in place of a masked word.

Both are exact, not approximations: :meth:`PieceIds.splice_safe` says when a sentence's text would
tokenise differently from its words' pieces (a glued pair such as ``!!`` that a BPE merges, or an
unusual run of whitespace), and the callers fall back to the text there. The tests compare splice
and re-tokenisation for each family on real sentences with case restoration and punctuation.

:func:`pack` groups rows into length-bucketed batches whose padded size (rows × longest row) stays
within a token budget (``--batch-tokens``), and :func:`pad` makes the padded ``(n, width)`` array.
"""

from __future__ import annotations

from itertools import accumulate, chain
from typing import Iterable, Sequence

import numpy as np

from textaudit.sentence import Sentence
from textaudit.text import word_tokenize

__all__ = ["WordIds", "PieceIds", "piece_ids", "splice_all", "pack", "pad", "default_batch_tokens", "piece_scheme", "SCHEMES"]

#: how a tokenizer marks a word's first piece: wordpiece (continuations start with ##),
#: sentencepiece (word starts carry ▁), bytelevel (word starts carry Ġ, bytes mapped to symbols)
SCHEMES = ("wordpiece", "sentencepiece", "bytelevel")


def piece_scheme(tokenizer) -> str:
    """How ``tokenizer`` marks a word's first piece (one of :data:`SCHEMES`): the first piece of " the"
    starts with ``▁`` (SentencePiece), with ``Ġ`` (byte-level BPE), or with neither (WordPiece)."""
    try:
        first = tokenizer.convert_ids_to_tokens(tokenizer(" the", add_special_tokens=False)["input_ids"])[:1]
    except (TypeError, ValueError, KeyError):
        first = []
    piece = str(first[0]) if first else ""
    return "sentencepiece" if piece.startswith("\u2581") else "bytelevel" if piece.startswith("\u0120") else "wordpiece"


def default_batch_tokens(device: str) -> int:
    """The token budget of one padded batch when ``--batch-tokens`` is not given: 4,096 on a CPU
    (about 128 SST-2 sentences, the old batch size) and 65,536 on a GPU (a few thousand sentences:
    a forward big enough to keep the device busy)."""
    return 65_536 if str(device).startswith("cuda") else 4_096


def pack(lengths: Sequence[int], batch_tokens: int, max_rows: int | None = None) -> list[list[int]]:
    """Return batches of row indices, shortest rows first, each padding to at most ``batch_tokens``
    tokens (rows × its longest row; a single longer row is a batch of its own) and at most
    ``max_rows`` rows. Sorting by length first is the bucketing: similar lengths share a batch."""
    n = len(lengths)
    order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")
    widths = np.asarray(lengths, dtype=np.int64)[order]  # ascending: a batch's last row is its longest
    cap = n if max_rows is None else max_rows
    out: list[list[int]] = []
    start = 0
    while start < n:
        # the longest run from ``start`` whose rows × last width fits: (e − start)·widths[e−1] grows with e
        sizes = np.arange(1, min(cap, n - start) + 1)
        fits = sizes * widths[start:start + len(sizes)] <= batch_tokens
        take = max(1, int(np.argmin(fits)) if not fits.all() else len(sizes))
        out.append(order[start:start + take].tolist())
        start += take
    return out


def pad(rows: Sequence[Sequence[int]], pad_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(ids, mask)``: rows padded with ``pad_id`` to the longest, as int64 arrays of shape
    ``(n, width)`` (``mask`` is 1 on real tokens). One flat copy, no per-row tensor."""
    lengths = np.array(list(map(len, rows)), dtype=np.int64)
    width = int(lengths.max()) if len(rows) else 0
    if len(rows) and lengths.min() == width:  # one length (a search round's sentences): no padding
        ids = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=width * len(rows)).reshape(len(rows), width)
        return ids, np.ones_like(ids)
    mask = np.arange(width)[None, :] < lengths[:, None]
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    ids[mask] = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
    return ids, mask.astype(np.int64)


class _Splicer:
    """What both encoders share: a sentence's ids are kept on it (with each word's offset), and a
    sentence made by ``Sentence.replace(i, w)`` gets its parent's ids with word i's span replaced
    by ``w``'s cached ids — a splice, O(1) lookups whatever the sentence's length."""

    def _word_at(self, s: Sentence, j: int) -> tuple[int, ...]:
        raise NotImplementedError

    def _known(self, s: Sentence) -> tuple[list[int], list[int]] | None:
        """This encoder's ``(ids, offsets)`` kept on ``s``, or None."""
        memo = s._ids
        if memo is None:
            return None
        if memo[0] is self:
            return memo[1]
        return memo[3] if len(memo) > 2 and memo[2] is self else None

    def _keep(self, s: Sentence, got: tuple[list[int], list[int]]) -> None:
        # two encoders' ids kept (a sentence meets one classifier, or two that are compared: B_{p,k} of a model and
        # its gender-swapped copy, attack cells side by side), so that either splices a child from its parent
        memo = s._ids
        s._ids = (self, got) if memo is None else (self, got, memo[0], memo[1])

    def _body(self, s: Sentence) -> tuple[list[int], list[int]]:
        """``(ids, offsets)`` of a sentence's words (no special tokens, no truncation), spliced from its parent's.
        A parent not encoded yet (a sentence that is only the stem of those scored: the neighbour whose pair word a
        counterfactual swaps, a beam's step) is encoded first, up the chain of parents (at most 64), so that its
        children splice from it."""
        got = self._known(s)
        if got is not None:
            return got
        line = [s]  # s, its parent, its parent's parent, … up to one whose ids are known (or a root)
        base = None
        while line[-1]._origin is not None and len(line) <= 64:
            up = line[-1]._origin[0]
            base = self._known(up)
            if base is not None:
                break
            line.append(up)
        if base is None:  # a root (or a very long line): word by word
            top = line.pop()
            per = [self._word_at(top, j) for j in range(len(top.tokens))]
            base = (list(chain.from_iterable(per)), [0, *accumulate(map(len, per))])
            self._keep(top, base)
        for child in reversed(line):  # each spliced from its parent's: one word looked up
            i = child._origin[1]  # type: ignore[index]
            pids, offs = base
            new = self._word_at(child, i)
            a, b = offs[i], offs[i + 1]
            ids = pids.copy()
            ids[a:b] = new
            d = len(new) - (b - a)
            base = (ids, offs if d == 0 else offs[: i + 1] + [o + d for o in offs[i + 1:]])
            self._keep(child, base)
        return base


class WordIds(_Splicer):
    """Word ids of the zoo's word models with a per-word cache (see the module docstring).

    ``ids(sentence)`` equals ``WordTokenizer.ids(sentence.text())``: the zoo's tokeniser works on
    whitespace, punctuation and clitics, all of which lie inside one :class:`Sentence` token or at
    its edges, so tokenising word by word gives the same tokens (tested)."""

    def __init__(self, vocab, max_len: int = 256):
        self.vocab = vocab
        self.max_len = max_len
        self.pad_id = 0
        self._cache: dict[str, tuple[int, ...]] = {}

    def word(self, w: str) -> tuple[int, ...]:
        """The ids of one word (cached)."""
        ids = self._cache.get(w)
        if ids is None:
            ids = self._cache[w] = tuple(self.vocab.encode(word_tokenize(w)))
        return ids

    def _word_at(self, s: Sentence, j: int) -> tuple[int, ...]:
        t = s.tokens[j]
        ids = self._cache.get(t)
        return self.word(t) if ids is None else ids

    def ids(self, s: Sentence) -> list[int]:
        """The ids of a sentence: its words' cached ids (spliced from its parent's), truncated at
        ``max_len`` (an empty one is ``<unk>``). Callers must not change the list."""
        out = self._body(s)[0]
        if len(out) > self.max_len:
            return out[: self.max_len]
        return out or [1]

    #: every sentence's ids splice exactly (the zoo's tokeniser splits inside and at the edges of tokens)
    always_safe = True

    def splice_safe(self, s: Sentence) -> bool:
        return True


class PieceIds(_Splicer):
    """Word-piece ids of a HuggingFace tokenizer with a per-word cache (see the module docstring).

    ``ids(s)`` equals ``tokenizer(s.text())["input_ids"]`` where :meth:`splice_safe` holds;
    ``masked(words, i)`` equals the ids of ``" ".join(words)`` with word i replaced by the mask
    token (what the masked LM reads). ``max_length`` truncates as the tokenizer does (the last
    special token kept)."""

    #: a sentence's splice is checked first (:meth:`splice_safe`)
    always_safe = False

    def __init__(self, tokenizer, max_length: int = 512):
        self.tokenizer = tokenizer
        self.scheme = piece_scheme(tokenizer)
        self.max_length = max_length
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.mask_id = tokenizer.mask_token_id
        plain = tokenizer("a", add_special_tokens=False)["input_ids"]
        full = tokenizer("a")["input_ids"]
        at = next((i for i in range(len(full) - len(plain) + 1) if full[i:i + len(plain)] == plain), 0)
        self.prefix, self.suffix = tuple(full[:at]), tuple(full[at + len(plain):])
        self._anchor = tuple(plain)
        self._spaced: dict[str, tuple[int, ...]] = {}
        self._glued: dict[str, tuple[int, ...]] = {}
        self._pairs: dict[tuple[str, str], bool] = {}
        #: the mask token reads as the tokenizer reads it in a joined text (it absorbs the space before
        #: it where the tokenizer's mask token strips to the left); else masked queries stay texts
        probe = ["a", "b", "c"]
        self.masked_ok = self.mask_id is not None and self.masked(probe, 1) == list(
            tokenizer(f"a {tokenizer.mask_token} c", truncation=True, max_length=max_length)["input_ids"])

    # -- words ------------------------------------------------------------------------------------
    def glued(self, w: str) -> tuple[int, ...]:
        """Pieces of ``w`` at the start of a text or right after another token (no space before it)."""
        ids = self._glued.get(w)
        if ids is None:
            ids = self._glued[w] = tuple(self.tokenizer(w, add_special_tokens=False)["input_ids"])
        return ids

    def spaced(self, w: str) -> tuple[int, ...]:
        """Pieces of ``w`` after a space: read off ``"a " + w`` past the pieces of ``"a"`` (the
        leading-space form of byte-level BPE and SentencePiece; the plain pieces for WordPiece)."""
        ids = self._spaced.get(w)
        if ids is None:
            if self.scheme == "wordpiece":
                ids = self.glued(w)
            else:
                both = self.tokenizer("a " + w, add_special_tokens=False)["input_ids"]
                n = len(self._anchor)
                ids = tuple(both[n:]) if tuple(both[:n]) == self._anchor else None
                if ids is None:  # the anchor merged with the word: cannot happen across a space, but never guess
                    raise ValueError(f"cannot split the pieces of {w!r}")
            self._spaced[w] = ids
        return ids

    def _finish(self, body: list[int]) -> list[int]:
        room = self.max_length - len(self.prefix) - len(self.suffix)
        return [*self.prefix, *body[:room], *self.suffix]

    # -- sentences --------------------------------------------------------------------------------
    def _word_at(self, s: Sentence, j: int) -> tuple[int, ...]:
        t = s.tokens[j]
        if j and s.seps[j]:
            w = self._spaced.get(t)
            return self.spaced(t) if w is None else w
        w = self._glued.get(t)
        return self.glued(t) if w is None else w

    def ids(self, s: Sentence) -> list[int]:
        """The ids of a sentence's text, spliced from its words' pieces (where :meth:`splice_safe`)."""
        return self._finish(self._body(s)[0])

    def masked(self, words: Sequence[str], i: int) -> list[int]:
        """The ids of ``" ".join(words)`` with word ``i`` replaced by the mask token."""
        body: list[int] = []
        for j, t in enumerate(words):
            if j == i:
                body.append(self.mask_id)
            elif j == 0:
                body.extend(self.glued(t))
            else:
                body.extend(self.spaced(t))
        return self._finish(body)

    def splice_safe(self, s: Sentence) -> bool:
        """True when ``ids(s)`` is what the tokenizer makes of ``s.text()``: no leading, trailing or
        interior whitespace other than one plain space for a byte-level BPE or SentencePiece (for
        them ``"\\u00a0"``, two spaces or a trailing space are tokens of their own), and every pair
        of glued tokens (``film`` + ``.``) splits where the sentence splits it (checked once per pair
        and remembered)."""
        seps = s.seps
        if self.scheme != "wordpiece" and (seps[0] or seps[-1]):
            return False
        for j in range(1, len(s.tokens)):
            sep = seps[j]
            if sep == " ":
                continue
            if sep:
                if self.scheme != "wordpiece" or sep.strip():
                    return False
                continue
            key = (s.tokens[j - 1], s.tokens[j])
            ok = self._pairs.get(key)
            if ok is None:
                left, right = key
                joint = tuple(self.tokenizer(left + right, add_special_tokens=False)["input_ids"])
                ok = self._pairs[key] = joint == self.glued(left) + self.glued(right)
            if not ok:
                return False
        return True


#: sentences every piece encoder must splice exactly before a model takes ids (else it keeps texts)
_PROBES = ("A deep and meaningful film.", "it 's not THE worst , is it ?", "Don't miss Café Müller - well-made!")


def piece_ids(tokenizer, max_length: int = 512) -> PieceIds | None:
    """A :class:`PieceIds` for ``tokenizer``, or None where its sentences must stay texts: a slow
    (Python) tokenizer, one without a padding token, or one whose tokenisation of the probe
    sentences differs from the splice of their words (a normaliser that joins words, say)."""
    if not getattr(tokenizer, "is_fast", False) or tokenizer.pad_token_id is None:
        return None
    try:
        enc = PieceIds(tokenizer, max_length=max_length)
        for text in _PROBES:
            s = Sentence.parse(text)
            if enc.splice_safe(s) and enc.ids(s) != list(tokenizer(text, truncation=True, max_length=max_length)["input_ids"]):
                return None
    except (ValueError, TypeError, KeyError):
        return None
    return enc


def splice_all(encoder, sentences: Iterable[Sentence]) -> list[list[int]] | None:
    """The ids of every sentence, or None when one of them is not :meth:`splice_safe`."""
    if encoder.always_safe:  # every sentence splices (no check per sentence)
        return [encoder.ids(s) for s in sentences]
    out = []
    for s in sentences:
        if not encoder.splice_safe(s):
            return None
        out.append(encoder.ids(s))
    return out
