"""`--launch_type=local_mp`: every node a child process of the launcher, on
this host (launch.py: the supervisor; children.py: one node's process)."""
