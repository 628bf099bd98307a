from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from traces.api.collaboration import A2AMessageWebhookView

# Database outages answer 503 (JSON on the API, a short page elsewhere); other errors 500.
handler500 = "agentsite.outage.server_error"
# Unknown API URLs answer the API's JSON 404; elsewhere Django's page.
handler404 = "traces.api.errors.not_found"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/", include("traces.api.urls")),
    path("api/", include("memory.api.urls")),
    path("api/", include("review.api.urls")),  # X6: scores (issue 23)
    path("api/", include("suites.api.urls")),  # X6: regression suites (issue 23)
    path("api/", include("tools.urls")),
    path("webhook/a2a-messages", A2AMessageWebhookView.as_view(), name="a2a-webhook"),
    path("", include("portal.urls")),
]
