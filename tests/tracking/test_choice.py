"""--tracking, --tracking_uri checked before launch: one line each."""

import socket

import pytest

from acme_launch import errors
from acme_launch import tracking


def test_names_beyond_the_files_always_written_in_order():
  assert tracking.parse_backends(['tensorboard', 'mlflow', 'WandB', 'mlflow']
                                 ) == ('mlflow', 'wandb')
  assert tracking.parse_backends(['csv', '']) == ()


def test_unknown_backend_is_one_line_naming_the_choices():
  with pytest.raises(errors.LaunchError) as e:
    tracking.parse_backends(['wandb', 'neptune'])
  message = str(e.value)
  assert "'neptune'" in message and 'mlflow' in message
  assert '\n' not in message


def test_tracking_uri_needs_mlflow():
  with pytest.raises(errors.LaunchError, match='--tracking=mlflow'):
    tracking.check_choice(['wandb'], 'http://127.0.0.1:5000', '')


def test_resume_keeps_saved_backends_and_store_over_the_environment():
  saved = {'backends': ['mlflow'], 'project': 'mine',
           'mlflow': {'run_id': 'abc', 'tracking_uri': ''}}
  choice = tracking.check_choice(
      [], '', '', saved=saved,
      environ={'MLFLOW_TRACKING_URI': 'file:/elsewhere'})
  assert choice == tracking.Choice(('mlflow',), 'mine', '')
  fresh = tracking.check_choice(
      ['mlflow'], '', '', environ={'MLFLOW_TRACKING_URI': 'file:/elsewhere'})
  assert fresh.mlflow_uri == 'file:/elsewhere'
  assert fresh.project == tracking.DEFAULT_PROJECT


def test_unreachable_tracking_server_is_one_line():
  with socket.socket() as s:  # A loopback port nobody listens on.
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
  with pytest.raises(errors.LaunchError) as e:
    tracking.probe_mlflow(f'http://127.0.0.1:{port}')
  assert 'does not answer' in str(e.value) and '\n' not in str(e.value)


def test_file_store_uris_are_not_probed(tmp_path):
  tracking.probe_mlflow(f'file:{tmp_path}/mlruns')
  tracking.probe_mlflow(str(tmp_path / 'mlruns'))


def test_a_comma_separated_string_as_the_python_api_passes_it():
  assert tracking.parse_backends('wandb, mlflow') == ('wandb', 'mlflow')
  choice = tracking.check_choice('mlflow', '', '', environ={})
  assert choice.backends == ('mlflow',) and choice.mlflow_uri == ''


def test_an_unreadable_state_file_counts_as_none(tmp_path):
  assert tracking.read_state(str(tmp_path / 'missing')) == {}
  (tmp_path / 'tracking.json').write_text('[1, 2')
  assert tracking.read_state(str(tmp_path)) == {}
  (tmp_path / 'tracking.json').write_text('[1, 2]')
  assert tracking.read_state(str(tmp_path)) == {}


_WITH_PASSWORD = 'http://alice:s3cret@127.0.0.1:5000'
_MASKED = 'http://alice:***@127.0.0.1:5000'


def test_a_resumed_run_asks_again_for_a_uri_whose_credentials_were_masked():
  # Saved masked: the flag, or the environment masking to the same, gives
  # it back; nothing else does.
  assert tracking.resumed_uri(_WITH_PASSWORD, '', _MASKED) == _WITH_PASSWORD
  assert tracking.resumed_uri('', _WITH_PASSWORD, _MASKED) == _WITH_PASSWORD
  for environ_uri in ('', 'http://alice:s3cret@10.0.0.9:5000'):
    with pytest.raises(errors.LaunchError) as e:
      tracking.resumed_uri('', environ_uri, _MASKED)
    message = str(e.value)
    assert _MASKED in message and 's3cret' not in message
    assert '--tracking_uri or MLFLOW_TRACKING_URI' in message
    assert '\n' not in message
  # Saved whole (no credentials): as before, the saved store.
  assert tracking.resumed_uri('', 'file:/elsewhere', 'http://h:5000') == (
      'http://h:5000')
  saved = {'backends': ['mlflow'], 'mlflow': {'run_id': 'r',
                                              'tracking_uri': _MASKED}}
  with pytest.raises(errors.LaunchError, match='credentials are never saved'):
    tracking.check_choice([], '', '', saved=saved, environ={})


def test_an_unreachable_server_with_a_password_is_named_masked():
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
  with pytest.raises(errors.LaunchError) as e:
    tracking.probe_mlflow(f'http://alice:s3cret@127.0.0.1:{port}')
  assert f'http://alice:***@127.0.0.1:{port} does not answer' in str(e.value)
  assert 's3cret' not in str(e.value)
