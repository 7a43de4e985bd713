/*
 * How long a foreign SetSelectionOwner takes to reach a watcher's change stream: this helper
 * takes CLIPBOARD N times and times each line the watcher (`xpb watch`, started by the caller
 * with its standard output on our standard input) prints. It answers the watcher's conversion
 * requests by refusing them, at once, as a minimal owner would.
 * Usage: xpb watch | latency N   -> prints one latency in milliseconds per line.
 */
#include <X11/Xlib.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void serve(Display *d) {
    while (XPending(d)) {
        XEvent e;
        XNextEvent(d, &e);
        if (e.type != SelectionRequest) continue;
        XEvent reply;
        memset(&reply, 0, sizeof reply);
        reply.xselection.type = SelectionNotify;
        reply.xselection.requestor = e.xselectionrequest.requestor;
        reply.xselection.selection = e.xselectionrequest.selection;
        reply.xselection.target = e.xselectionrequest.target;
        reply.xselection.property = None;
        reply.xselection.time = e.xselectionrequest.time;
        XSendEvent(d, e.xselectionrequest.requestor, False, 0, &reply);
        XFlush(d);
    }
}

int main(int argc, char **argv) {
    int count = argc > 1 ? atoi(argv[1]) : 1000;
    Display *d = XOpenDisplay(NULL);
    if (!d) { fprintf(stderr, "latency: cannot open display\n"); return 5; }
    Window w = XCreateSimpleWindow(d, DefaultRootWindow(d), 0, 0, 1, 1, 0, 0, 0);
    Atom clipboard = XInternAtom(d, "CLIPBOARD", False);
    char line[4096];
    size_t used = 0;
    sleep(1); /* let the watcher start watching */
    for (int i = 0; i < count; i++) {
        double start = now();
        XSetSelectionOwner(d, clipboard, w, CurrentTime);
        XFlush(d);
        int seen = 0;
        while (!seen) {
            /* Xlib may already hold requests it read while flushing: answer them before waiting. */
            serve(d);
            struct pollfd fds[2] = {{ConnectionNumber(d), POLLIN, 0}, {0, POLLIN, 0}};
            if (poll(fds, 2, 5000) <= 0) { fprintf(stderr, "latency: no change seen within 5 s\n"); return 1; }
            serve(d);
            if (fds[1].revents) {
                ssize_t n = read(0, line + used, sizeof line - used - 1);
                if (n <= 0) { fprintf(stderr, "latency: the watcher ended\n"); return 1; }
                used += (size_t)n;
                char *newline;
                while ((newline = memchr(line, '\n', used))) {
                    size_t rest = used - (size_t)(newline + 1 - line);
                    memmove(line, newline + 1, rest);
                    used = rest;
                    if (!seen) { printf("%.3f\n", now() - start); seen = 1; }
                }
            }
        }
    }
    return 0;
}
