#ifndef XPB_CLINUX_H
#define XPB_CLINUX_H

// Linux calls the same-host fast path needs that Swift's Glibc module does not expose: they are
// declared only under _GNU_SOURCE (struct ucred, memfd_create, F_ADD_SEALS), or need the CMSG
// macros, which Swift cannot use. Each shim returns -1 with errno set on failure.
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/ioctl.h>

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif
#ifndef F_ADD_SEALS
#define F_ADD_SEALS (1024 + 9)
#endif
#ifndef F_SEAL_SEAL
#define F_SEAL_SEAL 0x0001
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW 0x0004
#define F_SEAL_WRITE 0x0008
#endif
#ifndef F_GET_SEALS
#define F_GET_SEALS (1024 + 10)
#endif
#ifndef F_SETPIPE_SZ
#define F_SETPIPE_SZ (1024 + 7)
#endif
#ifndef MSG_CMSG_CLOEXEC
#define MSG_CMSG_CLOEXEC 0x40000000
#endif

// The same layout as the kernel's struct ucred (pid, uid, gid), which glibc hides without
// _GNU_SOURCE.
struct clinux_ucred { pid_t pid; uid_t uid; gid_t gid; };

// The credentials of the process at the other end of a connected UNIX socket (SO_PEERCRED: what
// the kernel recorded when it connected, not something the peer can claim).
static inline int clinux_peer_credentials(int socket, struct clinux_ucred *credentials) {
    socklen_t length = sizeof *credentials;
    if (getsockopt(socket, SOL_SOCKET, SO_PEERCRED, credentials, &length) != 0) return -1;
    if (length != sizeof *credentials) { errno = EPROTO; return -1; }
    return 0;
}

// The user id of the peer (clinux_peer_credentials).
static inline int clinux_peer_uid(int socket, uid_t *uid) {
    struct clinux_ucred credentials;
    if (clinux_peer_credentials(socket, &credentials) != 0) return -1;
    *uid = credentials.uid;
    return 0;
}

// The process id of the peer: the process that connected (clinux_peer_credentials).
static inline int clinux_peer_pid(int socket, pid_t *pid) {
    struct clinux_ucred credentials;
    if (clinux_peer_credentials(socket, &credentials) != 0) return -1;
    *pid = credentials.pid;
    return 0;
}

// A memory file holding `length` bytes, sealed against any change (write, grow, shrink, reseal):
// whoever receives it reads exactly what was written.
static inline int clinux_sealed_memfd(const char *name, const void *bytes, size_t length) {
    int fd = (int)syscall(SYS_memfd_create, name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -1;
    const char *cursor = (const char *)bytes;
    size_t left = length;
    while (left > 0) {
        ssize_t written = write(fd, cursor, left);
        if (written < 0) {
            if (errno == EINTR) continue;
            int saved = errno; close(fd); errno = saved; return -1;
        }
        cursor += written;
        left -= (size_t)written;
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        int saved = errno; close(fd); errno = saved; return -1;
    }
    return fd;
}

// Whether a descriptor's file can never shrink (a memory file sealed so): only then may a
// reader map it without risking SIGBUS when the file is cut short under the mapping.
static inline int clinux_cannot_shrink(int fd) {
    int seals = fcntl(fd, F_GET_SEALS);
    return seals >= 0 && (seals & F_SEAL_SHRINK) != 0;
}

// Sends `length` bytes with one descriptor attached (SCM_RIGHTS); fd < 0 sends none.
static inline ssize_t clinux_send_with_fd(int socket, const void *bytes, size_t length, int fd) {
    struct iovec vector = { (void *)bytes, length };
    struct msghdr message;
    memset(&message, 0, sizeof message);
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    union { struct cmsghdr header; char space[CMSG_SPACE(sizeof(int))]; } control;
    if (fd >= 0) {
        memset(&control, 0, sizeof control);
        message.msg_control = control.space;
        message.msg_controllen = sizeof control.space;
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(header), &fd, sizeof(int));
    }
    ssize_t sent;
    do { sent = sendmsg(socket, &message, MSG_NOSIGNAL); } while (sent < 0 && errno == EINTR);
    return sent;
}

// Receives up to `length` bytes; a descriptor that came with them is stored in *fd (close-on-exec),
// else *fd is left alone. Extra descriptors a peer attached are closed.
static inline ssize_t clinux_receive_with_fd(int socket, void *bytes, size_t length, int *fd) {
    struct iovec vector = { bytes, length };
    struct msghdr message;
    memset(&message, 0, sizeof message);
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    union { struct cmsghdr header; char space[CMSG_SPACE(sizeof(int) * 4)]; } control;
    memset(&control, 0, sizeof control);
    message.msg_control = control.space;
    message.msg_controllen = sizeof control.space;
    ssize_t received;
    do { received = recvmsg(socket, &message, MSG_CMSG_CLOEXEC); } while (received < 0 && errno == EINTR);
    if (received < 0) return received;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t index = 0; index < count; index++) {
            int received_fd;
            memcpy(&received_fd, CMSG_DATA(header) + index * sizeof(int), sizeof(int));
            if (*fd < 0) *fd = received_fd; else close(received_fd);
        }
    }
    return received;
}

// Receives up to `length` bytes and every descriptor that came with them, close-on-exec, into
// `fds` (at most `capacity`; more are closed): a Wayland compositor sends several with one batch.
// *count is the number stored.
static inline ssize_t clinux_receive_with_fds(int socket, void *bytes, size_t length, int *fds, int capacity, int *count) {
    struct iovec vector = { bytes, length };
    struct msghdr message;
    memset(&message, 0, sizeof message);
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    union { struct cmsghdr header; char space[CMSG_SPACE(sizeof(int) * 28)]; } control;
    memset(&control, 0, sizeof control);
    message.msg_control = control.space;
    message.msg_controllen = sizeof control.space;
    *count = 0;
    ssize_t received;
    do { received = recvmsg(socket, &message, MSG_CMSG_CLOEXEC | MSG_DONTWAIT); } while (received < 0 && errno == EINTR);
    if (received < 0) return received;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        size_t number = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t index = 0; index < number; index++) {
            int received_fd;
            memcpy(&received_fd, CMSG_DATA(header) + index * sizeof(int), sizeof(int));
            if (*count < capacity) fds[(*count)++] = received_fd; else close(received_fd);
        }
    }
    return received;
}

// Grows a pipe's buffer (F_SETPIPE_SZ, hidden by Glibc's Swift module): fewer wake-ups per
// megabyte between a writer and a reader. Returns the size set, or -1.
static inline int clinux_set_pipe_size(int fd, int size) {
    return fcntl(fd, F_SETPIPE_SZ, size);
}

// An empty memory file that can be sealed (for secrets that must never reach a disk, and for
// snapshots of copied files).
static inline int clinux_memfd(const char *name) {
    return (int)syscall(SYS_memfd_create, name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
}

// A descriptor that becomes readable when process `pid` ends (pidfd_open, Linux 5.3); -1 if
// it cannot be had (the process is gone, or an older kernel).
static inline int clinux_pidfd_open(int pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    return (int)syscall(434, pid, 0);
#endif
}

// Seals a memory file: nobody (not even its maker) can change it any more.
static inline int clinux_seal(int fd) {
    return fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
}

#ifndef FICLONE
#define FICLONE 0x40049409
#endif
#ifndef O_TMPFILE
#define O_TMPFILE (020000000 | 0200000)
#endif

// A copy-on-write clone of `source` in a new unnamed file of `directory` (btrfs, XFS): the
// clone keeps the contents as they are now whatever happens to the original; -1 where the file
// system cannot clone.
static inline int clinux_reflink_in(const char *directory, int source) {
    int fd = open(directory, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    if (ioctl(fd, FICLONE, source) != 0) { int saved = errno; close(fd); errno = saved; return -1; }
    return fd;
}

// The inodes of the sockets connected to sockets named `path` (a UNIX socket's file name, or an
// abstract name given without its leading NUL): for the X server's `/tmp/.X11-unix/XN`, every
// client-side end of its connections. Asked of the kernel's socket diagnostics (sock_diag, what
// `ss -x` reads). Returns how many were written to `peers` (at most `max`), or -1.
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>

static inline int clinux_unix_peers_named(const char *path, unsigned int *peers, int max) {
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0) return -1;
    struct {
        struct nlmsghdr header;
        struct unix_diag_req request;
    } message;
    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    message.request.sdiag_family = AF_UNIX;
    message.request.udiag_states = (unsigned int)-1;
    message.request.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_PEER;
    if (send(fd, &message, sizeof message, 0) < 0) {
        close(fd);
        return -1;
    }
    size_t length = strlen(path);
    int count = 0;
    static __thread char buffer[32768] __attribute__((aligned(8)));
    for (;;) {
        ssize_t received = recv(fd, buffer, sizeof buffer, 0);
        if (received <= 0) break;
        int left = (int)received;
        for (struct nlmsghdr *header = (struct nlmsghdr *)buffer; NLMSG_OK(header, left); header = NLMSG_NEXT(header, left)) {
            if (header->nlmsg_type == NLMSG_DONE) goto done;
            if (header->nlmsg_type == NLMSG_ERROR) {
                count = -1;
                goto done;
            }
            struct unix_diag_msg *socket_info = NLMSG_DATA(header);
            int attributes = (int)header->nlmsg_len - (int)NLMSG_LENGTH(sizeof *socket_info);
            const char *name = NULL;
            int name_length = 0;
            unsigned int peer = 0;
            for (struct rtattr *attribute = (struct rtattr *)(socket_info + 1); RTA_OK(attribute, attributes);
                 attribute = RTA_NEXT(attribute, attributes)) {
                if (attribute->rta_type == UNIX_DIAG_NAME) {
                    name = RTA_DATA(attribute);
                    name_length = (int)RTA_PAYLOAD(attribute);
                } else if (attribute->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(attribute) >= sizeof peer) {
                    memcpy(&peer, RTA_DATA(attribute), sizeof peer);
                }
            }
            if (!name || !peer || count >= max) continue;
            if (name_length > 0 && name[0] == 0) {
                name += 1;
                name_length -= 1;
            }
            if ((size_t)name_length == length && memcmp(name, path, length) == 0) peers[count++] = peer;
        }
    }
done:
    close(fd);
    return count;
}

// Closes every descriptor from `from` up in a posix_spawn child (glibc 2.34; declared only under
// _GNU_SOURCE): an action the daemon runs must not hold its X connection or its sockets.
#include <spawn.h>
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
static inline int clinux_spawn_close_from(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

// Names the calling thread (what `ps -L` and `top -H` show; the kernel keeps 15 bytes).
// prctl is variadic, which Swift cannot call.
#include <sys/prctl.h>
static inline int clinux_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

// A pipe whose ends are close-on-exec from the start (no window in which another thread's
// fork could inherit them). pipe2 is declared only under _GNU_SOURCE.
static inline int clinux_pipe_cloexec(int fds[2]) {
    return syscall(SYS_pipe2, fds, O_CLOEXEC);
}

// A connection taken from a listening socket, close-on-exec from the start. accept4 is declared
// only under _GNU_SOURCE.
static inline int clinux_accept_cloexec(int fd) {
    return (int)syscall(SYS_accept4, fd, NULL, NULL, SOCK_CLOEXEC);
}

// Moves the calling thread into the network namespace `fd` refers to (a file under /run/netns):
// the threads it makes after this, and the sockets they open, are in it too. setns is declared
// only under _GNU_SOURCE.
static inline int clinux_enter_network_namespace(int fd) {
    return (int)syscall(SYS_setns, fd, 0x40000000 /* CLONE_NEWNET */);
}

// A pipe that wakes a thread from its poll: close-on-exec from the start, as above, and
// non-blocking at both ends (a wake never blocks the waker, and the woken thread drains it
// without blocking).
static inline int clinux_wake_pipe(int fds[2]) {
    return syscall(SYS_pipe2, fds, O_CLOEXEC | O_NONBLOCK);
}

// A read passes its data in chunks of up to 1 MiB from the X thread to the thread that writes
// them out, which frees each one. By default glibc gives the top of the X thread's heap back to
// the system at such a free (madvise) and the next chunk faults the same pages in again (a
// 100 MB paste: 73,700 page faults, 2.8 times as long). Blocks under 4 MiB come from the heap,
// and 4 MiB stay at a heap's top. Set once, before any thread starts; M_TOP_PAD alone would
// also stop glibc's moving mmap threshold, so the threshold is set with it.
#include <malloc.h>
static inline void clinux_retain_transfer_memory(void) {
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
    mallopt(M_TOP_PAD, 4 << 20);
}

// How many threads this process has (/proc/self/stat's num_threads), -1 when it cannot be
// read: a fork is safe only while it is 1.
#include <stdio.h>
static inline int clinux_thread_count(void) {
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buffer[1024];
    ssize_t length = read(fd, buffer, sizeof buffer - 1);
    close(fd);
    if (length <= 0) return -1;
    buffer[length] = 0;
    // The command name may hold spaces and parentheses: the fields start after the last ')'.
    char *field = strrchr(buffer, ')');
    if (!field) return -1;
    // After ") " come state (3), ppid (4) ... num_threads is field 20.
    int index = 2;
    for (char *p = field + 1; *p; p++) {
        if (*p == ' ' && ++index == 20) return atoi(p + 1);
    }
    return -1;
}

// Forks a background child of this (single-threaded) process, as posix_spawn with
// POSIX_SPAWN_SETSID, SETSIGDEF and SETSIGMASK would start a new program, without the new
// program: in the child, a session of its own, `fds` as descriptors 3, 4, ..., standard input
// and output on /dev/null, standard error on `error_fd` (or /dev/null when it is -1), every other
// descriptor closed, every signal's action the default and none blocked, and the command name
// `name`. Returns 0 in the child, the child's pid in the parent, -1 (errno) when it failed.
#include <signal.h>
#include <stdlib.h>
// A detached child's standard streams: input and output on /dev/null, errors on `error_fd`
// (or /dev/null when it is -1). Exits 127 when they cannot be set.
static inline void clinux_detached_streams(int error_fd) {
    int null_fd = open("/dev/null", O_RDWR);
    if (null_fd < 0) _exit(127);
    if (dup2(null_fd, 0) < 0 || dup2(null_fd, 1) < 0 || dup2(error_fd >= 0 ? error_fd : null_fd, 2) < 0) _exit(127);
    if (null_fd > 2) close(null_fd);
}

// A detached child's signals: every action the default, those in `blocked` blocked (none when
// it is NULL); and its command name.
static inline void clinux_detached_signals(const char *name, const sigset_t *blocked) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, blocked ? blocked : &none, NULL);
    for (int number = 1; number < NSIG; number++) {
        if (number != SIGKILL && number != SIGSTOP) signal(number, SIG_DFL);
    }
    prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

static inline pid_t clinux_fork_detached(const int *fds, int count, int error_fd, const char *name) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) return pid;
    // The child: nothing here may fail in a way the parent must hear of but through the ready
    // pipe (descriptor 3), which the program run next writes; a setup that fails exits 127.
    if (setsid() < 0) _exit(127);
    int highest = 2 + count;
    int staged[64];
    if (count > 64) _exit(127);
    // Copied above every target first, so that a source that is itself a target is not lost.
    for (int i = 0; i < count; i++) {
        staged[i] = fcntl(fds[i], F_DUPFD, highest + 1);
        if (staged[i] < 0) _exit(127);
    }
    clinux_detached_streams(error_fd);
    for (int i = 0; i < count; i++) {
        if (dup2(staged[i], 3 + i) < 0) _exit(127);
    }
    // Nothing else of the caller's: its pipes would keep a `$(xpb copy)` waiting.
    if (syscall(SYS_close_range, (unsigned)(highest + 1), ~0U, 0) != 0) {
        for (int fd = highest + 1; fd < 65536; fd++) close(fd);
    }
    clinux_detached_signals(name, NULL);
    return 0;
}

// Forks a background child of this (single-threaded) process that goes on with what the parent
// holds (`xpb copy` after it owns the selection: its X connection stays open in the child): a
// session of its own, standard input and output on /dev/null, standard error on `error_fd` (or
// /dev/null when it is -1), the descriptors in `closing` (the caller's, inherited at the start)
// closed, every signal's action the default and those in `blocked` blocked (a signal sent before
// the child takes them waits for it), and the command name `name`.
// Returns 0 in the child, the child's pid in the parent, -1 (errno) when it failed.
static inline pid_t clinux_fork_keeping(const int *closing, int count, int error_fd, const char *name, const sigset_t *blocked) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) return pid;
    if (setsid() < 0) _exit(127);
    clinux_detached_streams(error_fd);
    if (error_fd > 2) close(error_fd);
    for (int i = 0; i < count; i++) {
        if (closing[i] > 2) close(closing[i]);
    }
    clinux_detached_signals(name, blocked);
    return 0;
}

// Runs `body(context)` on a thread of its own and waits for it; the body ends the process
// itself (exit). For a forked child's main thread: the Swift runtime caches each thread's id
// for its locks (ulock_get_tid, _swift_stdlib_gettid: a `__thread` variable), and a fork copies
// the parent's cached id into the child's main thread. A lock that thread holds while another
// thread waits for it can then never be released (FUTEX_UNLOCK_PI names the wrong owner: EPERM)
// and both spin. A thread born in the child has its own id; the main thread, every signal
// blocked, only waits. The body's thread starts with the signal mask the caller had.
#include <pthread.h>
struct clinux_thread_start {
    void (*body)(void *);
    void *context;
    sigset_t mask;
};
static void *clinux_thread_trampoline(void *argument) {
    struct clinux_thread_start *start = (struct clinux_thread_start *)argument;
    pthread_sigmask(SIG_SETMASK, &start->mask, NULL);
    start->body(start->context);
    return NULL;
}
static inline int clinux_run_on_thread(void (*body)(void *), void *context) {
    static struct clinux_thread_start start;
    start.body = body;
    start.context = context;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &start.mask);
    pthread_t thread;
    int error = pthread_create(&thread, NULL, clinux_thread_trampoline, &start);
    if (error != 0) {
        pthread_sigmask(SIG_SETMASK, &start.mask, NULL);
        errno = error;
        return -1;
    }
    pthread_join(thread, NULL);
    return 0;
}

#endif
