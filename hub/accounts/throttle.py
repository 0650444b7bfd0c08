"""Password guessing, slowed down: failures are counted per account and per client address, in the database
(so every web process and node counts together), and past a free allowance each failure pauses sign-in with
that account or from that address for twice as long as the last (1 s, 2 s, 4 s … up to
``HUB_LOGIN_MAX_PAUSE_S``). While paused, every password is refused without being checked, the right one too:
429 ``too_many_attempts`` with ``Retry-After``. A success clears its account's count (not its address's: an
attacker's own account must not clear the count of the address it guesses from); counts are forgotten after
``HUB_LOGIN_FORGET_S`` without a failure. Every pause is logged on ``hub.audit``.

API tokens are not passwords and are not counted here: a paused account's tokens keep working.
"""

from __future__ import annotations

import logging
import math
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from hub.accounts.models import LoginFailures
from hub.errors import HubError

audit = logging.getLogger("hub.audit")


class LockedOut(HubError):
    """Sign-in with this account, or from this address, is paused for ``wait`` seconds."""

    def __init__(self, seconds: int) -> None:
        super().__init__("too_many_attempts", f"Too many wrong passwords: signing in is paused for {seconds} s; "
                                              "try again after that (API tokens keep working).",
                         retry_after=seconds)
        self.wait = seconds


def address_of(request) -> str:
    """The client's address as this server sees it (``REMOTE_ADDR``)."""
    meta = getattr(request, "META", None) or {}
    return str(meta.get("REMOTE_ADDR") or "unknown")


def keys(username: str, request) -> dict[str, int]:
    """{counter key: failures allowed before pausing} for a sign-in with ``username`` from ``request``."""
    return {f"account:{username}"[:200]: settings.HUB_LOGIN_ACCOUNT_FREE,
            f"address:{address_of(request)}"[:200]: settings.HUB_LOGIN_ADDRESS_FREE}


def refuse_if_paused(counters: dict[str, int]) -> None:
    """Raise LockedOut when any counter is paused now."""
    now = timezone.now()
    until = (LoginFailures.objects.filter(key__in=counters, locked_until__gt=now)
             .order_by("-locked_until").values_list("locked_until", flat=True).first())
    if until is not None:
        raise LockedOut(max(1, math.ceil((until - now).total_seconds())))


def failed(counters: dict[str, int]) -> None:
    """Count a wrong password on every counter; pause those past their allowance, and log it."""
    now = timezone.now()
    forget = timedelta(seconds=settings.HUB_LOGIN_FORGET_S)
    with transaction.atomic():
        for key, free in counters.items():
            row, _ = LoginFailures.objects.select_for_update().get_or_create(key=key, defaults={"last_failure": now})
            row.failures = 1 if now - row.last_failure > forget else row.failures + 1
            row.last_failure = now
            if row.failures > free:
                pause = min(2 ** (row.failures - free - 1), settings.HUB_LOGIN_MAX_PAUSE_S)
                row.locked_until = now + timedelta(seconds=pause)
                audit.warning("sign-in paused for %s s: %s after %d wrong passwords", pause, key, row.failures)
            row.save()


def succeeded(counters: dict[str, int]) -> None:
    """A right password: forget its account's failures."""
    LoginFailures.objects.filter(key__in=[key for key in counters if key.startswith("account:")]).delete()
