"""The manual: reference pages generated from the code (``reference``), the MkDocs hook that puts them into the
site (``hook``), the check of the guides' code blocks (``blocks``) and the view that serves the built site at
``/docs/`` (``views``)."""
