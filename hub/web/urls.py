"""The pages (server-rendered; their scripts talk to the REST API)."""

from django.urls import path

from hub.web import access, account, finetune, orgs, publish, terms, views

urlpatterns = [
    path("", views.home, name="home"),
    path("browse/", views.browse, name="browse"),
    path("terms", terms.view, name="terms"),
    path("owners/<str:username>/", views.owner, name="owner"),
    path("orgs/<str:slug>/", orgs.page, name="org"),
    path("publish/", publish.publish, name="publish"),
    path("publish/card", publish.card, name="publish-card"),
    path("jobs/", account.jobs, name="jobs"),
    path("jobs/<uuid:pk>/", account.job, name="job"),
    path("jobs/<uuid:pk>/cancel", account.cancel, name="job-cancel"),
    path("account/", account.account, name="account"),
    path("sharing/<str:owner>/<str:name>", account.sharing, name="sharing"),
    path("access/requests/", access.requests_page, name="access-requests"),
    path("access/requests/<int:pk>", access.decide_page, name="access-decide"),
    path("access/ask/<str:owner>/<str:name>", access.ask_page, name="access-ask"),
    path("finetune/<str:owner>/<str:name>/<str:version>", finetune.start, name="finetune"),
]
