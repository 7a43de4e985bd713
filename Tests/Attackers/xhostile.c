/*
 * xhostile: a hostile X client for xpb's regression tests and its "under attack" benchmark.
 * Each mode plays one attack against the selection CLIPBOARD of $DISPLAY. Built by the tests
 * (cc xhostile.c -lX11) and by Benchmarks/run.sh; never run against a real desktop.
 *
 * Requestor modes (attack the owner of CLIPBOARD):
 *   multiple PAIRS COUNT           COUNT MULTIPLE requests of PAIRS (UTF8_STRING, prop) pairs
 *   string COUNT TARGET [HOLD]     COUNT requests for TARGET, each into a fresh property name,
 *                                  then stays connected HOLD seconds
 *   flood SECONDS PAIRS            MULTIPLE and STRING requests, as fast as the server takes them
 *   self-requestor TARGET          a request naming the owner's own window as requestor
 *   save-targets                   asks the clipboard manager to save CLIPBOARD (SAVE_TARGETS),
 *                                  though another client owns it; prints "saved" or "refused"
 *   root-requestor TARGET          a request naming the root window as requestor
 *   read [TARGET [PROPERTY]]       an honest reader: prints "asked" once its request reached the
 *                                  server, then "read N" with the bytes it got (INCR followed)
 * Owner modes (attack readers; print "ready" once they own CLIPBOARD, then serve until killed):
 *   owner-targets COUNT            TARGETS lists COUNT atoms that do not exist, then UTF8_STRING
 *   owner-incr-forever             answers UTF8_STRING with INCR, then 1 MiB chunks forever
 *   owner-trickle SECONDS          answers with INCR (printing "incr"), then one byte every SECONDS
 *   owner-evil-names               window name and a target name carry terminal escapes
 *   owner-manifest SOCKET          a manifest whose fast path names the abstract socket SOCKET
 *   owner-manifest-refusing        a manifest naming XPB_ITEM_0_0, which it then refuses
 *   owner-manifest-guess [TYPE]    a manifest whose first item target is of TYPE (default
 *                                  text; else text is its second), no fast path; answers an
 *                                  xpb reader's guess with "guessed", other reads with "hello"
 *   owner-bigprop MEGABYTES        answers UTF8_STRING with one property of MEGABYTES MiB
 *   owner-incr-claim BYTES         announces an INCR of BYTES, then sends "hi" and ends
 *   owner-pipeline SECONDS         holds each TARGETS answer until the same reader's next request
 *                                  is in (at most SECONDS): prints "pipelined TARGET" when the
 *                                  reader (the same client) asked for TARGET before its TARGETS
 *                                  was answered, "sequential" when it waited; serves "hello" as
 *                                  UTF8_STRING
 *   owner-late-incr SECONDS FILE   serves FILE as UTF8_STRING by INCR in 64 KiB chunks, one transfer
 *                                  at a time with requests during it dropped, waiting up to 120 s
 *                                  for each chunk to be taken (xclip 0.13's way); its first
 *                                  UTF8_STRING request is answered SECONDS late (printing "late
 *                                  answer"); prints "sent N" for each transfer taken whole, "stuck
 *                                  at N" for one nobody took
 *   owner-incr-seeded SEED FILE [TARGET]
 *                                  serves FILE as TARGET (UTF8_STRING) always by INCR, request k
 *                                  played by seed SEED+k (printed "seed N", then "sent N"):
 *                                  random chunk sizes (1 byte to the maximum request), random
 *                                  delays, the size announced exactly or as a lower bound, and
 *                                  any PropertyDelete on the requestor's window taken as the ask
 *                                  for the next chunk (xclip's habit); one transfer at a time,
 *                                  requests during it dropped (xclip 0.13's)
 * Other:
 *   flap COUNT                     takes CLIPBOARD and gives it up COUNT times, never answering
 *   screensaver                    prints the screen saver's timeout and interval
 *   atom-probe                     prints the number of a newly interned atom (atoms are
 *                                  numbered in order: two probes tell how many were made)
 */
#include <X11/Xatom.h>
#include <X11/Xlib.h>
#include <X11/Xlibint.h> /* the display's resource_mask: which bits of an XID name its client */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static Display *dpy;
static Window win;
static Atom clipboard, targets_atom, multiple, utf8, incr, atom_pair;

static int ignore_errors(Display *d, XErrorEvent *e) { (void)d; (void)e; return 0; }

static void drain(void) {
    while (XPending(dpy)) {
        XEvent ev;
        XNextEvent(dpy, &ev);
    }
}

static Window owner_or_die(void) {
    Window owner = XGetSelectionOwner(dpy, clipboard);
    if (owner == None) { fprintf(stderr, "xhostile: CLIPBOARD has no owner\n"); exit(2); }
    return owner;
}

static void set_pairs(Atom property, long pairs) {
    Atom *values = malloc(sizeof(Atom) * 2 * (size_t)pairs);
    Atom target_prop = XInternAtom(dpy, "XHOSTILE_PAIR", False);
    for (long i = 0; i < pairs; i++) { values[2 * i] = utf8; values[2 * i + 1] = target_prop; }
    /* Written in pieces: one request may not exceed the server's maximum request size. */
    long step = 65536;
    for (long done = 0; done < pairs * 2; done += step) {
        long n = pairs * 2 - done < step ? pairs * 2 - done : step;
        XChangeProperty(dpy, win, property, atom_pair, 32, done == 0 ? PropModeReplace : PropModeAppend,
                        (unsigned char *)(values + done), (int)n);
    }
    free(values);
    XSync(dpy, False);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* ---- owner side ---- */

static int owned_already; /* a forked child goes on serving what its parent took */

static void own(void) {
    if (owned_already) return;
    XSetSelectionOwner(dpy, clipboard, win, CurrentTime);
    if (XGetSelectionOwner(dpy, clipboard) != win) { fprintf(stderr, "xhostile: cannot own CLIPBOARD\n"); exit(2); }
    printf("ready\n");
    fflush(stdout);
}

static void notify(XSelectionRequestEvent *req, Atom property) {
    XEvent ev;
    memset(&ev, 0, sizeof ev);
    ev.xselection.type = SelectionNotify;
    ev.xselection.display = dpy;
    ev.xselection.requestor = req->requestor;
    ev.xselection.selection = req->selection;
    ev.xselection.target = req->target;
    ev.xselection.property = property;
    ev.xselection.time = req->time;
    XSendEvent(dpy, req->requestor, False, 0, &ev);
    XFlush(dpy);
}

static XSelectionRequestEvent next_request(void) {
    for (;;) {
        XEvent ev;
        XNextEvent(dpy, &ev);
        if (ev.type == SelectionRequest) return ev.xselectionrequest;
    }
}

/* Waits until the requestor deletes `property` (the INCR handshake); 0 when it went away. */
static int wait_deleted(Window requestor, Atom property, double timeout) {
    double end = now() + timeout;
    while (now() < end) {
        while (XPending(dpy)) {
            XEvent ev;
            XNextEvent(dpy, &ev);
            if (ev.type == PropertyNotify && ev.xproperty.window == requestor && ev.xproperty.atom == property &&
                ev.xproperty.state == PropertyDelete)
                return 1;
            if (ev.type == DestroyNotify && ev.xdestroywindow.window == requestor) return 0;
        }
        usleep(200);
    }
    return 0;
}

static void answer_targets(XSelectionRequestEvent *req, Atom *list, int count) {
    XChangeProperty(dpy, req->requestor, req->property, XA_ATOM, 32, PropModeReplace, (unsigned char *)list, count);
    notify(req, req->property);
}

static void serve_text(XSelectionRequestEvent *req, const char *text) {
    XChangeProperty(dpy, req->requestor, req->property, utf8, 8, PropModeReplace, (const unsigned char *)text, (int)strlen(text));
    notify(req, req->property);
}

/* Whether a request's property is an xpb reader's guess property, XPB_SEL_<client>_G. */
static int is_guess_property(Atom property) {
    char *name = XGetAtomName(dpy, property);
    if (!name) return 0;
    size_t length = strlen(name);
    int guess = !strncmp(name, "XPB_SEL_", 8) && length > 10 && !strcmp(name + length - 2, "_G");
    XFree(name);
    return guess;
}

static void owner_loop(int mode, long argument, const char *text) {
    own();
    Atom manifest = XInternAtom(dpy, "XPB_MANIFEST", False);
    Atom evil = XInternAtom(dpy, "EVIL\033]0;pwned\007\033[2J", False);
    char *chunk = calloc(1, 1 << 20);
    memset(chunk, 'z', 1 << 20);
    char *big = calloc(1, 8 << 20);
    memset(big, 'b', 8 << 20);
    for (;;) {
        XSelectionRequestEvent req = next_request();
        if (req.property == None) { notify(&req, None); continue; }
        if (req.target == targets_atom) {
            if (mode == 't') {
                Atom *list = malloc(sizeof(Atom) * (size_t)(argument + 2));
                /* Atom numbers far above any the server made: none exists. */
                for (long i = 0; i < argument; i++) list[i] = (Atom)(0x1000000 + i);
                list[argument] = targets_atom;
                list[argument + 1] = utf8;
                XSetErrorHandler(ignore_errors);
                long step = 65536;
                for (long done = 0; done < argument + 2; done += step) {
                    long n = argument + 2 - done < step ? argument + 2 - done : step;
                    XChangeProperty(dpy, req.requestor, req.property, XA_ATOM, 32, done == 0 ? PropModeReplace : PropModeAppend,
                                    (unsigned char *)(list + done), (int)n);
                }
                free(list);
                notify(&req, req.property);
            } else if (mode == 'e') {
                Atom list[] = {targets_atom, utf8, evil};
                answer_targets(&req, list, 3);
            } else if (mode == 'm' || mode == 'M' || mode == 'g') {
                Atom list[] = {targets_atom, utf8, manifest};
                answer_targets(&req, list, 3);
            } else {
                Atom list[] = {targets_atom, utf8};
                answer_targets(&req, list, 2);
            }
            continue;
        }
        if ((mode == 'm' || mode == 'M') && req.target == manifest) {
            char line[512];
            snprintf(line, sizeof line, "xpb-manifest\t1\titems=1\tlocal-only=0\texpires=-\tfast-path2=%s\n0\tpublic.utf8-plain-text\tXPB_ITEM_0_0\n", text);
            serve_text(&req, line);
            continue;
        }
        if (mode == 'g' && req.target == manifest) {
            /* The first item's first representation is of type `text`; its text comes second
               when that is another type. No fast path. */
            char line[512];
            int text_first = !strcmp(text, "public.utf8-plain-text");
            snprintf(line, sizeof line, "xpb-manifest\t1\titems=1\tlocal-only=0\texpires=-\n0\t%s\tXPB_ITEM_0_0\n%s", text,
                     text_first ? "" : "0\tpublic.utf8-plain-text\tXPB_ITEM_0_1\n");
            serve_text(&req, line);
            continue;
        }
        /* An xpb reader's guess (into any client's XPB_SEL_<n>_G): "m" refuses it (its reader
           then goes on to the fast path), "g" answers it with words of its own, to tell whether
           the reader took it. */
        if ((mode == 'm' || mode == 'g') && req.target == utf8 && is_guess_property(req.property)) {
            if (mode == 'm') notify(&req, None);
            else serve_text(&req, "guessed");
            continue;
        }
        if (req.target != utf8 && !(mode == 'm' && req.target == XInternAtom(dpy, "XPB_ITEM_0_0", False))) {
            notify(&req, None);
            continue;
        }
        if (mode == 'i' || mode == 'r' || mode == 'c') {
            XSelectInput(dpy, req.requestor, PropertyChangeMask | StructureNotifyMask);
            long size = mode == 'c' ? argument : 1 << 20;
            XChangeProperty(dpy, req.requestor, req.property, incr, 32, PropModeReplace, (unsigned char *)&size, 1);
            notify(&req, req.property);
            if (mode == 'r') printf("incr\n");
            if (mode == 'c') {
                if (wait_deleted(req.requestor, req.property, 10)) {
                    XChangeProperty(dpy, req.requestor, req.property, utf8, 8, PropModeReplace, (const unsigned char *)"hi", 2);
                    XFlush(dpy);
                    if (wait_deleted(req.requestor, req.property, 10)) {
                        XChangeProperty(dpy, req.requestor, req.property, utf8, 8, PropModeReplace, (const unsigned char *)"", 0);
                        XFlush(dpy);
                    }
                }
                continue;
            }
            /* Forever: a chunk each time the reader deletes the property, until it goes away. */
            while (wait_deleted(req.requestor, req.property, mode == 'r' ? argument + 30 : 30)) {
                if (mode == 'r') sleep((unsigned)argument);
                XChangeProperty(dpy, req.requestor, req.property, utf8, 8, PropModeReplace, (unsigned char *)chunk, mode == 'r' ? 1 : 1 << 20);
                XFlush(dpy);
            }
            continue;
        }
        if (mode == 'b') {
            /* One property built by appends of 8 MiB (each request stays under the maximum). */
            for (long done = 0; done < argument; done += 8) {
                long n = argument - done < 8 ? argument - done : 8;
                XChangeProperty(dpy, req.requestor, req.property, utf8, 8, done == 0 ? PropModeReplace : PropModeAppend,
                                (unsigned char *)big, (int)(n << 20));
            }
            notify(&req, req.property);
            continue;
        }
        serve_text(&req, "hello");
    }
}

/* Serves FILE as `served` and advertises it under `count` other names too (spellings of one
   format: IMAGE/BMP, Image/Bmp, image/x-bmp …), which it refuses itself: a manager that keeps
   FILE makes the others from it, each by conversion. */
static void owner_spellings(const char *path, Atom served, char **names, int count) {
    FILE *file = fopen(path, "rb");
    if (!file) { fprintf(stderr, "xhostile: cannot read %s\n", path); exit(2); }
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    unsigned char *bytes = malloc((size_t)size + 1);
    if (fread(bytes, 1, (size_t)size, file) != (size_t)size) exit(2);
    fclose(file);
    Atom *list = malloc(sizeof(Atom) * (size_t)(count + 2));
    list[0] = targets_atom;
    list[1] = served;
    for (int i = 0; i < count; i++) list[i + 2] = XInternAtom(dpy, names[i], False);
    own();
    for (;;) {
        XSelectionRequestEvent req = next_request();
        if (req.property != None && req.target == targets_atom) {
            answer_targets(&req, list, count + 2);
        } else if (req.property != None && req.target == served) {
            XChangeProperty(dpy, req.requestor, req.property, served, 8, PropModeReplace, bytes, (int)size);
            notify(&req, req.property);
        } else {
            notify(&req, None);
        }
    }
}

/* Offers text/html alone and serves it; refuses any other target only after `delay_ms`, as a
   loaded owner does, and dies of BadWindow as xclip does (Xlib's default handler) when the
   requestor's window is gone by then. */
static void owner_slow_refusal(long delay_ms) {
    Atom html = XInternAtom(dpy, "text/html", False);
    own();
    for (;;) {
        XSelectionRequestEvent req = next_request();
        if (req.property != None && req.target == targets_atom) {
            Atom list[] = {targets_atom, html};
            answer_targets(&req, list, 2);
        } else if (req.property != None && req.target == html) {
            XChangeProperty(dpy, req.requestor, req.property, html, 8, PropModeReplace, (const unsigned char *)"<p>x</p>", 8);
            notify(&req, req.property);
        } else {
            usleep((useconds_t)(delay_ms * 1000));
            notify(&req, None);
            XSync(dpy, False);
        }
    }
}

/* The syncer's answer to a request of CLIPBOARD: its TARGETS, or the text it copied. */
static void serve_synced(XSelectionRequestEvent *req, unsigned char *text, unsigned long length) {
    if (req->property != None && req->target == targets_atom) {
        Atom list[] = {targets_atom, utf8};
        answer_targets(req, list, 2);
    } else if (req->property != None && req->target == utf8) {
        XChangeProperty(dpy, req->requestor, req->property, utf8, 8, PropModeReplace, text ? text : (unsigned char *)"", (int)length);
        notify(req, req->property);
    } else {
        notify(req, None);
    }
}

/* An autocutsel-like syncer, one way: whenever PRIMARY gets a new owner, it reads PRIMARY's text
   and takes CLIPBOARD with it (whatever it got, nothing too: as a naive script does), serving it
   until the next. Prints "ready" once it knows PRIMARY's owner (a change after that is synced;
   one before it is taken for the start's), then "synced N BYTES" for each copy it makes. */
static void syncer(void) {
    Atom primary = XA_PRIMARY;
    Atom property = XInternAtom(dpy, "XHOSTILE_SYNC", False);
    unsigned char *text = NULL;
    unsigned long length = 0;
    Window seen = XGetSelectionOwner(dpy, primary);
    long synced = 0;
    printf("ready\n");
    for (;;) {
        while (XPending(dpy)) {
            XEvent ev;
            XNextEvent(dpy, &ev);
            if (ev.type != SelectionRequest) continue;
            serve_synced(&ev.xselectionrequest, text, length);
        }
        Window owner = XGetSelectionOwner(dpy, primary);
        if (owner == None || owner == seen) {
            usleep(5000);
            continue;
        }
        seen = owner;
        XDeleteProperty(dpy, win, property);
        XConvertSelection(dpy, primary, utf8, property, win, CurrentTime);
        XFlush(dpy);
        double end = now() + 2;
        int got = 0;
        while (!got && now() < end) {
            XEvent ev;
            if (!XCheckTypedWindowEvent(dpy, win, SelectionNotify, &ev)) {
                /* Serve CLIPBOARD meanwhile (the daemon may read it to answer this very read). */
                while (XCheckTypedEvent(dpy, SelectionRequest, &ev)) {
                    serve_synced(&ev.xselectionrequest, text, length);
                }
                usleep(1000);
                continue;
            }
            got = 1;
            if (text) XFree(text);
            text = NULL;
            length = 0;
            if (ev.xselection.property != None) {
                Atom type;
                int format;
                unsigned long after;
                XGetWindowProperty(dpy, win, property, 0, 1 << 20, True, AnyPropertyType, &type, &format, &length, &after, &text);
            }
        }
        XSetSelectionOwner(dpy, clipboard, win, CurrentTime);
        XFlush(dpy);
        printf("synced %ld %lu\n", ++synced, length);
    }
}

static int same_client(Window a, Window b) {
    unsigned long mask = dpy->resource_mask;
    return (a & ~mask) == (b & ~mask);
}

/* SplitMix64: the test computes nothing from it, but a seed replays a run exactly. */
static unsigned long long mix_state;
static unsigned long long mix(void) {
    unsigned long long z = (mix_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* FILE's bytes, whole; the size in `size`. */
static unsigned char *read_whole(const char *path, long *size) {
    FILE *file = fopen(path, "rb");
    if (!file) { fprintf(stderr, "xhostile: cannot open %s\n", path); exit(2); }
    fseek(file, 0, SEEK_END);
    *size = ftell(file);
    fseek(file, 0, SEEK_SET);
    unsigned char *data = malloc(*size > 0 ? (size_t)*size : 1);
    if (*size > 0 && fread(data, 1, (size_t)*size, file) != (size_t)*size) { fprintf(stderr, "xhostile: cannot read %s\n", path); exit(2); }
    fclose(file);
    return data;
}

/* Waits for any PropertyDelete on `requestor`, as xclip 0.13 does (it never checks which
   property): a reader that deletes anything else on the window of a transfer, or deletes
   twice, gets the next chunk written over one it has not read. 0 when it went away. */
static int wait_any_delete(Window requestor, double timeout) {
    double end = now() + timeout;
    while (now() < end) {
        while (XPending(dpy)) {
            XEvent ev;
            XNextEvent(dpy, &ev);
            if (ev.type == PropertyNotify && ev.xproperty.window == requestor && ev.xproperty.state == PropertyDelete) return 1;
            if (ev.type == DestroyNotify && ev.xdestroywindow.window == requestor) return 0;
            /* Requests that come during a transfer are dropped, as xclip 0.13 drops them. */
        }
        usleep(100);
    }
    return 0;
}

/* Serves FILE's bytes as TARGET, always by INCR, one request at a time. Request k (counted
   from 0) plays seed SEED + k, printed as "seed N" before it starts: chunk sizes from 1 byte
   to the server's maximum request, a delay before each chunk (none, up to 2 ms, or up to
   10 ms), the announced size exact or a lower bound, and every PropertyDelete on the
   requestor's window taken as the ask for the next chunk. */
static void owner_incr_seeded(unsigned long long seed, const char *path, const char *target_name) {
    long size;
    unsigned char *data = read_whole(path, &size);
    Atom target = XInternAtom(dpy, target_name, False);
    long max_request = XExtendedMaxRequestSize(dpy) > 0 ? XExtendedMaxRequestSize(dpy) : XMaxRequestSize(dpy);
    long max_chunk = max_request * 4 - 1024;
    unsigned long long served = 0;
    /* A reader that went away mid-transfer must not end the owner (BadWindow). */
    XSetErrorHandler(ignore_errors);
    own();
    for (;;) {
        XSelectionRequestEvent req = next_request();
        if (req.property == None) { notify(&req, None); continue; }
        if (req.target == targets_atom) {
            Atom list[] = {targets_atom, target};
            answer_targets(&req, list, 2);
            continue;
        }
        if (req.target != target) { notify(&req, None); continue; }
        mix_state = seed + served;
        printf("seed %llu\n", seed + served);
        served++;
        /* At most about 64 chunks (a whole run stays quick), at least 1 byte each. */
        long floor = size / 64 + 1;
        long span = max_chunk - floor > 0 ? max_chunk - floor : 1;
        long announced = mix() % 4 == 0 ? size / 2 : size;
        XSelectInput(dpy, req.requestor, PropertyChangeMask | StructureNotifyMask);
        XChangeProperty(dpy, req.requestor, req.property, incr, 32, PropModeReplace, (unsigned char *)&announced, 1);
        notify(&req, req.property);
        long offset = 0;
        for (;;) {
            if (!wait_any_delete(req.requestor, 10)) { printf("reader gone at %ld\n", offset); break; }
            switch (mix() % 3) {
            case 0: break;
            case 1: usleep((useconds_t)(mix() % 2000)); break;
            default: usleep((useconds_t)(mix() % 10000)); break;
            }
            /* Small chunks as often as large ones: a size drawn on a log scale. */
            long chunk = floor + (long)(mix() % (unsigned long long)(1L << (mix() % 25))) % span;
            if (chunk > size - offset) chunk = size - offset;
            XChangeProperty(dpy, req.requestor, req.property, target, 8, PropModeReplace, data + offset, (int)chunk);
            XFlush(dpy);
            offset += chunk;
            if (chunk == 0) { printf("sent %ld\n", offset); break; }
        }
    }
}

/* An owner that answers its first request for the text late, and then serves by INCR as xclip
   0.13 does: one transfer at a time, requests that come meanwhile dropped, and no end to the
   wait for a chunk to be taken but 120 s. A reader that gave the late-answered request up must
   still take (or drain) that transfer, or the owner serves nobody else. */
static void owner_late_incr(double seconds, const char *path) {
    long size;
    unsigned char *data = read_whole(path, &size);
    XSetErrorHandler(ignore_errors);
    own();
    int first = 1;
    for (;;) {
        XSelectionRequestEvent req = next_request();
        if (req.property == None) { notify(&req, None); continue; }
        if (req.target == targets_atom) {
            Atom list[] = {targets_atom, utf8};
            answer_targets(&req, list, 2);
            continue;
        }
        if (req.target != utf8) { notify(&req, None); continue; }
        if (first) {
            first = 0;
            usleep((useconds_t)(seconds * 1e6));
            printf("late answer\n");
            fflush(stdout);
        }
        XSelectInput(dpy, req.requestor, PropertyChangeMask | StructureNotifyMask);
        XChangeProperty(dpy, req.requestor, req.property, incr, 32, PropModeReplace, (unsigned char *)&size, 1);
        notify(&req, req.property);
        long offset = 0;
        for (;;) {
            if (!wait_any_delete(req.requestor, 120)) { printf("stuck at %ld\n", offset); fflush(stdout); break; }
            long chunk = size - offset < 65536 ? size - offset : 65536;
            XChangeProperty(dpy, req.requestor, req.property, utf8, 8, PropModeReplace, data + offset, (int)chunk);
            XFlush(dpy);
            offset += chunk;
            if (chunk == 0) { printf("sent %ld\n", offset); fflush(stdout); break; }
        }
    }
}

static void owner_pipeline(double seconds) {
    own();
    for (;;) {
        XSelectionRequestEvent req = next_request();
        if (req.property == None) { notify(&req, None); continue; }
        if (req.target != targets_atom) {
            if (req.target == utf8) serve_text(&req, "hello");
            else notify(&req, None);
            continue;
        }
        XSelectionRequestEvent next;
        int got = 0;
        double end = now() + seconds;
        while (!got && now() < end) {
            while (!got && XPending(dpy)) {
                XEvent ev;
                XNextEvent(dpy, &ev);
                if (ev.type == SelectionRequest) { next = ev.xselectionrequest; got = 1; }
            }
            if (!got) usleep(1000);
        }
        /* The same reader: the same client, whose windows share the id's client bits (a reader
           may ask each conversion on a window of its own). */
        if (got && same_client(next.requestor, req.requestor)) {
            char *name = XGetAtomName(dpy, next.target);
            printf("pipelined %s\n", name);
            XFree(name);
        } else {
            printf("sequential\n");
        }
        Atom list[] = {targets_atom, utf8};
        answer_targets(&req, list, 2);
        if (got) {
            if (next.target == utf8 && next.property != None) serve_text(&next, "hello");
            else if (next.target == targets_atom && next.property != None) answer_targets(&next, list, 2);
            else notify(&next, None);
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: xhostile MODE [ARGS]\n"); return 64; }
    setvbuf(stdout, NULL, _IOLBF, 0);
    dpy = XOpenDisplay(NULL);
    if (!dpy) { fprintf(stderr, "xhostile: cannot open display\n"); return 2; }
    win = XCreateSimpleWindow(dpy, DefaultRootWindow(dpy), 0, 0, 1, 1, 0, 0, 0);
    clipboard = XInternAtom(dpy, "CLIPBOARD", False);
    targets_atom = XInternAtom(dpy, "TARGETS", False);
    multiple = XInternAtom(dpy, "MULTIPLE", False);
    utf8 = XInternAtom(dpy, "UTF8_STRING", False);
    incr = XInternAtom(dpy, "INCR", False);
    atom_pair = XInternAtom(dpy, "ATOM_PAIR", False);
    const char *mode = argv[1];
    long a = argc > 2 ? atol(argv[2]) : 0;
    long b = argc > 3 ? atol(argv[3]) : 0;

    if (!strcmp(mode, "multiple")) {
        owner_or_die();
        Atom property = XInternAtom(dpy, "XHOSTILE_MULTIPLE", False);
        set_pairs(property, a);
        for (long i = 0; i < b; i++) {
            XConvertSelection(dpy, clipboard, multiple, property, win, CurrentTime);
            XFlush(dpy);
            drain();
        }
        XSync(dpy, False);
        printf("sent\n");
        return 0;
    }
    if (!strcmp(mode, "string")) {
        owner_or_die();
        Atom target = XInternAtom(dpy, argc > 3 ? argv[3] : "STRING", False);
        for (long i = 0; i < a; i++) {
            char name[64];
            snprintf(name, sizeof name, "XHOSTILE_P%ld", i);
            XConvertSelection(dpy, clipboard, target, XInternAtom(dpy, name, False), win, CurrentTime);
            XFlush(dpy);
            drain();
        }
        XSync(dpy, False);
        printf("sent\n");
        /* Stay connected a while if asked: a departed client's window ids are given to the next. */
        if (argc > 4) sleep((unsigned)atol(argv[4]));
        return 0;
    }
    if (!strcmp(mode, "probe")) {
        /* A client that stays connected (its slot, and so its window ids, stay its own) and, at
           each SIGUSR1, asks the owner for TARGETS and prints "answered N" once it has the
           answer: the owner has then handled every request that reached it before this one. */
        Atom property = XInternAtom(dpy, "XHOSTILE_PROBE", False);
        sigset_t usr1, old;
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        sigprocmask(SIG_BLOCK, &usr1, &old);
        printf("ready\n");
        for (long n = 1;; n++) {
            int number;
            sigwait(&usr1, &number);
            XConvertSelection(dpy, clipboard, targets_atom, property, win, CurrentTime);
            XFlush(dpy);
            XEvent ev;
            do XNextEvent(dpy, &ev);
            while (ev.type != SelectionNotify);
            XDeleteProperty(dpy, win, property);
            XSync(dpy, False);
            printf("answered %ld\n", n);
        }
    }
    if (!strcmp(mode, "read") || !strcmp(mode, "read-hold") || !strcmp(mode, "read-twice")) {
        /* A plain reader: asks, says so once the request reached the server, reads the reply (INCR
           too) and prints how many bytes it got. "read-hold" stops itself (SIGSTOP) once it has
           taken the first INCR chunk, its transfer open, and reads on when continued.
           "read-twice" asks again, the same target into the same property, once it has taken the
           INCR marker: as a new client with a departed one's window id does whose request reaches
           the owner after the departed one's was answered; it reads on as before. */
        int hold = !strcmp(mode, "read-hold");
        int twice = !strcmp(mode, "read-twice");
        owner_or_die();
        Atom target = XInternAtom(dpy, argc > 2 ? argv[2] : "UTF8_STRING", False);
        Atom property = XInternAtom(dpy, argc > 3 ? argv[3] : "XHOSTILE_READ", False);
        XSelectInput(dpy, win, PropertyChangeMask);
        XConvertSelection(dpy, clipboard, target, property, win, CurrentTime);
        XSync(dpy, False);
        printf("asked\n");
        XEvent ev;
        do XNextEvent(dpy, &ev);
        while (!(ev.type == SelectionNotify && (ev.xselection.property == property || ev.xselection.property == None)));
        if (ev.xselection.property == None) { printf("refused\n"); return 1; }
        Atom type;
        int format;
        unsigned long count, after;
        unsigned char *data = NULL;
        XGetWindowProperty(dpy, win, property, 0, 0x1fffffff, True, AnyPropertyType, &type, &format, &count, &after, &data);
        if (data) XFree(data);
        long total = (long)count;
        if (type == incr) {
            total = 0;
            if (twice) {
                XConvertSelection(dpy, clipboard, target, property, win, CurrentTime);
                XSync(dpy, False);
            }
            for (;;) {
                do XNextEvent(dpy, &ev);
                while (!(ev.type == PropertyNotify && ev.xproperty.atom == property && ev.xproperty.state == PropertyNewValue));
                data = NULL;
                XGetWindowProperty(dpy, win, property, 0, 0x1fffffff, True, AnyPropertyType, &type, &format, &count, &after, &data);
                if (data) XFree(data);
                if (count == 0) break;
                total += (long)count * (format / 8);
                if (hold) {
                    hold = 0;
                    XSync(dpy, False);
                    printf("holding\n");
                    fflush(stdout);
                    raise(SIGSTOP);
                }
            }
        }
        printf("read %ld\n", total);
        return 0;
    }
    if (!strcmp(mode, "flood")) {
        owner_or_die();
        Atom property = XInternAtom(dpy, "XHOSTILE_MULTIPLE", False);
        Atom string = XInternAtom(dpy, "STRING", False);
        set_pairs(property, b > 0 ? b : 100);
        printf("flooding\n");
        double end = now() + (double)a;
        long sent = 0;
        while (now() < end) {
            for (int i = 0; i < 64; i++) {
                XConvertSelection(dpy, clipboard, multiple, property, win, CurrentTime);
                XConvertSelection(dpy, clipboard, string, property, win, CurrentTime);
                sent += 2;
            }
            XSync(dpy, False); /* as fast as the server takes them, no faster */
            drain();
        }
        printf("sent %ld\n", sent);
        return 0;
    }
    if (!strcmp(mode, "self-requestor") || !strcmp(mode, "root-requestor")) {
        Window owner = owner_or_die();
        Window requestor = mode[0] == 's' ? owner : DefaultRootWindow(dpy);
        Atom target = XInternAtom(dpy, argc > 2 ? argv[2] : "UTF8_STRING", False);
        XConvertSelection(dpy, clipboard, target, XInternAtom(dpy, "XHOSTILE_SELF", False), requestor, CurrentTime);
        XSync(dpy, False);
        printf("sent\n");
        return 0;
    }
    if (!strcmp(mode, "owner-lossy-exit")) {
        /* An app that exits as Qt 5 may: it owns CLIPBOARD, leaves unanswered the requests that
           come in its first MILLISECONDS (argv[3], default 400: they came while it shut down),
           then asks the clipboard manager to save (SAVE_TARGETS) and answers requests only while
           it waits for the manager's reply. */
        own();
        double quiet = now() + (argc > 3 ? atof(argv[3]) : 400) / 1000;
        int dropped = 0;
        while (now() < quiet) {
            while (XPending(dpy)) {
                XEvent ev;
                XNextEvent(dpy, &ev);
                if (ev.type == SelectionRequest) dropped++;
            }
            usleep(5000);
        }
        printf("dropped %d\n", dropped);
        fflush(stdout);
        Atom manager = XInternAtom(dpy, "CLIPBOARD_MANAGER", False);
        XConvertSelection(dpy, manager, XInternAtom(dpy, "SAVE_TARGETS", False), XInternAtom(dpy, "XHOSTILE_SAVE", False), win,
                          CurrentTime);
        XFlush(dpy);
        double end = now() + 10;
        while (now() < end) {
            while (XPending(dpy)) {
                XEvent ev;
                XNextEvent(dpy, &ev);
                if (ev.type == SelectionNotify && ev.xselection.selection == manager) {
                    printf("%s\n", ev.xselection.property == None ? "refused" : "saved");
                    return 0;
                }
                if (ev.type != SelectionRequest) continue;
                XSelectionRequestEvent req = ev.xselectionrequest;
                if (req.property == None) {
                    notify(&req, None);
                } else if (req.target == targets_atom) {
                    Atom list[] = {targets_atom, utf8};
                    answer_targets(&req, list, 2);
                } else if (req.target == utf8) {
                    serve_text(&req, argc > 2 ? argv[2] : "kept");
                } else {
                    notify(&req, None);
                }
            }
            usleep(10000);
        }
        printf("no answer\n");
        return 1;
    }
    if (!strcmp(mode, "save-targets")) {
        Atom manager = XInternAtom(dpy, "CLIPBOARD_MANAGER", False);
        Atom property = XInternAtom(dpy, "XHOSTILE_SAVE", False);
        XConvertSelection(dpy, manager, XInternAtom(dpy, "SAVE_TARGETS", False), property, win, CurrentTime);
        XFlush(dpy);
        time_t deadline = time(NULL) + 10;
        while (time(NULL) < deadline) {
            while (XPending(dpy)) {
                XEvent ev;
                XNextEvent(dpy, &ev);
                if (ev.type == SelectionNotify) {
                    printf("%s\n", ev.xselection.property == None ? "refused" : "saved");
                    return 0;
                }
            }
            usleep(10000);
        }
        printf("no answer\n");
        return 1;
    }
    if (!strcmp(mode, "flap")) {
        for (long i = 0; i < a; i++) {
            XSetSelectionOwner(dpy, clipboard, win, CurrentTime);
            XSync(dpy, False);
            drain();
            usleep(2000);
        }
        XSetSelectionOwner(dpy, clipboard, None, CurrentTime);
        XSync(dpy, False);
        printf("flapped\n");
        return 0;
    }
    if (!strcmp(mode, "screensaver")) {
        int timeout, interval, blanking, exposures;
        XGetScreenSaver(dpy, &timeout, &interval, &blanking, &exposures);
        printf("%d %d\n", timeout, interval);
        return 0;
    }
    if (!strcmp(mode, "atom-probe")) {
        char name[64];
        snprintf(name, sizeof name, "XHOSTILE_PROBE_%ld_%d", (long)time(NULL), getpid());
        printf("%lu\n", (unsigned long)XInternAtom(dpy, name, False));
        return 0;
    }
    if (!strcmp(mode, "owner-fork-later")) {
        /* Takes CLIPBOARD, then after `a` ms forks as xclip does: the parent exits, the child
           serves on the connection the parent made (the server still names the parent's pid). */
        own();
        XSync(dpy, False);
        usleep((useconds_t)(a * 1000));
        pid_t child = fork();
        if (child < 0) return 2;
        if (child > 0) {
            printf("forked %d\n", (int)child);
            _exit(0);
        }
        owned_already = 1;
        owner_loop('h', 0, NULL);
    }
    if (!strcmp(mode, "owner-targets")) owner_loop('t', a, NULL);
    if (!strcmp(mode, "owner-incr-forever")) owner_loop('i', 0, NULL);
    if (!strcmp(mode, "owner-trickle")) owner_loop('r', a, NULL);
    if (!strcmp(mode, "owner-evil-names")) {
        XStoreName(dpy, win, "evil\033]0;pwned\007\033[31mred");
        owner_loop('e', 0, NULL);
    }
    if (!strcmp(mode, "syncer")) syncer();
    if (!strcmp(mode, "owner-slow-refusal")) owner_slow_refusal(a);
    if (!strcmp(mode, "owner-spellings") && argc > 4)
        owner_spellings(argv[2], XInternAtom(dpy, argv[3], False), argv + 4, argc - 4);
    if (!strcmp(mode, "owner-evil-lines")) {
        /* A window name that would forge a second line in a log, and clear a terminal. */
        XStoreName(dpy, win, "evil\nFORGED: a second log line\033[2J\007");
        owner_loop('h', 0, NULL);
    }
    if (!strcmp(mode, "owner-manifest")) owner_loop('m', 0, argc > 2 ? argv[2] : "nothing");
    if (!strcmp(mode, "owner-manifest-refusing")) owner_loop('M', 0, "");
    if (!strcmp(mode, "owner-manifest-guess")) owner_loop('g', 0, argc > 2 ? argv[2] : "public.utf8-plain-text");
    if (!strcmp(mode, "owner-bigprop")) owner_loop('b', a, NULL);
    if (!strcmp(mode, "owner-incr-claim")) owner_loop('c', a, NULL);
    if (!strcmp(mode, "owner-pipeline")) owner_pipeline((double)a);
    if (!strcmp(mode, "owner-late-incr") && argc > 3) owner_late_incr(atof(argv[2]), argv[3]);
    if (!strcmp(mode, "owner-incr-seeded") && argc > 3)
        owner_incr_seeded(strtoull(argv[2], NULL, 10), argv[3], argc > 4 ? argv[4] : "UTF8_STRING");
    fprintf(stderr, "xhostile: unknown mode %s\n", mode);
    return 64;
}
