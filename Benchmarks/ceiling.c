/*
 * The ceiling for moving bytes through the X server: two connections hand chunks to each other
 * through one window property, as INCR does, with nothing else (no selection, no conversion).
 * Usage: ceiling BYTES CHUNK   -> prints the seconds it took.
 */
#include <X11/Xlib.h>
#include <X11/Xatom.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static Bool is_property(Display *d, XEvent *e, XPointer arg) {
    (void)d;
    int state = *(int *)arg;
    return e->type == PropertyNotify && e->xproperty.state == state;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: ceiling BYTES CHUNK\n"); return 64; }
    long total = atol(argv[1]), chunk = atol(argv[2]);
    Display *writer = XOpenDisplay(NULL), *reader = XOpenDisplay(NULL);
    if (!writer || !reader) { fprintf(stderr, "ceiling: cannot open display\n"); return 5; }
    Window window = XCreateSimpleWindow(reader, DefaultRootWindow(reader), 0, 0, 1, 1, 0, 0, 0);
    XSelectInput(reader, window, PropertyChangeMask);
    XSync(reader, False);
    XSelectInput(writer, window, PropertyChangeMask);
    Atom property = XInternAtom(writer, "CEILING", False);
    XSync(writer, False);
    unsigned char *data = malloc(chunk);
    memset(data, 0x5a, chunk);
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    long moved = 0;
    int new_value = PropertyNewValue, deleted = PropertyDelete;
    XEvent event;
    while (moved < total) {
        long n = total - moved < chunk ? total - moved : chunk;
        XChangeProperty(writer, window, property, XA_STRING, 8, PropModeReplace, data, (int)n);
        XFlush(writer);
        XIfEvent(reader, &event, is_property, (XPointer)&new_value);
        Atom type; int format; unsigned long count, after; unsigned char *got = NULL;
        XGetWindowProperty(reader, window, property, 0, (n + 3) / 4, True, AnyPropertyType,
                           &type, &format, &count, &after, &got);
        if (got) XFree(got);
        moved += (long)count;
        XIfEvent(writer, &event, is_property, (XPointer)&deleted);
        /* the writer also sees its own NewValue events: drop them */
        while (XCheckIfEvent(writer, &event, is_property, (XPointer)&new_value)) {}
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    printf("%.6f\n", (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9);
    return 0;
}
