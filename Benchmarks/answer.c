/*
 * How fast the owner of CLIPBOARD answers one conversion, without a reader's process start in
 * the figure: this helper converts CLIPBOARD to UTF8_STRING N times from one connection (request,
 * SelectionNotify, read and delete the property) and prints each round trip in milliseconds.
 * Usage: answer N   -> one latency per line; exits 1 if the owner refuses or stays silent.
 */
#include <X11/Xatom.h>
#include <X11/Xlib.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    Display *d = XOpenDisplay(NULL);
    if (!d) { fprintf(stderr, "answer: cannot open the display\n"); return 1; }
    Window w = XCreateSimpleWindow(d, DefaultRootWindow(d), 0, 0, 1, 1, 0, 0, 0);
    Atom clipboard = XInternAtom(d, "CLIPBOARD", False);
    Atom utf8 = XInternAtom(d, "UTF8_STRING", False);
    Atom property = XInternAtom(d, "ANSWER_DATA", False);
    for (int i = 0; i < rounds; i++) {
        double start = now();
        XConvertSelection(d, clipboard, utf8, property, w, CurrentTime);
        XFlush(d);
        for (;;) {
            XEvent e;
            if (!XPending(d)) {
                struct pollfd p = { ConnectionNumber(d), POLLIN, 0 };
                if (poll(&p, 1, 5000) <= 0) { fprintf(stderr, "answer: no reply within 5 s\n"); return 1; }
                continue;
            }
            XNextEvent(d, &e);
            if (e.type != SelectionNotify) continue;
            if (e.xselection.property == None) { fprintf(stderr, "answer: the owner refused\n"); return 1; }
            Atom type; int format; unsigned long count, after; unsigned char *data = NULL;
            XGetWindowProperty(d, w, property, 0, 1 << 20, True, AnyPropertyType, &type, &format, &count, &after, &data);
            if (data) XFree(data);
            break;
        }
        printf("%.4f\n", now() - start);
    }
    XCloseDisplay(d);
    return 0;
}
