"""Filters of the artifact list. Full-text search and facets grow here (issue: FAIR metadata)."""

from __future__ import annotations

import django_filters
from django.db.models import Q

from hub.registry.models import Artifact


class ArtifactFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(method="search", help_text="Words in the name, title or description.")
    kind = django_filters.ChoiceFilter(choices=Artifact.Kind.choices)
    owner = django_filters.CharFilter(field_name="owner__username")
    visibility = django_filters.ChoiceFilter(choices=Artifact.Visibility.choices)

    class Meta:
        model = Artifact
        fields = ["q", "kind", "owner", "visibility"]

    def search(self, queryset, name: str, value: str):
        for word in value.split()[:10]:
            queryset = queryset.filter(
                Q(name__icontains=word) | Q(title__icontains=word) | Q(description__icontains=word)
            )
        return queryset
