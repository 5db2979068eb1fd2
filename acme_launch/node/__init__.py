"""What runs first in every node process, before Launchpad's own entry."""
