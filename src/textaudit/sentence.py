"""A sentence as word tokens plus the exact whitespace around them, so edits round-trip.

``Sentence.parse("Hello, world!")`` → tokens ``("Hello", ",", "world", "!")``; ``.text()`` gives the
original string back, and ``.replace(i, w)`` changes one token keeping every space and every
other character. SST-style tokenised text ("it 's a film .") parses into its own tokens.
Splitting (Unicode-aware, any script that separates words by spaces): on whitespace, then
leading/trailing punctuation and symbols (Unicode categories P* and S*: « », ¿ ¡, „ “, …) are
peeled off each chunk — but not apostrophes or hyphens, so clitics such as ``'s`` or ``n't`` and
words like ``well-made`` or ``aujourd'hui`` stay whole. Accented letters, ß, Cyrillic or Greek are
letters like any other (``str.isalpha``). ``language`` adds a language's own rule: French,
Italian and Catalan split an elided article or pronoun from its word (``l'homme`` → ``l'`` +
``homme``, ``dell'anno`` → ``dell'`` + ``anno``), so the word can be replaced and the elision never
is. Languages written without spaces between words (Chinese, Japanese, Thai) are refused.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import chain

from textaudit.errors import TextAuditError

__all__ = ["Sentence", "restore_case", "LANGUAGES", "check_language", "guess_language"]

_KEEP = "'’ʼ-‐‑"  # apostrophes and hyphens stay inside a chunk
_CHUNK = re.compile(r"(\s*)(\S+)")
#: languages with an elision rule; any other ISO 639-1 code splits like English
_ELISION = {
    "fr": re.compile(r"(?i)^((?:qu|jusqu|lorsqu|puisqu|quoiqu|[cdjlmnst])['’])(\w.*)$"),
    "it": re.compile(r"(?i)^([^\W\d_]+['’])([^\W\d_].*)$"),
    "ca": re.compile(r"(?i)^([dlmnst]['’])(\w.*)$"),
}
_NO_SPACES = {"zh", "ja", "th", "lo", "km", "my"}
#: the languages with a rule of their own (every other code splits on spaces and punctuation as English does)
LANGUAGES = ("en", *_ELISION)


def check_language(language: str | None) -> str:
    """``--language``: an ISO 639-1 code (en, fr, de, …); one-line errors for what cannot work."""
    lang = (language or "en").strip().lower()
    import langcodes  # the IANA language subtag registry (what BCP 47 tags are made of)

    if not re.fullmatch(r"[a-z]{2,3}", lang) or not langcodes.tag_is_valid(lang):
        raise TextAuditError(f"--language takes an ISO 639-1 code such as en, fr, de (got {language!r}, which is not "
                             "a language: it would be split into words as English is)")
    if lang in _NO_SPACES:
        raise TextAuditError(f"--language {lang}: its words are not separated by spaces, which the word-level "
                             "neighbourhood needs; segment the text into words first")
    return lang


def guess_language(model_name: str | None) -> str:
    """The language a masked LM's name implies (camembert, flaubert → fr; gbert, german → de;
    umberto, italian → it), else English: ``--language auto``."""
    name = (model_name or "").lower()
    for keys, lang in ((("camembert", "flaubert", "french"), "fr"), (("gbert", "german", "-de-", "-de"), "de"),
                       (("umberto", "italian", "alberto"), "it"), (("spanish", "beto"), "es")):
        if any(name.endswith(k) if k == "-de" else k in name for k in keys):
            return lang
    return "en"


def _peelable(c: str) -> bool:
    return c not in _KEEP and unicodedata.category(c)[0] in "PS"


def _lead(chunk: str) -> int:
    n = 0
    while n < len(chunk) and _peelable(chunk[n]):
        n += 1
    return n


def _trail(chunk: str) -> int:
    n = 0
    while n < len(chunk) and _peelable(chunk[len(chunk) - 1 - n]):
        n += 1
    return n


def restore_case(word: str, like: str) -> str:
    """Return ``word`` with the case pattern of ``like``: UPPER (two letters or more), Title, or as is.

    Only the first letter is raised for Title case; the rest of ``word`` is kept (``capitalize()``
    would lower-case it: "McDonald" stays "McDonald")."""
    if like.isupper() and len(like) > 1:
        return word.upper()
    if like[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


class Sentence:
    """Word tokens and the separators before each of them (``seps[-1]`` is the trailing space).

    Immutable. The text is joined once and remembered; a sentence made by :meth:`replace` remembers
    its parent and the position that changed, so an encoder of :mod:`textaudit.token_ids` splices
    the child's ids from the parent's (one word looked up) instead of re-tokenising it, and shares
    its separators (so whether they are all single spaces is looked at once)."""

    __slots__ = ("tokens", "seps", "_text", "_origin", "_ids", "_spaced")

    def __init__(self, tokens: tuple[str, ...], seps: tuple[str, ...]):
        self.tokens = tokens
        self.seps = seps
        self._text: str | None = None
        self._origin: tuple[Sentence, int] | None = None  # (parent, the position replaced)
        self._ids: tuple | None = None  # (encoder, its ids of this sentence[, another encoder, its ids]): see token_ids
        self._spaced: bool | None = None  # its separators are single spaces (None: not looked at yet)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sentence):
            return NotImplemented
        return self.tokens == other.tokens and self.seps == other.seps

    def __hash__(self) -> int:
        return hash((self.tokens, self.seps))

    def __repr__(self) -> str:
        return f"Sentence(tokens={self.tokens!r}, seps={self.seps!r})"

    def __getstate__(self) -> tuple:
        """Pickled (for another process) as its words and spaces alone: no parent, no ids."""
        return self.tokens, self.seps

    def __setstate__(self, state: tuple) -> None:
        self.__init__(*state)

    @classmethod
    def parse(cls, text: str, language: str = "en") -> "Sentence":
        """Return the tokens of ``text`` with its whitespace preserved (``language``: see the module docstring)."""
        if not isinstance(text, str):
            raise TextAuditError(f"expected a sentence string, got {type(text).__name__}")
        elision = _ELISION.get(language)
        tokens: list[str] = []
        seps: list[str] = []
        end = 0
        for m in _CHUNK.finditer(text):
            space, chunk = m.group(1), m.group(2)
            end = m.end()
            lead = _lead(chunk)
            trail = _trail(chunk) if lead < len(chunk) else 0
            if lead == len(chunk):  # punctuation only: one token per character run
                parts = [chunk]
            else:
                core = chunk[lead: len(chunk) - trail if trail else None]
                split = elision.match(core) if elision is not None else None
                middle = [split.group(1), split.group(2)] if split else [core]
                parts = list(chunk[:lead]) + middle + list(chunk[len(chunk) - trail:] if trail else [])
            for j, p in enumerate(parts):
                tokens.append(p)
                seps.append(space if j == 0 else "")
        seps.append(text[end:])
        return cls(tuple(tokens), tuple(seps))

    def text(self) -> str:
        """Return the sentence as a string (identical to the parsed text where nothing changed)."""
        t = self._text
        if t is None:
            spaced = self._spaced
            if spaced is None:  # one space between tokens, none around them (SST-2's form): a fast join
                seps = self.seps
                spaced = self._spaced = not seps[0] and not seps[-1] and all(s == " " for s in seps[1:-1])
            if spaced:
                t = " ".join(self.tokens)
            else:
                t = "".join(chain.from_iterable(zip(self.seps, self.tokens))) + self.seps[-1]
            self._text = t
        return t

    def span(self, lo: int, hi: int) -> str:
        """The text of tokens ``lo`` to ``hi`` (exclusive), with the separators between them."""
        return "".join(chain.from_iterable(zip(("", *self.seps[lo + 1:hi]), self.tokens[lo:hi])))

    def replace(self, i: int, word: str) -> "Sentence":
        """Return a copy with token ``i`` replaced by ``word`` (it remembers this sentence as its parent)."""
        child = Sentence(self.tokens[:i] + (word,) + self.tokens[i + 1:], self.seps)
        child._origin = (self, i)
        child._spaced = self._spaced  # the same separators
        return child

    def words(self) -> list[str]:
        return list(self.tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def diff(self, other: "Sentence") -> list[int]:
        """Return the positions where ``other`` has a different token (ℓ0 = its length)."""
        return [i for i, (a, b) in enumerate(zip(self.tokens, other.tokens)) if a != b]

    def __str__(self) -> str:
        return self.text()
