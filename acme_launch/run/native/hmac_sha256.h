/* HMAC-SHA-256 (RFC 2104 over FIPS 180-4's SHA-256) for the loopback shim's
 * per-run handshake, kept apart from the socket code. Checked against
 * RFC 4231's test vectors (tests/run/test_run_key.py). */
#ifndef ACME_LAUNCH_HMAC_SHA256_H
#define ACME_LAUNCH_HMAC_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define ACME_SHA256_SIZE 32

/* `out` (32 bytes) = HMAC-SHA-256(key, message). */
void acme_launch_hmac_sha256(const uint8_t *key, size_t key_len,
                             const uint8_t *message, size_t message_len,
                             uint8_t out[ACME_SHA256_SIZE]);

/* 1 when the `len` bytes at a and b are equal; its time depends on `len`
 * only, not on where they differ. */
int acme_launch_equal(const uint8_t *a, const uint8_t *b, size_t len);

#endif
