"""What the admin's changelists share: fast lists at 100,000 accelerators, read-only audit
trails, staff-edited rows, one message per action."""

from django.contrib import admin, messages


class FastChangelist(admin.ModelAdmin):
    list_per_page = 100
    show_full_result_count = False


class AuditTrail(FastChangelist):
    """An audit record: shown, never added, changed or deleted here, superusers included."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class StaffEdits(admin.ModelAdmin):
    """Editable by every member of staff (the alert rules are operations' own), not only by
    accounts holding the model permissions."""

    def _staff(self, request) -> bool:
        return request.user.is_active and request.user.is_staff

    def has_module_permission(self, request) -> bool:
        return self._staff(request) or super().has_module_permission(request)

    def has_view_permission(self, request, obj=None) -> bool:
        return self._staff(request)

    def has_add_permission(self, request) -> bool:
        return self._staff(request)

    def has_change_permission(self, request, obj=None) -> bool:
        return self._staff(request)

    def has_delete_permission(self, request, obj=None) -> bool:
        return self._staff(request)

def action_report(modeladmin, request, n: int, what: str) -> None:
    modeladmin.message_user(request, f"{n} {what}.", messages.SUCCESS)
