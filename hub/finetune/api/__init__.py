"""The finetune API (views.py)."""
