/* acme-launch loopback shim: an LD_PRELOAD library that keeps listeners local
 * and answers only the run's own user.
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
 * Loopback is no boundary between the users of one host: any process on it
 * can connect there, and Courier runs what a request names. So the library
 * also wraps accept() and accept4(): a connection is handed to the server
 * only when the peer's socket belongs to this process's effective user.
 * For TCP the peer is looked up by its address and port in /proc/net/tcp
 * (and /proc/net/tcp6: a dual-stack listener sees an IPv4 client as
 * ::ffff:127.0.0.1, and a dual-stack client's socket is listed there), and
 * must be a live socket (inode not 0: an orphan, already closed by its
 * process, reads as uid 0 on some kernels) whose uid is ours; for a Unix
 * socket, SO_PEERCRED's uid must be ours. Anything else, a peer on another
 * host included, is closed at once, before the server sees it: the client
 * reads nothing, and the server keeps listening. On a non-blocking listener
 * (gRPC's) the call goes on to the next pending connection, and returns as
 * on an empty queue (EAGAIN) when none is left; on a blocking one it
 * returns -1 with ECONNABORTED, which servers take as a client that gave up.
 *
 * On a cluster (--launch_type=ray) each node's listeners must be reachable
 * from the other hosts, and only there: ACME_LAUNCH_BIND_ADDRESS=A.B.C.D
 * (the host's cluster address, IPv4) replaces 127.0.0.1 above, so 0.0.0.0
 * -> A.B.C.D and a dual-stack [::] -> ::ffff:A.B.C.D; an IPv6-only [::]
 * still becomes [::1]. A value that is not an IPv4 address makes every
 * wildcard bind fail (EADDRNOTAVAIL) rather than listen on all interfaces.
 * With it set, accept is not screened: peers on other hosts cannot be
 * looked up here, and the cluster network must be private to the user.
 *
 * ACME_LAUNCH_LOOPBACK_DEBUG=1 prints each rewrite and each refusal to
 * stderr.
 * Build: cc -shared -fPIC -O2 -o acme_launch_loopback.so loopback_bind.c -ldl
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*accept_fn)(int, struct sockaddr *, socklen_t *);
typedef int (*accept4_fn)(int, struct sockaddr *, socklen_t *, int);

static bind_fn real_bind;
static accept_fn real_accept;
static accept4_fn real_accept4;
static int debug;
static in_addr_t target_v4;  /* Network order: loopback or the bind address. */
static int target_invalid;   /* ACME_LAUNCH_BIND_ADDRESS set but unreadable. */
static uid_t run_uid;        /* The only user whose connections are accepted. */

/* Found by the Python side to tell that the shim is loaded in a process. */
int acme_launch_loopback_active = 1;
/* 1 when accept() hands over only the run's user's connections (local runs). */
int acme_launch_peer_check = 1;

__attribute__((constructor)) static void init(void) {
  real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
  real_accept = (accept_fn)dlsym(RTLD_NEXT, "accept");
  real_accept4 = (accept4_fn)dlsym(RTLD_NEXT, "accept4");
  run_uid = geteuid();
  const char *value = getenv("ACME_LAUNCH_LOOPBACK_DEBUG");
  debug = value != NULL && value[0] == '1';
  target_v4 = htonl(INADDR_LOOPBACK);
  const char *address = getenv("ACME_LAUNCH_BIND_ADDRESS");
  if (address != NULL && address[0] != '\0') {
    acme_launch_peer_check = 0;  /* Peers on other hosts: not in /proc here. */
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

/* An address as /proc/net/tcp{,6} prints it: the raw 32-bit words in hex. */
static void proc_v4(char *out, size_t size, const struct in_addr *a) {
  snprintf(out, size, "%08X", (unsigned)a->s_addr);
}

static void proc_v6(char *out, size_t size, const struct in6_addr *a) {
  snprintf(out, size, "%08X%08X%08X%08X", (unsigned)a->s6_addr32[0],
           (unsigned)a->s6_addr32[1], (unsigned)a->s6_addr32[2],
           (unsigned)a->s6_addr32[3]);
}

/* `v4` as an IPv4-mapped IPv6 address, ::ffff:a.b.c.d. */
static void mapped(struct in6_addr *out, const struct in_addr *v4) {
  memset(out, 0, sizeof *out);
  out->s6_addr[10] = 0xff;
  out->s6_addr[11] = 0xff;
  out->s6_addr32[3] = v4->s_addr;
}

/* 1 when `table` lists a live socket at (peer, peer_port) connected to
 * (local, local_port) whose uid is run_uid; its uid in *seen otherwise. */
static int listed_as_ours(const char *table, const char *peer,
                          unsigned peer_port, const char *local,
                          unsigned local_port, long *seen) {
  FILE *f = fopen(table, "re");
  if (f == NULL) return 0;
  char line[512];
  int ours = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    char laddr[33], raddr[33];
    unsigned lport, rport, uid;
    unsigned long inode;
    if (sscanf(line, " %*u: %32[0-9A-Fa-f]:%x %32[0-9A-Fa-f]:%x %*x %*s %*s "
               "%*s %u %*d %lu", laddr, &lport, raddr, &rport, &uid,
               &inode) != 6)
      continue;  /* The header. */
    if (lport != peer_port || rport != local_port ||
        strcasecmp(laddr, peer) != 0 || strcasecmp(raddr, local) != 0)
      continue;
    *seen = inode != 0 ? (long)uid : -1;  /* -1: closed by its process. */
    ours = inode != 0 && (uid_t)uid == run_uid;
    break;
  }
  fclose(f);
  return ours;
}

/* 1 when the TCP peer of an accepted connection is a socket of run_uid on
 * this host (this network namespace). */
static int tcp_peer_is_ours(const struct sockaddr_storage *local,
                            const struct sockaddr_storage *peer, long *seen) {
  struct in6_addr l6, p6;
  unsigned lport, pport;
  if (local->ss_family == AF_INET) {
    const struct sockaddr_in *l = (const struct sockaddr_in *)local;
    const struct sockaddr_in *p = (const struct sockaddr_in *)peer;
    mapped(&l6, &l->sin_addr);
    mapped(&p6, &p->sin_addr);
    lport = ntohs(l->sin_port);
    pport = ntohs(p->sin_port);
  } else {
    const struct sockaddr_in6 *l = (const struct sockaddr_in6 *)local;
    const struct sockaddr_in6 *p = (const struct sockaddr_in6 *)peer;
    l6 = l->sin6_addr;
    p6 = p->sin6_addr;
    lport = ntohs(l->sin6_port);
    pport = ntohs(p->sin6_port);
  }
  char la[33], pa[33];
  /* An IPv6 client, or a dual-stack one (listed with mapped addresses). */
  proc_v6(la, sizeof la, &l6);
  proc_v6(pa, sizeof pa, &p6);
  if (listed_as_ours("/proc/net/tcp6", pa, pport, la, lport, seen)) return 1;
  if (!IN6_IS_ADDR_V4MAPPED(&p6) || !IN6_IS_ADDR_V4MAPPED(&l6)) return 0;
  /* An IPv4 client (of a dual-stack listener, whose side reads ::ffff:..). */
  proc_v4(la, sizeof la, (const struct in_addr *)&l6.s6_addr32[3]);
  proc_v4(pa, sizeof pa, (const struct in_addr *)&p6.s6_addr32[3]);
  return listed_as_ours("/proc/net/tcp", pa, pport, la, lport, seen);
}

/* 1 when connection `fd` comes from a socket of the run's user. */
static int peer_is_ours(int fd, long *seen) {
  struct sockaddr_storage local, peer;
  socklen_t local_len = sizeof local, peer_len = sizeof peer;
  memset(&local, 0, sizeof local);
  memset(&peer, 0, sizeof peer);
  if (getsockname(fd, (struct sockaddr *)&local, &local_len) != 0) return 0;
  if (local.ss_family == AF_UNIX) {
    struct ucred cred;
    socklen_t size = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &size) != 0) return 0;
    *seen = cred.uid;
    return cred.uid == run_uid;
  }
  if (local.ss_family != AF_INET && local.ss_family != AF_INET6)
    return 1;  /* Not a network or Unix socket: nothing to screen. */
  if (getpeername(fd, (struct sockaddr *)&peer, &peer_len) != 0 ||
      peer.ss_family != local.ss_family)
    return 0;  /* Reset by the peer already: nobody to answer. */
  return tcp_peer_is_ours(&local, &peer, seen);
}

/* Refuses connection `fd` of `listener`: closes it, says so when asked. */
static void refuse(int listener, int fd, long seen) {
  if (debug)
    fprintf(stderr, "acme-launch loopback: fd %d refused a connection from "
            "uid %ld (not uid %ld)\n", listener, seen, (long)run_uid);
  close(fd);
}

/* At most this many refused connections are skipped in one call. */
#define MAX_SKIPPED 64

/* accept4() (accept() when `use_accept`) handing over only connections of
 * the run's user. A refused one is closed; on a non-blocking listener (as
 * gRPC's) the next pending connection is tried, so one queued behind it is
 * not left waiting for the next readiness edge, and the call ends as an
 * empty queue does (EAGAIN); on a blocking one, -1 with ECONNABORTED at
 * once, rather than blocking a caller that polled first. */
static int screened_accept(int listener, struct sockaddr *addr,
                           socklen_t *len, int flags, int use_accept) {
  socklen_t given = len != NULL ? *len : 0;
  for (int skipped = 0;; ++skipped) {
    if (len != NULL) *len = given;
    int saved = errno;
    int fd = use_accept ? real_accept(listener, addr, len)
                        : real_accept4(listener, addr, len, flags);
    if (fd < 0 || !acme_launch_peer_check) return fd;
    long seen = -1;
    if (peer_is_ours(fd, &seen)) {
      errno = saved;
      return fd;
    }
    refuse(listener, fd, seen);
    int status = fcntl(listener, F_GETFL);
    if (status < 0 || !(status & O_NONBLOCK) || skipped + 1 >= MAX_SKIPPED) {
      errno = ECONNABORTED;
      return -1;
    }
  }
}

int accept(int fd, struct sockaddr *addr, socklen_t *len) {
  if (real_accept == NULL) {
    real_accept = (accept_fn)dlsym(RTLD_NEXT, "accept");
    if (real_accept == NULL) {
      errno = ENOSYS;
      return -1;
    }
  }
  return screened_accept(fd, addr, len, 0, 1);
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
  if (real_accept4 == NULL) {
    real_accept4 = (accept4_fn)dlsym(RTLD_NEXT, "accept4");
    if (real_accept4 == NULL) {
      errno = ENOSYS;
      return -1;
    }
  }
  return screened_accept(fd, addr, len, flags, 0);
}
