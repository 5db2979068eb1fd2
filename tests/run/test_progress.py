"""The progress rate: steady on slow runs whose counter moves in big quanta."""

import json
import os

import pytest

from acme_launch.run import progress


def _quantized_run(rate, quantum, seconds, poll=0.5):
  """(time, counter value) as the reporter sees them: the count moves in
  `quantum` steps (one episode end) while the true rate is `rate`."""
  t, samples = 0.0, []
  while t <= seconds:
    samples.append((t, int(rate * t) // quantum * quantum))
    t += poll
  return samples


@pytest.mark.parametrize('rate,quantum', [(70, 1000), (70, 51), (5200, 16)])
def test_rate_stays_within_ten_percent_once_the_count_moved_three_times(rate, quantum):
  estimator = progress.RateEstimator()
  seen = []
  for t, steps in _quantized_run(rate, quantum, seconds=300):
    estimator.add(t, steps)
    if t > 3.5 * quantum / rate:
      seen.append(estimator.rate(t))
  assert min(seen) > 0.9 * rate and max(seen) < 1.1 * rate, (min(seen), max(seen))


def test_a_stalled_run_decays_instead_of_holding_its_rate():
  estimator = progress.RateEstimator()
  for t, steps in _quantized_run(100, 100, seconds=60):
    estimator.add(t, steps)
  steady = estimator.rate(60)
  assert estimator.rate(61) == pytest.approx(steady, rel=0.05)
  assert estimator.rate(180) < 0.5 * steady
  assert estimator.rate(180) > 0  # Decays, does not drop to zero at once.


def test_progress_lines_show_rate_and_eta_from_the_run_directory(tmp_path, capsys):
  run_dir = str(tmp_path)
  reporter = progress.ProgressReporter(run_dir, max_actor_steps=10_000,
                                       interactive=False, every_seconds=0)
  import time
  now = time.time()
  for i, steps in enumerate([0, 1000, 2000, 3000]):
    with open(os.path.join(run_dir, 'progress.json'), 'w') as f:
      json.dump({'time': now - 30 + 10 * i, 'counts': {'actor_steps': steps}}, f)
    reporter.update()
  last = capsys.readouterr().out.strip().splitlines()[-1]
  assert 'actor steps 3,000/10,000 (30%)' in last
  assert '100 env steps/s' in last and 'ETA 70s' in last
