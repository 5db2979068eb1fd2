"""scripts/kubernetes/raycluster.yaml stays true to the image it runs."""

import json
import os
import re

import yaml

from tests.conftest import REPO_ROOT

MANIFEST = os.path.join(REPO_ROOT, 'scripts', 'kubernetes', 'raycluster.yaml')


def _locked(package: str) -> str:
  with open(os.path.join(REPO_ROOT, 'requirements.txt')) as f:
    return re.search(rf'^{package}==(\S+)', f.read(), re.M).group(1)


def _documents():
  with open(MANIFEST) as f:
    return {doc['kind']: doc for doc in yaml.safe_load_all(f)}


def test_the_manifest_names_the_locked_ray_and_the_documented_resources():
  spec = _documents()['RayCluster']['spec']
  assert spec['rayVersion'] == _locked('ray')
  groups = [spec['headGroupSpec'], *spec['workerGroupSpecs']]
  # KubeRay passes `resources` to `ray start --resources` as a quoted JSON.
  resources = [json.loads(json.loads(g['rayStartParams']['resources']))
               for g in groups]
  assert resources == [{'gpu_host': 100}, {'cpu_host': 100}]
  for group in groups:
    container, = group['template']['spec']['containers']
    env = {e['name']: e['value'] for e in container['env']}
    assert env['RAY_AUTH_MODE'] == 'token'
    mounts = {m['mountPath'] for m in container['volumeMounts']}
    assert os.path.dirname(env['RAY_AUTH_TOKEN_PATH']) in mounts


def test_only_the_clusters_own_pods_reach_its_pods():
  docs = _documents()
  assert set(docs) == {'RayCluster', 'NetworkPolicy'}
  own = {'ray.io/cluster': docs['RayCluster']['metadata']['name']}
  policy = docs['NetworkPolicy']
  assert policy['apiVersion'] == 'networking.k8s.io/v1'
  spec = policy['spec']
  # Every pod of the RayCluster (KubeRay's label), inbound only.
  assert spec['podSelector'] == {'matchLabels': own}
  assert spec['policyTypes'] == ['Ingress']
  # One rule: from the cluster's own pods, on any port; nothing else (no
  # namespaceSelector or ipBlock that would let other pods or hosts in).
  rule, = spec['ingress']
  assert set(rule) == {'from'}
  peer, = rule['from']
  assert peer == {'podSelector': {'matchLabels': own}}
