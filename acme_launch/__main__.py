"""`python -m acme_launch ARGS`: the same as `acme-launch ARGS` or launch.py."""

from acme_launch import main

if __name__ == '__main__':
  main.main()
