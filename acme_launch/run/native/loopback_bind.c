/* acme-launch loopback shim: an LD_PRELOAD library that keeps listeners local.
 *
 * Courier (Launchpad) and Reverb servers bind the wildcard [::]:PORT in C++
 * and take no host. Loaded with LD_PRELOAD into every node process, this
 * library wraps glibc's bind() and rewrites a wildcard address to loopback
 * before calling the real bind():
 *
 *   AF_INET   0.0.0.0                    -> 127.0.0.1
 *   AF_INET6  ::ffff:0.0.0.0             -> ::ffff:127.0.0.1
 *   AF_INET6  ::  on an IPv6-only socket -> ::1
 *   AF_INET6  ::  on a dual-stack socket -> ::ffff:127.0.0.1 (IPv4 loopback)
 *
 * A dual-stack [::] socket answers both IPv4 and IPv6, but one socket holds
 * one address: it becomes the IPv4 loopback, the address `localhost`
 * resolves to first or alone on Linux hosts, where the nodes' clients dial.
 * A client whose resolver puts ::1 first gets "connection refused" there at
 * once and gRPC moves on to 127.0.0.1 (see acme_launch/run/loopback.py).
 * Only the address changes: the port, the family, every other socket and
 * every outbound connection stay as they were. Specific addresses pass
 * through untouched.
 *
 * On a cluster (--launch_type=ray) each node's listeners must be reachable
 * from the other hosts, and only there: ACME_LAUNCH_BIND_ADDRESS=A.B.C.D
 * (the host's cluster address, IPv4) replaces 127.0.0.1 above, so 0.0.0.0
 * -> A.B.C.D and a dual-stack [::] -> ::ffff:A.B.C.D; an IPv6-only [::]
 * still becomes [::1]. A value that is not an IPv4 address makes every
 * wildcard bind fail (EADDRNOTAVAIL) rather than listen on all interfaces.
 *
 * ACME_LAUNCH_LOOPBACK_DEBUG=1 prints each rewrite to stderr.
 * Build: cc -shared -fPIC -O2 -o acme_launch_loopback.so loopback_bind.c -ldl
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

static bind_fn real_bind;
static int debug;
static in_addr_t target_v4;  /* Network order: loopback or the bind address. */
static int target_invalid;   /* ACME_LAUNCH_BIND_ADDRESS set but unreadable. */

/* Found by the Python side to tell that the shim is loaded in a process. */
int acme_launch_loopback_active = 1;

__attribute__((constructor)) static void init(void) {
  real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
  const char *value = getenv("ACME_LAUNCH_LOOPBACK_DEBUG");
  debug = value != NULL && value[0] == '1';
  target_v4 = htonl(INADDR_LOOPBACK);
  const char *address = getenv("ACME_LAUNCH_BIND_ADDRESS");
  if (address != NULL && address[0] != '\0') {
    struct in_addr parsed;
    if (inet_pton(AF_INET, address, &parsed) == 1)
      target_v4 = parsed.s_addr;
    else
      target_invalid = 1;
  }
}

static void report(int fd, const struct sockaddr *before,
                   const struct sockaddr *after) {
  char from[INET6_ADDRSTRLEN] = "?", to[INET6_ADDRSTRLEN] = "?";
  unsigned port;
  if (before->sa_family == AF_INET) {
    inet_ntop(AF_INET, &((const struct sockaddr_in *)before)->sin_addr, from, sizeof from);
    inet_ntop(AF_INET, &((const struct sockaddr_in *)after)->sin_addr, to, sizeof to);
    port = ntohs(((const struct sockaddr_in *)before)->sin_port);
  } else {
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)before)->sin6_addr, from, sizeof from);
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)after)->sin6_addr, to, sizeof to);
    port = ntohs(((const struct sockaddr_in6 *)before)->sin6_port);
  }
  fprintf(stderr, "acme-launch loopback: fd %d bind %s port %u -> %s\n",
          fd, from, port, to);
}

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
  if (real_bind == NULL) {
    real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    if (real_bind == NULL) {
      errno = ENOSYS;
      return -1;
    }
  }
  if (addr == NULL) return real_bind(fd, addr, len);

  if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
    struct sockaddr_in local;
    memcpy(&local, addr, sizeof local);
    if (local.sin_addr.s_addr != htonl(INADDR_ANY)) return real_bind(fd, addr, len);
    if (target_invalid) { errno = EADDRNOTAVAIL; return -1; }
    local.sin_addr.s_addr = target_v4;
    if (debug) report(fd, addr, (struct sockaddr *)&local);
    return real_bind(fd, (struct sockaddr *)&local, sizeof local);
  }

  if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 local;
    memcpy(&local, addr, sizeof local);
    int mapped_any = IN6_IS_ADDR_V4MAPPED(&local.sin6_addr) &&
                     local.sin6_addr.s6_addr32[3] == htonl(INADDR_ANY);
    if (!IN6_IS_ADDR_UNSPECIFIED(&local.sin6_addr) && !mapped_any)
      return real_bind(fd, addr, len);
    if (target_invalid) { errno = EADDRNOTAVAIL; return -1; }
    int v6only = 0;
    socklen_t size = sizeof v6only;
    if (!mapped_any &&
        getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &size) == 0 &&
        v6only) {
      local.sin6_addr = in6addr_loopback;                 /* [::1] */
    } else {
      memset(&local.sin6_addr, 0, sizeof local.sin6_addr); /* ::ffff:<target> */
      local.sin6_addr.s6_addr[10] = 0xff;
      local.sin6_addr.s6_addr[11] = 0xff;
      local.sin6_addr.s6_addr32[3] = target_v4;
    }
    local.sin6_scope_id = 0;
    if (debug) report(fd, addr, (struct sockaddr *)&local);
    return real_bind(fd, (struct sockaddr *)&local, sizeof local);
  }
  return real_bind(fd, addr, len);
}
