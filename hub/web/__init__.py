"""Server-rendered pages and the embedded-default launcher."""
