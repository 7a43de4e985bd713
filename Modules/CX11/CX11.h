#ifndef XPB_CX11_H
#define XPB_CX11_H

// The one C surface the X11 backend sees: Xlib, its atom and utility headers, and XFixes
// (selection-owner change events). Shims are prefixed cx11_ and each says why it exists.
#include <X11/Xlib.h>
#include <X11/Xatom.h>
#include <X11/Xutil.h>
#include <X11/XKBlib.h>
#include <X11/extensions/Xfixes.h>
#include <X11/extensions/XRes.h>
#include <string.h>

// XSelectionEvent must be sent through XSendEvent as an XEvent; building the union in C avoids
// Swift's lack of union initialisers.
static inline XEvent cx11_selection_notify(Display *display, Window requestor, Atom selection,
                                           Atom target, Atom property, Time time) {
    XEvent event;
    memset(&event, 0, sizeof event);
    event.xselection.type = SelectionNotify;
    event.xselection.display = display;
    event.xselection.requestor = requestor;
    event.xselection.selection = selection;
    event.xselection.target = target;
    event.xselection.property = property;
    event.xselection.time = time;
    return event;
}

// The MANAGER client message a new owner of a manager selection sends to the root window
// (ICCCM 2.8): timestamp, selection, owner window. Built in C for the same reason.
static inline XEvent cx11_manager_message(Display *display, Window root, Atom manager, Time time,
                                          Atom selection, Window owner) {
    XEvent event;
    memset(&event, 0, sizeof event);
    event.xclient.type = ClientMessage;
    event.xclient.display = display;
    event.xclient.window = root;
    event.xclient.message_type = manager;
    event.xclient.format = 32;
    event.xclient.data.l[0] = (long)time;
    event.xclient.data.l[1] = (long)selection;
    event.xclient.data.l[2] = (long)owner;
    return event;
}

// The process id of the client that created `window` (X-Resource 1.2's client ids), or -1: the
// server knows it only for clients on its own host, and a server without the extension says
// nothing. One round trip; the list the server returns is freed here.
static inline long cx11_client_pid(Display *display, Window window) {
    int event_base = 0, error_base = 0, major = 0, minor = 0;
    if (!XResQueryExtension(display, &event_base, &error_base)) return -1;
    if (!XResQueryVersion(display, &major, &minor) || major < 1 || (major == 1 && minor < 2)) return -1;
    XResClientIdSpec spec = { window, XRES_CLIENT_ID_PID_MASK };
    long count = 0;
    XResClientIdValue *values = NULL;
    if (XResQueryClientIds(display, 1, &spec, &count, &values) != Success) return -1;
    long pid = -1;
    for (long index = 0; index < count && pid < 0; index++) {
        pid_t value = XResGetClientPid(&values[index]);
        if (value > 0) pid = value;
    }
    XResClientIdsDestroy(count, values);
    return pid;
}

// The process ids of all the server's clients (X-Resource 1.2's client ids, asked for every
// client at once), -1 for a client whose process the server does not know (another host). Writes
// at most `max`; returns how many clients there are, or -1 without the extension. One round trip.
static inline long cx11_all_client_pids(Display *display, long *pids, long max) {
    int event_base = 0, error_base = 0, major = 0, minor = 0;
    if (!XResQueryExtension(display, &event_base, &error_base)) return -1;
    if (!XResQueryVersion(display, &major, &minor) || major < 1 || (major == 1 && minor < 2)) return -1;
    XResClientIdSpec spec = { 0, XRES_CLIENT_ID_PID_MASK };
    long count = 0;
    XResClientIdValue *values = NULL;
    if (XResQueryClientIds(display, 1, &spec, &count, &values) != Success) return -1;
    long clients = 0;
    for (long index = 0; index < count; index++) {
        if (values[index].spec.mask != XRES_CLIENT_ID_PID_MASK) continue;
        if (clients < max) pids[clients] = XResGetClientPid(&values[index]);
        clients++;
    }
    XResClientIdsDestroy(count, values);
    return clients;
}

#endif
