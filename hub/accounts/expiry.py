"""When a new API token expires: the site's default lifetime, or the one asked for up to the site's maximum
(``HUB_TOKEN_DEFAULT_DAYS``, ``HUB_TOKEN_MAX_DAYS``; 0 is no default expiry / no maximum)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from hub.errors import HubError

LONGEST_DAYS = 36500  # even where the site sets no maximum: a date Python can still write


def max_days() -> int:
    return max(settings.HUB_TOKEN_MAX_DAYS, 0)


def default_days() -> int:
    """The site's default, never past its maximum."""
    days, most = max(settings.HUB_TOKEN_DEFAULT_DAYS, 0), max_days()
    return min(days, most) if most and days else (days or most)


def expires_at(days: int | None = None) -> datetime | None:
    """The expiry of a token asked to live ``days`` days (None: the default); None means never, which only a
    site without a maximum gives. Refused (``invalid``) past the maximum."""
    if days is None:
        days = default_days()
    most = max_days()
    if days < 0 or days > LONGEST_DAYS:
        raise HubError("invalid", f"expires_days is a number of days, 1 to {most or LONGEST_DAYS}.")
    if most and (days == 0 or days > most):
        raise HubError("invalid", f"This hub's tokens live {most} days at most; ask for expires_days between 1 "
                                  f"and {most}.", errors={"expires_days": [f"at most {most}"]})
    return timezone.now() + timedelta(days=days) if days else None


def choices() -> list[int]:
    """Lifetimes (days) the account page offers: common ones up to the maximum, the default among them."""
    most = max_days()
    offered = {d for d in (7, 30, 90, 365) if not most or d <= most} | {default_days()}
    if most:
        offered.add(most)
    return sorted(d for d in offered if d)
