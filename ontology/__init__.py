"""The HPC Ontology mapping: the metadata schema (``fields``), the RDF mapping (``graph``), SHACL shapes
(``shapes``), exports (``exports``) and the hub's own terms (``hub-terms.ttl``). No Django here."""
