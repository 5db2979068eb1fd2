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
 * For TCP the kernel is asked for the socket at the peer's address and port
 * connected to ours (NETLINK_SOCK_DIAG, one hash lookup; an IPv4 client of a
 * dual-stack listener, seen as ::ffff:127.0.0.1, is looked up as IPv4,
 * which finds dual-stack clients too), or where that is not available, it
 * is looked for in /proc/net/tcp and /proc/net/tcp6 (which walk the whole
 * connection table: 7 to 10 ms a file on a host with 262,144 hash
 * buckets). It must be that very connection (not a listener the lookup
 * falls back on), live (inode not 0: an orphan, already closed by its
 * process, reads as uid 0 on some kernels) and of our uid; for a Unix
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
 * still becomes [::1]. An IPv6 address there (ACME_LAUNCH_BIND_ADDRESS=
 * fd00::5) takes every IPv6 wildcard bind, dual-stack or not ([::] ->
 * [fd00::5]), and refuses IPv4 ones (0.0.0.0, ::ffff:0.0.0.0:
 * EADDRNOTAVAIL): the host has no IPv4 cluster address to put them on. A
 * value that is no address makes every wildcard bind fail (EADDRNOTAVAIL)
 * rather than listen on all interfaces.
 * The users of another host cannot be looked up from here, so there accept
 * screens by host: ACME_LAUNCH_HOSTS_FILE names a file of the IPv4 or IPv6
 * addresses of the run's hosts, one per line, which the launcher rewrites
 * (by rename) when a node moves to another host. A peer at this host's own
 * address or on loopback is screened by its user as above; a peer on
 * another host is accepted only when its address is in the file, read
 * anew at each such connection (a few microseconds; connections are few
 * and long-lived). A file that cannot be read admits no other host.
 * Without ACME_LAUNCH_HOSTS_FILE accept is not screened on a cluster
 * address (the launcher always sets it).
 *
 * A listed host is a machine, not a user: any user logged in there would
 * get in. So a run on a cluster also names its key (ACME_LAUNCH_RUN_KEY_FILE:
 * 32 random bytes, this user's, mode 0600; read once at load) and every
 * connection between two of its hosts proves it (handshake.c: the client's
 * hello, a MAC of the time, a fresh nonce and the listener's address and
 * port; the server's reply, a MAC over the client's nonce and its own). On
 * the server, accept() reads the hello of a connection from another listed
 * host only when it has arrived (the listener defers accepting until data
 * comes: TCP_DEFER_ACCEPT, set by listen()), never waiting for it: without
 * a whole, valid, fresh, unseen hello the connection is closed unanswered;
 * with one, the reply is sent and the connection handed to the server. On
 * the client, connect() to a listed host other than this one waits, even
 * for a non-blocking socket (gRPC's), until the connection is made and the
 * server has proved the key, within HANDSHAKE_WAIT_MS, and returns the
 * outcome itself: 0 (gRPC takes a connect that succeeded at once), or -1
 * with ECONNREFUSED for a server without the key, so gRPC never writes a
 * byte to a stand-in. Peers on this host keep the check by user. A key
 * file named but unusable is said in one line on stderr and the process
 * exits at once with status 2 (load_run_key).
 *
 * A local run (no ACME_LAUNCH_BIND_ADDRESS) ignores a key unless it also
 * names its ports: --run_key=all under local_mp sets ACME_LAUNCH_RUN_PORTS
 * (comma-separated) with the key, and then every connection to one of
 * those ports on loopback proves the key as one between hosts does (the
 * server checks the peer's user first, then the hello), so a process of
 * the run's own user without the key is refused too. Other loopback ports
 * (a tracker's local service) keep the check by user alone.
 *
 * ACME_LAUNCH_LOOPBACK_DEBUG=1 prints each rewrite and each refusal to
 * stderr; ACME_LAUNCH_LOOPBACK_LOOKUP=proc looks peers up in /proc only
 * (the tests check both ways).
 * Build: cc -shared -fPIC -O2 -o acme_launch_loopback.so loopback_bind.c \
 *        handshake.c hmac_sha256.c -ldl -pthread
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "handshake.h"

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*accept_fn)(int, struct sockaddr *, socklen_t *);
typedef int (*accept4_fn)(int, struct sockaddr *, socklen_t *, int);
typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*listen_fn)(int, int);

static bind_fn real_bind;
static accept_fn real_accept;
static accept4_fn real_accept4;
static connect_fn real_connect;
static listen_fn real_listen;
static int debug;
static in_addr_t target_v4;  /* Network order: loopback or the bind address. */
static struct in6_addr target_v6; /* The bind address, when it is IPv6. */
static int target_is_v6;     /* Then no IPv4 wildcard bind is taken. */
static int target_invalid;   /* ACME_LAUNCH_BIND_ADDRESS set but unreadable. */
static uid_t run_uid;        /* The only user whose connections are accepted. */
static int use_proc;         /* Look peers up in /proc/net/tcp* only. */
static int diag_found_one;   /* sock_diag has found a socket in this process. */
static const char *hosts_file; /* The run's hosts, on a cluster address. */
/* --run_key=all under local_mp: the run's ports on loopback
 * (ACME_LAUNCH_RUN_PORTS, comma-separated), whose connections prove the key
 * too; any other loopback port (a tracker's local service) is left as is. */
#define MAX_RUN_PORTS 4096
static uint16_t run_ports[MAX_RUN_PORTS];  /* Network order. */
static size_t run_port_count;

/* Found by the Python side to tell that the shim is loaded in a process. */
int acme_launch_loopback_active = 1;
/* How accept() screens: 1, only the run's user's connections (local runs);
 * 2, those and connections from the run's other hosts (a cluster address
 * with ACME_LAUNCH_HOSTS_FILE); 0, not at all. */
int acme_launch_peer_check = 1;
/* 1 when connections between the run's hosts carry the run key's proof
 * (a cluster address with ACME_LAUNCH_RUN_KEY_FILE, read at load). */
int acme_launch_run_key = 0;

/* A named key file that cannot be used: said in one line on stderr (the
 * node's log), the launcher's own words, and the process ends there with
 * exit status 2, before the program runs: a node without its key neither
 * serves nor dials the run's other hosts, and its supervisor sees it fail
 * at once (restarted as any failed node, or the run stops naming it). */
static void load_run_key(void) {
  const char *path = getenv("ACME_LAUNCH_RUN_KEY_FILE");
  if (path == NULL || path[0] == '\0' ||
      (hosts_file == NULL && run_port_count == 0))
    return;  /* Neither a cluster's hosts nor the run's loopback ports. */
  const char *why = acme_handshake_load_key(path);
  if (why != NULL) {
    fprintf(stderr, "acme-launch: error: the run key file %s cannot be "
            "used: %s\n", path, why);
    fflush(stderr);
    _exit(2);
  }
  acme_launch_run_key = 1;
  pthread_atfork(acme_handshake_lock, acme_handshake_unlock,
                 acme_handshake_unlock);
}

/* run_ports from `list` ("PORT,PORT,..."); what is not a port is skipped. */
static void load_run_ports(const char *list) {
  while (*list != '\0' && run_port_count < MAX_RUN_PORTS) {
    char *end;
    unsigned long port = strtoul(list, &end, 10);
    if (end != list && port > 0 && port < 65536)
      run_ports[run_port_count++] = htons((uint16_t)port);
    list = *end != '\0' ? end + 1 : end;
  }
}

/* 1 when `port` (network order) is one of the run's loopback ports. */
static int is_run_port(uint16_t port) {
  for (size_t i = 0; i < run_port_count; ++i)
    if (run_ports[i] == port) return 1;
  return 0;
}

/* The cluster bind address `text`: IPv4 (also written ::ffff:a.b.c.d) in
 * target_v4, IPv6 in target_v6; anything else makes every wildcard bind
 * fail rather than listen on all interfaces. */
static void parse_target(const char *text) {
  struct in_addr v4;
  struct in6_addr v6;
  if (inet_pton(AF_INET, text, &v4) == 1) {
    target_v4 = v4.s_addr;
  } else if (inet_pton(AF_INET6, text, &v6) == 1 && IN6_IS_ADDR_V4MAPPED(&v6)) {
    target_v4 = v6.s6_addr32[3];
  } else if (inet_pton(AF_INET6, text, &v6) == 1 &&
             !IN6_IS_ADDR_UNSPECIFIED(&v6)) {
    target_v6 = v6;
    target_is_v6 = 1;
  } else {
    target_invalid = 1;
  }
}

__attribute__((constructor)) static void init(void) {
  real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
  real_accept = (accept_fn)dlsym(RTLD_NEXT, "accept");
  real_accept4 = (accept4_fn)dlsym(RTLD_NEXT, "accept4");
  real_connect = (connect_fn)dlsym(RTLD_NEXT, "connect");
  real_listen = (listen_fn)dlsym(RTLD_NEXT, "listen");
  run_uid = geteuid();
  const char *value = getenv("ACME_LAUNCH_LOOPBACK_DEBUG");
  debug = value != NULL && value[0] == '1';
  value = getenv("ACME_LAUNCH_LOOPBACK_LOOKUP");
  use_proc = value != NULL && strcmp(value, "proc") == 0;
  target_v4 = htonl(INADDR_LOOPBACK);
  const char *address = getenv("ACME_LAUNCH_BIND_ADDRESS");
  if (address != NULL && address[0] != '\0') {
    /* Peers on other hosts: screened by address, their users unknown. */
    hosts_file = getenv("ACME_LAUNCH_HOSTS_FILE");
    if (hosts_file != NULL && hosts_file[0] == '\0') hosts_file = NULL;
    acme_launch_peer_check = hosts_file != NULL ? 2 : 0;
    parse_target(address);
  } else {
    const char *ports = getenv("ACME_LAUNCH_RUN_PORTS");
    if (ports != NULL) load_run_ports(ports);
  }
  load_run_key();
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
    if (target_invalid || target_is_v6) { errno = EADDRNOTAVAIL; return -1; }
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
    if (target_invalid || (target_is_v6 && mapped_any)) {
      errno = EADDRNOTAVAIL;  /* No IPv4 address to put it on. */
      return -1;
    }
    int v6only = 0;
    socklen_t size = sizeof v6only;
    if (target_is_v6) {
      local.sin6_addr = target_v6;                        /* [<target>] */
    } else if (!mapped_any &&
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

/* An address in the form sock_diag compares: IPv4 (also a v4-mapped
 * IPv6 address) in word 0, the family it is looked up in. */
struct endpoint {
  int family;
  uint32_t addr[4];  /* Network order. */
  uint16_t port;     /* Network order. */
};

static struct endpoint endpoint_of(const struct sockaddr_storage *a) {
  struct endpoint e;
  memset(&e, 0, sizeof e);
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)a;
    e.family = AF_INET;
    e.addr[0] = v4->sin_addr.s_addr;
    e.port = v4->sin_port;
  } else {
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)a;
    e.port = v6->sin6_port;
    if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
      e.family = AF_INET;
      e.addr[0] = v6->sin6_addr.s6_addr32[3];
    } else {
      e.family = AF_INET6;
      memcpy(e.addr, &v6->sin6_addr, sizeof e.addr);
    }
  }
  return e;
}

/* `words` (an inet_diag address of a socket of `family`) is `e`'s address. */
static int same_address(int family, const uint32_t *words,
                        const struct endpoint *e) {
  if (e->family == AF_INET6) return memcmp(words, e->addr, 16) == 0;
  if (family == AF_INET) return words[0] == e->addr[0];
  /* A dual-stack socket's IPv4 address: ::ffff:a.b.c.d. */
  return words[0] == 0 && words[1] == 0 && words[2] == htonl(0xffff) &&
         words[3] == e->addr[0];
}

/* The socket at `peer` connected to `local`, asked of the kernel by its
 * exact address (NETLINK_SOCK_DIAG: one hash lookup; reading /proc/net/tcp
 * walks the whole connection table, milliseconds on a large host). 1 when
 * it is a live socket of run_uid, 0 when it is not or there is none, -1
 * when sock_diag cannot answer here. A kernel without TCP sock_diag says
 * "no such socket" too: until a lookup has found one, that is -1. */
static int diag_says_ours(const struct endpoint *peer,
                          const struct endpoint *local, long *seen) {
  int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return -1;
  struct {
    struct nlmsghdr header;
    struct inet_diag_req_v2 request;
  } message;
  memset(&message, 0, sizeof message);
  message.header.nlmsg_len = sizeof message;
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST;
  message.request.sdiag_family = (uint8_t)peer->family;
  message.request.sdiag_protocol = IPPROTO_TCP;
  message.request.idiag_states = ~0U;
  message.request.id.idiag_sport = peer->port;
  message.request.id.idiag_dport = local->port;
  if (peer->family == AF_INET) {
    message.request.id.idiag_src[0] = peer->addr[0];
    message.request.id.idiag_dst[0] = local->addr[0];
  } else {
    memcpy(message.request.id.idiag_src, peer->addr, 16);
    memcpy(message.request.id.idiag_dst, local->addr, 16);
  }
  message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  struct sockaddr_nl kernel;
  memset(&kernel, 0, sizeof kernel);
  kernel.nl_family = AF_NETLINK;
  long answer[2048 / sizeof(long)];  /* Aligned for nlmsghdr. */
  ssize_t got = -1;
  if (sendto(nl, &message, sizeof message, 0, (struct sockaddr *)&kernel,
             sizeof kernel) == (ssize_t)sizeof message) {
    do {
      got = recv(nl, answer, sizeof answer, 0);
    } while (got < 0 && errno == EINTR);
  }
  close(nl);
  if (got < (ssize_t)sizeof(struct nlmsghdr)) return -1;
  const struct nlmsghdr *reply = (const struct nlmsghdr *)answer;
  if (!NLMSG_OK(reply, (size_t)got)) return -1;
  if (reply->nlmsg_type == NLMSG_ERROR) {
    const struct nlmsgerr *error = NLMSG_DATA(reply);
    /* No such socket, or (never found one yet) no TCP sock_diag here. */
    if (reply->nlmsg_len >= NLMSG_LENGTH(sizeof *error) &&
        error->error == -ENOENT && diag_found_one)
      return 0;
    return -1;
  }
  if (reply->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
      reply->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
    return -1;
  const struct inet_diag_msg *found = NLMSG_DATA(reply);
  diag_found_one = 1;
  /* The lookup falls back on a listener at the peer's port when no
   * connection is there: only the peer's own connection counts. */
  if (found->idiag_state == 10 /* TCP_LISTEN */ ||
      found->id.idiag_sport != peer->port ||
      found->id.idiag_dport != local->port ||
      !same_address(found->idiag_family, found->id.idiag_src, peer) ||
      !same_address(found->idiag_family, found->id.idiag_dst, local))
    return 0;
  *seen = found->idiag_inode != 0 ? (long)found->idiag_uid : -1;
  return found->idiag_inode != 0 && (uid_t)found->idiag_uid == run_uid;
}

/* The same from /proc/net/tcp and /proc/net/tcp6, where sock_diag is not
 * available (no inet_diag in the kernel, netlink refused). */
static int proc_says_ours(const struct endpoint *peer,
                          const struct endpoint *local, long *seen) {
  char la[33], pa[33];
  unsigned lport = ntohs(local->port), pport = ntohs(peer->port);
  if (peer->family == AF_INET6) {
    proc_v6(la, sizeof la, (const struct in6_addr *)local->addr);
    proc_v6(pa, sizeof pa, (const struct in6_addr *)peer->addr);
    return listed_as_ours("/proc/net/tcp6", pa, pport, la, lport, seen);
  }
  /* An IPv4 client, or a dual-stack one (listed in tcp6 as ::ffff:...). */
  proc_v4(la, sizeof la, (const struct in_addr *)&local->addr[0]);
  proc_v4(pa, sizeof pa, (const struct in_addr *)&peer->addr[0]);
  if (listed_as_ours("/proc/net/tcp", pa, pport, la, lport, seen)) return 1;
  struct in6_addr l6, p6;
  mapped(&l6, (const struct in_addr *)&local->addr[0]);
  mapped(&p6, (const struct in_addr *)&peer->addr[0]);
  proc_v6(la, sizeof la, &l6);
  proc_v6(pa, sizeof pa, &p6);
  return listed_as_ours("/proc/net/tcp6", pa, pport, la, lport, seen);
}

/* 1 when the TCP peer of an accepted connection is a socket of run_uid on
 * this host (this network namespace). */
static int tcp_peer_is_ours(const struct sockaddr_storage *local,
                            const struct sockaddr_storage *peer, long *seen,
                            const char **how) {
  struct endpoint l = endpoint_of(local), p = endpoint_of(peer);
  if (l.family != p.family) return 0;
  *how = "sock_diag";
  int ours = use_proc ? -1 : diag_says_ours(&p, &l, seen);
  if (ours >= 0) return ours;
  *how = "/proc/net/tcp";
  return proc_says_ours(&p, &l, seen);
}

/* 1 when `line` (an address of hosts_file) is `e`'s address; IPv4 also
 * as ::ffff:a.b.c.d. */
static int is_line_of(const char *line, const struct endpoint *e) {
  struct in_addr v4;
  struct in6_addr v6;
  if (inet_pton(AF_INET, line, &v4) == 1)
    return e->family == AF_INET && v4.s_addr == e->addr[0];
  if (inet_pton(AF_INET6, line, &v6) != 1) return 0;
  if (IN6_IS_ADDR_V4MAPPED(&v6))
    return e->family == AF_INET && v6.s6_addr32[3] == e->addr[0];
  return e->family == AF_INET6 && memcmp(&v6, e->addr, 16) == 0;
}

/* 1 when `e`'s address is a line of hosts_file (IPv4 or IPv6). Read anew
 * at each call, not through a link; a file that cannot be read lists
 * nobody. */
static int listed_host(const struct endpoint *e) {
  int fd = open(hosts_file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  FILE *f = fdopen(fd, "re");
  if (f == NULL) {
    close(fd);
    return 0;
  }
  char line[128];
  int found = 0;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    line[strcspn(line, " \t\r\n#")] = '\0';
    found = is_line_of(line, e);
  }
  fclose(f);
  return found;
}

/* The handshake's name for a listener: family, address, port (network
 * order), an IPv4 one (or v4-mapped) as IPv4. */
static void server_id(const struct endpoint *e,
                      uint8_t id[ACME_SERVER_ID_SIZE]) {
  id[0] = e->family == AF_INET ? 4 : 6;
  memcpy(id + 1, e->addr, 16);
  memcpy(id + 17, &e->port, 2);
}

/* On the server: 1 when connection `fd`, just accepted on `local`, holds
 * the client's whole hello, and it proves the run's key (the reply is then
 * sent). The hello is read only when it has arrived (the listener defers
 * accepting until data comes, see listen): a connection without it now is
 * refused at once, never waited for. */
static int proven_by_peer(int fd, const struct endpoint *local,
                          const char **how) {
  uint8_t hello[ACME_HELLO_SIZE], reply[ACME_REPLY_SIZE], id[ACME_SERVER_ID_SIZE];
  ssize_t got;
  do {
    got = recv(fd, hello, sizeof hello, MSG_DONTWAIT);
  } while (got < 0 && errno == EINTR);
  if (got != (ssize_t)sizeof hello) {
    *how = got <= 0 ? "no proof sent" : "a short proof";
    return 0;
  }
  server_id(local, id);
  const char *why = acme_handshake_check_hello(id, hello, reply);
  if (why != NULL) {
    *how = why;
    return 0;
  }
  *how = "could not send the reply";
  return send(fd, reply, sizeof reply, MSG_DONTWAIT | MSG_NOSIGNAL) ==
         (ssize_t)sizeof reply;
}

/* 1 when `e` is a loopback address (IPv4 127/8, ::1, ::ffff:127.x). */
static int on_loopback(const struct endpoint *e) {
  if (e->family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK((const struct in6_addr *)e->addr);
  return (ntohl(e->addr[0]) >> 24) == 127;
}

/* 1 when a connection to `server` on loopback must prove the run's key:
 * --run_key=all under local_mp, and one of the run's ports. */
static int loopback_proof(const struct endpoint *server) {
  return acme_launch_run_key == 1 && hosts_file == NULL &&
         on_loopback(server) && is_run_port(server->port);
}

/* On a cluster address: 1 when the TCP peer is on this host and of the
 * run's user, or on another host of the run (listed in hosts_file). */
static int cluster_peer_allowed(int fd, const struct sockaddr_storage *local,
                                const struct sockaddr_storage *peer,
                                long *seen, const char **how) {
  struct endpoint l = endpoint_of(local), p = endpoint_of(peer);
  int on_this_host = on_loopback(&p) ||
      (p.family == l.family &&
       memcmp(p.addr, l.addr, p.family == AF_INET ? 4 : 16) == 0);
  if (on_this_host) return tcp_peer_is_ours(local, peer, seen, how);
  *how = "not a host of the run";
  *seen = -2;  /* Another host: its user is not known here. */
  if (!listed_host(&p)) return 0;
  return acme_launch_run_key != 1 || proven_by_peer(fd, &l, how);
}

/* 1 when connection `fd` comes from a socket of the run's user. */
static int peer_is_ours(int fd, long *seen, const char **how) {
  struct sockaddr_storage local, peer;
  socklen_t local_len = sizeof local, peer_len = sizeof peer;
  memset(&local, 0, sizeof local);
  memset(&peer, 0, sizeof peer);
  if (getsockname(fd, (struct sockaddr *)&local, &local_len) != 0) return 0;
  if (local.ss_family == AF_UNIX) {
    *how = "SO_PEERCRED";
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
  if (acme_launch_peer_check == 2)
    return cluster_peer_allowed(fd, &local, &peer, seen, how);
  if (!tcp_peer_is_ours(&local, &peer, seen, how)) return 0;
  struct endpoint l = endpoint_of(&local);
  return !loopback_proof(&l) || proven_by_peer(fd, &l, how);
}

/* Refuses connection `fd` of `listener`: closes it, says so when asked. */
static void refuse(int listener, int fd, long seen, const char *how) {
  if (debug && seen == -2) {
    struct sockaddr_storage peer;
    socklen_t size = sizeof peer;
    char text[INET6_ADDRSTRLEN] = "?";
    if (getpeername(fd, (struct sockaddr *)&peer, &size) == 0) {
      struct endpoint p = endpoint_of(&peer);
      inet_ntop(p.family, p.addr, text, sizeof text);
    }
    fprintf(stderr, "acme-launch loopback: fd %d refused a connection from "
            "%s (%s)\n", listener, text, how);
  } else if (debug && seen == (long)run_uid) {
    fprintf(stderr, "acme-launch loopback: fd %d refused a connection from "
            "uid %ld without the run key (%s)\n", listener, seen, how);
  } else if (debug) {
    fprintf(stderr, "acme-launch loopback: fd %d refused a connection from "
            "uid %ld (not uid %ld; %s)\n", listener, seen, (long)run_uid, how);
  }
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
    const char *how = "no address";
    if (peer_is_ours(fd, &seen, &how)) {
      errno = saved;
      return fd;
    }
    refuse(listener, fd, seen, how);
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

/* The client's side of the run key handshake (handshake.c): connect() to a
 * listener on another of the run's hosts completes only once the server
 * has proved the run's key, so gRPC never sees a connection to a stand-in.
 * A non-blocking connect (gRPC's) is waited for here, with the handshake,
 * within HANDSHAKE_WAIT_MS, and returns its real outcome: 0, connected and
 * proven; -1 with the connect's own errno, ETIMEDOUT, or ECONNREFUSED for
 * a server without the key. */
#define HANDSHAKE_WAIT_MS 3000
#define DEFER_ACCEPT_SECONDS 5

static long ms_left(const struct timespec *deadline) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (deadline->tv_sec - t.tv_sec) * 1000 +
         (deadline->tv_nsec - t.tv_nsec) / 1000000;
}

/* 1 when `fd` is ready for `events` (or failed: the next call says) before
 * the deadline, 0 at the deadline, -1 on error. */
static int wait_ready(int fd, short events, const struct timespec *deadline) {
  for (;;) {
    long left = ms_left(deadline);
    if (left <= 0) return 0;
    struct pollfd p = {fd, events, 0};
    int r = poll(&p, 1, (int)left);
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) return -1;
  }
}

/* Sends (`out`) or receives exactly `len` bytes by the deadline, whatever
 * the socket's blocking mode; 0 when done. Never reads past `len`: what
 * follows belongs to gRPC. */
static int transfer(int fd, uint8_t *buf, size_t len, int out,
                    const struct timespec *deadline) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = out ? send(fd, buf + done, len - done,
                           MSG_DONTWAIT | MSG_NOSIGNAL)
                    : recv(fd, buf + done, len - done, MSG_DONTWAIT);
    if (n > 0) {
      done += (size_t)n;
    } else if (n == 0) {
      return -1;  /* Closed by the server. */
    } else if (errno != EINTR) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      if (wait_ready(fd, out ? POLLOUT : POLLIN, deadline) != 1) return -1;
    }
  }
  return 0;
}

/* 1 when `e` is this host's cluster address (the bind address). */
static int is_this_host(const struct endpoint *e) {
  if (e->family == AF_INET) return !target_is_v6 && e->addr[0] == target_v4;
  return target_is_v6 && memcmp(e->addr, &target_v6, 16) == 0;
}

/* 1 when a connect of `fd` to `addr` must prove the run's key: a TCP
 * connection to another of the run's hosts (listed in hosts_file), or,
 * under --run_key=all, to one of the run's ports on loopback; its address
 * and port in *server. */
static int needs_proof(int fd, const struct sockaddr *addr, socklen_t len,
                       struct endpoint *server) {
  if (acme_launch_run_key != 1 || addr == NULL) return 0;
  struct sockaddr_storage copy;
  memset(&copy, 0, sizeof copy);
  if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
    memcpy(&copy, addr, sizeof(struct sockaddr_in));
  else if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
    memcpy(&copy, addr, sizeof(struct sockaddr_in6));
  else
    return 0;
  *server = endpoint_of(&copy);
  int type = 0;
  socklen_t size = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &size) != 0 ||
      type != SOCK_STREAM)
    return 0;  /* Not TCP. */
  if (hosts_file == NULL) return loopback_proof(server);
  if (on_loopback(server) || is_this_host(server))
    return 0;  /* This host: screened by user there. */
  return listed_host(server);
}

/* The hello sent and the server's reply checked on connected `fd`; NULL
 * when the server proved the key, else why not. */
static const char *prove_to_server(int fd, const struct endpoint *server,
                                   const struct timespec *deadline) {
  uint8_t id[ACME_SERVER_ID_SIZE], hello[ACME_HELLO_SIZE],
      nonce[ACME_NONCE_SIZE], reply[ACME_REPLY_SIZE];
  server_id(server, id);
  if (acme_handshake_hello(id, hello, nonce) != 0) return "no random bytes";
  if (transfer(fd, hello, sizeof hello, 1, deadline) != 0)
    return "the hello could not be sent";
  if (transfer(fd, reply, sizeof reply, 0, deadline) != 0)
    return "no reply from the server";
  if (!acme_handshake_check_reply(id, nonce, reply))
    return "the server does not hold the run key";
  return NULL;
}

/* Connects `fd` and waits until it is connected (or failed) by the
 * deadline: 0, or -1 with errno. */
static int connected_by(int fd, const struct sockaddr *addr, socklen_t len,
                        const struct timespec *deadline) {
  if (real_connect(fd, addr, len) == 0) return 0;
  if (errno != EINPROGRESS) return -1;
  int ready = wait_ready(fd, POLLOUT, deadline);
  if (ready != 1) {
    errno = ready == 0 ? ETIMEDOUT : errno;
    return -1;
  }
  int error = 0;
  socklen_t size = sizeof error;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) return -1;
  if (error != 0) {
    errno = error;
    return -1;
  }
  return 0;
}

int connect(int fd, const struct sockaddr *addr, socklen_t len) {
  if (real_connect == NULL) {
    real_connect = (connect_fn)dlsym(RTLD_NEXT, "connect");
    if (real_connect == NULL) {
      errno = ENOSYS;
      return -1;
    }
  }
  struct endpoint server;
  if (!needs_proof(fd, addr, len, &server)) return real_connect(fd, addr, len);
  int saved = errno;
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += HANDSHAKE_WAIT_MS / 1000;
  deadline.tv_nsec += (HANDSHAKE_WAIT_MS % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000L;
  }
  if (connected_by(fd, addr, len, &deadline) != 0) return -1;
  const char *why = prove_to_server(fd, &server, &deadline);
  if (why != NULL) {
    if (debug) {
      char text[INET6_ADDRSTRLEN] = "?";
      inet_ntop(server.family, server.addr, text, sizeof text);
      fprintf(stderr, "acme-launch loopback: fd %d refused the server %s "
              "port %u (%s)\n", fd, text, ntohs(server.port), why);
    }
    shutdown(fd, SHUT_RDWR);
    errno = ECONNREFUSED;
    return -1;
  }
  errno = saved;
  return 0;
}

/* A listener of a run with a key accepts a connection only once data has
 * come (TCP_DEFER_ACCEPT): a client of another host sends its hello at
 * once, so accept finds it there, and one that sends nothing stays out of
 * the queue until the kernel gives up on it, then is refused unread. */
int listen(int fd, int backlog) {
  if (real_listen == NULL) {
    real_listen = (listen_fn)dlsym(RTLD_NEXT, "listen");
    if (real_listen == NULL) {
      errno = ENOSYS;
      return -1;
    }
  }
  if (acme_launch_run_key == 1) {
    int type = 0, seconds = DEFER_ACCEPT_SECONDS;
    socklen_t size = sizeof type;
    struct sockaddr_storage local;
    socklen_t local_len = sizeof local;
    memset(&local, 0, sizeof local);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &size) == 0 &&
        type == SOCK_STREAM &&
        getsockname(fd, (struct sockaddr *)&local, &local_len) == 0 &&
        (local.ss_family == AF_INET || local.ss_family == AF_INET6)) {
      /* On loopback (--run_key=all) only the run's ports take proofs: a
       * local service that speaks first is left as it is. */
      struct endpoint e = endpoint_of(&local);
      if (hosts_file != NULL || loopback_proof(&e))
        setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &seconds, sizeof seconds);
    }
  }
  return real_listen(fd, backlog);
}
