"""What a user on the host tries against a Ray instance (for tests).

    python -m tests.ray_intruder --address=HOST:PORT --sentinel=PATH

Joins the Ray instance whose GCS is at HOST:PORT as a driver, as a plain
`ray start --head` lets another user do, and runs a task there that
creates SENTINEL (as the instance's user, where it runs). Prints one JSON
object: {'uid': ..., 'joined': bool, 'task_ran': bool, 'error': the first
line of what stopped it, if anything}. Exits 0 whatever happened.
"""

import argparse
import json
import os
import sys
import threading

TIMEOUT_SECONDS = 20


def main(argv) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--address', required=True)
  parser.add_argument('--sentinel', required=True)
  args = parser.parse_args(argv)
  found = {'uid': os.geteuid(), 'joined': False, 'task_ran': False}

  def attempt():
    import ray
    ray.init(address=args.address, log_to_driver=False)
    found['joined'] = True

    @ray.remote
    def touch(path):
      open(path, 'w').close()
      return True
    found['task_ran'] = bool(ray.get(touch.remote(args.sentinel),
                                     timeout=TIMEOUT_SECONDS))

  thread = threading.Thread(target=lambda: _quietly(attempt, found),
                            daemon=True)
  thread.start()
  thread.join(TIMEOUT_SECONDS + 20)
  print(json.dumps(found), flush=True)
  return 0


def _quietly(call, found) -> None:
  try:
    call()
  except BaseException as e:  # Refused, timed out, or Ray gave up: not in.
    found['error'] = ' '.join(f'{type(e).__name__}: {e}'.split())[:300]


if __name__ == '__main__':
  code = main(sys.argv[1:])
  os._exit(code)  # A join that never answered may still hold threads.
