"""ClusterTwin's Django project and app: inventory, admin, services, views, commands."""
