"""The HPC Ontology vocabulary and the hub's own terms (the mapping to RDF grows here: issue 3)."""

HPC_NAMESPACE = "https://hpc-fair.github.io/ontology#"
# Terms the HPC Ontology lacks (ONNX opset, tensor signatures, ...) live in the hub's namespace.
HUB_NAMESPACE = "https://w3id.org/hpcfair-hub/terms#"
