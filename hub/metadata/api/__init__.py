"""The metadata API (views.py)."""
