"""ARK persistent identifiers, minted locally: ``ark:/{NAAN}/{shoulder}{blade}{check}``.

The check character is the NOID Check Digit Algorithm over ``{NAAN}/{shoulder}{blade}``, so a
mistyped identifier is recognised as such instead of resolving to something else.
"""

from __future__ import annotations

import re
import secrets

from django.conf import settings

# NOID's "betanumeric" alphabet: digits and consonants without l (no vowels: no accidental words).
ALPHABET = "0123456789bcdfghjkmnpqrstvwxz"
BLADE_LENGTH = 8
ARK_RE = re.compile(r"^ark:/?(?P<naan>[0-9bcdfghjkmnpqrstvwxz]+)/(?P<name>[A-Za-z0-9=~*+@_$.-]+)$")


def check_char(text: str) -> str:
    """NOID check character: sum of position x ordinal over ``text``, mod 29."""
    total = 0
    for position, char in enumerate(text, start=1):
        ordinal = ALPHABET.find(char)
        total += position * (ordinal if ordinal >= 0 else 0)
    return ALPHABET[total % len(ALPHABET)]


def mint(naan: str | None = None, shoulder: str | None = None) -> str:
    """A new random ARK; the caller guarantees uniqueness (the database does)."""
    naan = naan or settings.HUB_PID["NAAN"]
    shoulder = shoulder if shoulder is not None else settings.HUB_PID["SHOULDER"]
    blade = "".join(secrets.choice(ALPHABET) for _ in range(BLADE_LENGTH))
    base = f"{naan}/{shoulder}{blade}"
    return f"ark:/{base}{check_char(base)}"


def normalize(pid: str) -> str | None:
    """The canonical form of an ARK (``ark:/naan/name``, hyphens dropped), or None if malformed."""
    pid = pid.strip()
    if pid.lower().startswith("ark:"):
        pid = "ark:" + pid[4:]
    match = ARK_RE.match(pid)
    if not match:
        return None
    name = match.group("name").replace("-", "")
    return f"ark:/{match.group('naan')}/{name}"


def is_valid(pid: str) -> bool:
    """Whether ``pid`` is a well-formed ARK whose check character matches."""
    canonical = normalize(pid)
    if canonical is None:
        return False
    body = canonical[len("ark:/") :]
    return len(body) > 1 and check_char(body[:-1]) == body[-1]
