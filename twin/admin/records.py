"""The admin of what people and the engine did: drills, the audit trail, alert rules, alerts
and silences (read-only where they are a record)."""

from django.contrib import admin
from django.urls import reverse

from twin.admin.base import AuditTrail, StaffEdits, action_report
from twin.alerts import rules as alerts
from twin.alerts.models import Alert, AlertRule, Silence
from twin.audit.models import AuditEntry
from twin.live.models import Drill


@admin.register(Drill)
class DrillAdmin(AuditTrail):
    """Drills are requested on the Drills page or the API (audited there), never here."""

    list_display = ("requested_at", "kind", "target", "requested_by", "status")
    list_select_related = ("requested_by",)
    list_filter = ("kind", "status")

    def view_on_site(self, obj) -> str:
        return reverse("drills")


@admin.register(AuditEntry)
class AuditEntryAdmin(AuditTrail):
    """Who changed what in the inventory, and when."""

    list_display = ("created_at", "username", "action", "target")
    list_filter = ("action",)
    search_fields = ("username", "target")


@admin.register(AlertRule)
class AlertRuleAdmin(StaffEdits):
    """Alert rules; the figure path and threshold are checked by ``AlertRule.clean``."""

    list_display = ("name", "figure", "comparison", "threshold", "for_s", "severity", "enabled")
    list_filter = ("severity", "enabled")
    search_fields = ("name", "figure")
    fieldsets = (
        (None, {"fields": ("name", "figure", "comparison", "threshold", "for_s", "severity",
                           "enabled")}),
        ("For the on-call", {"fields": ("description", "runbook_url")}),
        ("Event-log figures and hysteresis", {"fields": ("window_s", "resolve_threshold",
                                                        "resolve_for_s")}),
    )
    actions = ("enable", "disable")

    @admin.action(description="Enable the selected rules")
    def enable(self, request, queryset) -> None:
        action_report(self, request, queryset.update(enabled=True), "rule(s) enabled")
        alerts.rules_changed()

    @admin.action(description="Disable the selected rules (their alerts resolve)")
    def disable(self, request, queryset) -> None:
        action_report(self, request, queryset.update(enabled=False), "rule(s) disabled")
        alerts.rules_changed()

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        alerts.rules_changed()

    def delete_model(self, request, obj) -> None:
        super().delete_model(request, obj)
        alerts.rules_changed()


@admin.register(Alert)
class AlertAdmin(AuditTrail):
    """Alerts fire and resolve with the live engine; staff acknowledge them on /alerts/."""

    list_display = ("started_at", "rule", "state", "value", "labels", "notified",
                    "acknowledged_by")
    list_select_related = ("rule", "acknowledged_by")
    list_filter = ("state", "rule__severity", "notified")

    def view_on_site(self, obj) -> str:
        return reverse("alerts")

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.is_active and request.user.is_staff

    def has_module_permission(self, request) -> bool:
        return self.has_view_permission(request) or super().has_module_permission(request)


@admin.register(Silence)
class SilenceAdmin(StaffEdits):
    """Silences: staff create them here or on /alerts/ (who is recorded either way); matchers
    are checked by ``Silence.clean``."""

    list_display = ("id", "matchers", "starts_at", "ends_at", "created_by_name", "comment")
    list_filter = ("ends_at",)
    search_fields = ("comment", "created_by_name")
    readonly_fields = ("created_by_name",)
    fields = ("matchers", "starts_at", "ends_at", "comment", "created_by_name")

    def save_model(self, request, obj, form, change) -> None:
        if not change:
            obj.created_by, obj.created_by_name = request.user, request.user.get_username()
        super().save_model(request, obj, form, change)
        alerts.silences_changed()

    def delete_model(self, request, obj) -> None:
        super().delete_model(request, obj)
        alerts.silences_changed()

    def view_on_site(self, obj) -> str:
        return reverse("alerts")
