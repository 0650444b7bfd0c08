"""Shapes of the registry's API bodies."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from hub.metadata.services import class_labels
from hub.registry import access, direct, lineage
from hub.registry.files_access import strictest_state
from hub.registry.links import absolute, file_url, pid_url
from hub.registry.models import LABEL_RE, NAME_RE, Artifact, File, ProvenanceLink, Upload, Version
from hub.registry.uploads import offset_of
from hub.strict import StrictFields, StrictSerializer


class UsernameListField(serializers.ListField):
    child = serializers.CharField(max_length=150)

    def to_internal_value(self, data):
        names = super().to_internal_value(data)
        users = list(get_user_model().objects.filter(username__in=names))
        missing = sorted(set(names) - {u.username for u in users})
        if missing:
            raise serializers.ValidationError(f"No such user: {', '.join(missing)}.")
        return users

    def to_representation(self, data):
        return [user.username for user in data.all()]


class ArtifactSerializer(StrictFields, serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", required=False, max_length=150,
                                  help_text="On create: an organization you write in (default: you).")
    full_name = serializers.CharField(read_only=True)
    collaborators = UsernameListField(required=False)
    pid_url = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()
    latest_version = serializers.SerializerMethodField(help_text="The newest live version of any kind (`latest`).")
    current_version = serializers.SerializerMethodField(
        help_text="The version the artifact stands for (`current`): its newest upload, not the hub's conversion.")
    name = serializers.RegexField(
        NAME_RE, max_length=100,
        error_messages={"invalid": "Use letters, digits, '.', '_' and '-', starting with a letter or digit."},
    )
    kind = serializers.ChoiceField(choices=Artifact.Kind.choices)
    visibility = serializers.ChoiceField(choices=Artifact.Visibility.choices, default="public")

    class Meta:
        model = Artifact
        fields = [
            "kind", "owner", "name", "full_name", "title", "description", "visibility", "collaborators",
            "pid", "pid_url", "url", "latest_version", "current_version", "created", "updated",
        ]
        read_only_fields = ["pid", "created", "updated"]

    def get_pid_url(self, artifact: Artifact) -> str:
        return pid_url(artifact.pid)

    def get_url(self, artifact: Artifact) -> str:
        return absolute(reverse("api:artifact-detail", args=[artifact.owner.username, artifact.name]))

    def get_latest_version(self, artifact: Artifact) -> str | None:
        if hasattr(artifact, "latest_label"):  # set by the search listing
            return artifact.latest_label
        latest = artifact.latest_version()
        return latest.label if latest else None

    def get_current_version(self, artifact: Artifact) -> str | None:
        if hasattr(artifact, "current_label"):  # set by the search listing
            return artifact.current_label
        current = lineage.current_version(artifact)
        return current.label if current else None


class ArtifactUpdateSerializer(StrictSerializer):
    title = serializers.CharField(max_length=300, required=False, allow_blank=True)
    description = serializers.CharField(required=False, allow_blank=True)
    visibility = serializers.ChoiceField(choices=Artifact.Visibility.choices, required=False)
    collaborators = UsernameListField(required=False)


class ArtifactUpdatedSerializer(ArtifactSerializer):
    """The answer to an update: the artifact, and what its owner should know."""

    warnings = serializers.ListField(
        child=serializers.CharField(), read_only=True,
        help_text="After a change of visibility or collaborators: relations that some readers now see as "
                  "restricted (a source or a derivative they may not read).")

    class Meta(ArtifactSerializer.Meta):
        fields = [*ArtifactSerializer.Meta.fields, "warnings"]


class FileSerializer(serializers.ModelSerializer):
    sha256 = serializers.CharField(source="blob_id")
    download_url = serializers.SerializerMethodField()

    class Meta:
        model = File
        fields = ["path", "size", "sha256", "media_type", "download_url"]

    def get_download_url(self, file: File) -> str:
        return file_url(file.version, file.path)

    def to_representation(self, file: File) -> dict:
        data = super().to_representation(file)
        if file.location:  # data by reference: where it lives, and when fixity found it changed
            data["location"] = file.location
            data["location_changed"] = file.location_changed.isoformat() if file.location_changed else None
        return data


class ProvenanceSerializer(serializers.Serializer):
    """A source as the reader may see it (``hub.registry.access.Source``): a restricted one has no name
    or PID, only its relation and kind."""

    relation = serializers.CharField()
    target = serializers.SerializerMethodField(help_text="owner/name@version; null when restricted.")
    target_pid = serializers.SerializerMethodField(help_text="The source's PID; null when restricted.")
    target_kind = serializers.CharField(source="kind")
    restricted = serializers.BooleanField(help_text="True when you may not see the source (a private artifact).")
    description = serializers.CharField(source="name", help_text='e.g. "a restricted dataset" when restricted.')

    def get_target(self, source: access.Source) -> str | None:
        return str(source.target) if source.target is not None else None

    def get_target_pid(self, source: access.Source) -> str | None:
        return source.target.pid if source.target is not None else None


class DerivativeSerializer(serializers.ModelSerializer):
    version_pid = serializers.CharField(source="version.pid")
    version = serializers.CharField(source="version.__str__")

    class Meta:
        model = ProvenanceLink
        fields = ["relation", "version", "version_pid"]


class VersionSerializer(serializers.ModelSerializer):
    artifact = serializers.CharField(source="artifact.full_name")
    version = serializers.CharField(source="label")
    pid_url = serializers.SerializerMethodField()
    created_by = serializers.CharField(source="created_by.username", default=None)
    files = FileSerializer(many=True)
    provenance = serializers.SerializerMethodField()
    derivatives = serializers.SerializerMethodField()
    deleted = serializers.BooleanField(source="is_deleted")
    files_access = serializers.SerializerMethodField(
        help_text="open, restricted or embargoed: who reads the files, apart from who reads the record (the "
                  "strictest of this version's and its sources'; GET .../access says whether you may).")
    embargo_until = serializers.SerializerMethodField()
    class_labels = serializers.SerializerMethodField(
        help_text="The names of the model's classes in index order, where it, the version it was converted from or "
                  "a dataset it was trained on records them (metadata field labels); null otherwise.")

    class Meta:
        model = Version
        fields = [
            "artifact", "version", "pid", "pid_url", "metadata", "content_digest", "created", "created_by",
            "files", "provenance", "derivatives", "deleted", "deleted_at", "deletion_reason", "class_labels",
            "files_access", "embargo_until",
        ]

    def get_files_access(self, version: Version) -> str:
        return strictest_state(version)[0]

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_embargo_until(self, version: Version) -> str | None:
        until = strictest_state(version)[1]
        return until.isoformat() if until else None

    def get_pid_url(self, version: Version) -> str:
        return pid_url(version.pid)

    def _viewer(self) -> access.Viewer:
        """The reader, from the context (``{"viewer": Viewer(user)}``); without one, the public."""
        if "viewer" not in self.context:
            self.context["viewer"] = access.Viewer.public()
        return self.context["viewer"]

    @extend_schema_field(ProvenanceSerializer(many=True))
    def get_provenance(self, version: Version):
        return ProvenanceSerializer(access.sources(self._viewer(), version), many=True).data

    @extend_schema_field(DerivativeSerializer(many=True))
    def get_derivatives(self, version: Version):
        """Only what the reader may see: other users' private versions made from this one are not there."""
        return DerivativeSerializer(access.derivatives(self._viewer(), version), many=True).data

    @extend_schema_field(serializers.ListField(child=serializers.CharField(), allow_null=True))
    def get_class_labels(self, version: Version) -> list[str] | None:
        if version.artifact.kind != Artifact.Kind.MODEL:
            return None

        return class_labels(version, self._viewer())

    def to_representation(self, version: Version):
        data = super().to_representation(version)
        if version.is_deleted:  # a tombstone says what it was, but serves no bytes
            for item in data["files"]:
                item["download_url"] = None
        return data


class VersionPublishedSerializer(VersionSerializer):
    """The answer to a publish: the version, and what its publisher should know."""

    warnings = serializers.ListField(
        child=serializers.CharField(), read_only=True,
        help_text="E.g. a source that some readers of the new version may not see (they see it as restricted).")

    class Meta(VersionSerializer.Meta):
        fields = [*VersionSerializer.Meta.fields, "warnings"]


class ProvenanceInputSerializer(StrictSerializer):
    relation = serializers.ChoiceField(choices=ProvenanceLink.Relation.choices)
    target = serializers.CharField(help_text="A version PID (ark:/…) or owner/name[@version].")


class FileInputSerializer(StrictSerializer):
    path = serializers.CharField(max_length=1024)
    upload = serializers.UUIDField(help_text="The id of a completed upload (POST /api/v1/uploads/).")


class NewArtifactSerializer(StrictSerializer):
    kind = serializers.ChoiceField(choices=Artifact.Kind.choices)
    visibility = serializers.ChoiceField(choices=Artifact.Visibility.choices, default=Artifact.Visibility.PUBLIC)
    title = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")
    description = serializers.CharField(max_length=20000, required=False, allow_blank=True, default="")


class VersionCreateSerializer(StrictSerializer):
    """JSON body; with multipart/form-data send the files as parts and these fields as form fields
    (``metadata`` and ``provenance`` as JSON strings)."""

    version = serializers.RegexField(LABEL_RE, required=False, allow_blank=True)
    metadata = serializers.JSONField(required=False, default=dict)
    files = FileInputSerializer(many=True, required=False, default=list)
    provenance = ProvenanceInputSerializer(many=True, required=False, default=list)
    artifact = NewArtifactSerializer(required=False, help_text=(
        "Create the artifact (yours) together with this version when it does not exist yet: both are made, or "
        "neither is (a refused version leaves no empty artifact behind)."))

    def validate_metadata(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError("Expected a JSON object.")
        return value


class UploadSerializer(StrictFields, serializers.ModelSerializer):
    sha256 = serializers.CharField(read_only=True)
    expected_sha256 = serializers.RegexField(r"^[0-9a-fA-F]{64}$", required=False, allow_blank=True)
    offset = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()
    size = serializers.IntegerField(min_value=0, required=False, help_text=(
        "The file's size in bytes (not with reference or fetch: the hub's job finds it)."))
    reference = serializers.CharField(write_only=True, required=False, max_length=2048, help_text=(
        "Data by reference: an absolute path under a root the hub declares (HUB_REFERENCE_ROOTS), a file or a "
        "folder, or s3://bucket/key; the bytes stay there. A `reference` job reads them once for size and sha256."))
    fetch = serializers.CharField(write_only=True, required=False, max_length=2048, help_text=(
        "An http(s):// or s3:// URL the hub fetches into this upload (allowed sites only, HUB_FETCH_ALLOWED), "
        "in a `fetch` job."))
    source = serializers.CharField(read_only=True, help_text="Where a fetched or referenced upload's bytes come from.")
    direct = serializers.BooleanField(write_only=True, required=False, default=False, help_text=(
        "Send the bytes straight to the object store by presigned multipart URLs, where the hub offers it "
        "(the answer then has `multipart`)."))
    multipart = serializers.SerializerMethodField(help_text=(
        "A direct upload: part_size, part_count, parts_received, url_seconds. Ask POST …/parts for URLs."))

    class Meta:
        model = Upload
        fields = ["id", "filename", "size", "expected_sha256", "sha256", "state", "offset", "url", "created",
                  "expires", "completed_at", "direct", "multipart", "reference", "fetch", "source"]
        read_only_fields = ["id", "state", "created", "expires", "completed_at"]

    def validate(self, attrs: dict) -> dict:
        given = [name for name in ("size", "reference", "fetch") if name in attrs]
        if len(given) != 1:
            raise serializers.ValidationError({"size": ["Give one of size (you send the bytes), reference (the "
                                                        "bytes stay where they are) or fetch (the hub reads a URL)."]})
        return attrs

    def get_offset(self, upload: Upload) -> int:
        return direct.offset_of(upload) if upload.direct_id else offset_of(upload)

    @extend_schema_field({"type": "object", "nullable": True})
    def get_multipart(self, upload: Upload) -> dict | None:
        return direct.describe(upload) if upload.direct_id and upload.state == Upload.State.OPEN else None

    def get_url(self, upload: Upload) -> str:
        return absolute(reverse("api:upload-detail", args=[upload.id]))


class UploadPartsSerializer(StrictSerializer):
    numbers = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=1,
                                    max_length=direct.URLS_PER_REQUEST)


class UploadCompleteSerializer(StrictSerializer):
    sha256 = serializers.RegexField(r"^[0-9a-fA-F]{64}$", required=False, allow_blank=True)
