/* SHA-256 (FIPS 180-4) and HMAC (RFC 2104), small and unoptimised: the shim
 * computes two MACs per connection between hosts. See hmac_sha256.h. */
#include "hmac_sha256.h"

#include <string.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

struct sha256 {
  uint32_t state[8];
  uint64_t length;      /* Bytes hashed so far. */
  uint8_t block[64];
  size_t used;          /* Bytes of `block` filled. */
};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void compress(uint32_t state[8], const uint8_t block[64]) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 |
           (uint32_t)block[4 * i + 2] << 8 | block[4 * i + 3];
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = ROTR(w[i - 15], 7) ^ ROTR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ROTR(w[i - 2], 17) ^ ROTR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t t1 = h + (ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25)) +
                  ((e & f) ^ (~e & g)) + K[i] + w[i];
    uint32_t t2 = (ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22)) +
                  ((a & b) ^ (a & c) ^ (b & c));
    h = g; g = f; f = e; e = d + t1;
    d = c; c = b; b = a; a = t1 + t2;
  }
  state[0] += a; state[1] += b; state[2] += c; state[3] += d;
  state[4] += e; state[5] += f; state[6] += g; state[7] += h;
}

static void sha256_init(struct sha256 *s) {
  static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                      0xa54ff53a, 0x510e527f, 0x9b05688c,
                                      0x1f83d9ab, 0x5be0cd19};
  memcpy(s->state, initial, sizeof initial);
  s->length = 0;
  s->used = 0;
}

static void sha256_update(struct sha256 *s, const uint8_t *data, size_t len) {
  s->length += len;
  while (len > 0) {
    size_t take = 64 - s->used < len ? 64 - s->used : len;
    memcpy(s->block + s->used, data, take);
    s->used += take;
    data += take;
    len -= take;
    if (s->used == 64) {
      compress(s->state, s->block);
      s->used = 0;
    }
  }
}

static void sha256_final(struct sha256 *s, uint8_t out[ACME_SHA256_SIZE]) {
  uint64_t bits = s->length * 8;
  uint8_t pad = 0x80;
  sha256_update(s, &pad, 1);
  pad = 0;
  while (s->used != 56) sha256_update(s, &pad, 1);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = (uint8_t)(bits >> (56 - 8 * i));
  sha256_update(s, length, 8);
  for (int i = 0; i < 8; ++i) {
    out[4 * i] = (uint8_t)(s->state[i] >> 24);
    out[4 * i + 1] = (uint8_t)(s->state[i] >> 16);
    out[4 * i + 2] = (uint8_t)(s->state[i] >> 8);
    out[4 * i + 3] = (uint8_t)s->state[i];
  }
}

void acme_launch_hmac_sha256(const uint8_t *key, size_t key_len,
                             const uint8_t *message, size_t message_len,
                             uint8_t out[ACME_SHA256_SIZE]) {
  uint8_t block[64] = {0}, pad[64], inner[ACME_SHA256_SIZE];
  struct sha256 s;
  if (key_len > 64) {  /* Keys longer than a block are hashed first. */
    sha256_init(&s);
    sha256_update(&s, key, key_len);
    sha256_final(&s, block);
  } else {
    memcpy(block, key, key_len);
  }
  for (int i = 0; i < 64; ++i) pad[i] = block[i] ^ 0x36;
  sha256_init(&s);
  sha256_update(&s, pad, 64);
  sha256_update(&s, message, message_len);
  sha256_final(&s, inner);
  for (int i = 0; i < 64; ++i) pad[i] = block[i] ^ 0x5c;
  sha256_init(&s);
  sha256_update(&s, pad, 64);
  sha256_update(&s, inner, sizeof inner);
  sha256_final(&s, out);
  memset(block, 0, sizeof block);
  memset(pad, 0, sizeof pad);
}

int acme_launch_equal(const uint8_t *a, const uint8_t *b, size_t len) {
  volatile uint8_t differ = 0;
  for (size_t i = 0; i < len; ++i) differ |= a[i] ^ b[i];
  return differ == 0;
}
