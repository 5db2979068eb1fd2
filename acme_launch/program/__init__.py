"""The Launchpad program and the objects its nodes run."""
