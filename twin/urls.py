from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from twin import views

admin.site.site_header = "ClusterTwin inventory"
admin.site.site_title = "ClusterTwin"

urlpatterns = [
    path("", views.home, name="home"),
    path("api/inventory", views.api_inventory, name="api-inventory"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]
