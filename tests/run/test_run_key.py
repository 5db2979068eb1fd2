"""The shim's HMAC-SHA-256 (acme_launch/run/native/hmac_sha256.c), which
proves a connection between hosts belongs to the run: RFC 4231's test
vectors, and Python's hmac module on random keys and messages of every
length around SHA-256's 64-byte block.
"""

import ctypes
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acme_launch.run import loopback

# RFC 4231, section 4: (key, data, HMAC-SHA-256); case 5's is truncated to
# 128 bits in the RFC.
_RFC_4231 = [
    (b'\x0b' * 20, b'Hi There',
     'b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7'),
    (b'Jefe', b'what do ya want for nothing?',
     '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843'),
    (b'\xaa' * 20, b'\xdd' * 50,
     '773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe'),
    (bytes(range(1, 26)), b'\xcd' * 50,
     '82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b'),
    (b'\x0c' * 20, b'Test With Truncation', 'a3b6167473100ee06e0c796c2955552b'),
    (b'\xaa' * 131, b'Test Using Larger Than Block-Size Key - Hash Key First',
     '60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54'),
    (b'\xaa' * 131,
     b'This is a test using a larger than block-size key and a larger than '
     b'block-size data. The key needs to be hashed before being used by the '
     b'HMAC algorithm.',
     '9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2'),
]


@pytest.fixture(scope='module')
def shim(tmp_path_factory):
  path = str(tmp_path_factory.mktemp('shim') / 'shim.so')
  loopback.build(path)
  return ctypes.CDLL(path)


def _mac(shim, key: bytes, message: bytes) -> bytes:
  out = ctypes.create_string_buffer(32)
  shim.acme_launch_hmac_sha256(key, ctypes.c_size_t(len(key)), message,
                               ctypes.c_size_t(len(message)), out)
  return out.raw


@pytest.mark.parametrize('case', range(1, len(_RFC_4231) + 1))
def test_the_shims_hmac_sha256_gives_rfc_4231s_vectors(shim, case):
  key, data, expected = _RFC_4231[case - 1]
  assert _mac(shim, key, data).hex()[:len(expected)] == expected


@settings(max_examples=300, deadline=None)
@given(key=st.binary(max_size=200), message=st.binary(max_size=300))
def test_the_shims_hmac_sha256_is_pythons(shim, key, message):
  assert _mac(shim, key, message) == hmac.new(key, message,
                                              hashlib.sha256).digest()


def test_the_shims_compare_tells_equal_from_unequal(shim):
  equal = shim.acme_launch_equal
  a = bytes(32)
  for i in range(32):
    b = bytearray(a)
    b[i] = 1
    assert equal(a, bytes(b), ctypes.c_size_t(32)) == 0
  assert equal(a, a, ctypes.c_size_t(32)) == 1
