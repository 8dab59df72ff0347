"""HTTP shell: wire models, dependencies, one error table, thin handlers."""
