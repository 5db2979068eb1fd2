"""A user's own project: an agent and an environment acme-launch does not ship."""
