"""`--launch_type=ray`: the same program on an existing Ray cluster."""
