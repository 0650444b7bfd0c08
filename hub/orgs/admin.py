from django.contrib import admin

from hub.orgs.models import Membership, Organization, SlurmAccount


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ["slug", "title", "storage_quota_mb", "jobs_at_once"]
    search_fields = ["account__username", "title"]
    inlines = [MembershipInline]


@admin.register(SlurmAccount)
class SlurmAccountAdmin(admin.ModelAdmin):
    list_display = ["account", "owner", "qos", "is_default"]
    search_fields = ["account", "owner__username"]
    raw_id_fields = ["owner"]
