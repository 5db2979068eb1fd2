"""Per-agent adapters: each turns a ConfigDict into Acme builder pieces."""
