"""HTTP content negotiation: the best of the offered media types for an ``Accept`` header, and of offered
(media type, profile) pairs where a client names a ``profile`` (RFC 6906; e.g. the Croissant or schema.org
profile of JSON-LD)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

# JSON-LD's own profiles name a document form (expanded, compacted, ...), not a metadata profile: any
# JSON-LD offer answers them.
JSONLD_FORMS = "http://www.w3.org/ns/json-ld#"


class Wanted(NamedTuple):
    """One media range of an ``Accept`` header: the type, its q, and its other parameters (names lower-case,
    values unquoted)."""

    media: str
    q: float
    params: dict[str, str]

    @property
    def profiles(self) -> list[str]:
        return [p for p in self.params.get("profile", "").split() if not p.startswith(JSONLD_FORMS)]


class Offer(NamedTuple):
    media: str
    profile: str = ""


def _params(parts: list[str]) -> dict[str, str]:
    out = {}
    for param in parts:
        key, _, value = param.partition("=")
        out[key.strip().lower()] = value.strip().strip('"').strip()
    return out


def wanted(header: str) -> list[Wanted]:
    """The media ranges of ``header`` in the order of preference (q, then the more specific, then the
    order written); an empty header accepts anything."""
    out = []
    for position, part in enumerate((header or "*/*").split(",")):
        media, *rest = [p.strip() for p in part.split(";")]
        if not media:
            continue
        params = _params(rest)
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 0.0
        out.append((Wanted(media.lower(), q, params), position))
    out.sort(key=lambda item: (-item[0].q, item[0].media.count("*"), item[1]))
    return [item for item, _ in out if item.q > 0]


def parse_accept(header: str) -> list[tuple[str, float]]:
    """(media type, q) pairs in the order of preference; an empty header accepts anything."""
    return [(item.media, item.q) for item in wanted(header)]


def _matches(media: str, offered: str) -> bool:
    return media == "*/*" or media == offered or (media.endswith("/*") and offered.startswith(media[:-1]))


def same_profile(a: str, b: str) -> bool:
    """Profile URIs compared as people write them: http or https, with or without a trailing slash."""
    def norm(uri: str) -> str:
        return uri.strip().rstrip("/#").replace("https://", "http://", 1)

    return bool(a and b) and norm(a) == norm(b)


def choose_offer(header: str, offers: Sequence[Offer]) -> tuple[Offer, Wanted] | None:
    """The offer the client prefers most, and the media range that chose it. A range that names profiles
    takes only an offer that conforms to one of them; one without takes the first offer of its type (offer
    order breaks ties and answers wildcards)."""
    for item in wanted(header):
        profiles = item.profiles
        for offer in offers:
            if _matches(item.media, offer.media) and (
                    not profiles or any(same_profile(p, offer.profile) for p in profiles)):
                return offer, item
    return None


def choose(header: str, offered: list[str]) -> str | None:
    """The offered type the client prefers most, parameters aside (offer order breaks ties and answers
    wildcards)."""
    for item in wanted(header):
        found = next((media for media in offered if _matches(item.media, media)), None)
        if found:
            return found
    return None
