"""The admin's login form, counted against allauth's failed-login limits.

Django's admin login has no limit of its own. This form authenticates through allauth's adapter,
which consumes the same `login_failed` counters as the site's login form (per client address and
per login name, in the cache), refuses once they are spent, and gives back the count on success.
"""

from allauth.account.adapter import get_adapter
from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.core.exceptions import ValidationError


class RateLimitedAdminLoginForm(AdminAuthenticationForm):
    def clean(self):
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if username is not None and password:
            try:
                self.user_cache = get_adapter(self.request).authenticate(
                    self.request, username=username, password=password
                )
            except ValidationError as refusal:  # too many failed attempts
                raise forms.ValidationError(refusal.messages, code="too_many_login_attempts") from None
            if self.user_cache is None:
                raise self.get_invalid_login_error()
            self.confirm_login_allowed(self.user_cache)
        return self.cleaned_data
