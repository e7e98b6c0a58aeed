"""Character- and word-level noise perturbations, seeded, registered by name.

Every perturbation is a ``Callable[[str, random.Random], str]``; all randomness comes from the
``random.Random`` passed in, so a seed reproduces the output exactly. Behaviour follows the
descriptions in the learnability paper and NL-Augmenter's documentation (our own code). Each is
asymmetric: applying it twice does not, in general, give the original back.

Register your own with :func:`register_perturbation` and fetch any by name with :func:`get_perturbation`.
"""

from __future__ import annotations

import random
import re
from functools import partial
from typing import Callable

from textaudit.errors import TextAuditError

__all__ = ["NOISE_PERTURBATIONS", "register_perturbation", "get_perturbation", "Perturbation"] + [
    "whitespace_perturbation", "shuffle_word", "duplicate_punctuations", "butter_fingers_perturbation",
    "random_upper_transformation", "insert_abbreviation", "visual_attack_letters", "leet_letters"]

Perturbation = Callable[[str, random.Random], str]


def whitespace_perturbation(text: str, rng: random.Random, add_prob: float = 0.05, remove_prob: float = 0.1) -> str:
    """Randomly remove spaces (each with probability ``remove_prob``) and insert a space after a
    non-space character (probability ``add_prob``)."""
    out = []
    for c in text:
        if c == " ":
            if rng.random() < remove_prob:
                continue
            out.append(c)
        else:
            out.append(c)
            if rng.random() < add_prob:
                out.append(" ")
    return "".join(out)


def shuffle_word(text: str, rng: random.Random) -> str:
    """Shuffle the order of the whitespace-separated words (single spaces in the output)."""
    words = text.split()
    rng.shuffle(words)
    return " ".join(words)


def duplicate_punctuations(text: str, rng: random.Random, prob: float = 0.5) -> str:
    """Duplicate each punctuation character with probability ``prob`` ("." → "..")."""
    return "".join(c + c if (not c.isalnum() and not c.isspace() and rng.random() < prob) else c for c in text)


_KEYBOARD = {
    "q": "was", "w": "qesad", "e": "wsdfr", "r": "edfgt", "t": "rfghy", "y": "tghju", "u": "yhjki", "i": "ujklo",
    "o": "iklp", "p": "ol", "a": "qwszx", "s": "qweadzx", "d": "wersfxc", "f": "ertdgcv", "g": "rtyfhvb",
    "h": "tyugjbn", "j": "yuihknm", "k": "uiojlm", "l": "iopk", "z": "asx", "x": "zsdc", "c": "xdfv",
    "v": "cfgb", "b": "vghn", "n": "bhjm", "m": "njk",
}


def butter_fingers_perturbation(text: str, rng: random.Random, prob: float = 0.05) -> str:
    """Replace each letter, with probability ``prob``, by a neighbouring key of a QWERTY keyboard
    (case kept)."""
    out = []
    for c in text:
        lc = c.lower()
        if lc in _KEYBOARD and rng.random() < prob:
            n = rng.choice(_KEYBOARD[lc])
            out.append(n.upper() if c.isupper() else n)
        else:
            out.append(c)
    return "".join(out)


def random_upper_transformation(text: str, rng: random.Random, prob: float = 0.1) -> str:
    """Upper-case each character with probability ``prob``."""
    return "".join(c.upper() if rng.random() < prob else c for c in text)


ABBREVIATIONS = {
    "you": "u", "are": "r", "for": "4", "to": "2", "too": "2", "be": "b", "see": "c", "why": "y", "okay": "ok",
    "please": "pls", "because": "bc", "people": "ppl", "with": "w/", "without": "w/o", "thanks": "thx",
    "really": "rly", "though": "tho", "before": "b4", "great": "gr8", "later": "l8r", "tonight": "2nite",
    "tomorrow": "tmrw", "message": "msg", "about": "abt", "something": "sth", "someone": "sb", "your": "ur",
    "laugh out loud": "lol", "in my opinion": "imo", "by the way": "btw", "as soon as possible": "asap",
    "to be honest": "tbh", "i do n't know": "idk", "i don't know": "idk", "oh my god": "omg", "as far as i know": "afaik",
}
_ABBR_RE = re.compile(r"\b(" + "|".join(sorted(map(re.escape, ABBREVIATIONS), key=len, reverse=True)) + r")\b",
                      re.IGNORECASE)


def insert_abbreviation(text: str, rng: random.Random, prob: float = 0.5) -> str:
    """Replace each word or phrase that has a common abbreviation ("you" → "u", "by the way" →
    "btw", …) with probability ``prob`` (longest phrase first)."""
    return _ABBR_RE.sub(lambda m: ABBREVIATIONS[m.group(0).lower()] if rng.random() < prob else m.group(0), text)


_VISUAL = {
    "a": "àáâãäåа", "b": "ƅЬ", "c": "çćс", "d": "ďđ", "e": "èéêëе", "g": "ğġ", "h": "ĥһ", "i": "ìíîïі",
    "j": "ĵј", "k": "ķк", "l": "ĺļł", "n": "ñńň", "o": "òóôõöøо", "p": "р", "r": "ŕř", "s": "śšѕ", "t": "ţť",
    "u": "ùúûü", "w": "ŵ", "x": "х", "y": "ýÿу", "z": "źżž",
}


def visual_attack_letters(text: str, rng: random.Random, prob: float = 0.3) -> str:
    """Replace each lowercase letter, with probability ``prob``, by a visually similar character
    (accented Latin letters and Cyrillic homoglyphs)."""
    return "".join(rng.choice(_VISUAL[c]) if c in _VISUAL and rng.random() < prob else c for c in text)


_LEET = {"a": "4", "e": "3", "i": "1", "o": "0", "s": "5", "t": "7", "l": "1", "g": "9", "b": "8"}


def leet_letters(text: str, rng: random.Random, prob: float = 0.5) -> str:
    """Replace each leet-able letter (a→4, e→3, i→1, o→0, s→5, t→7, l→1, g→9, b→8) with
    probability ``prob``."""
    return "".join(_LEET[c.lower()] if c.lower() in _LEET and rng.random() < prob else c for c in text)


NOISE_PERTURBATIONS: dict[str, Perturbation] = {
    "whitespace_perturbation": whitespace_perturbation,
    "shuffle_word": shuffle_word,
    "duplicate_punctuations": duplicate_punctuations,
    "butter_fingers_perturbation": butter_fingers_perturbation,
    "random_upper_transformation": random_upper_transformation,
    "insert_abbreviation": insert_abbreviation,
    "visual_attack_letters": visual_attack_letters,
    "leet_letters": leet_letters,
}


def register_perturbation(name: str, fn: Perturbation) -> None:
    """Make ``fn(text, rng) -> text`` available by ``name`` (e.g. to ``audit learnability``)."""
    if not callable(fn):
        raise TextAuditError(f"perturbation '{name}' must be callable as fn(text, rng) -> text")
    NOISE_PERTURBATIONS[name] = fn


def get_perturbation(name: str, **params) -> Perturbation:
    """Return the perturbation registered as ``name`` (with keyword parameters bound)."""
    if name not in NOISE_PERTURBATIONS:
        raise TextAuditError(f"unknown perturbation '{name}'; use one of {', '.join(NOISE_PERTURBATIONS)} or 'all'")
    fn = NOISE_PERTURBATIONS[name]
    return partial(fn, **params) if params else fn
