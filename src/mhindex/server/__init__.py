"""Serving a built index over HTTP (`mhindex serve`): `app` is the server, `protocols` the shapes
of the retrieval servers that existing code already speaks to."""
