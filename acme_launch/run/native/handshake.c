/* The per-run handshake that a connection between two of the run's hosts
 * makes before gRPC sees it (docs/reliability-and-security.md).
 *
 *   hello (client -> server, 60 bytes): "ACL1", the client's clock (8 bytes,
 *     seconds, big-endian), a fresh random nonce (16), and
 *     HMAC(key, "acme-launch hello" | server | time | nonce_c)
 *   reply (server -> client, 48 bytes): a fresh random nonce (16), and
 *     HMAC(key, "acme-launch reply" | server | nonce_c | nonce_s)
 *
 * `server` is the listener's family, address and port as the client dials
 * it: a proof for another node's port, another host or another run (another
 * key) does not check. The server takes a hello only within
 * ACME_WINDOW_SECONDS of its own clock and only once (its nonce is kept for
 * the window): a captured hello replayed later is refused. The reply is
 * fresh by the client's nonce: a stand-in listener without the key cannot
 * make it, nor reuse one. Both MACs are compared in constant time.
 */
#include "handshake.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hmac_sha256.h"

static uint8_t key[ACME_KEY_SIZE];
static int key_loaded;

/* Nonces of hellos taken within the window, with their time. */
#define SEEN_CAPACITY 4096
static struct {
  uint8_t nonce[ACME_NONCE_SIZE];
  int64_t time;
} seen[SEEN_CAPACITY];
static size_t seen_count;
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;

const char *acme_handshake_load_key(const char *path) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno == ELOOP ? "it is a link" : errno == ENOENT
               ? "it does not exist" : "it cannot be read";
  struct stat st;
  const char *why = NULL;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    why = "it is not a regular file";
  else if (st.st_uid != geteuid())
    why = "it belongs to another user";
  else if (st.st_mode & 077)
    why = "others can read or change it (chmod 600)";
  else if (st.st_size != ACME_KEY_SIZE)
    why = "it is not 32 bytes";
  else if (read(fd, key, sizeof key) != (ssize_t)sizeof key)
    why = "it cannot be read";
  close(fd);
  key_loaded = why == NULL;
  return why;
}

int acme_handshake_ready(void) { return key_loaded; }

static int64_t now(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (int64_t)t.tv_sec;
}

static int random_bytes(uint8_t *out, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = getrandom(out + got, len - got, 0);
    if (n < 0 && errno != EINTR) return -1;
    if (n > 0) got += (size_t)n;
  }
  return 0;
}

/* HMAC(key, label | server | a | b) into out. */
static void mac(const char *label, const uint8_t *server, const uint8_t *a,
                size_t a_len, const uint8_t *b, size_t b_len,
                uint8_t out[ACME_SHA256_SIZE]) {
  uint8_t message[32 + ACME_SERVER_ID_SIZE + 2 * 32];
  size_t label_len = strlen(label), used = 0;
  memcpy(message, label, label_len);
  used += label_len;
  memcpy(message + used, server, ACME_SERVER_ID_SIZE);
  used += ACME_SERVER_ID_SIZE;
  memcpy(message + used, a, a_len);
  used += a_len;
  memcpy(message + used, b, b_len);
  used += b_len;
  acme_launch_hmac_sha256(key, sizeof key, message, used, out);
}

int acme_handshake_hello(const uint8_t *server, uint8_t hello[ACME_HELLO_SIZE],
                         uint8_t nonce[ACME_NONCE_SIZE]) {
  if (random_bytes(nonce, ACME_NONCE_SIZE) != 0) return -1;
  int64_t t = now();
  memcpy(hello, "ACL1", 4);
  for (int i = 0; i < 8; ++i) hello[4 + i] = (uint8_t)((uint64_t)t >> (56 - 8 * i));
  memcpy(hello + 12, nonce, ACME_NONCE_SIZE);
  mac("acme-launch hello", server, hello + 4, 8, nonce, ACME_NONCE_SIZE,
      hello + 28);
  return 0;
}

/* Records `nonce` as taken at `t`; 0 when it was seen within the window
 * already, or the table is full of fresh ones. */
static int first_sight(const uint8_t *nonce, int64_t t) {
  int fresh = 1;
  pthread_mutex_lock(&seen_lock);
  size_t kept = 0;
  for (size_t i = 0; i < seen_count; ++i) {
    if (seen[i].time < t - 2 * ACME_WINDOW_SECONDS) continue;  /* Expired. */
    if (memcmp(seen[i].nonce, nonce, ACME_NONCE_SIZE) == 0) fresh = 0;
    seen[kept++] = seen[i];
  }
  seen_count = kept;
  if (fresh && seen_count == SEEN_CAPACITY) fresh = 0;
  if (fresh) {
    memcpy(seen[seen_count].nonce, nonce, ACME_NONCE_SIZE);
    seen[seen_count++].time = t;
  }
  pthread_mutex_unlock(&seen_lock);
  return fresh;
}

const char *acme_handshake_check_hello(const uint8_t *server,
                                       const uint8_t hello[ACME_HELLO_SIZE],
                                       uint8_t reply[ACME_REPLY_SIZE]) {
  if (!key_loaded) return "no run key";
  if (memcmp(hello, "ACL1", 4) != 0) return "not a handshake";
  uint64_t sent = 0;
  for (int i = 0; i < 8; ++i) sent = sent << 8 | hello[4 + i];
  int64_t t = now(), age = t - (int64_t)sent;
  uint8_t expected[ACME_SHA256_SIZE];
  mac("acme-launch hello", server, hello + 4, 8, hello + 12, ACME_NONCE_SIZE,
      expected);
  if (!acme_launch_equal(expected, hello + 28, sizeof expected))
    return "wrong proof";
  if (age > ACME_WINDOW_SECONDS || age < -ACME_WINDOW_SECONDS)
    return "proof out of its time window";
  if (!first_sight(hello + 12, t)) return "proof seen before";
  if (random_bytes(reply, ACME_NONCE_SIZE) != 0) return "no random bytes";
  mac("acme-launch reply", server, hello + 12, ACME_NONCE_SIZE, reply,
      ACME_NONCE_SIZE, reply + ACME_NONCE_SIZE);
  return NULL;
}

int acme_handshake_check_reply(const uint8_t *server,
                               const uint8_t nonce[ACME_NONCE_SIZE],
                               const uint8_t reply[ACME_REPLY_SIZE]) {
  uint8_t expected[ACME_SHA256_SIZE];
  mac("acme-launch reply", server, nonce, ACME_NONCE_SIZE, reply,
      ACME_NONCE_SIZE, expected);
  return key_loaded &&
         acme_launch_equal(expected, reply + ACME_NONCE_SIZE, sizeof expected);
}

void acme_handshake_lock(void) { pthread_mutex_lock(&seen_lock); }
void acme_handshake_unlock(void) { pthread_mutex_unlock(&seen_lock); }
