"""Web server start-up: the objects made while starting are kept out of the cycle collector's passes."""

from __future__ import annotations

import gc

from django.urls import get_resolver

from hub.runtime import settle


def test_settle_freezes_what_start_up_made():
    before = gc.get_freeze_count()
    try:
        settle()
        assert gc.get_freeze_count() > before + 1000  # Django, the apps and every view module
        scanned = gc.get_objects()  # what full collections still walk
        resolver = get_resolver()
        assert not any(o is resolver for o in scanned)
        made_after = type("MadeAfter", (), {})()
        assert any(o is made_after for o in gc.get_objects())  # collected as usual
    finally:
        gc.unfreeze()
