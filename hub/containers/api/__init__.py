"""The containers API (views.py)."""
