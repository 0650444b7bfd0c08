"""HTTP content negotiation: the best of the offered media types for an ``Accept`` header."""

from __future__ import annotations


def parse_accept(header: str) -> list[tuple[str, float]]:
    """(media type, q) pairs in the order of preference; an empty header accepts anything."""
    out = []
    for position, part in enumerate((header or "*/*").split(",")):
        media, *params = [p.strip() for p in part.split(";")]
        if not media:
            continue
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        out.append((media.lower(), q, position))
    out.sort(key=lambda item: (-item[1], item[0].count("*"), item[2]))
    return [(media, q) for media, q, _ in out if q > 0]


def choose(header: str, offered: list[str]) -> str | None:
    """The offered type the client prefers most (offer order breaks ties and answers wildcards)."""
    for media, _ in parse_accept(header):
        if media == "*/*":
            return offered[0]
        if media.endswith("/*"):
            major = media[:-1]
            match = next((o for o in offered if o.startswith(major)), None)
            if match:
                return match
        elif media in offered:
            return media
    return None
