"""The resource plan: topology, GPU and CPU placement, each node's environment.

Pure data made before anything starts; nothing here imports acme,
Launchpad, TensorFlow or JAX."""
