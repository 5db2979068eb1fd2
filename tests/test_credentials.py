"""The credentials rule: what nodes never inherit, and what is masked."""

import pytest

from acme_launch import credentials


@pytest.mark.parametrize('text,masked', [
    ('http://alice:s3cret@127.0.0.1:5000',
     'http://alice:***@127.0.0.1:5000'),
    ('https://alice:p@ss:w@mlflow.example/path?x=1',  # '@' in it, to the last.
     'https://alice:***@mlflow.example/path?x=1'),
    ('https://ghp_abc123@mlflow.example', 'https://***@mlflow.example'),
    ('postgresql://u:pw@db:5432/mlflow', 'postgresql://u:***@db:5432/mlflow'),
    ('http://h:5000/x?access_token=abc&run=1&X-Amz-Signature=ff',
     'http://h:5000/x?access_token=***&run=1&X-Amz-Signature=***'),
    ('--tracking_uri=http://a:b@h:1', '--tracking_uri=http://a:***@h:1'),
    ('warning: API request to http://a:b@h:1/api/2.0/x failed',
     'warning: API request to http://a:***@h:1/api/2.0/x failed'),
])
def test_passwords_tokens_and_credential_query_values_are_masked(text, masked):
  assert credentials.mask(text) == masked
  assert credentials.has_credentials(text)
  assert credentials.mask(masked) == masked  # Masking twice changes nothing.
  assert credentials.is_masked(masked) and not credentials.is_masked(text)


@pytest.mark.parametrize('text', [
    'http://127.0.0.1:5000', 'file:/runs/a/mlruns', '/runs/a/mlruns',
    'sqlite:///mlflow.db', 'databricks://profile', 'http://h/x?run=1&sslmode=on',
    '--config.num_actors=2', 'user@example.com',
    "--sweep=ppo.num_passes=1,2;ppo.max_key=3"])  # Query-like, not in a URL.
def test_text_without_credentials_is_left_as_it_is(text):
  assert credentials.mask(text) == text
  assert not credentials.has_credentials(text)
  assert not credentials.is_masked(text)


def test_without_credentials_keeps_the_address_only():
  assert credentials.without_credentials(
      'http://alice:s3cret@127.0.0.1:5000/mlflow?token=x') == (
          'http://127.0.0.1:5000/mlflow')
  assert credentials.without_credentials('https://[::1]:5000') == (
      'https://[::1]:5000')


@pytest.mark.parametrize('name', [
    'WANDB_API_KEY', 'WANDB_MODE', 'MLFLOW_TRACKING_URI',
    'MLFLOW_TRACKING_PASSWORD', 'AWS_SECRET_ACCESS_KEY', 'AWS_PROFILE',
    'AZURE_CLIENT_SECRET', 'GOOGLE_APPLICATION_CREDENTIALS',
    'DATABRICKS_TOKEN', 'HF_TOKEN', 'GITHUB_TOKEN', 'PGPASSWORD',
    'MY_SERVICE_SECRET', 'OPENAI_API_KEY', 'SSH_AUTH_SOCK', 'hf_token'])
def test_credential_names_are_withheld_from_nodes(name):
  assert credentials.is_withheld(name, 'x')


@pytest.mark.parametrize('name', [
    'PATH', 'HOME', 'PYTHONPATH', 'LD_PRELOAD', 'CUDA_VISIBLE_DEVICES',
    'JAX_PLATFORMS', 'XLA_FLAGS', 'TF_CPP_MIN_LOG_LEVEL', 'OMP_NUM_THREADS',
    'ACME_LAUNCH_NODE', 'ACME_LAUNCH_PASS_ENV', 'MUJOCO_GL',
    'TOKENIZERS_PARALLELISM', 'KEYBOARD_LAYOUT', 'RAY_AUTH_MODE'])
def test_what_nodes_need_is_kept(name):
  assert not credentials.is_withheld(name, 'x')


def test_a_value_holding_a_url_password_is_withheld_whatever_its_name():
  assert credentials.is_withheld('HTTPS_PROXY', 'http://bob:hunter2@proxy:3128')
  assert not credentials.is_withheld('HTTPS_PROXY', 'http://proxy:3128')


def test_node_environ_drops_credentials_except_those_passed():
  environ = {'PATH': '/bin', 'WANDB_API_KEY': 'k', 'HF_TOKEN': 't',
             'AWS_ACCESS_KEY_ID': 'a', 'AWS_SECRET_ACCESS_KEY': 's',
             'PROXY': 'http://u:p@h:1'}
  assert credentials.node_environ(environ) == {'PATH': '/bin'}
  assert credentials.node_environ(environ, ('HF_TOKEN', 'AWS_*')) == {
      'PATH': '/bin', 'HF_TOKEN': 't', 'AWS_ACCESS_KEY_ID': 'a',
      'AWS_SECRET_ACCESS_KEY': 's'}
