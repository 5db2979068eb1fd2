/* The per-run handshake's messages, built and checked apart from the socket
 * code that sends them (loopback_bind.c). See handshake.c. */
#ifndef ACME_LAUNCH_HANDSHAKE_H
#define ACME_LAUNCH_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#define ACME_KEY_SIZE 32      /* The run key file: exactly these raw bytes. */
#define ACME_NONCE_SIZE 16
#define ACME_HELLO_SIZE 60    /* Client -> server: magic, time, nonce, MAC. */
#define ACME_REPLY_SIZE 48    /* Server -> client: nonce, MAC. */
#define ACME_SERVER_ID_SIZE 19 /* Family, address (16), port (2). */
#define ACME_WINDOW_SECONDS 15 /* A hello's time may be this far off. */

/* Reads the run's key from `path`; NULL when it is loaded, else why not
 * (a static string). Only a regular file of this user, readable by no one
 * else, of exactly ACME_KEY_SIZE bytes, opened without following a link. */
const char *acme_handshake_load_key(const char *path);

/* 1 once a key is loaded. */
int acme_handshake_ready(void);

/* The client's hello to the server `server` (ACME_SERVER_ID_SIZE bytes:
 * the address and port it dials); its fresh nonce in `nonce`. 0 when made,
 * -1 when no random bytes could be had. */
int acme_handshake_hello(const uint8_t *server, uint8_t hello[ACME_HELLO_SIZE],
                         uint8_t nonce[ACME_NONCE_SIZE]);

/* The server's check of `hello` on its listener `server`: NULL when it is
 * the run's, fresh and never seen, `reply` then made; else why not. */
const char *acme_handshake_check_hello(const uint8_t *server,
                                       const uint8_t hello[ACME_HELLO_SIZE],
                                       uint8_t reply[ACME_REPLY_SIZE]);

/* The client's check of the server's `reply` to its hello of `nonce`: 1
 * when it proves the run's key, for this server and this hello. */
int acme_handshake_check_reply(const uint8_t *server,
                               const uint8_t nonce[ACME_NONCE_SIZE],
                               const uint8_t reply[ACME_REPLY_SIZE]);

/* Around fork(): the seen-nonce table's lock (pthread_atfork's three). */
void acme_handshake_lock(void);
void acme_handshake_unlock(void);

#endif
