"""Process start-up for long-running web servers."""

from __future__ import annotations

import gc


def settle() -> None:
    """Load every URL pattern (and so every view module) now, then move everything made so far out of
    the cycle collector's reach: a full collection over the ~100k objects a started hub holds pauses a
    request for ~100 ms on a small machine, and these objects live as long as the process anyway."""
    from django.urls import get_resolver

    _ = get_resolver().url_patterns
    gc.collect()
    gc.freeze()
