"""Signals other domains listen to, so that the registry does not depend on them."""

from django.dispatch import Signal

# Sent inside create_version's transaction, after the version, its files and provenance exist.
# Arguments: version, user. A receiver that raises rolls the version back.
version_published = Signal()

# Sent after an artifact was created, edited (title, description, visibility), deleted, or lost a
# version. Arguments: artifact. The search index listens.
artifact_changed = Signal()
