"""The conversions API (views.py)."""
