"""Signals other domains listen to, so that the registry does not depend on them."""

from django.dispatch import Signal

# Sent inside create_version's transaction, after the version, its files and provenance exist.
# Arguments: version, user. A receiver that raises rolls the version back.
version_published = Signal()
