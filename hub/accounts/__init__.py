"""Users and API tokens with scopes."""
