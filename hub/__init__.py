"""HPCFair Hub: the Django project (settings, urls) and one app per domain."""
