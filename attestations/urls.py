app_name = "attestations"
urlpatterns = []
