#include <X11/Xlibint.h>
#include <X11/Xlib-xcb.h>
#include <xcb/xcb.h>
#include <xcb/xcbext.h>
#include <xcb/xproto.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "CXEvents.h"

void cxevents_take_queue(void *opaque) {
    Display *display = opaque;
    XSetEventQueueOwner(display, XCBOwnsEventQueue);
    // Xlib writes its requests on a socket it has taken from XCB, with flags chosen when it took
    // it: since XOpenDisplay, unchecked, so the error of a request with a reply would go to the
    // event queue, where Xlib no longer looks, and Xlib would take the missing reply for a lost
    // connection. A request of XCB's own makes Xlib give the socket back; it takes it again,
    // checked, for its next request: then every error of its requests is kept for a reply poll.
    xcb_connection_t *connection = XGetXCBConnection(display);
    xcb_no_operation(connection);
    xcb_flush(connection);
}

// XFixes' SelectionNotify on the wire (the XFixes protocol, version 1): no header of libxcb-xfixes
// is needed for eight fields.
typedef struct {
    uint8_t response_type, subtype;
    uint16_t sequence;
    uint32_t window, owner, selection, timestamp, selection_timestamp;
} wire_fixes_selection_notify;

static void decode(const xcb_generic_event_t *event, int fixes_event_base, cxevents_event *out) {
    memset(out, 0, sizeof *out);
    out->kind = event->response_type & 0x7f;
    out->sent = (event->response_type & 0x80) != 0;
    out->sequence = event->full_sequence;
    switch (out->kind) {
    case 0: {
        const xcb_generic_error_t *error = (const xcb_generic_error_t *)event;
        out->detail = error->error_code;
        out->major = error->major_code;
        out->minor = error->minor_code;
        out->window = error->resource_id;
        return;
    }
    case XCB_SELECTION_REQUEST: {
        const xcb_selection_request_event_t *request = (const xcb_selection_request_event_t *)event;
        out->time = request->time;
        out->owner = request->owner;
        out->window = request->requestor;
        out->selection = request->selection;
        out->target = request->target;
        out->property = request->property;
        return;
    }
    case XCB_SELECTION_NOTIFY: {
        const xcb_selection_notify_event_t *notify = (const xcb_selection_notify_event_t *)event;
        out->time = notify->time;
        out->window = notify->requestor;
        out->selection = notify->selection;
        out->target = notify->target;
        out->property = notify->property;
        return;
    }
    case XCB_SELECTION_CLEAR: {
        const xcb_selection_clear_event_t *clear = (const xcb_selection_clear_event_t *)event;
        out->time = clear->time;
        out->window = clear->owner;
        out->selection = clear->selection;
        return;
    }
    case XCB_PROPERTY_NOTIFY: {
        const xcb_property_notify_event_t *property = (const xcb_property_notify_event_t *)event;
        out->time = property->time;
        out->window = property->window;
        out->property = property->atom;
        out->detail = property->state;
        return;
    }
    case XCB_DESTROY_NOTIFY: {
        const xcb_destroy_notify_event_t *destroy = (const xcb_destroy_notify_event_t *)event;
        out->window = destroy->window;
        return;
    }
    default:
        if (fixes_event_base >= 0 && out->kind == fixes_event_base) {
            const wire_fixes_selection_notify *fixes = (const wire_fixes_selection_notify *)event;
            out->detail = fixes->subtype;
            out->window = fixes->window;
            out->owner = fixes->owner;
            out->selection = fixes->selection;
            out->time = fixes->selection_timestamp;
        }
        return;
    }
}

int cxevents_next(void *opaque, int read, int fixes_event_base, uint32_t skip_requestor, int skip_limit,
                  int *skipped, cxevents_event *out) {
    xcb_connection_t *connection = XGetXCBConnection((Display *)opaque);
    while (1) {
        xcb_generic_event_t *event = read ? xcb_poll_for_event(connection) : xcb_poll_for_queued_event(connection);
        if (!event) return xcb_connection_has_error(connection) ? -1 : 0;
        if (skip_requestor != 0 && (event->response_type & 0x7f) == XCB_SELECTION_REQUEST
            && ((xcb_selection_request_event_t *)event)->requestor == skip_requestor) {
            free(event);
            if (++*skipped >= skip_limit) return 0;
            continue;
        }
        decode(event, fixes_event_base, out);
        free(event);
        return 1;
    }
}

int cxevents_poll_error(void *opaque, unsigned long serial, cxevents_event *out) {
    xcb_connection_t *connection = XGetXCBConnection((Display *)opaque);
    void *reply = NULL;
    xcb_generic_error_t *error = NULL;
    if (!xcb_poll_for_reply64(connection, serial, &reply, &error)) return 0;
    free(reply);
    if (!error) return 1;
    decode((xcb_generic_event_t *)error, -1, out);
    free(error);
    return 2;
}

void cxevents_trim(void) {
    malloc_trim(0);
}

unsigned long cxevents_resource_mask(void *opaque) {
    return ((Display *)opaque)->resource_mask;
}

int cxevents_intern_atoms(void *opaque, const char *names, int count, int only_if_exists, uint32_t *atoms) {
    xcb_connection_t *connection = XGetXCBConnection((Display *)opaque);
    xcb_intern_atom_cookie_t stack[64];
    xcb_intern_atom_cookie_t *cookies = count <= 64 ? stack : malloc(sizeof(*cookies) * (size_t)count);
    if (!cookies) return 0;
    const char *name = names;
    for (int index = 0; index < count; index++) {
        size_t length = strlen(name);
        cookies[index] = xcb_intern_atom(connection, only_if_exists ? 1 : 0, (uint16_t)length, name);
        name += length + 1;
    }
    int complete = 1;
    for (int index = 0; index < count; index++) {
        xcb_generic_error_t *error = NULL;
        xcb_intern_atom_reply_t *reply = xcb_intern_atom_reply(connection, cookies[index], &error);
        atoms[index] = reply ? reply->atom : 0;
        if (!reply) complete = 0;
        free(reply);
        free(error);
    }
    if (cookies != stack) free(cookies);
    return complete;
}

uint32_t cxevents_selection_owner_request(void *opaque, uint32_t selection) {
    return xcb_get_selection_owner(XGetXCBConnection((Display *)opaque), selection).sequence;
}

uint32_t cxevents_selection_owner_reply(void *opaque, uint32_t sequence, int *ok) {
    xcb_get_selection_owner_cookie_t cookie = { sequence };
    xcb_generic_error_t *error = NULL;
    xcb_get_selection_owner_reply_t *reply = xcb_get_selection_owner_reply(XGetXCBConnection((Display *)opaque), cookie, &error);
    uint32_t owner = reply ? reply->owner : 0;
    *ok = reply != NULL;
    free(reply);
    free(error);
    return owner;
}

uint32_t cxevents_property_request(void *opaque, uint32_t window, uint32_t property, uint32_t max_values) {
    return xcb_get_property(XGetXCBConnection((Display *)opaque), 0, window, property, XCB_GET_PROPERTY_TYPE_ANY, 0, max_values).sequence;
}

int cxevents_cardinals_reply(void *opaque, uint32_t sequence, uint32_t *values, int max_values) {
    xcb_get_property_cookie_t cookie = { sequence };
    xcb_generic_error_t *error = NULL;
    xcb_get_property_reply_t *reply = xcb_get_property_reply(XGetXCBConnection((Display *)opaque), cookie, &error);
    int count = -1;
    if (reply && reply->type == XCB_ATOM_CARDINAL && reply->format == 32) {
        int length = xcb_get_property_value_length(reply) / 4;
        count = length < max_values ? length : max_values;
        if (count > 0) memcpy(values, xcb_get_property_value(reply), sizeof(uint32_t) * (size_t)count);
    }
    free(reply);
    free(error);
    return count;
}

void cxevents_discard_reply(void *opaque, uint32_t sequence) {
    xcb_discard_reply(XGetXCBConnection((Display *)opaque), sequence);
}
