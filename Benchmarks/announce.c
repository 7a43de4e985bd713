/*
 * Announce latency of xpbd sync: this helper takes CLIPBOARD on display A (as a minimal owner
 * that answers TARGETS with UTF8_STRING and UTF8_STRING with a few bytes) and times how long
 * until display B's CLIPBOARD changes owner (XFixes), N times.
 * Usage: announce DISPLAY_A DISPLAY_B N   -> one latency in milliseconds per line.
 */
#include <X11/Xatom.h>
#include <X11/Xlib.h>
#include <X11/extensions/Xfixes.h>
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

static Atom targets, utf8;

/* Answers what A's daemon asks our window. */
static void serve(Display *d) {
    while (XPending(d)) {
        XEvent e;
        XNextEvent(d, &e);
        if (e.type != SelectionRequest) continue;
        XSelectionRequestEvent *r = &e.xselectionrequest;
        Atom property = r->property == None ? r->target : r->property;
        if (r->target == targets) {
            Atom list[2] = {targets, utf8};
            XChangeProperty(d, r->requestor, property, XA_ATOM, 32, PropModeReplace, (unsigned char *)list, 2);
        } else if (r->target == utf8) {
            XChangeProperty(d, r->requestor, property, utf8, 8, PropModeReplace, (unsigned char *)"announce", 8);
        } else {
            property = None;
        }
        XEvent reply;
        memset(&reply, 0, sizeof reply);
        reply.xselection.type = SelectionNotify;
        reply.xselection.requestor = r->requestor;
        reply.xselection.selection = r->selection;
        reply.xselection.target = r->target;
        reply.xselection.property = property;
        reply.xselection.time = r->time;
        XSendEvent(d, r->requestor, False, 0, &reply);
        XFlush(d);
    }
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: announce DISPLAY_A DISPLAY_B N\n"); return 64; }
    int count = atoi(argv[3]);
    Display *a = XOpenDisplay(argv[1]), *b = XOpenDisplay(argv[2]);
    if (!a || !b) { fprintf(stderr, "announce: cannot open the displays\n"); return 5; }
    int base, error;
    if (!XFixesQueryExtension(b, &base, &error)) { fprintf(stderr, "announce: no XFixes\n"); return 5; }
    targets = XInternAtom(a, "TARGETS", False);
    utf8 = XInternAtom(a, "UTF8_STRING", False);
    Atom clipboardA = XInternAtom(a, "CLIPBOARD", False), clipboardB = XInternAtom(b, "CLIPBOARD", False);
    Window w = XCreateSimpleWindow(a, DefaultRootWindow(a), 0, 0, 1, 1, 0, 0, 0);
    XFixesSelectSelectionInput(b, DefaultRootWindow(b), clipboardB, XFixesSetSelectionOwnerNotifyMask);
    XSync(b, False);
    for (int i = 0; i < count; i++) {
        /* Drain B's earlier events (the daemon on A may re-own after ours, etc.). */
        while (XPending(b)) { XEvent e; XNextEvent(b, &e); }
        double start = now();
        XSetSelectionOwner(a, clipboardA, w, CurrentTime);
        XFlush(a);
        int seen = 0;
        while (!seen) {
            struct pollfd fds[2] = {{ConnectionNumber(a), POLLIN, 0}, {ConnectionNumber(b), POLLIN, 0}};
            serve(a);
            while (XPending(b)) {
                XEvent e;
                XNextEvent(b, &e);
                if (e.type == base + XFixesSelectionNotify) {
                    XFixesSelectionNotifyEvent *n = (XFixesSelectionNotifyEvent *)&e;
                    if (n->owner != None) seen = 1;
                }
            }
            if (seen) break;
            if (now() - start > 5000) { fprintf(stderr, "announce: B did not change within 5 s\n"); return 1; }
            poll(fds, 2, 100);
        }
        printf("%.3f\n", now() - start);
        fflush(stdout);
        /* Let the daemons settle (A's keeper reads us 150 ms later) before the next copy. */
        double settle = now();
        while (now() - settle < 250) {
            serve(a);
            struct pollfd fd = {ConnectionNumber(a), POLLIN, 0};
            poll(&fd, 1, 20);
        }
    }
    return 0;
}
