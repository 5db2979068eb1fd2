"""An MLflow tracking server on loopback that wants a password, for tests.

`mlflow server` needs the full `mlflow` package (Flask, SQLAlchemy), which
does not fit the launcher's lock; mlflow-skinny has MLflow's client, its
REST protocol (the service protos and their JSON form) and its file store.
This serves that protocol's calls that the launcher's MLflow backend makes
(experiments, runs, batches of metrics, params and tags, search), each
answered by MLflow's own FileStore in `store_dir`, behind HTTP basic
authentication: a call without the right user and password gets 401 and
is counted, so a run tracked here proves it sent its credentials. Artifacts
go where the file store says, a folder on this machine, which the client
writes itself. `/health` answers without credentials, as MLflow's does.
"""

import base64
import http.server
import json
import os
import threading
import urllib.parse
from typing import Callable, Dict, Tuple

_PREFIX = '/api/2.0'


def _handlers(store) -> Dict[str, Callable]:
  """Request message name -> function(request) -> response message."""
  from mlflow import entities
  from mlflow.exceptions import MlflowException
  from mlflow.protos import databricks_pb2
  from mlflow.protos import service_pb2 as s

  def experiment_by_name(r):
    experiment = store.get_experiment_by_name(r.experiment_name)
    if experiment is None:
      raise MlflowException(
          f'no experiment {r.experiment_name!r}',
          databricks_pb2.RESOURCE_DOES_NOT_EXIST)
    return s.GetExperimentByName.Response(experiment=experiment.to_proto())

  def create_run(r):
    run = store.create_run(
        r.experiment_id, r.user_id, r.start_time,
        [entities.RunTag.from_proto(t) for t in r.tags], r.run_name or None)
    return s.CreateRun.Response(run=run.to_proto())

  def update_run(r):
    info = store.update_run_info(
        r.run_id, r.status, r.end_time if r.HasField('end_time') else None,
        r.run_name or None)
    return s.UpdateRun.Response(run_info=info.to_proto())

  def log_batch(r):
    store.log_batch(r.run_id,
                    [entities.Metric.from_proto(m) for m in r.metrics],
                    [entities.Param.from_proto(p) for p in r.params],
                    [entities.RunTag.from_proto(t) for t in r.tags])
    return s.LogBatch.Response()

  def search_runs(r):
    runs = store.search_runs(list(r.experiment_ids), r.filter,
                             r.run_view_type or 1, r.max_results or 1000,
                             list(r.order_by), r.page_token or None)
    return s.SearchRuns.Response(runs=[run.to_proto() for run in runs],
                                 next_page_token=runs.token or '')

  return {
      'GetExperimentByName': experiment_by_name,
      'CreateExperiment': lambda r: s.CreateExperiment.Response(
          experiment_id=store.create_experiment(
              r.name, r.artifact_location or None,
              [entities.ExperimentTag.from_proto(t) for t in r.tags])),
      'GetExperiment': lambda r: s.GetExperiment.Response(
          experiment=store.get_experiment(r.experiment_id).to_proto()),
      'CreateRun': create_run,
      'GetRun': lambda r: s.GetRun.Response(
          run=store.get_run(r.run_id).to_proto()),
      'UpdateRun': update_run,
      'LogBatch': log_batch,
      'SearchRuns': search_runs,
      'SetTag': lambda r: (store.set_tag(r.run_id, entities.RunTag(r.key, r.value)),
                           s.SetTag.Response())[1],
  }


def _routes() -> Dict[Tuple[str, str], type]:
  """(path, HTTP method) -> request message class, from MLflow's protos."""
  from mlflow.protos import service_pb2
  from mlflow.utils import rest_utils
  return {(path, method): request for request, (path, method) in
          rest_utils.extract_api_info_for_service(
              service_pb2.MlflowService, _PREFIX).items()}


class MlflowServer:
  """Serves on 127.0.0.1 (a free port) until stop(); see the module
  docstring. `uri` has the credentials in it; `refused` counts the calls
  that came without them; `calls` names the calls served."""

  def __init__(self, store_dir: str, user: str, password: str):
    os.environ.setdefault('MLFLOW_ALLOW_FILE_STORE', 'true')  # MLflow 3.
    from mlflow.store.tracking import file_store
    self.store = file_store.FileStore(store_dir)
    self.refused = 0
    self.calls = []
    expected = 'Basic ' + base64.b64encode(f'{user}:{password}'.encode()).decode()
    handlers, routes, server = _handlers(self.store), _routes(), self

    class Handler(http.server.BaseHTTPRequestHandler):

      def log_message(self, *args):
        pass

      def _answer(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

      def _serve(self, method: str) -> None:
        from google.protobuf import json_format
        from mlflow.exceptions import MlflowException
        url = urllib.parse.urlsplit(self.path)
        if url.path == '/health':
          return self._answer(200, '"OK"')
        if self.headers.get('Authorization') != expected:
          server.refused += 1
          return self._answer(401, '{"error_code": "UNAUTHENTICATED"}')
        request_class = routes.get((url.path, method))
        handler = request_class and handlers.get(request_class.__name__)
        if handler is None:
          return self._answer(404, json.dumps(
              {'error_code': 'ENDPOINT_NOT_FOUND', 'message': url.path}))
        if method == 'GET':
          fields = urllib.parse.parse_qs(url.query)
          body = {k: v if len(v) > 1 else v[0] for k, v in fields.items()}
        else:
          length = int(self.headers.get('Content-Length') or 0)
          body = json.loads(self.rfile.read(length) or b'{}')
        request = json_format.ParseDict(body, request_class(),
                                        ignore_unknown_fields=True)
        server.calls.append(request_class.__name__)
        try:
          response = handler(request)
        except MlflowException as e:
          return self._answer(e.get_http_status_code(), e.serialize_as_json())
        self._answer(200, json_format.MessageToJson(
            response, preserving_proto_field_name=True))

      def do_GET(self):
        self._serve('GET')

      def do_POST(self):
        self._serve('POST')

      def do_PATCH(self):
        self._serve('PATCH')

    self._http = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    self._http.daemon_threads = True
    self.port = self._http.server_address[1]
    self.uri = f'http://{user}:{password}@127.0.0.1:{self.port}'
    self._thread = threading.Thread(target=self._http.serve_forever,
                                    daemon=True)
    self._thread.start()

  def stop(self) -> None:
    self._http.shutdown()
    self._http.server_close()
