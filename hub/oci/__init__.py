"""An OCI Distribution registry at ``/v2/`` on the hub's content-addressed blob store.

Pull (``views``): every published model and dataset version is an ORAS artifact, generated on the fly
(``artifacts``: its files as layers, its metadata as the config; tag = version label, repository = ``owner/name``);
images the hub's workers push (``uploads``, manifest PUT) are kept as rows naming blobs of the store (``models``).
Access is the hub's own (``names``): a Bearer challenge and a short-lived registry token (``tokens``) from a hub
API token; errors are the specification's ``{"errors": [...]}`` bodies, with the hub's ``code``/``detail``
(``errors``).
"""
